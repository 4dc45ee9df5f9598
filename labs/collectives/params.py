"""collectives parameters, limits and resources (torch-free: the web tier reads this through labs.catalog)."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field
from pydantic.config import JsonDict

from labs.params import LabParams, Preset, in_order, rank_timeout_field, ranks_field, seed_field
from labs.resources import GPU_BACKENDS, RANK_START_S, START_S, Problem, Resources, rank_job
from labs.words import byte_size

Collective = Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast"]
COLLECTIVES: tuple[Collective, ...] = get_args(Collective)
# auto: NCCL_ALGO unset, NCCL's own choice per call (NVLS on an NVSwitch node); ring, tree: forced
# (labs/collectives/nccl.py says which collectives each can run).
Algorithm = Literal["auto", "ring", "tree"]
ALGORITHMS: tuple[Algorithm, ...] = get_args(Algorithm)

RUN: JsonDict = {"group": "Run"}
RUN_MORE: JsonDict = {"group": "Run", "advanced": True}
SWEEP: JsonDict = {"group": "Message sizes"}
TOPO: JsonDict = {"group": "Emulated nodes"}
TOPO_MORE: JsonDict = {"group": "Emulated nodes", "advanced": True}


class CollectivesParams(LabParams):
    ranks: int = ranks_field(4, description="Processes, one per device", group=RUN)
    collectives: Annotated[list[Collective], in_order(COLLECTIVES)] = Field(
        default=list(COLLECTIVES),
        min_length=1,
        max_length=5,
        description="Which collectives the size sweep times",
        title="Collectives",
        json_schema_extra=RUN,
    )
    min_bytes: int = Field(
        4096,
        ge=256,
        le=2**30,
        description="Smallest message in the sweep (nccl-tests' S: the whole buffer)",
        title="Smallest message (bytes)",
        json_schema_extra=SWEEP,
    )
    max_bytes: int | None = Field(
        None,
        ge=256,
        le=2**30,
        description="Largest message; the node comparisons use it too. Empty: 4 MiB on CPU, 256 MiB on a GPU, "
        "where smaller messages take about as long as launching them",
        title="Largest message (bytes)",
        json_schema_extra=SWEEP,
    )
    factor: int = Field(
        4, ge=2, le=16, description="Each size is this many times the last", title="Size step", json_schema_extra=SWEEP
    )
    iters: int = Field(
        5,
        ge=1,
        le=100,
        description="Operations per size issued back to back between two events (their span / this is the time)",
        title="Timed operations",
        json_schema_extra=RUN,
    )
    warmup: int = Field(
        2,
        ge=0,
        le=20,
        description="Untimed operations before each timed run (at least 1 on a GPU, where NCCL sets up on first use)",
        title="Warm-up operations",
        json_schema_extra=RUN_MORE,
    )
    nodes: int = Field(
        2,
        ge=1,
        le=4,
        description="Emulated nodes the ranks are split into (ranks must divide evenly); 1 runs flat",
        title="Nodes",
        json_schema_extra=TOPO,
    )
    link_mbit: float = Field(
        200.0,
        ge=10.0,
        le=100000.0,
        description="Each node's cross-node link (its NIC) in Mbit/s, each way; ranks inside a node are not limited",
        title="Cross-node link (Mbit/s)",
        json_schema_extra=TOPO,
    )
    link_delay_ms: float = Field(
        0.5,
        ge=0.0,
        le=50.0,
        description="Added one-way latency on the cross-node link, where the kernel has tc netem",
        title="Cross-node latency (ms)",
        json_schema_extra=TOPO_MORE,
    )
    algorithms: Annotated[list[Algorithm], in_order(ALGORITHMS)] = Field(
        default=list(ALGORITHMS),
        min_length=1,
        max_length=3,
        description="GPU: one launch per NCCL_ALGO: auto (unset: NCCL's choice, NVLS on NVSwitch), Ring, Tree (the "
        "all-reduce only); gloo on CPU always rings",
        title="NCCL algorithms (GPU)",
        json_schema_extra=RUN_MORE,
    )
    seed: int = seed_field("Seeds the tensors", RUN_MORE)
    rank_timeout_s: int = rank_timeout_field(RUN_MORE)


Params = CollectivesParams


# The largest message when max_bytes is empty: nccl-tests-sized on a GPU, where a few MiB over NVLink take tens of
# µs and only messages of hundreds of MiB reach the links' bandwidth; small on CPU, where gloo moves ~0.4 GB/s.
DEFAULT_MAX_BYTES = {"cpu": 4 * 2**20, "gpu": 256 * 2**20}


def max_bytes(p: Params, backend: str) -> int:
    """The largest message of the sweep on `backend`: max_bytes, or the backend's default when it is empty."""
    if p.max_bytes is not None:
        return p.max_bytes
    return DEFAULT_MAX_BYTES["gpu" if backend in GPU_BACKENDS else "cpu"]


