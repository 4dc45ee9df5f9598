"""collectives: time each collective over a sweep of message sizes (nccl-tests style), fit the course's α-β
model, and compare collectives inside and across emulated nodes, flat against hierarchical.

    # CPU (gloo, 4 ranks on 2 emulated nodes when the worker may create network namespaces):
    python -m labs run collectives --params '{}' --out /tmp/coll --backend cpu
    # GPU node (NCCL; ring and tree all-reduce sweeps, one launch per NCCL_ALGO):
    python -m labs run collectives --params '{"ranks": 8, "nodes": 2}' --out /tmp/coll --backend torch-cuda

Reads as: topology (labs/collectives/topo.py: one network namespace per node, rate-limited veths between
them; flat when the worker may not) -> ranks (labs.parallel.dist.launch; each joins its node's namespace
and makes its groups there: all ranks, its node, and its peers of the same local index on other nodes)
-> measurements, every timed operation after a barrier over all ranks, its time the slowest rank's:

    sweep       each collective x each size over all ranks: time, algbw = S/t, busbw = algbw x factor
    scopes      an all-reduce of the largest size inside one node, across nodes (one rank per node), all ranks
    hierarchy   the largest all-reduce flat, and HSDP-style: reduce-scatter in node, all-reduce of the shard
                across nodes, all-gather in node; same result (checked), node egress read from the
                interface's byte counters (/proc/thread-self/net/dev) against the model's bytes.

GPU paths (NCCL) are written against torch 2.13's torch/distributed/distributed_c10d.py (all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single, barrier) and NCCL's documented NCCL_ALGO (read once per communicator,
hence one launch per algorithm); nobody has run them on a GPU yet: the result says "unverified".
"""

from __future__ import annotations

import os
import statistics
import time
from typing import TYPE_CHECKING

from labs.collectives import model, report, topo
from labs.collectives.params import Params, sizes
from labs.parallel import comm
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


def _timed(dist, torch, cuda: bool, barrier_group, fn, iters: int, warmup: int, part: bool = True) -> list[float]:
    """Seconds per call on this rank, each call after a barrier over all ranks; ranks not in the group only
    keep the barriers (part=False) so the others' timings see the same start."""
    out = []
    for i in range(warmup + iters):
        dist.barrier(group=barrier_group)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        if part:
            fn()
            if cuda:
                torch.cuda.synchronize()
        t1 = time.perf_counter()
        if i >= warmup and part:
            out.append(t1 - t0)
    return out


