"""tp-sweep: one transformer MLP block split Megatron-style at several TP degrees, measured and predicted.

    # CPU (gloo, one process per rank, degrees 1, 2 and 4):
    python -m labs run tp-sweep --params '{"degrees": [1, 2, 4]}' --out /tmp/tp-sweep --backend cpu
    # smaller and quicker:
    python -m labs run tp-sweep --params '{"degrees": [1, 2], "tokens": 64, "hidden": 128, "ffn": 512, "steps": 2}' --out /tmp/tp
    # GPU node (NCCL, rank r on cuda:r), up to the number of visible GPUs:
    python -m labs run tp-sweep --params '{"degrees": [1, 2, 4, 8]}' --out /tmp/tp-sweep --backend torch-cuda

Reads as: model (a seeded MLP: fc1 hidden->ffn, gelu, fc2 ffn->hidden) -> parallel wrapping
(fc1 column-parallel, fc2 row-parallel, from labs.tp) -> run (warm-up, barrier, timed steps on every
rank, then parity against the unsharded TP=1 block computed in the launching process).

Per degree and rank the result holds: which slice of which weight the rank owns and its local GEMM
shapes; time in local GEMMs; each collective's kind, bytes and time; wait time (how long the rank sat
in a collective before the last peer arrived, taken from the shared clock); and the largest
difference of output and gradients against TP=1 with a named tolerance. Beside the measurement, a
PREDICTION for a named GPU node (labs.costmodel) shows where over-sharding begins.

On the cpu backend the timings are CPU timings of ranks that share cores; the page says so.
"""

from __future__ import annotations

import json
import statistics

from labs import costmodel
from labs import dist as labdist
from labs import timeline as tl
from labs.svgplot import Series, line_chart
from labs.tp_sweep.params import TOLERANCES, Params, device_for

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


# ---- parallel wrapping ------------------------------------------------------------------------


def parallelize(w1, w2, group, fp8: bool):
    """fc1 column-parallel then fc2 row-parallel: the gelu between them needs no communication."""
    from labs.tp import ColumnParallelLinear, RowParallelLinear

    fc1 = ColumnParallelLinear(w1, group, name="fc1", fp8=fp8)
    fc2 = RowParallelLinear(w2, group, name="fc2", input_is_parallel=True, fp8=fp8)
    return fc1, fc2


def forward_backward(fc1, fc2, x, dy):
    from labs.tp import gelu

    x = x.detach().requires_grad_(True)
    h_parallel = gelu(fc1(x))  # (tokens, ffn/p)
    y = fc2(h_parallel)  # (tokens, hidden), all-reduced
    y.backward(dy)
    return y.detach(), x.grad


# ---- run: one process per rank ----------------------------------------------------------------


def _rank_main(rank: int, world: int, params_dict: dict, device_kind: str) -> dict:
    import torch
    import torch.distributed as dist

    from labs.tp import Tracer, tracing

    params = Params.model_validate(params_dict)
    device = torch.device(f"cuda:{rank}" if device_kind == "cuda" else "cpu")
    w1, w2, x, dy = build_block(params, str(device))
    out = {}
    for degree in params.degrees:
        # Every rank takes part in creating every group, members or not (a c10d rule). TP=1 gets
        # its own one-rank group too: group=None would mean the whole world in torch.distributed.
        group = dist.new_group(list(range(degree)))
        if rank < degree:
            fc1, fc2 = parallelize(w1, w2, group, params.fp8)
            tracer = Tracer(rank, device)
            for _ in range(params.warmup):
                forward_backward(fc1, fc2, x, dy)
            spans, steps = [], []
            for s in range(params.steps):
                for p in (fc1.weight_parallel, fc2.weight_parallel):
                    p.grad = None
                dist.barrier(group=group)  # start every rank's step together
                with tracing(tracer):
                    tracer.start()
                    t0 = tracer.now()
                    y, dx = forward_backward(fc1, fc2, x, dy)
                    t1 = tracer.now()
                    tracer.add("compute", "__step__", t0, t1)
                    step_spans = tracer.spans()
                marker = next(sp for sp in step_spans if sp.name == "__step__")
                steps.append((marker.start_ms, marker.end_ms))
                spans += [sp.to_dict() | {"step": s} for sp in step_spans if sp.name != "__step__"]
            out[degree] = {
                "spans": spans,
                "steps": steps,
                "mapping": [fc1.mapping(), fc2.mapping()],
                "y": y.cpu() if rank == 0 else None,
                "dx": dx.cpu() if rank == 0 else None,
                "dw1": fc1.weight_parallel.grad.cpu(),
                "dw2": fc2.weight_parallel.grad.cpu(),
                "rows": fc1.row_range,
                "cols": fc2.col_range,
            }
        dist.barrier()  # the next degree starts only when this one is done everywhere
    return out


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