def sizes(p: Params, backend: str) -> list[int]:
    """The sweep's message sizes in bytes, from min_bytes by `factor` up to max_bytes (both included)."""
    top = max_bytes(p, backend)
    out, s = [], p.min_bytes
    while s < top:
        out.append(s)
        s *= p.factor
    out.append(top)
    return out


def limits(params: Params, backend: str) -> list[Problem]:
    p = params
    out = []
    top = max_bytes(p, backend)
    if p.ranks % p.nodes:
        out.append(Problem("nodes", f"nodes: ranks({p.ranks}) % nodes({p.nodes}) = {p.ranks % p.nodes}, must be 0"))
    if top < p.min_bytes:
        out.append(Problem("max_bytes", f"max_bytes: {top} is below min_bytes ({p.min_bytes})"))
    elif len(sizes(p, backend)) > 12:
        out.append(
            Problem(
                "factor",
                f"factor: {len(sizes(p, backend))} sizes from {p.min_bytes} to {top}; at most 12, use a larger step",
            )
        )
    return out


# Host memory: per rank, the largest size's buffers: input, output (the all-gather's and all-to-all's are S),
# the hierarchical all-reduce's shard and copy, and gloo's staging of the same order: about 6 x max_bytes.
SAFETY = 1.5


def resources(params: Params, backend: str) -> Resources:
    p = params
    top = max_bytes(p, backend)
    return rank_job(
        p.ranks,
        backend,
        per_rank_bytes=6 * top,
        what=f"(about 6 buffers of the largest message, {byte_size(top)})",
        memory_field="max_bytes",
        safety=SAFETY,
    )


PRESETS: tuple[Preset, ...] = (
    Preset(
        "All-reduce only, flat",
        "One node, all-reduce alone: the α-β fit of one collective on one host's loopback, with no slow links.",
        {"collectives": ["all-reduce"], "nodes": 1},
    ),
    Preset(
        "Two nodes, a slow link",
        "Two emulated nodes on the default 200 Mbit/s link, all-reduce and all-gather: cross-node cost, "
        "hierarchical all-reduce and node egress.",
        {"collectives": ["all-reduce", "all-gather"]},
    ),
    Preset(
        "A fast cross-node link",
        "The same two nodes joined at 2 Gbit/s: the link stops being the bottleneck, and the hierarchical "
        "all-reduce's extra in-node phases eat most of what its smaller egress saves.",
        {"collectives": ["all-reduce", "all-gather"], "link_mbit": 2000.0},
    ),
    Preset(
        "Latency-bound small messages",
        "Only small messages (256 B to 64 KiB): time barely grows with size, so the fit's α carries the result.",
        {"min_bytes": 256, "max_bytes": 65536, "collectives": ["all-reduce", "broadcast"]},
    ),
)


# Bytes per second the emulated link and gloo's loopback move, calibrated on the 2-core CPU; and a GPU's bus
# bandwidth per rank taken low (PCIe-class), so a GPU estimate errs long: NVLink moves 10-40 times this.
CPU_LOOPBACK_BPS = 4e8
GPU_LINK_BPS = 1e10
SETUP_S = 5.0


def estimate_seconds(params: Params, backend: str) -> float:
    """Start-up, namespaces, and every timed operation at the rates of its links."""
    p = params
    gpu = backend in GPU_BACKENDS
    total_bytes = sum(sizes(p, backend))
    top = max_bytes(p, backend)
    warmup = max(1, p.warmup) if gpu else p.warmup  # labs.parallel.timing.warmup_for
    ops = (p.iters + warmup) * len(p.collectives)
    if gpu:
        link = GPU_LINK_BPS
    else:
        link = CPU_LOOPBACK_BPS if p.nodes < 2 else min(CPU_LOOPBACK_BPS, p.link_mbit * 1e6 / 8)
    # An all-reduce moves about 2 S per rank; the node comparisons run 3 all-reduces of the largest size (all
    # ranks, inside a node, across nodes), a flat and a hierarchical loop, each phase alone, and the checked and
    # drawn pairs: about 8 more all-reduces of it per timed call.
    moved = 2 * total_bytes * ops + 8 * (p.iters + warmup) * 2 * top
    # Each GPU launch also makes 1 + nodes + ranks/nodes NCCL communicators; a Tree launch sweeps the all-reduce only
    # (counted whole here: the estimate errs long). On CPU each launch also builds the namespaces: about 5 s on
    # the loaded 2-core worker, where a default run measured 16-26 s against 9 s before this term.
    launches = len(p.algorithms) if gpu else 1
    return START_S + launches * (p.ranks * RANK_START_S + SETUP_S + moved / link) + 0.01 * ops * len(sizes(p, backend))
