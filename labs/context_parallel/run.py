"""context-parallel: ring attention over a sequence split across ranks, zig-zag against contiguous, and an
all-to-all over heads (Ulysses) beside it, on real timelines.

    # CPU (gloo, 4 ranks, 2048 tokens, causal):
    python -m labs run context-parallel --params '{}' --out /tmp/cp --backend cpu
    # no causal mask (both splits balanced):
    python -m labs run context-parallel --params '{"causal": false}' --out /tmp/cp-full
    # GPU node (NCCL; unverified: no GPU has run it yet):
    python -m labs run context-parallel --params '{"ranks": 4, "seq_len": 16384}' --out /tmp/cp --backend torch-cuda

Reads as: Q, K, V for the whole sequence (heads x tokens x head_dim, seeded the same on every rank) -> split
into 2N chunks, rank r holding chunks (r, 2N-1-r) (zig-zag) or (2r, 2r+1) (contiguous) -> N ring steps: each
rank posts the K/V block it holds to rank r+1 and a receive from r-1 (`dist.batch_isend_irecv`, real p2p on
gloo and NCCL), computes its queries against the block it holds meanwhile, merges the block's output into its
running output by log-sum-exp rescaling (online softmax), then waits for the next block. Query/key chunk pairs
above the causal diagonal are skipped, which is where a contiguous split's imbalance comes from. Ulysses: three
`all_to_all_single` turn sequence shards of every head into the whole sequence of H/N heads, each rank runs
full attention on its heads, and one more brings the output back to sequence shards.

PyTorch's own context parallelism (torch 2.13, torch/distributed/tensor/experimental/_context_parallel/
_attention.py, read in the installed wheel 2.13.0): `context_parallel()` dispatches only the CUDA SDPA kernels
(flash, memory-efficient, cuDNN; `_sdpa_handler`'s call_maps); on CPU SDPA runs
aten._scaled_dot_product_flash_attention_for_cpu, which has no sharding strategy, so it raises
NotImplementedError (the run records the message). Its ring loop `_templated_ring_attention` takes the op as an
argument and rotates K/V with `ft_c.permute_tensor` (an all_to_all, not p2p): the lab calls it with the CPU
flash op as a cross-check of the same arithmetic, and builds its own ring from isend/irecv so the sends are
point-to-point and their overlap with compute is measured span by span. The backward (`backward`, on by
default) is checked once, untimed: autograd through the blocks each rank held, each K/V gradient sent back to
its owner with p2p, against autograd through full attention.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import TYPE_CHECKING

from labs.context_parallel import report, work
from labs.context_parallel.params import GRAD_RTOL, TOL, Params, chunk_tokens, flops_per_chunk_pair
from labs.parallel import comm, timing
from labs.parallel import dist as labdist
from labs.trace import timeline as tl

if TYPE_CHECKING:
    from labs.runtime import LabContext

VARIANTS = ("ring-zigzag", "ring-contiguous", "ring-serial", "ulysses")


def _qkv(params: Params, device):
    import torch

    g = torch.Generator().manual_seed(params.seed)
    shape = (params.heads, params.seq_len, params.head_dim)
    return [torch.randn(*shape, generator=g).to(device) for _ in range(3)]


class _Clock:
    """CPU: perf_counter (one CLOCK_MONOTONIC for all ranks). CUDA: the current stream synchronized at each mark,
    so a compute span ends when its kernels have (torch 2.13 torch/cuda/streams.py Stream.synchronize; unverified).
    Communication completion is known when the rank's `wait()` returns, after which the stream is synchronized."""

    def __init__(self, torch, cuda: bool):
        self.torch, self.cuda = torch, cuda

    def now(self) -> float:
        if self.cuda:
            self.torch.cuda.current_stream().synchronize()
        return time.perf_counter() * 1e3


def _rows(full, chunk_ids: list[int], c: int):
    import torch

    return torch.cat([full[:, a * c : (a + 1) * c] for a in chunk_ids], dim=1)