def _parity(per_rank: list[dict], degree: int, ref: dict, tol_name: str) -> dict:
    import torch

    dw1 = torch.cat([per_rank[r][degree]["dw1"] for r in range(degree)], dim=0)  # rows back in order
    dw2 = torch.cat([per_rank[r][degree]["dw2"] for r in range(degree)], dim=1)  # cols back in order
    out = {
        "output": _diff(per_rank[0][degree]["y"], ref["y"]),
        "grad_input": _diff(per_rank[0][degree]["dx"], ref["dx"]),
        "grad_fc1_weight": _diff(dw1, ref["dw1"]),
        "grad_fc2_weight": _diff(dw2, ref["dw2"]),
    }
    limit = TOLERANCES[tol_name]["max_rel_diff"]
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
                "step_ms": med["step_ms"],
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


def _rebase(spans: list[tl.Span]) -> list[tl.Span]:
    t0 = min((s.start_ms for s in spans), default=0.0)
    return [tl.Span(s.rank, s.lane, s.name, s.start_ms - t0, s.end_ms - t0, s.args) for s in spans]


def run(params: Params, ctx) -> dict:
    import torch

    device = device_for(ctx.backend)
    world = max(params.degrees)
    slots, slots_why = labdist.slots_explained(device)
    ctx.progress(0.05, f"starting {world} rank process(es) on {device}")
    per_rank = labdist.launch(
        _rank_main,
        world,
        args=(params.model_dump(), device),
        device=device,
        timeout_s=params.rank_timeout_s,
        on_rank_done=lambda r: ctx.progress(0.6, f"rank {r} finished"),
    )
    ctx.progress(0.7, "comparing against the unsharded TP=1 block")
    torch.manual_seed(params.seed)
    ref = reference(params)
    tol_name = "FP8_PER_SHARD_SCALE" if params.fp8 else "FP32_REORDER"

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
            "exposed_comm_ms": statistics.mean(r["exposed_comm_ms"] for r in ranks),
            "collective_kinds": sorted({c["kind"] for r in ranks for c in r["collectives"]}),
            "collective_bytes_per_step": sum(c["bytes"] for c in ranks[0]["collectives"]),
            "parity": _parity(per_rank, degree, ref, tol_name),
            "ranks": ranks,
            "predicted": pred_by_degree.get(degree),
        }
        last_step = params.steps - 1
        last = [s for s in spans if s.args.get("step") == last_step]
        svg_name, trace_name = f"timeline_tp{degree}.svg", f"trace_tp{degree}.json"
        ctx.write_text(
            svg_name,
            tl.svg_timeline(
                last,
                title=f"TP={degree}: one measured step per rank (last of {params.steps})",
                subtitle=f"{ctx.environment['label'][:110]}",
                description=f"Compute, communication and wait lanes for each of {degree} ranks during one forward+backward of the MLP block.",
            ),
        )
        ctx.write_text(
            trace_name,
            tl.chrome_trace_json(spans, metadata={"lab": "tp-sweep", "degree": degree, "backend": ctx.backend}),
        )
        ctx.add_artifact(f"timeline_tp{degree}", svg_name, "image/svg+xml", f"Timeline, TP={degree} (measured)")
        ctx.add_artifact(
            f"trace_tp{degree}", trace_name, "application/json", f"Chrome trace, TP={degree} (open in Perfetto)"
        )
        row["artifacts"] = {"timeline": svg_name, "trace": trace_name}
        degrees_out.append(row)

    base = degrees_out[0]["step_ms"] if degrees_out[0]["degree"] == 1 else None
    for row in degrees_out:
        row["step_vs_tp1"] = (row["step_ms"] / base) if base else None

    ctx.write_text("sweep.svg", _sweep_svg(degrees_out, predicted, ctx))
    ctx.add_artifact("sweep_plot", "sweep.svg", "image/svg+xml", "Sweep: measured vs predicted, relative to TP=1")
    ctx.progress(0.95, "writing tables")
    return _results(params, ctx, degrees_out, predicted, slots, slots_why, tol_name)


