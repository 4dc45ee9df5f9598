"""collectives: time each collective over a sweep of message sizes (nccl-tests style), fit the course's α-β
model, and compare collectives inside and across emulated nodes, flat against hierarchical.

    # CPU (gloo, 4 ranks on 2 emulated nodes when the worker may create network namespaces; 4 KiB to 4 MiB):
    python -m labs run collectives --params '{}' --out /tmp/coll --backend cpu
    # GPU node (NCCL, 4 KiB to 256 MiB; NCCL's own choice, Ring and Tree, one launch per NCCL_ALGO):
    python -m labs run collectives --params '{"ranks": 8, "nodes": 2}' --out /tmp/coll --backend torch-cuda

Reads as: topology (labs/collectives/topo.py: one network namespace per node, rate-limited veths between
them; flat when the worker may not) -> ranks (labs.parallel.dist.launch; each joins its node's namespace
and makes its groups there: all ranks, its node, and its peers of the same local index on other nodes)
-> measurements, each as nccl-tests takes them (labs.parallel.timing.time_back_to_back): warm-up calls, a
barrier over all ranks, then `iters` calls back to back between two events, their span / iters; the slowest
rank's:

    sweep       each collective x each size over all ranks: time, algbw = S/t, busbw = algbw x factor
    scopes      an all-reduce of the largest size inside one node, across nodes (one rank per node), all ranks
    hierarchy   the largest all-reduce flat, and HSDP-style: reduce-scatter in node, all-reduce of the shard
                across nodes, all-gather in node; same result (checked once on integers, untimed), node egress
                read from the interface's byte counters (/proc/thread-self/net/dev) against the model's bytes.

GPU paths (NCCL) are written against torch 2.13's torch/distributed/distributed_c10d.py (all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single, barrier, torch.cuda.nccl.version) and NCCL's src/graph/tuning.cc and
src/enqueue.cc (labs/collectives/nccl.py: which NCCL_ALGO each launch sets, and the algorithm NCCL logs it
chose); they are unverified until a GPU runs scripts/gpu-check.sh, and the result says so.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from labs.collectives import model, nccl, report, topo
from labs.collectives.params import Params, sizes
from labs.parallel import comm, timing
from labs.parallel import dist as labdist
from labs.trace import timeline as tl

if TYPE_CHECKING:
    from labs.runtime import LabContext

# ---- in each rank -------------------------------------------------------------------------------


def _tx_bytes(iface: str | None) -> int | None:
    """Bytes this namespace's `iface` has sent: /proc/thread-self/net shows the calling thread's namespace."""
    if iface is None:
        return None
    with open("/proc/thread-self/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == iface:
                return int(rest.split()[8])
    return None


class _Groups:
    def __init__(self, dist, rank: int, world: int, per_node: int):
        self.all = dist.new_group(list(range(world)))
        nodes = world // per_node
        self.node_ranks = [list(range(k * per_node, (k + 1) * per_node)) for k in range(nodes)]
        self.cross_ranks = [[k * per_node + j for k in range(nodes)] for j in range(per_node)]
        # Every rank must create every group, in the same order (torch.distributed.new_group's contract).
        node_groups = [dist.new_group(r) for r in self.node_ranks]
        cross_groups = [dist.new_group(r) for r in self.cross_ranks]
        self.node = node_groups[rank // per_node]
        self.node_first = self.node_ranks[rank // per_node][0]
        self.cross = cross_groups[rank % per_node]
        self.cross_j = rank % per_node


def _gather(dist):
    """torch 2.13 renames all_gather_into_tensor / reduce_scatter_tensor to *_single (the old names warn); older
    torch builds (a GPU image may ship one) have only the old names."""
    return (
        getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor,
        getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor,
    )


def _op(dist, torch, name: str, n: int, elems: int, group, root: int, device):
    """Buffers and a call for one collective of `elems` FP32 elements (nccl-tests' S) over `n` ranks."""
    if name == "all-reduce":
        x = torch.ones(elems, device=device)
        return lambda: dist.all_reduce(x, group=group)
    all_gather, reduce_scatter = _gather(dist)
    if name == "all-gather":
        inp, out = torch.ones(elems // n, device=device), torch.empty(elems, device=device)
        return lambda: all_gather(out, inp, group=group)
    if name == "reduce-scatter":
        inp, out = torch.ones(elems, device=device), torch.empty(elems // n, device=device)
        return lambda: reduce_scatter(out, inp, group=group)
    if name == "all-to-all":
        inp, out = torch.ones(elems, device=device), torch.empty(elems, device=device)
        return lambda: dist.all_to_all_single(out, inp, group=group)
    if name == "broadcast":
        x = torch.ones(elems, device=device)
        return lambda: dist.broadcast(x, src=root, group=group)
    raise ValueError(f"collective: {name!r}")


def _elems(size: int, multiple: int) -> int:
    return max(multiple, (size // 4) // multiple * multiple)


class _Timer:
    """This rank's back-to-back timing (labs.parallel.timing): the device's events, and a barrier over every rank
    on a gloo group, which runs on the host and puts no kernel between the timed calls."""

    def __init__(self, dist, cuda: bool, host, p: Params):
        self.dist, self.host, self.iters = dist, host, p.iters
        self.warmup = timing.warmup_for("cuda" if cuda else "cpu", p.warmup)
        self.sync = timing.sync_for("cuda" if cuda else "cpu")
        self.new_event = timing.events_for("cuda" if cuda else "cpu")

    def barrier(self) -> None:
        self.dist.barrier(group=self.host)

    def per_call(self, fn, part: bool = True, warmup: int | None = None) -> float | None:
        """Seconds per call of `fn` issued `iters` times back to back, or None on a rank outside the collective's
        group, which keeps the barrier so the others start together."""
        if not part:
            self.sync()
            self.barrier()
            return None
        return timing.time_back_to_back(
            fn,
            iters=self.iters,
            warmup=self.warmup if warmup is None else warmup,
            barrier=self.barrier,
            sync=self.sync,
            new_event=self.new_event,
        )


def _rank_main(rank: int, world: int, params_dict: dict, device_kind: str, cfg: dict, plan: list) -> dict:
    import torch
    import torch.distributed as dist

    from labs.trace.profile import host_group

    place = plan[rank]
    topo.join(place)  # before any group we time is made: its sockets must live in the node's namespace
    iface = place["iface"] if place else None
    p = Params.model_validate(params_dict)
    cuda = device_kind == "cuda"
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    per_node = world // cfg["nodes"]
    g = _Groups(dist, rank, world, per_node)
    timer = _Timer(dist, cuda, host_group(list(range(world))), p)
    out: dict = {"sweep": {}, "rank": rank}
    for name in cfg["collectives"]:
        out["sweep"][name] = {}
        for s in cfg["sizes"]:
            fn = _op(dist, torch, name, world, _elems(s, world), g.all, 0, device)
            out["sweep"][name][s] = timer.per_call(fn)
    if not cfg["comparisons"]:
        return out

    big = cfg["sizes"][-1]
    elems = _elems(big, world)
    scopes = {}
    ar = lambda grp: _op(dist, torch, "all-reduce", 0, elems, grp, 0, device)  # noqa: E731
    scopes["all ranks"] = timer.per_call(ar(g.all))
    if cfg["nodes"] > 1:
        # One node's ranks only (the fast links), then one rank per node (every hop crosses a node boundary).
        scopes["intra-node"] = timer.per_call(ar(g.node), part=rank < per_node)
        scopes["cross-node"] = timer.per_call(ar(g.cross), part=g.cross_j == 0)
    out["scopes"] = {k: v for k, v in scopes.items() if v is not None}
    out["hierarchy"] = _hierarchy_rank(dist, torch, p, g, rank, elems, per_node, cfg["nodes"], device, iface, timer)
    return out


def _hierarchy_rank(dist, torch, p: Params, g: _Groups, rank, elems, per_node, nodes, device, iface, timer) -> dict:
    """Flat against hierarchical on this rank: once on seeded integers, whose sums are exact and must agree; then
    each timed back to back on zeros (the values do not change the time, and repeated sums of zeros cannot
    overflow), each phase alone too; the node's egress counted over the flat and the hierarchical loops; and one
    more untimed pair with an event at every phase boundary, drawn as the timeline."""
    all_gather, reduce_scatter = _gather(dist)
    gen = torch.Generator().manual_seed(p.seed + rank)
    base = torch.randint(-8, 9, (elems,), generator=gen).float().to(device)
    flat_buf = base.clone()
    dist.all_reduce(flat_buf, group=g.all)
    shard = torch.empty(elems // per_node, device=device)
    hier_buf = torch.empty(elems, device=device)
    reduce_scatter(shard, base, group=g.node)
    if nodes > 1:
        dist.all_reduce(shard, group=g.cross)
    all_gather(hier_buf, shard, group=g.node)
    max_abs_diff = float((flat_buf - hier_buf).abs().max().item())

    zeros, zshard, zout = (torch.zeros(n, device=device) for n in (elems, elems // per_node, elems))
    phases = [
        lambda: reduce_scatter(zshard, zeros, group=g.node),
        (lambda: dist.all_reduce(zshard, group=g.cross)) if nodes > 1 else None,
        lambda: all_gather(zout, zshard, group=g.node),
    ]

    def flat_once():
        dist.all_reduce(zeros, group=g.all)

    def hier_once():
        for phase in phases:
            if phase is not None:
                phase()

    egress: dict[str, int | None] = {}
    times: dict[str, float] = {}
    for kind, fn in (("flat", flat_once), ("hierarchical", hier_once)):
        for _ in range(timer.warmup):
            fn()
        c0 = _tx_bytes(iface)
        times[kind] = timer.per_call(fn, warmup=0) or 0.0
        c1 = _tx_bytes(iface)
        egress[kind] = None if c0 is None or c1 is None else (c1 - c0) // p.iters
    phase_s = [0.0 if phase is None else (timer.per_call(phase) or 0.0) for phase in phases]
    return {
        "elems": elems,
        "flat": times["flat"],
        "hierarchical": times["hierarchical"],
        "phases": phase_s,
        "egress": egress,
        "max_abs_diff": max_abs_diff,
        "spans": _drawn_pair(rank, timer, flat_once, phases, elems, per_node, nodes),
        "counts_egress": iface is not None,
        "node_leader": rank == g.node_first,
    }


def _drawn_pair(rank: int, timer: _Timer, flat_once, phases, elems: int, per_node: int, nodes: int) -> list[dict]:
    """One flat all-reduce and one hierarchical, untimed, an event at each boundary: the timeline's spans, in
    host milliseconds from an origin each rank stamps after the common barrier."""
    timer.sync()
    timer.barrier()
    origin_ms = time.perf_counter() * 1e3
    origin = timer.new_event()
    origin.record()
    marks = []
    for fn in (flat_once, *[ph for ph in phases if ph is not None]):
        ev = timer.new_event()
        fn()
        ev.record()
        marks.append(ev)
    timer.sync()
    ends = [origin_ms + origin.elapsed_time(ev) for ev in marks]
    starts = [origin_ms, *ends[:-1]]
    names = [
        ("all-reduce (flat, all ranks)", "all-reduce", elems * 4),
        ("reduce-scatter (in node)", "reduce-scatter", elems * 4),
    ]
    if nodes > 1:
        names.append(("all-reduce of shard (across nodes)", "all-reduce", elems * 4 // per_node))
    names.append(("all-gather (in node)", "all-gather", elems * 4))
    return [
        tl.Span(rank, "communication", name, a, b, {"kind": kind, "bytes": int(nbytes)}).to_dict()
        for (name, kind, nbytes), a, b in zip(names, starts, ends)
    ]


# ---- in the launcher ----------------------------------------------------------------------------


def _slowest(per_rank: list[float | None]) -> float:
    """The slowest participating rank's seconds per call (a collective is done when its last rank is)."""
    return max(t for t in per_rank if t is not None)


def _launch(
    params: Params, plan: list, collectives: list[str], comparisons: bool, nodes: int, ctx: LabContext, what: str
) -> list[dict]:
    cfg = {
        "collectives": collectives,
        "sizes": sizes(params, ctx.backend),
        "nodes": nodes,
        "comparisons": comparisons,
    }
    return labdist.run_ranks(
        ctx,
        _rank_main,
        params,
        cfg,
        plan,
        world=params.ranks,
        what=None,  # run() says it, with the emulated topology or the NCCL algorithm
        finished_at=0.8,
        finished=f"{what}: rank {{rank}} finished",
    )


def _sweep(params: Params, per_rank: list[dict], algorithm: str, note: str, chosen: dict | None) -> dict:
    n = params.ranks
    colls = []
    for name in per_rank[0]["sweep"]:
        rows: list[dict] = []
        ts: list[float] = []
        for s in sorted(per_rank[0]["sweep"][name]):
            t = _slowest([r["sweep"][name][s] for r in per_rank])
            nbytes = _elems(s, n) * 4
            ts.append(t)
            f = comm.bus_factor(name, n)
            rows.append(
                {
                    "bytes": nbytes,
                    "time_ms": 1e3 * t,
                    "algbw_gbs": nbytes / t / 1e9,
                    "busbw_gbs": f * nbytes / t / 1e9,
                    "nccl_algorithm": None if chosen is None else nccl.algorithm_for(chosen, name, nbytes, n),
                }
            )
        fitted = model.fit(name, n, [r["bytes"] for r in rows], ts, _hops_algorithm(algorithm))
        for row, pred, res in zip(rows, fitted.pop("predicted_ms"), fitted.pop("residuals")):
            row["fit_ms"] = pred
            row["residual"] = res
        colls.append({"name": name, "rows": rows, "fit": fitted})
    return {"algorithm": algorithm, "note": note, "collectives": colls}


def _hops_algorithm(sweep_algorithm: str) -> str | None:
    """Which hop count the fit divides its intercept by: a ring's, a tree's, or none where NCCL chose per call."""
    return {"gloo-ring": "ring", "nccl-ring": "ring", "nccl-tree": "tree"}.get(sweep_algorithm)


def _nccl_launches(params: Params, plan: list, nodes: int, ctx: LabContext) -> tuple[list[dict], list[dict]]:
    """Every NCCL launch of nccl.plan_launches, each under its own NCCL_ALGO and with NCCL's tuning log read back:
    (sweeps, the per-rank results of the launch that ran the node comparisons)."""
    import torch

    # (major, minor, patch[, suffix]) of the NCCL torch runs (torch/cuda/nccl.py @ v2.13 `version()`).
    version = tuple(torch.cuda.nccl.version()) if torch.cuda.is_available() else None
    sweeps: list[dict] = []
    main: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="labs-nccl-") as logs:
        for launch in nccl.plan_launches(list(params.algorithms), list(params.collectives), version):
            env = nccl.launch_env(launch, logs)
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update({k: v for k, v in env.items() if v is not None})
            for k in (k for k, v in env.items() if v is None):
                os.environ.pop(k, None)
            try:
                ctx.progress(0.1, f"NCCL_ALGO={launch.nccl_algo or 'unset'}: starting {params.ranks} ranks")
                per_rank = _launch(
                    params, plan, list(launch.collectives), launch.comparisons, nodes, ctx, launch.algorithm
                )
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            text = "".join(f.read_text(errors="replace") for f in Path(logs).glob(f"nccl-{launch.algorithm}.*.log"))
            if launch.collectives:
                sweeps.append(
                    _sweep(params, per_rank, f"nccl-{launch.algorithm}", launch.note, nccl.chosen_algorithms(text))
                )
            if launch.comparisons:
                main = per_rank
    return sweeps, main


def run(params: Params, ctx: LabContext) -> dict:
    device = ctx.device
    nodes = params.nodes
    ctx.progress(0.02, f"building {nodes} emulated node(s)" if device == "cpu" and nodes > 1 else "starting")
    with topo.emulated_nodes(nodes if device == "cpu" else 1, params.link_mbit, params.link_delay_ms) as t:
        if device == "cuda":
            mode = "gpu-groups"
            why = (
                "GPUs grouped into nodes by rank; on one GPU host every link is the same NVLink, so the "
                "cross-node slowdown is not emulated (a real multi-node run shows it)"
            )
        elif t.ok:
            mode, why = "netns", t.why
        else:
            mode, why = "flat", t.why
        plan = t.plan(params.ranks // nodes)
        if device == "cuda":
            sweeps, main = _nccl_launches(params, plan, nodes, ctx)
        else:
            ctx.progress(0.1, f"starting {params.ranks} rank processes on cpu ({mode})")
            main = _launch(params, plan, list(params.collectives), True, nodes, ctx, "gloo")
            sweeps = [
                _sweep(
                    params,
                    main,
                    "gloo-ring",
                    "gloo has no tree: torch's ProcessGroupGloo leaves gloo's all-reduce algorithm unspecified, which "
                    "gloo/allreduce.cc runs as a ring",
                    None,
                )
            ]
    ctx.progress(0.9, "fitting and writing tables")
    topology = {
        "mode": mode,
        "note": why,
        "nodes": nodes,
        "ranks_per_node": params.ranks // nodes,
        "link_mbit": params.link_mbit if mode == "netns" else None,
        "link_delay_ms": (params.link_delay_ms if t.delay_applied else 0.0) if mode == "netns" else None,
        "delay_applied": bool(mode == "netns" and t.delay_applied),
    }
    scopes = _scopes(params, ctx, main, nodes)
    hierarchy = _hierarchy(params, ctx, main, nodes, topology)
    return report.results(params, ctx, device, sweeps, topology, scopes, hierarchy)


def _scopes(params: Params, ctx: LabContext, per_rank: list[dict], nodes: int) -> list[dict]:
    big = _elems(sizes(params, ctx.backend)[-1], params.ranks) * 4
    per_node = params.ranks // nodes
    out = []
    for scope, n in (("intra-node", per_node), ("cross-node", nodes), ("all ranks", params.ranks)):
        times = [r["scopes"][scope] for r in per_rank if scope in r.get("scopes", {})]
        if not times:
            continue
        t = max(times)
        f = comm.bus_factor("all-reduce", n)
        out.append({"scope": scope, "ranks": n, "bytes": big, "time_ms": 1e3 * t, "busbw_gbs": f * big / t / 1e9})
    return out


def _hierarchy(params: Params, ctx: LabContext, per_rank: list[dict], nodes: int, topology: dict) -> dict:
    hs = [r["hierarchy"] for r in per_rank]
    nbytes = hs[0]["elems"] * 4
    flat = max(h["flat"] for h in hs)
    hier = max(h["hierarchical"] for h in hs)
    phases = [max(h["phases"][k] for h in hs) for k in range(3)]
    leaders = [h for h in hs if h["node_leader"] and h["counts_egress"]]

    def measured(kind):
        got = [h["egress"][kind] for h in leaders if h["egress"][kind] is not None]
        return statistics.median(got) if got else None

    link = topology["link_mbit"] * 1e6 / 8 if topology["link_mbit"] else None
    spans = [s for h in hs for s in h["spans"]]
    t0 = min(s["start_ms"] for s in spans)
    drawn = [tl.Span(s["rank"], s["lane"], s["name"], s["start_ms"] - t0, s["end_ms"] - t0, s["args"]) for s in spans]
    return {
        "bytes": nbytes,
        "flat_ms": 1e3 * flat,
        "hierarchical_ms": 1e3 * hier,
        "flat_over_hierarchical": flat / hier,
        "phases_ms": {
            "reduce_scatter": 1e3 * phases[0],
            "all_reduce_across": 1e3 * phases[1],
            "all_gather": 1e3 * phases[2],
        },
        "max_abs_diff": max(h["max_abs_diff"] for h in hs),
        "egress": {
            "measured_flat_bytes": measured("flat"),
            "measured_hierarchical_bytes": measured("hierarchical"),
            **model.predicted_egress(nbytes, params.ranks, nodes, link),
        },
        "artifacts": report.timeline_artifacts(ctx, params, drawn, topology),
    }
