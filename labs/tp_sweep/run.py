"""tp-sweep: one transformer MLP block split Megatron-style at several TP degrees, measured and predicted.

    # CPU (gloo, one process per rank, degrees 1, 2 and 4):
    python -m labs run tp-sweep --params '{"degrees": [1, 2, 4]}' --out /tmp/tp-sweep --backend cpu
    # smaller and quicker:
    python -m labs run tp-sweep --params '{"degrees": [1, 2], "tokens": 64, "hidden": 128, "ffn": 512, "steps": 2}' --out /tmp/tp
    # GPU node (NCCL, rank r on cuda:r), up to the number of visible GPUs:
    python -m labs run tp-sweep --params '{"degrees": [1, 2, 4, 8]}' --out /tmp/tp-sweep --backend torch-cuda

Reads as: model (a seeded MLP: fc1 hidden->ffn, gelu, fc2 ffn->hidden) -> parallel wrapping
(fc1 column-parallel, fc2 row-parallel, from labs.parallel.tp) -> run (warm-up, barrier, timed steps on every
rank, then parity against the unsharded TP=1 block computed in the launching process).

Per degree and rank the result holds: which slice of which weight the rank owns and its local GEMM
shapes; time in local GEMMs; each collective's kind, bytes and time; wait time (how long the rank sat
in a collective before the last peer arrived, taken from the shared clock); and the largest
difference of output and gradients against TP=1 with a named tolerance. Beside the measurement, a
PREDICTION for a named GPU node (labs.parallel.costmodel) shows where over-sharding begins.

On the cpu backend the timings are CPU timings of ranks that share cores; the page says so.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from labs.parallel import costmodel, timing
from labs.parallel import dist as labdist
from labs.tp_sweep import report
from labs.tp_sweep.params import TE_TOLERANCES, TOLERANCES, Params
from labs.trace import timeline as tl

if TYPE_CHECKING:
    from labs.runtime import LabContext

# ---- model ------------------------------------------------------------------------------------


def build_block(params: Params, device: str = "cpu"):
    """Seeded full (unsharded) weights, input and upstream gradient: identical on every process."""
    import torch

    g = torch.Generator().manual_seed(params.seed)
    w1 = torch.randn(params.ffn, params.hidden, generator=g) / params.hidden**0.5  # fc1.weight (ffn, hidden)
    w2 = torch.randn(params.hidden, params.ffn, generator=g) / params.ffn**0.5  # fc2.weight (hidden, ffn)
    x = torch.randn(params.tokens, params.hidden, generator=g)  # (tokens, hidden)
    dy = torch.randn(params.tokens, params.hidden, generator=g)  # upstream gradient (tokens, hidden)
    return [t.to(device) for t in (w1, w2, x, dy)]


def megatron_dtype(device_kind: str):
    """The precision the Megatron block runs in, and its tolerance against the FP32 TP=1 block.

    On GPU: BF16 tensors, the precision labs.parallel.costmodel prices (BF16 tensor-core GEMMs, 2-byte
    collectives), so step_vs_megatron and measured-vs-predicted compare like with like rather than FP32
    GEMMs (no TF32) with a BF16 prediction. On CPU: FP32, where BF16 GEMMs are emulated and slower and
    the timings are not the prediction's hardware anyway.
    """
    import torch

    return torch.bfloat16 if device_kind == "cuda" else torch.float32


def tolerance_for(device_kind: str, fp8: bool) -> str:
    """Which named tolerance (params.TOLERANCES) the Megatron block's parity is held to."""
    if device_kind == "cuda":
        return "FP8_IN_BF16" if fp8 else "BF16_VS_FP32"
    return "FP8_TP_AMAX" if fp8 else "FP32_REORDER"


# ---- parallel wrapping ------------------------------------------------------------------------


def parallelize(w1, w2, group, fp8: bool):
    """fc1 column-parallel then fc2 row-parallel: the gelu between them needs no communication."""
    from labs.parallel.tp import ColumnParallelLinear, RowParallelLinear

    fc1 = ColumnParallelLinear(w1, group, name="fc1", fp8=fp8)
    fc2 = RowParallelLinear(w2, group, name="fc2", input_is_parallel=True, fp8=fp8)
    return fc1, fc2


def forward_backward(fc1, fc2, x, dy):
    from labs.parallel.tp import gelu

    x = x.detach().requires_grad_(True)
    h_parallel = gelu(fc1(x))  # (tokens, ffn/p)
    y = fc2(h_parallel)  # (tokens, hidden), all-reduced
    y.backward(dy)
    return y.detach(), x.grad