def _sweep_svg(rows: list[dict], predicted: dict, ctx) -> str:
    """Everything relative to its own TP=1 step time, so CPU-measured and GPU-predicted share an axis."""
    m_base = next((r["step_ms"] for r in rows if r["degree"] == 1), rows[0]["step_ms"])
    p_rows = predicted["per_degree"]
    p_base = next((r["step_ms"] for r in p_rows if r["degree"] == 1), p_rows[0]["step_ms"])
    xs = [r["degree"] for r in rows]
    pxs = [r["degree"] for r in p_rows]
    series = []
    for key, label in (
        ("step_ms", "step"),
        ("local_gemm_ms", "local GEMM"),
        ("collective_ms", "collective"),
        ("exposed_comm_ms", "exposed comm"),
    ):
        series.append(Series(f"{label} (measured)", xs, [r[key] / m_base for r in rows]))
    for key, label in (
        ("step_ms", "step"),
        ("local_gemm_ms", "local GEMM"),
        ("collective_ms", "collective"),
        ("exposed_comm_ms", "exposed comm"),
    ):
        series.append(Series(f"{label} (predicted)", pxs, [r[key] / p_base for r in p_rows], dashed=True))
    over = predicted["oversharding_from"]
    return line_chart(
        series,
        title=f"TP sweep: measured ({ctx.backend}) vs predicted ({predicted['node']})",
        xlabel="TP degree" + (f"  (predicted over-sharding from TP={over})" if over else ""),
        ylabel="time / own TP=1 step",
        width=760,
        description=(
            "Solid lines: measured on this machine; dashed: predicted by the roofline + alpha-beta model for "
            f"{predicted['node']}. Each curve is divided by its own TP=1 step time."
        ),
    )


