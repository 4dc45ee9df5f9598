"""Which nodes the Ray dispatcher offers work to (app/executors/ray_resources.py `alive_nodes`), from `ray.nodes()`
as Ray 2.60 shapes it and what the tasks' streams have said about their nodes. The same path with a real cluster and a
killed node is in test_ray.py."""

from __future__ import annotations

from app.executors.ray_resources import DEAD_NODE_S, alive_nodes
from app.services.cluster.nodes import node_memory_budget


def _listed(node_id: str, alive: bool = True, gpus: float = 4.0) -> dict:
    return {
        "NodeID": node_id,
        "Alive": alive,
        "NodeManagerHostname": f"host-{node_id}",
        "Resources": {"CPU": 8.0, "GPU": gpus, "memory": 1e10, f"node:{node_id}": 1.0},
        "Labels": {"course/te": "1", "ray.io/node-id": node_id},
    }


def test_alive_nodes_are_offered_with_their_resources_and_course_labels():
    nodes, dead = alive_nodes([_listed("a"), _listed("b", alive=False)], {}, now=100.0)
    assert list(nodes) == ["a"] and dead == {}
    assert nodes["a"] == {
        "hostname": "host-a",
        "resources": {"CPU": 8.0, "GPU": 4.0, "memory": 1e10},
        "labels": {"course/te": "1"},
    }


def test_a_node_a_task_reported_dead_gets_no_work_while_ray_still_lists_it():
    nodes, dead = alive_nodes([_listed("a"), _listed("b")], {"a": 100.0}, now=101.0)
    assert list(nodes) == ["b"]
    assert dead == {"a": 100.0}  # kept: Ray has not caught up yet


def test_the_report_is_dropped_once_ray_no_longer_lists_the_node_alive():
    _, dead = alive_nodes([_listed("a", alive=False), _listed("b")], {"a": 100.0}, now=101.0)
    assert dead == {}
    _, dead = alive_nodes([_listed("b")], {"a": 100.0}, now=101.0)
    assert dead == {}


def test_after_dead_node_s_ray_listing_the_node_alive_wins_again():
    nodes, dead = alive_nodes([_listed("a")], {"a": 100.0}, now=100.0 + DEAD_NODE_S - 0.5)
    assert nodes == {} and dead == {"a": 100.0}
    nodes, dead = alive_nodes([_listed("a")], {"a": 100.0}, now=100.0 + DEAD_NODE_S)
    assert list(nodes) == ["a"] and dead == {}


def test_a_nodes_memory_budget_comes_from_its_label_and_the_dispatchers_own_is_only_a_fallback():
    fallback = 6 * 2**30
    assert node_memory_budget({"course/job_memory_mb": "32768"}, fallback) == 32768 * 2**20
    assert node_memory_budget({}, fallback) == fallback  # a node started with flags written by hand
    assert node_memory_budget({"course/job_memory_mb": "lots"}, fallback) == fallback