# ---- run: one process per rank ----------------------------------------------------------------


def _rank_main(rank: int, world: int, params_dict: dict, device_kind: str, out_dir: str, with_te: bool) -> dict:
    import torch
    import torch.distributed as dist

    from labs.trace.profile import host_group

    params = Params.model_validate(params_dict)
    device = torch.device(f"cuda:{rank}" if device_kind == "cuda" else "cpu")
    w1, w2, x, dy = build_block(params, str(device))
    out = {}
    for degree in params.degrees:
        # Every rank takes part in creating every group, members or not (a c10d rule). TP=1 gets
        # its own one-rank group too: group=None would mean the whole world in torch.distributed.
        group = dist.new_group(list(range(degree)))
        host = host_group(list(range(degree)))  # gloo: the per-step rendezvous launches no GPU kernel
        if rank < degree:
            # On CUDA the traced window is profiled too (kernels for HTA); CPU runs keep the lab's own spans.
            profile = Path(out_dir) / f"profile_tp{degree}_rank{rank}.json" if device_kind == "cuda" else None
            out[degree] = measure_megatron(w1, w2, x, dy, group, host, degree, rank, params, device, profile)
            if with_te:
                from labs.tp_sweep import te

                te_profile = Path(out_dir) / f"profile_te_tp{degree}_rank{rank}.json"
                out[degree]["te"] = te.run_degree(w1, w2, x, dy, group, host, degree, rank, params, te_profile)
        dist.barrier()  # the next degree starts only when this one is done everywhere
    return out


def measure_megatron(
    w1, w2, x, dy, group, host, degree: int, rank: int, params: Params, device, profile: Path | None
) -> dict:
    """The Megatron block at one degree on this rank: warm-up; the step timed alone, `steps` times, between two
    events with nothing else on (labs.parallel.timing.time_steps); then as many steps again with the tracer's spans
    (an event or a clock read at every GEMM and collective), NVTX ranges on CUDA, and torch.profiler writing
    `profile` when given: what the step is made of, measured apart from how long it takes."""
    from labs.parallel.tp import Tracer, tracing
    from labs.trace.profile import align_ranks, nvtx_range, profile_step, profiled

    kind = device.type
    cuda = kind == "cuda"
    dtype = megatron_dtype(kind)
    fc1, fc2 = parallelize(w1.to(dtype), w2.to(dtype), group, params.fp8)
    x_m, dy_m = x.to(dtype), dy.to(dtype)  # (tokens, hidden) each

    def align():
        for p in (fc1.weight_parallel, fc2.weight_parallel):
            p.grad = None
        align_ranks(host, cuda=cuda)  # every rank starts the step together

    for _ in range(timing.warmup_for(kind, params.warmup)):
        align()
        forward_backward(fc1, fc2, x_m, dy_m)
    step_ms = timing.time_steps(
        lambda: forward_backward(fc1, fc2, x_m, dy_m),
        steps=params.steps,
        align=align,
        sync=timing.sync_for(kind),
        new_event=timing.events_for(kind),
    )
    tracer = Tracer(rank, device)
    spans, steps = [], []
    with profiled(profile, enabled=profile is not None, cuda=cuda) as prof:
        for s in range(params.steps):
            align()
            with (
                profile_step(prof, s),
                tracing(tracer),
                nvtx_range(f"megatron TP={degree} step {s}", "step", enabled=cuda),
            ):
                tracer.start()
                t0 = tracer.now()
                y, dx = forward_backward(fc1, fc2, x_m, dy_m)
                t1 = tracer.now()
                tracer.add("compute", "__step__", t0, t1)
                step_spans = tracer.spans()
            marker = next(sp for sp in step_spans if sp.name == "__step__")
            steps.append((marker.start_ms, marker.end_ms))
            spans += [sp.to_dict() | {"step": s} for sp in step_spans if sp.name != "__step__"]
    return {
        "step_ms": step_ms,
        "spans": spans,
        "steps": steps,
        "mapping": [fc1.mapping(), fc2.mapping()],
        "y": y.cpu() if rank == 0 else None,
        "dx": dx.cpu() if rank == 0 else None,
        "dw1": fc1.weight_parallel.grad.float().cpu(),
        "dw2": fc2.weight_parallel.grad.float().cpu(),
        "rows": fc1.row_range,
        "cols": fc2.col_range,
        "profile": str(profile) if profile is not None else None,
    }


