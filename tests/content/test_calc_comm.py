"""A lesson's number and a lab's prediction for the same case come from one communication model
(labs/parallel/comm.py) and agree to the last bit; and no other module writes the ring factor again."""

import io
import re
import tokenize
from pathlib import Path

import pytest

import labs.api
from app.content import calc
from app.content.calc import parallel
from labs.collectives import model
from labs.parallel import comm, costmodel
from labs.zero_fsdp import anatomy

ROOT = Path(__file__).resolve().parents[2]
RANKS = [2, 3, 4, 5, 7, 8, 12, 16, 64]
SIZES = [1.0, 3e6, 2.0**30, 7.3e9]


def test_the_lessons_and_the_labs_reach_the_same_module():
    assert labs.api.comm is comm and parallel.comm is comm


@pytest.mark.parametrize("n", RANKS)
def test_bytes_per_gpu_lesson_against_zero_fsdp_prediction(n):
    for size in SIZES:
        for kind in ("all-gather", "reduce-scatter", "all-reduce"):
            lesson = calc.collective_time(size, n, 450e9, kind)["moved"]
            assert lesson == anatomy.predicted_bus_bytes({kind: size}, n) == comm.bus_bytes(kind, n, size)
        assert calc.ring_allreduce(size, n)["per_gpu"] == comm.bus_bytes("all-reduce", n, size)


@pytest.mark.parametrize("node", sorted(costmodel.NODES))
@pytest.mark.parametrize("n", RANKS)
def test_all_reduce_time_lesson_against_tp_sweep_prediction(node, n):
    spec = costmodel.NODES[node]
    for size in SIZES:
        lesson = calc.collective_time(size, n, spec.link_bytes_per_s, "all-reduce")["seconds"]
        # The tp-sweep lab pays its node's α once per collective; the lesson's collective_time has no α term.
        assert costmodel.all_reduce_s(size, n, spec) == spec.collective_latency_s + lesson


@pytest.mark.parametrize("n", RANKS)
def test_the_collectives_lab_fits_the_lessons_ring_back(n):
    alpha, bw = 7e-6, 37e9
    sizes = [2**k for k in range(10, 30, 3)]
    times = [calc.ring_time(float(s), n, bw, alpha)["seconds"] for s in sizes]
    f = model.fit("all-reduce", n, sizes, times)
    assert f["steps"] == calc.ring_time(1.0, n, bw, alpha)["steps"]
    assert f["alpha_us"] == pytest.approx(1e6 * alpha, rel=1e-6)
    assert f["bandwidth_gbs"] == pytest.approx(bw / 1e9, rel=1e-6)


@pytest.mark.parametrize("gpus_per_node", [2, 4, 8])
@pytest.mark.parametrize("nodes", [2, 3, 4, 16, 64])
def test_node_egress_lesson_against_collectives_prediction(nodes, gpus_per_node):
    for size in SIZES:
        lab = model.predicted_egress(size, nodes * gpus_per_node, nodes, None)
        hier = lab["predicted_hierarchical_bytes"] / 1e9
        ring = calc.network_collective(size, nodes, gpus_per_node, kind="all-reduce")
        # the lesson's NCCL ring is the lab's flat all-reduce; its hierarchical floor is the lab's hierarchical one
        assert ring["node_out_gb"] == ring["flat_node_out_gb"] == lab["predicted_flat_bytes"] / 1e9
        assert ring["hier_node_out_gb"] == hier
        named = calc.network_collective(size, nodes, gpus_per_node, kind="all-reduce", algorithm="hierarchical")
        assert named["node_out_gb"] == hier
        # HSDP's gradient all-reduce across replicas sends what the lab's hierarchical all-reduce predicts.
        assert calc.hsdp_step(size / 2, gpus_per_node, nodes, 50e9)["node_out_gb"] == hier
        assert lab["predicted_flat_bytes"] == comm.flat_ring_node_egress(
            size, "all-reduce", nodes * gpus_per_node, nodes
        )


# ---- no second copy of the ring factor ---------------------------------------------------------------------

# The ring factor and its inverse, in code (strings and comments are left out): (n - 1) / n, (n - 1) // n and
# n / (n - 1), whatever the name.
COPIES = [
    re.compile(r"\(\s*(\w+)\s*-\s*1\s*\)\s*//?\s*\1\b"),
    re.compile(r"\b(\w+)\s*/\s*\(\s*\1\s*-\s*1\s*\)"),
]
# A run-time budget, not a number a learner reads: gloo's ~1 GB/s on one host sizes the job's time limit.
ALLOWED = {"2 * reduce_bytes * 2 * (d - 1) / d"}


def _code(path: Path) -> list[tuple[int, str]]:
    """Each line's code without its strings and comments."""
    lines: dict[int, list[str]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type not in (tokenize.STRING, tokenize.COMMENT) and tok.string.strip():
            lines.setdefault(tok.start[0], []).append(tok.string)
    return [(n, " ".join(parts)) for n, parts in sorted(lines.items())]


def test_no_module_but_comm_writes_the_ring_factor():
    model_file = ROOT / "labs/parallel/comm.py"
    found = []
    for folder in ("app/content", "labs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == model_file:
                continue
            text = path.read_text().splitlines()
            for n, code in _code(path):
                line = text[n - 1]
                if any(p.search(code) for p in COPIES) and not any(a in line for a in ALLOWED):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "use labs.api.comm instead:\n" + "\n".join(found)