def _rank_main(rank: int, world: int, params_dict: dict, device_kind: str, cfg: dict, plan: list) -> dict:
    import torch
    import torch.distributed as dist

    place = plan[rank]
    topo.join(place)  # before any group we time is made: its sockets must live in the node's namespace
    iface = place["iface"] if place else None
    p = Params.model_validate(params_dict)
    cuda = device_kind == "cuda"
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    per_node = world // cfg["nodes"]
    g = _Groups(dist, rank, world, per_node)
    out: dict = {"sweep": {}, "rank": rank}
    for name in cfg["collectives"]:
        out["sweep"][name] = {}
        for s in cfg["sizes"]:
            fn = _op(dist, torch, name, world, _elems(s, world), g.all, 0, device)
            out["sweep"][name][s] = _timed(dist, torch, cuda, g.all, fn, p.iters, p.warmup)
    if not cfg["comparisons"]:
        return out

    big = cfg["sizes"][-1]
    elems = _elems(big, world)
    scopes = {}
    ar = lambda grp: _op(dist, torch, "all-reduce", 0, elems, grp, 0, device)  # noqa: E731
    scopes["all ranks"] = _timed(dist, torch, cuda, g.all, ar(g.all), p.iters, p.warmup)
    if cfg["nodes"] > 1:
        # One node's ranks only (the fast links), then one rank per node (every hop crosses a node boundary).
        scopes["intra-node"] = _timed(dist, torch, cuda, g.all, ar(g.node), p.iters, p.warmup, part=rank < per_node)
        scopes["cross-node"] = _timed(dist, torch, cuda, g.all, ar(g.cross), p.iters, p.warmup, part=g.cross_j == 0)
    out["scopes"] = scopes

    # Flat against hierarchical, on the same seeded integers so the sums are exact and must agree.
    gen = torch.Generator().manual_seed(p.seed + rank)
    base = torch.randint(-8, 9, (elems,), generator=gen).float().to(device)
    flat_buf = base.clone()
    shard = torch.empty(elems // per_node, device=device)
    hier_buf = torch.empty(elems, device=device)
    spans: list[dict] = []
    flat_t: list[float] = []
    hier_t: list[float] = []
    phases_t: list[list[float]] = []
    egress: dict[str, list[int]] = {"flat": [], "hierarchical": []}
    nodes = cfg["nodes"]

    def flat_once():
        flat_buf.copy_(base)
        dist.all_reduce(flat_buf, group=g.all)

    all_gather, reduce_scatter = _gather(dist)

    def hier_once(marks):
        stamps = [time.perf_counter()]
        reduce_scatter(shard, base, group=g.node)
        stamps.append(_sync_now(torch, cuda))
        if nodes > 1:
            dist.all_reduce(shard, group=g.cross)
        stamps.append(_sync_now(torch, cuda))
        all_gather(hier_buf, shard, group=g.node)
        stamps.append(_sync_now(torch, cuda))
        marks.append(stamps)

    for i in range(p.warmup + p.iters):
        timed = i >= p.warmup
        for kind in ("flat", "hierarchical"):
            dist.barrier(group=g.all)
            if cuda:
                torch.cuda.synchronize()
            c0 = _tx_bytes(iface)
            marks: list = []
            t0 = time.perf_counter()
            if kind == "flat":
                flat_once()
                t1 = _sync_now(torch, cuda)
            else:
                hier_once(marks)
                t1 = marks[-1][-1]
            dist.barrier(group=g.all)
            c1 = _tx_bytes(iface)
            if not timed:
                continue
            (flat_t if kind == "flat" else hier_t).append(t1 - t0)
            if c0 is not None and c1 is not None:
                egress[kind].append(c1 - c0)
            last = i == p.warmup + p.iters - 1
            if kind == "flat" and last:
                spans.append(_span(rank, "all-reduce (flat, all ranks)", t0, t1, "all-reduce", elems * 4))
            if kind == "hierarchical":
                st = marks[-1]
                phases_t.append([st[1] - st[0], st[2] - st[1], st[3] - st[2]])
                if last:
                    spans.append(_span(rank, "reduce-scatter (in node)", st[0], st[1], "reduce-scatter", elems * 4))
                    if nodes > 1:
                        spans.append(
                            _span(
                                rank,
                                "all-reduce of shard (across nodes)",
                                st[1],
                                st[2],
                                "all-reduce",
                                elems * 4 // per_node,
                            )
                        )
                    spans.append(_span(rank, "all-gather (in node)", st[2], st[3], "all-gather", elems * 4))
    out["hierarchy"] = {
        "elems": elems,
        "flat": flat_t,
        "hierarchical": hier_t,
        "phases": phases_t,
        "egress": egress,
        "max_abs_diff": float((flat_buf - hier_buf).abs().max().item()),
        "spans": spans,
        "counts_egress": iface is not None,
        "node_leader": rank == g.node_first,
    }
    return out


def _sync_now(torch, cuda: bool) -> float:
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter()


def _span(rank, name, t0, t1, kind, nbytes) -> dict:
    return tl.Span(rank, "communication", name, t0 * 1e3, t1 * 1e3, {"kind": kind, "bytes": int(nbytes)}).to_dict()


# ---- in the launcher ----------------------------------------------------------------------------


def _slowest(per_rank: list[list[float]]) -> list[float]:
    """Per call, the slowest participating rank's seconds (a collective is done when its last rank is)."""
    lists = [xs for xs in per_rank if xs]
    return [max(calls) for calls in zip(*lists)]


def _launch(
    params: Params, plan: list, collectives: list[str], comparisons: bool, nodes: int, ctx: LabContext, what: str
) -> list[dict]:
    cfg = {"collectives": collectives, "sizes": sizes(params), "nodes": nodes, "comparisons": comparisons}
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


def _sweep(params: Params, per_rank: list[dict], algorithm: str, note: str) -> dict:
    n = params.ranks
    colls = []
    for name in per_rank[0]["sweep"]:
        rows, ts = [], []
        szs = sorted(per_rank[0]["sweep"][name])
        for s in szs:
            t = statistics.median(_slowest([r["sweep"][name][s] for r in per_rank]))
            nbytes = _elems(s, n) * 4
            ts.append(t)
            f = comm.bus_factor(name, n)
            rows.append(
                {"bytes": nbytes, "time_ms": 1e3 * t, "algbw_gbs": nbytes / t / 1e9, "busbw_gbs": f * nbytes / t / 1e9}
            )
        fitted = model.fit(name, n, [int(r["bytes"]) for r in rows], ts)
        for row, pred, res in zip(rows, fitted.pop("predicted_ms"), fitted.pop("residuals")):
            row["fit_ms"] = pred
            row["residual"] = res
        colls.append({"name": name, "rows": rows, "fit": fitted})
    return {"algorithm": algorithm, "note": note, "collectives": colls}


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
        sweeps = []
        if device == "cuda":
            # NCCL reads NCCL_ALGO when a communicator is created, so each algorithm gets its own launch.
            first = True
            for algo in params.algorithms:
                old = os.environ.get("NCCL_ALGO")
                os.environ["NCCL_ALGO"] = algo.capitalize()
                try:
                    # Tree is an all-reduce algorithm in NCCL; the other collectives only run on the ring launch.
                    colls: list[str] = [c for c in params.collectives if algo == "ring" or c == "all-reduce"]
                    ctx.progress(0.1, f"NCCL_ALGO={algo.capitalize()}: starting {params.ranks} ranks")
                    per_rank = _launch(params, plan, colls or ["all-reduce"], first, nodes, ctx, algo)
                finally:
                    if old is None:
                        os.environ.pop("NCCL_ALGO", None)
                    else:
                        os.environ["NCCL_ALGO"] = old
                sweeps.append(
                    _sweep(
                        params, per_rank, f"nccl-{algo}", f"NCCL_ALGO={algo.capitalize()} (unverified: no GPU run yet)"
                    )
                )
                if first:
                    main = per_rank
                first = False
        else:
            ctx.progress(0.1, f"starting {params.ranks} rank processes on cpu ({mode})")
            main = _launch(params, plan, list(params.collectives), True, nodes, ctx, "gloo")
            sweeps.append(
                _sweep(
                    params,
                    main,
                    "gloo-ring",
                    "gloo has no tree: torch's ProcessGroupGloo leaves gloo's all-reduce algorithm unspecified, which "
                    "gloo/allreduce.cc runs as a ring",
                )
            )
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
    scopes = _scopes(params, main, nodes)
    hierarchy = _hierarchy(params, ctx, main, nodes, topology)
    return report.results(params, ctx, device, sweeps, topology, scopes, hierarchy)


def _scopes(params: Params, per_rank: list[dict], nodes: int) -> list[dict]:
    big = _elems(sizes(params)[-1], params.ranks) * 4
    per_node = params.ranks // nodes
    out = []
    for scope, n in (("intra-node", per_node), ("cross-node", nodes), ("all ranks", params.ranks)):
        if scope not in per_rank[0]["scopes"] and not any(scope in r.get("scopes", {}) for r in per_rank):
            continue
        t = statistics.median(_slowest([r["scopes"].get(scope, []) for r in per_rank]))
        f = comm.bus_factor("all-reduce", n)
        out.append({"scope": scope, "ranks": n, "bytes": big, "time_ms": 1e3 * t, "busbw_gbs": f * big / t / 1e9})
    return out


def _hierarchy(params: Params, ctx: LabContext, per_rank: list[dict], nodes: int, topology: dict) -> dict:
    hs = [r["hierarchy"] for r in per_rank]
    nbytes = hs[0]["elems"] * 4
    flat = statistics.median(_slowest([h["flat"] for h in hs]))
    hier = statistics.median(_slowest([h["hierarchical"] for h in hs]))
    phases = [statistics.median(max(h["phases"][i][k] for h in hs) for i in range(params.iters)) for k in range(3)]
    leaders = [h for h in hs if h["node_leader"] and h["counts_egress"]]

    def measured(kind):
        if not leaders:
            return None
        return statistics.median(statistics.median(h["egress"][kind]) for h in leaders)

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