def reference(params: Params) -> dict:
    """The unsharded TP=1 block, computed in this process (no process group: collectives are no-ops)."""
    w1, w2, x, dy = build_block(params)
    fc1, fc2 = parallelize(w1, w2, None, params.fp8)
    y, dx = forward_backward(fc1, fc2, x, dy)
    return {"y": y, "dx": dx, "dw1": fc1.weight_parallel.grad, "dw2": fc2.weight_parallel.grad}


def _diff(a, b) -> dict:
    d = (a.float() - b.float()).abs().max().item()
    scale = b.float().abs().max().item() or 1.0
    return {"max_abs_diff": d, "max_rel_diff": d / scale}


def _parity(per_rank: list[dict], degree: int, ref: dict, tol_name: str, part=lambda rec: rec) -> dict:
    """The sharded block (`part` picks the Megatron record or its `te` one) against TP=1."""
    import torch

    recs = [part(per_rank[r][degree]) for r in range(degree)]
    dw1 = torch.cat([rec["dw1"] for rec in recs], dim=0)  # rows back in order
    dw2 = torch.cat([rec["dw2"] for rec in recs], dim=1)  # cols back in order
    out = {
        "output": _diff(recs[0]["y"], ref["y"]),
        "grad_input": _diff(recs[0]["dx"], ref["dx"]),
        "grad_fc1_weight": _diff(dw1, ref["dw1"]),
        "grad_fc2_weight": _diff(dw2, ref["dw2"]),
    }
    limit = (TOLERANCES | TE_TOLERANCES)[tol_name]["max_rel_diff"]
    worst = max(v["max_rel_diff"] for v in out.values())
    return {**out, "tolerance": tol_name, "max_rel_diff": worst, "within_tolerance": worst <= limit}


def _split_waits(spans: list[tl.Span], degree: int, n_steps: int) -> list[tl.Span]:
    """Turn each rank's collective span (its own arrival -> done) into wait (arrival -> last peer's
    arrival) plus communication (last arrival -> done), matching the k-th collective of a step
    across ranks. Valid because all ranks read one clock (same host)."""
    out = [s for s in spans if s.lane != "communication"]
    for step in range(n_steps):
        per_rank = {
            r: [s for s in spans if s.rank == r and s.lane == "communication" and s.args.get("step") == step]
            for r in range(degree)
        }
        for k in range(min(len(v) for v in per_rank.values())):
            last_arrival = max(per_rank[r][k].start_ms for r in range(degree))
            for r in range(degree):
                s = per_rank[r][k]
                begin = min(last_arrival, s.end_ms)
                if begin > s.start_ms:
                    out.append(tl.Span(r, "wait", f"wait for peers: {s.name}", s.start_ms, begin, dict(s.args)))
                out.append(tl.Span(r, "communication", s.name, begin, s.end_ms, dict(s.args)))
    return out


def _analyse_degree(per_rank: list[dict], degree: int, params: Params) -> dict:
    raw = []
    for r in range(degree):
        for d in per_rank[r][degree]["spans"]:
            args = dict(d["args"], step=d["step"])
            raw.append(tl.Span(d["rank"], d["lane"], d["name"], d["start_ms"], d["end_ms"], args))
    spans = _split_waits(raw, degree, params.steps)
    ranks = []
    for r in range(degree):
        rec = per_rank[r][degree]
        per_step = []
        for s, (a, b) in enumerate(rec["steps"]):
            mine = [sp for sp in spans if sp.rank == r and sp.args.get("step") == s]
            m = tl.overlap_metrics(mine, r, step=(a, b))
            gemm = sum(sp.duration_ms for sp in mine if sp.lane == "compute" and "GEMM" in sp.name)
            colls = [sp for sp in mine if sp.lane == "communication"]
            per_step.append({**m, "local_gemm_ms": gemm, "collectives": colls})
        med = {
            k: statistics.median(p[k] for p in per_step)
            for k in (
                "step_ms",
                "local_gemm_ms",
                "communication_ms",
                "wait_ms",
                "exposed_communication_ms",
                "compute_ms",
            )
        }
        ratios = [p["overlap_ratio"] for p in per_step if p["overlap_ratio"] is not None]
        last = per_step[-1]
        f = params.ffn // degree
        ranks.append(
            {
                "rank": r,
                "mapping": rec["mapping"],
                "local_gemm_shapes": [
                    {"gemm": "fc1 fwd", "m": params.tokens, "n": f, "k": params.hidden},
                    {"gemm": "fc2 fwd", "m": params.tokens, "n": params.hidden, "k": f},
                    {"gemm": "fc2 dX", "m": params.tokens, "n": f, "k": params.hidden},
                    {"gemm": "fc2 dW", "m": params.hidden, "n": f, "k": params.tokens},
                    {"gemm": "fc1 dX", "m": params.tokens, "n": params.hidden, "k": f},
                    {"gemm": "fc1 dW", "m": f, "n": params.hidden, "k": params.tokens},
                ],
                # The unprofiled, untraced window's steps; the breakdown below is the traced window's.
                "step_ms": statistics.median(rec["step_ms"]),
                "local_gemm_ms": med["local_gemm_ms"],
                "other_compute_ms": med["compute_ms"] - med["local_gemm_ms"],
                "collective_ms": med["communication_ms"],
                "wait_ms": med["wait_ms"],
                "exposed_comm_ms": med["exposed_communication_ms"],
                "overlap_ratio": statistics.median(ratios) if ratios else None,
                "collectives": [
                    {"name": c.name, "kind": c.args.get("kind"), "bytes": c.args.get("bytes"), "ms": c.duration_ms}
                    for c in last["collectives"]
                ],
            }
        )
    return {"ranks": ranks, "spans": spans}