def _ring_pass(torch, dist, clock, params: Params, split: str, overlap: bool, q_all, k_all, v_all, rank, world):
    """One ring pass; returns (output rows of this rank's chunks, spans, counters)."""
    c = chunk_tokens(params)
    mine = work.chunks(split, rank, world)
    q = _rows(q_all, mine, c)
    kv = torch.stack([_rows(k_all, mine, c), _rows(v_all, mine, c)]).contiguous()  # (2, H, 2c, d)
    scale = 1.0 / math.sqrt(params.head_dim)
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], -math.inf, device=q.device)
    above = torch.triu(torch.ones(c, c, dtype=torch.bool, device=q.device), diagonal=1)
    spans, sent, computed, needed, cpu_ms = [], 0, 0.0, 0.0, 0.0
    nxt, dst, src_peer = None, (rank + 1) % world, (rank - 1) % world
    for i in range(world):
        holder = (rank - i) % world  # whose K/V this rank holds at step i
        theirs = work.chunks(split, holder, world)
        reqs, posted = [], None
        if i < world - 1:
            nxt = torch.empty_like(kv)
            posted = clock.now()
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, kv, dst), dist.P2POp(dist.irecv, nxt, src_peer)])
            sent += kv.numel() * kv.element_size()
            if not overlap:
                w0 = clock.now()
                for r in reqs:
                    r.wait()
                done = clock.now()
                spans.append(("wait", f"wait K/V←{src_peer}", w0, done, {"ring_step": i}))
                spans.append(
                    (
                        "communication",
                        f"K/V→{dst} ←{src_peer}",
                        posted,
                        done,
                        {"ring_step": i, "bytes": kv.numel() * kv.element_size()},
                    )
                )
                reqs = []
        t0, cpu0 = clock.now(), time.thread_time()
        blocks = 0
        for qi, a in enumerate(mine):
            for ki, b in enumerate(theirs):
                comp, need = work.pair_work(a, b, params.causal)
                if comp == 0:
                    continue
                blocks += 1
                computed += comp
                needed += need
                qs = q[:, qi * c : (qi + 1) * c]
                s = torch.matmul(qs, kv[0, :, ki * c : (ki + 1) * c].transpose(1, 2)) * scale
                if params.causal and a == b:
                    s = s.masked_fill(above, -math.inf)
                blse = torch.logsumexp(s, dim=-1)  # (H, c)
                bout = torch.matmul(torch.exp(s - blse.unsqueeze(-1)), kv[1, :, ki * c : (ki + 1) * c])
                old = lse[:, qi * c : (qi + 1) * c]
                new = torch.logaddexp(old, blse)
                # Online softmax: rescale what is there and what the block adds by their share of the new sum.
                out[:, qi * c : (qi + 1) * c] = out[:, qi * c : (qi + 1) * c] * torch.exp(old - new).unsqueeze(
                    -1
                ) + bout * torch.exp(blse - new).unsqueeze(-1)
                lse[:, qi * c : (qi + 1) * c] = new
        t1 = clock.now()
        cpu_ms += 1e3 * (time.thread_time() - cpu0)
        spans.append(
            (
                "compute",
                f"attn K/V{holder}",
                t0,
                t1,
                {"ring_step": i, "blocks": blocks, "flops": int(blocks * flops_per_chunk_pair(params))},
            )
        )
        if reqs:
            w0 = clock.now()
            for r in reqs:
                r.wait()
            done = clock.now()
            spans.append(("wait", f"wait K/V←{src_peer}", w0, done, {"ring_step": i}))
            spans.append(
                (
                    "communication",
                    f"K/V→{dst} ←{src_peer}",
                    posted,
                    done,
                    {"ring_step": i, "bytes": kv.numel() * kv.element_size()},
                )
            )
        if nxt is not None and i < world - 1:
            kv = nxt
    counters = {"send_bytes": sent, "computed": computed, "needed": needed, "compute_cpu_ms": cpu_ms}
    return out, spans, counters