def _results(params, ctx, rows, predicted, slots, slots_why, tol_name) -> dict:
    cpu = ctx.backend == "cpu"
    timing_note = (
        "CPU timings: ranks are processes sharing this machine's cores over gloo, not GPUs"
        if cpu
        else "GPU timings from CUDA events"
    )
    summary = [
        {"label": "Backend", "value": ctx.backend, "note": ctx.environment["label"]},
        {"label": "Rank slots", "value": slots, "note": slots_why},
    ]
    for r in rows:
        summary.append(
            {
                "label": f"TP={r['degree']} step (measured)",
                "value": round(r["step_ms"], 3),
                "unit": "ms",
                "note": timing_note + (f"; {r['step_vs_tp1']:.2f}x TP=1" if r["step_vs_tp1"] else ""),
            }
        )
    worst = max(r["parity"]["max_rel_diff"] for r in rows)
    summary.append(
        {
            "label": "Worst relative difference vs TP=1",
            "value": worst,
            "note": f"tolerance {tol_name} = {TOLERANCES[tol_name]['max_rel_diff']:g}: {TOLERANCES[tol_name]['reason']}",
        }
    )
    summary.append(
        {
            "label": f"Over-sharding begins (predicted, {predicted['node']})",
            "value": f"TP={predicted['oversharding_from']}" if predicted["oversharding_from"] else "not within TP<=8",
            "note": "predicted: first degree whose step stops improving or whose collectives outweigh its GEMMs",
        }
    )
    tables = [
        {
            "title": "Per degree (measured; times are medians over steps, in ms)",
            "columns": [
                "TP",
                "step",
                "step / TP=1",
                "local GEMM",
                "collective",
                "wait",
                "exposed comm",
                "collective kinds",
                "bytes/step",
                "max rel diff",
                "within tolerance",
            ],
            "rows": [
                [
                    r["degree"],
                    _r(r["step_ms"]),
                    _r(r["step_vs_tp1"]),
                    _r(r["local_gemm_ms"]),
                    _r(r["collective_ms"]),
                    _r(r["wait_ms"]),
                    _r(r["exposed_comm_ms"]),
                    ", ".join(r["collective_kinds"]) or "none",
                    r["collective_bytes_per_step"],
                    f"{r['parity']['max_rel_diff']:.2e}",
                    "yes" if r["parity"]["within_tolerance"] else "NO",
                ]
                for r in rows
            ],
        },
        {
            "title": "Rank mapping: which slice of which weight each rank owns",
            "columns": ["TP", "rank", "weight", "split", "slice", "local shape", "full shape"],
            "rows": [
                [
                    r["degree"],
                    k["rank"],
                    m["weight"],
                    m["split"],
                    m["slice"],
                    "x".join(map(str, m["local_shape"])),
                    "x".join(map(str, m["full_shape"])),
                ]
                for r in rows
                for k in r["ranks"]
                for m in k["mapping"]
            ],
        },
        {
            "title": "Per rank (measured, ms)",
            "columns": [
                "TP",
                "rank",
                "local GEMM shapes (m x n x k)",
                "local GEMM",
                "collectives",
                "collective",
                "wait",
                "step",
            ],
            "rows": [
                [
                    r["degree"],
                    k["rank"],
                    "; ".join(f"{g['gemm']} {g['m']}x{g['n']}x{g['k']}" for g in k["local_gemm_shapes"][:2]),
                    _r(k["local_gemm_ms"]),
                    "; ".join(f"{c['kind']} {c['bytes']} B" for c in k["collectives"]) or "none",
                    _r(k["collective_ms"]),
                    _r(k["wait_ms"]),
                    _r(k["step_ms"]),
                ]
                for r in rows
                for k in r["ranks"]
            ],
        },
        {
            "title": f"PREDICTED for {predicted['node_spec']['name']} ({predicted['precision']}, tokens={predicted['shape']['tokens']}, hidden={predicted['shape']['hidden']}, ffn={predicted['shape']['ffn']}; ms)",
            "columns": [
                "TP",
                "predicted local GEMM",
                "predicted collective",
                "predicted exposed comm",
                "predicted step",
                "predicted comm fraction",
            ],
            "rows": [
                [
                    p["degree"],
                    _r(p["local_gemm_ms"], 5),
                    _r(p["collective_ms"], 5),
                    _r(p["exposed_comm_ms"], 5),
                    _r(p["step_ms"], 5),
                    _r(p["comm_fraction"]),
                ]
                for p in predicted["per_degree"]
            ],
        },
    ]
    return {
        "summary": summary,
        "tables": tables,
        "timing": {"kind": "cpu-wall-clock" if cpu else "cuda-events", "unit": "ms", "note": timing_note},
        "rank_slots": {"available": slots, "explanation": slots_why},
        "tolerances": TOLERANCES,
        "tolerance_used": tol_name,
        "fp8": {
            "enabled": params.fp8,
            "mode": ("emulated (labs.fp8, per-shard current scaling)" if cpu else "emulated (labs.fp8) on GPU")
            if params.fp8
            else None,
        },
        "degrees": [{k: v for k, v in r.items()} for r in rows],
        "predicted": predicted,
    }


def _r(v, nd: int = 3):
    return None if v is None else round(float(v), nd)


if __name__ == "__main__":  # python -m labs.tp_sweep prints the parameter schema
    print(json.dumps(Params.model_json_schema(), indent=2))