def _profiler_check(
    ctx: LabContext, per_rank: list[dict], degree: int, ranks: list[dict] | None, key: str, name: str
) -> dict:
    """HTA beside the lab's own kernel count (and its CUDA-event spans) for one degree's profiler traces."""
    from labs.trace import kernels

    files = {r: Path(_pick(per_rank[r][degree], key)) for r in range(degree)}
    lab = {k["rank"]: k["overlap_ratio"] for k in ranks} if ranks else None
    check = kernels.cross_check(files, lab, device_name=ctx.environment["device"].get("name"))
    for r, f in files.items():
        ctx.add_artifact(f"{name}_rank{r}", f.name, "application/json", f"Profiler trace ({name}, rank {r})")
    return check


def _comm_from_kernels(per_rank: list[dict], degree: int, row: dict) -> None:
    """On CUDA, replace each rank's clock-based collective, wait and exposed-communication times with the profiled
    window's kernels' (labs.trace.kernels.kernel_comm: durations and each rank's own clock only, never host clocks
    compared across ranks, whose offsets are as large as these collectives)."""
    from labs.trace import kernels

    files = {r: Path(per_rank[r][degree]["profile"]) for r in range(degree)}
    comm = kernels.kernel_comm(files) if degree > 1 else None
    if comm is None:
        return
    for rank_row in row["ranks"]:
        steps = comm[rank_row["rank"]]
        for key, field in (
            ("collective_ms", "collective_ms"),
            ("wait_ms", "wait_ms"),
            ("exposed_comm_ms", "exposed_ms"),
        ):
            rank_row[key] = statistics.median(st[field] for st in steps)
    for key in ("collective_ms", "wait_ms", "exposed_comm_ms"):
        row[key] = statistics.mean(r[key] for r in row["ranks"])
    row["wait_source"] = "trace kernels"


def _pick(rec: dict, key: str):
    return rec["te"]["profile"] if key == "te.profile" else rec[key]


def _te_row(ctx: LabContext, params: Params, per_rank: list[dict], degree: int, ref_fp32: dict, megatron: dict) -> dict:
    """The te.Linear block at this degree beside the Megatron one: parity against the FP32 TP=1 block (not
    the emulated-FP8 one: TE's FP8 is judged against full precision), time and bytes moved."""
    from labs.tp_sweep import te

    tol = "TE_FP8" if params.fp8 else "TE_BF16"
    step = max(per_rank[r][degree]["te"]["step_ms"] for r in range(degree))
    plan = te.collective_plan(
        params.tokens, params.hidden, degree, params.sequence_parallel, fp8=params.fp8, recipe=params.recipe
    )
    megatron_plan = [{"kind": c["kind"], "bytes": c["bytes"]} for c in megatron["ranks"][0]["collectives"]]
    return {
        "recipe": params.recipe if params.fp8 else None,
        "sequence_parallel": params.sequence_parallel and degree > 1,
        "step_ms": step,
        "step_vs_megatron": step / megatron["step_ms"] if megatron["step_ms"] else None,
        "parity": _parity(per_rank, degree, ref_fp32, tol, part=lambda rec: rec["te"]),
        "collectives": plan,
        "ring_bytes_per_rank": te.ring_bytes_per_rank(plan, degree),
        "megatron_ring_bytes_per_rank": te.ring_bytes_per_rank(megatron_plan, degree),
        "profiler": _profiler_check(ctx, per_rank, degree, None, "te.profile", f"profile_te_tp{degree}"),
    }