def _ulysses_pass(torch, dist, clock, params: Params, q_all, k_all, v_all, rank, world):
    """Sequence shards of all heads -> (all_to_all_single) whole sequence of H/N heads -> attention -> back."""
    import torch.nn.functional as F

    h, shard = params.heads // world, params.seq_len // world
    rows = slice(rank * shard, (rank + 1) * shard)
    d = params.head_dim
    qkv = torch.stack([q_all[:, rows], k_all[:, rows], v_all[:, rows]])  # (3, H, S/N, d)
    # dim 0 is the destination: head group j goes to rank j.
    send = qkv.reshape(3, world, h, shard, d).permute(1, 0, 2, 3, 4).contiguous()
    recv = torch.empty_like(send)  # recv[j] = rank j's sequence shard of my head group
    spans, cpu_ms = [], 0.0
    elem = send.element_size()
    t0 = clock.now()
    dist.all_to_all_single(recv, send)
    t1 = clock.now()
    spans.append(
        (
            "communication",
            "a2a Q,K,V",
            t0,
            t1,
            {"bytes": comm.whole_bus_bytes("all-to-all", world, send.numel() * elem)},
        )
    )
    q, k, v = recv.permute(1, 2, 0, 3, 4).reshape(3, h, params.seq_len, d)
    c0 = time.thread_time()
    t2 = clock.now()
    o = F.scaled_dot_product_attention(q, k, v, is_causal=params.causal)  # (h, S, d)
    t3 = clock.now()
    cpu_ms += 1e3 * (time.thread_time() - c0)
    spans.append(
        (
            "compute",
            f"attn head {rank * h}" if h == 1 else f"attn heads {rank * h}-{rank * h + h - 1}",
            t2,
            t3,
            {},
        )
    )
    back = o.reshape(h, world, shard, d).permute(1, 0, 2, 3).contiguous()  # dim 0: the sequence shard's owner
    got = torch.empty_like(back)  # got[j] = head group j of my shard
    t4 = clock.now()
    dist.all_to_all_single(got, back)
    t5 = clock.now()
    spans.append(
        (
            "communication",
            "a2a out",
            t4,
            t5,
            {"bytes": comm.whole_bus_bytes("all-to-all", world, back.numel() * elem)},
        )
    )
    out = got.reshape(params.heads, shard, d)
    sent = comm.whole_bus_bytes("all-to-all", world, (send.numel() + back.numel()) * elem)
    w = work.ulysses_work(world, params.causal)
    return out, spans, {"send_bytes": sent, "computed": w["computed"], "needed": w["needed"], "compute_cpu_ms": cpu_ms}