def _rebase(spans: list[tl.Span]) -> list[tl.Span]:
    t0 = min((s.start_ms for s in spans), default=0.0)
    return [tl.Span(s.rank, s.lane, s.name, s.start_ms - t0, s.end_ms - t0, s.args) for s in spans]


def run(params: Params, ctx: LabContext) -> dict:
    import torch

    device = ctx.device
    world = max(params.degrees)
    slots, slots_why = labdist.slots_explained(device)
    with_te = ctx.backend == "te"
    per_rank = labdist.run_ranks(
        ctx,
        _rank_main,
        params,
        str(ctx.out_dir),
        with_te,
        world=world,
        what="rank process(es)",
        finished_at=0.6,
    )
    ctx.progress(0.7, "comparing against the unsharded TP=1 block")
    torch.manual_seed(params.seed)
    ref = reference(params)
    ref_fp32 = reference(params.model_copy(update={"fp8": False})) if with_te and params.fp8 else ref
    tol_name = tolerance_for(device, params.fp8)

    pt, ph, pf = (
        params.predict_tokens or params.tokens,
        params.predict_hidden or params.hidden,
        params.predict_ffn or params.ffn,
    )
    predict_degrees = sorted(set(params.degrees) | {1, 2, 4, 8})
    predicted = costmodel.predict_sweep(
        pt, ph, pf, [d for d in predict_degrees if pf % d == 0], params.predict_node, params.predict_precision
    )
    pred_by_degree = {p["degree"]: p for p in predicted["per_degree"]}

    degrees_out = []
    for degree in params.degrees:
        analysed = _analyse_degree(per_rank, degree, params)
        ranks = analysed["ranks"]
        spans = _rebase(analysed["spans"])
        # A step is as slow as its slowest rank; GEMM and collective times are averaged over ranks.
        row = {
            "degree": degree,
            "step_ms": max(r["step_ms"] for r in ranks),
            "local_gemm_ms": statistics.mean(r["local_gemm_ms"] for r in ranks),
            "collective_ms": statistics.mean(r["collective_ms"] for r in ranks),
            "wait_ms": statistics.mean(r["wait_ms"] for r in ranks),
            # Split from spans on one host clock; on CUDA replaced below by the trace kernels' durations.
            "wait_source": "shared host clock",
            "exposed_comm_ms": statistics.mean(r["exposed_comm_ms"] for r in ranks),
            "collective_kinds": sorted({c["kind"] for r in ranks for c in r["collectives"]}),
            "collective_bytes_per_step": sum(c["bytes"] for c in ranks[0]["collectives"]),
            "parity": _parity(per_rank, degree, ref, tol_name),
            "ranks": ranks,
            "predicted": pred_by_degree.get(degree),
        }
        row["artifacts"] = report.degree_artifacts(ctx, params, degree, spans)
        if device == "cuda":
            row["profiler"] = _profiler_check(ctx, per_rank, degree, ranks, "profile", f"profile_tp{degree}")
            _comm_from_kernels(per_rank, degree, row)
        if with_te:
            row["te"] = _te_row(ctx, params, per_rank, degree, ref_fp32, row)
        degrees_out.append(row)

    base = degrees_out[0]["step_ms"] if degrees_out[0]["degree"] == 1 else None
    for row in degrees_out:
        row["step_vs_tp1"] = (row["step_ms"] / base) if base else None

    ctx.write_text("sweep.svg", report.sweep_svg(degrees_out, predicted, ctx))
    if device != "cuda":
        from labs.trace.kernels import not_applicable

        for row in degrees_out:
            row["profiler"] = not_applicable(ctx.backend)
    ctx.add_artifact(
        "sweep_plot", "sweep.svg", "image/svg+xml", "Sweep: measured vs predicted, per-step times on log axes"
    )
    ctx.progress(0.95, "writing tables")
    return report.results(params, ctx, degrees_out, predicted, slots, slots_why, tol_name)


if __name__ == "__main__":  # python -m labs.tp_sweep prints the parameter schema
    print(json.dumps(Params.model_json_schema(), indent=2))