def _ring_backward(torch, dist, params: Params, q_all, k_all, v_all, rank, world) -> dict:
    """The zig-zag ring's backward, once, against autograd through full attention: autograd runs through the
    blocks this rank held (each received block a leaf), then each block's K/V gradient goes back to the rank that
    owns it with one p2p exchange per ring distance, summed there. Returns the largest error of dQ, dK and dV,
    relative to each reference gradient's largest entry."""
    import torch.nn.functional as F

    c, split = chunk_tokens(params), "zigzag"
    mine = work.chunks(split, rank, world)
    dst, src = (rank + 1) % world, (rank - 1) % world
    kv = torch.stack([_rows(k_all, mine, c), _rows(v_all, mine, c)]).contiguous()
    blocks = []  # (the rank whose chunks these are, the block as an autograd leaf)
    for i in range(world):
        blocks.append(((rank - i) % world, kv.detach().clone().requires_grad_()))
        if i < world - 1:
            nxt = torch.empty_like(kv)
            for r in dist.batch_isend_irecv([dist.P2POp(dist.isend, kv, dst), dist.P2POp(dist.irecv, nxt, src)]):
                r.wait()
            kv = nxt
    q = _rows(q_all, mine, c).clone().requires_grad_()
    scale = 1.0 / math.sqrt(params.head_dim)
    above = torch.triu(torch.ones(c, c, dtype=torch.bool, device=q.device), diagonal=1)
    outs = []
    for qi, a in enumerate(mine):
        o = lse = None
        qs = q[:, qi * c : (qi + 1) * c]
        for holder, leaf in blocks:
            for ki, b in enumerate(work.chunks(split, holder, world)):
                if work.pair_work(a, b, params.causal)[0] == 0:
                    continue
                sc = torch.matmul(qs, leaf[0, :, ki * c : (ki + 1) * c].transpose(1, 2)) * scale
                if params.causal and a == b:
                    sc = sc.masked_fill(above, -math.inf)
                blse = torch.logsumexp(sc, dim=-1)
                bout = torch.matmul(torch.exp(sc - blse.unsqueeze(-1)), leaf[1, :, ki * c : (ki + 1) * c])
                if o is None or lse is None:
                    o, lse = bout, blse
                else:
                    new = torch.logaddexp(lse, blse)
                    o = o * torch.exp(lse - new).unsqueeze(-1) + bout * torch.exp(blse - new).unsqueeze(-1)
                    lse = new
        outs.append(o)
    g = torch.randn(q_all.shape, generator=torch.Generator().manual_seed(params.seed + 7)).to(q.device)
    (torch.cat(outs, dim=1) * _rows(g, mine, c)).sum().backward()
    dkv = blocks[0][1].grad.clone()
    for i in range(1, world):  # my gradient of rank (rank - i)'s block goes to it; rank + i sends me mine
        theirs, got = blocks[i][1].grad.contiguous(), torch.empty_like(dkv)
        reqs = dist.batch_isend_irecv(
            [dist.P2POp(dist.isend, theirs, (rank - i) % world), dist.P2POp(dist.irecv, got, (rank + i) % world)]
        )
        for r in reqs:
            r.wait()
        dkv += got
    qr, kr, vr = (t.detach().clone().requires_grad_() for t in (q_all, k_all, v_all))
    (F.scaled_dot_product_attention(qr, kr, vr, is_causal=params.causal) * g).sum().backward()

    def rel(got, want) -> float:
        return float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))

    return {
        "dq": rel(q.grad, _rows(qr.grad, mine, c)),
        "dk": rel(dkv[0], _rows(kr.grad, mine, c)),
        "dv": rel(dkv[1], _rows(vr.grad, mine, c)),
    }


def _torch_ring(torch, dist, params: Params, q_all, k_all, v_all, ref, rank, world, cuda: bool) -> dict:
    """PyTorch's own ring loop (`_templated_ring_attention`) on contiguous shards, and whether the public
    `context_parallel()` runs here. Private API of torch 2.13: its failure is reported, not raised."""
    out: dict = {"ring_max_abs_err": None, "ring_error": None, "context_parallel_error": None}
    shard = params.seq_len // world
    rows = slice(rank * shard, (rank + 1) * shard)
    try:
        from torch.distributed.tensor.experimental._attention import _cp_options, _templated_ring_attention

        _cp_options.enable_load_balance = False
        aten = torch.ops.aten
        if cuda:
            # torch 2.13 _attention.py _scaled_dot_product_ring_efficient_attention: the same op with these
            # keywords (unverified: no GPU has run this path).
            op, kw = aten._scaled_dot_product_efficient_attention, {"attn_bias": None, "compute_log_sumexp": True}
        else:
            op, kw = aten._scaled_dot_product_flash_attention_for_cpu, {}
        o, *_ = _templated_ring_attention(
            dist.group.WORLD,
            2,
            op,
            q_all[None, :, rows].contiguous(),
            k_all[None, :, rows].contiguous(),
            v_all[None, :, rows].contiguous(),
            is_causal=params.causal,
            **kw,
        )
        out["ring_max_abs_err"] = float((o[0] - ref[:, rows]).abs().max())
    except Exception as exc:  # a private API: whatever it raises is the finding
        out["ring_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.experimental import context_parallel

        mesh = init_device_mesh("cuda" if cuda else "cpu", (world,))
        q, k, v = (t[None].clone() for t in (q_all, k_all, v_all))
        with context_parallel(mesh, buffers=[q, k, v], buffer_seq_dims=[2, 2, 2]):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=params.causal)
    except Exception as exc:
        out["context_parallel_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return out


def _rank_main(rank: int, world: int, params_dict: dict, device_kind: str) -> dict:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    params = Params.model_validate(params_dict)
    cuda = device_kind == "cuda"
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    clock = _Clock(torch, cuda)
    q_all, k_all, v_all = _qkv(params, device)
    with torch.no_grad():
        ref = F.scaled_dot_product_attention(q_all, k_all, v_all, is_causal=params.causal)  # (H, S, d)
        c = chunk_tokens(params)
        variants = (
            ["ring-zigzag", "ring-contiguous"] + (["ring-serial"] if params.serial_baseline else []) + ["ulysses"]
        )
        out = {}
        for name in variants:
            passes = []
            warmup = timing.warmup_for(device_kind, params.warmup)
            for s in range(warmup + params.steps):
                dist.barrier()  # every rank starts the pass together
                t0 = clock.now()
                if name == "ulysses":
                    o, spans, counters = _ulysses_pass(torch, dist, clock, params, q_all, k_all, v_all, rank, world)
                    shard = params.seq_len // world
                    want = ref[:, rank * shard : (rank + 1) * shard]
                    held = [2 * rank, 2 * rank + 1]
                else:
                    split = "zigzag" if name in ("ring-zigzag", "ring-serial") else "contiguous"
                    o, spans, counters = _ring_pass(
                        torch, dist, clock, params, split, name != "ring-serial", q_all, k_all, v_all, rank, world
                    )
                    held = work.chunks(split, rank, world)
                    want = _rows(ref, held, c)
                t1 = clock.now()
                if s < warmup:
                    continue
                passes.append({"start": t0, "end": t1, "spans": spans, **counters})
                err = float((o - want).abs().max())
            out[name] = {"passes": passes, "max_abs_err": err, "chunks": held}
        torch_ring = _torch_ring(torch, dist, params, q_all, k_all, v_all, ref, rank, world, cuda)
    backward = _ring_backward(torch, dist, params, q_all, k_all, v_all, rank, world) if params.backward else None
    return {"variants": out, "torch": torch_ring, "backward": backward}


# ---- run ----------------------------------------------------------------------------------------


def run(params: Params, ctx: LabContext) -> dict:
    device = ctx.device
    per_rank = labdist.run_ranks(ctx, _rank_main, params, world=params.ranks, what="context-parallel ranks")
    ctx.progress(0.8, "measuring work, overlap and bytes")
    t0 = min(p["start"] for rec in per_rank for v in rec["variants"].values() for p in v["passes"])
    variants = {}
    for name in per_rank[0]["variants"]:
        variants[name] = _variant(params, ctx, name, [rec["variants"][name] for rec in per_rank], t0, device)
    torch_cp = {
        "ring_max_abs_err": max(
            (r["torch"]["ring_max_abs_err"] for r in per_rank if r["torch"]["ring_max_abs_err"] is not None),
            default=None,
        ),
        "ring_error": next((r["torch"]["ring_error"] for r in per_rank if r["torch"]["ring_error"]), None),
        "context_parallel_error": next(
            (r["torch"]["context_parallel_error"] for r in per_rank if r["torch"]["context_parallel_error"]), None
        ),
    }
    backward = None
    if params.backward:
        backward = {k: max(rec["backward"][k] for rec in per_rank) for k in ("dq", "dk", "dv")}
        backward = {
            "split": "zigzag",
            "max_rel_err_dq": backward["dq"],
            "max_rel_err_dk": backward["dk"],
            "max_rel_err_dv": backward["dv"],
            "tolerance": GRAD_RTOL,
        }
    ctx.progress(0.95, "writing tables")
    return report.results(params, ctx, variants, torch_cp, backward, device, TOL)


def _variant(params: Params, ctx: LabContext, name: str, recs: list[dict], t0: float, device: str) -> dict:
    n = params.ranks
    windows = [
        (min(rec["passes"][s]["start"] for rec in recs) - t0, max(rec["passes"][s]["end"] for rec in recs) - t0)
        for s in range(params.steps)
    ]
    median = sorted(range(params.steps), key=lambda s: windows[s][1] - windows[s][0])[(params.steps - 1) // 2]
    all_spans: list[tl.Span] = []
    for r, rec in enumerate(recs):
        for s, p in enumerate(rec["passes"]):
            for lane, label, a, b, args in p["spans"]:
                all_spans.append(tl.Span(r, lane, label, a - t0, b - t0, {**args, "step": s}))
    fpcp = flops_per_chunk_pair(params)
    ranks = []
    for r, rec in enumerate(recs):
        p = rec["passes"][median]
        mine = [sp for sp in all_spans if sp.rank == r and sp.args["step"] == median]
        window = (p["start"] - t0, p["end"] - t0)
        met = tl.overlap_metrics(mine, r, window)
        cpu_times = [q["compute_cpu_ms"] for q in rec["passes"]]
        ranks.append(
            {
                "rank": r,
                "chunks": rec["chunks"],
                "pass_ms": window[1] - window[0],
                "blocks_computed": p["computed"],
                "blocks_needed": p["needed"],
                "flops_computed": int(p["computed"] * fpcp),
                "flops_needed": int(p["needed"] * fpcp),
                "compute_ms": met["compute_ms"],
                "compute_cpu_ms": statistics.median(cpu_times),
                "communication_ms": met["communication_ms"],
                "wait_ms": met["wait_ms"],
                "overlap_ratio": met["overlap_ratio"],
                "exposed_communication_ms": met["exposed_communication_ms"],
                "send_bytes": p["send_bytes"],
                "max_abs_err": rec["max_abs_err"],
            }
        )
    ring = name.startswith("ring")
    formula = (work.ring_bytes_per_rank if ring else work.ulysses_bytes_per_rank)(
        n, params.seq_len, params.heads, params.head_dim
    )
    if ring:
        split = "contiguous" if name == "ring-contiguous" else "zigzag"
        model = [work.rank_work(split, r, n, params.causal)["needed"] for r in range(n)]
    else:
        split = "contiguous"
        model = [work.ulysses_work(n, params.causal)["needed"]] * n
    last = params.steps - 1
    drawn = [sp for sp in all_spans if sp.args["step"] == last]
    lo = min(sp.start_ms for sp in drawn)
    drawn = [tl.Span(sp.rank, sp.lane, sp.name, sp.start_ms - lo, sp.end_ms - lo, sp.args) for sp in drawn]
    comm = [r["overlap_ratio"] for r in ranks if r["overlap_ratio"] is not None]
    return {
        "method": "ring" if ring else "ulysses",
        "split": split,
        "overlapped": name in ("ring-zigzag", "ring-contiguous"),
        "ranks": ranks,
        "pass_ms": windows[median][1] - windows[median][0],
        "max_abs_err": max(r["max_abs_err"] for r in ranks),
        "work_imbalance": work.imbalance([r["blocks_needed"] for r in ranks]),
        "model_work_imbalance": work.imbalance(model),
        "compute_time_imbalance": work.imbalance([r["compute_cpu_ms"] for r in ranks]),
        "overlap_ratio": statistics.fmean(comm) if comm else None,
        "exposed_communication_ms": statistics.fmean(r["exposed_communication_ms"] for r in ranks),
        "send_bytes_per_rank": max(r["send_bytes"] for r in ranks),
        "formula_bytes_per_rank": formula,
        "artifacts": report.variant_artifacts(ctx, params, name, all_spans, drawn, device),
    }
