"""tp-sweep's page: per-degree timelines and traces, the sweep chart, and the summary and tables.

Nothing here measures; it lays out what run.py measured and what labs.parallel.costmodel predicted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labs.result_common import SummaryItem, Table, table_number
from labs.tp_sweep.params import TE_TOLERANCES, TOLERANCES, Params
from labs.trace.chart import Series, log_axis_margin
from labs.trace.chrome import chrome_trace_json
from labs.trace.svgplot import line_chart, stack, svg_timeline
from labs.trace.timeline import Span
from labs.words import byte_size, duration, number

if TYPE_CHECKING:
    from labs.runtime import LabContext


def degree_artifacts(ctx: LabContext, params: Params, degree: int, spans: list[Span]) -> dict:
    """The timeline SVG of one measured step and the Chrome trace of all steps, for one degree."""
    last_step = params.steps - 1
    last = [s for s in spans if s.args.get("step") == last_step]
    svg_name, trace_name = f"timeline_tp{degree}.svg", f"trace_tp{degree}.json"
    ctx.write_text(
        svg_name,
        svg_timeline(
            last,
            title=f"TP={degree}: one measured step per rank (last of {params.steps})",
            subtitle=ctx.environment["label"],  # whole: the timeline wraps it (a cut one read "...run o")
            description=f"Compute, communication and wait lanes for each of {degree} ranks during one forward+backward of the MLP block.",
        ),
    )
    ctx.write_text(
        trace_name,
        chrome_trace_json(spans, metadata={"lab": "tp-sweep", "degree": degree, "backend": ctx.backend}),
    )
    ctx.add_artifact(f"timeline_tp{degree}", svg_name, "image/svg+xml", f"Timeline, TP={degree} (measured)")
    ctx.add_artifact(
        f"trace_tp{degree}", trace_name, "application/json", f"Chrome trace, TP={degree} (JSON for Perfetto UI)"
    )
    return {"timeline": svg_name, "trace": trace_name}


SWEEP_PARTS = (
    ("step_ms", "step"),
    ("local_gemm_ms", "local GEMM"),
    ("collective_ms", "collective"),
    ("exposed_comm_ms", "exposed comm"),
)


def sweep_svg(rows: list[dict], predicted: dict, ctx: LabContext) -> str:
    """Measured and predicted in two panels, each on a log time axis: a GPU prediction's collectives can be
    thousands of times its GEMMs, and a CPU step hundreds of times a GPU one, so one linear axis drew every other
    line flat. On a log axis equal ratios are equal heights, so the two panels' shapes still compare."""
    degrees = sorted({r["degree"] for r in rows} | {p["degree"] for p in predicted["per_degree"]})

    def lines(source: list[dict], dashed: bool) -> list[Series]:
        xs = [r["degree"] for r in source]
        # a zero (no collective at TP=1) has no place on a log axis: it leaves a gap, said in the description
        return [
            Series(label, xs, [r[key] if r[key] > 0 else None for r in source], dashed=dashed)
            for key, label in SWEEP_PARTS
        ]

    panels = [(lines(rows, False), f"Measured on this machine ({ctx.backend})")]
    over = predicted["oversharding_from"]
    shape = predicted["shape"]
    title = f"Predicted for {predicted['node']} ({predicted['precision']}) at {shape['tokens']}x{shape['hidden']}x{shape['ffn']}"
    panels.append((lines(predicted["per_degree"], True), title + (f": over-sharding from TP={over}" if over else "")))
    left = max(log_axis_margin(series) for series, _ in panels)  # both plots start at one x, so degrees line up
    charts = [
        line_chart(
            series,
            title=title,
            xlabel="TP degree",
            ylabel="ms per step",
            height=260,
            log_y=True,
            log_x=True,
            xticks=degrees,
            min_left=left,
        )
        for series, title in panels
    ]
    return stack(
        charts,
        title=f"TP sweep: measured ({ctx.backend}) vs predicted ({predicted['node']})",
        description=(
            "Two panels, each on a log time axis labelled at powers of ten, degrees spaced by ratio. Top, solid: step, local GEMM, collective "
            "and exposed-communication time per TP degree, measured on this machine. Bottom, dashed: the same, "
            f"predicted by the roofline + alpha-beta model for {predicted['node']}. A degree with no collective "
            "(TP=1) has no point on those lines."
        ),
    )


def crossover(rows: list[dict], predicted: dict, backend: str) -> dict:
    """Where collective time overtakes local GEMM time, measured and predicted, and whether they agree.

    The measured rule is the grader's (labs/tp_sweep/checks.py `stretch`): the first degree whose
    mean collective time exceeds its mean local GEMM time. The predicted one is the cost model's
    comm_exceeds_gemm_from for the same degrees.
    """
    measured = next((r["degree"] for r in rows if r["degree"] > 1 and r["collective_ms"] > r["local_gemm_ms"]), None)
    best = min(rows, key=lambda r: r["step_ms"])["degree"]
    in_range = {r["degree"] for r in rows}
    pred_rows = {p["degree"]: p for p in predicted["per_degree"]}
    pred = next(
        (
            d
            for d in sorted(in_range)
            if d > 1 and d in pred_rows and pred_rows[d]["collective_ms"] >= pred_rows[d]["local_gemm_ms"]
        ),
        None,
    )
    pred_best = min((pred_rows[d] for d in in_range if d in pred_rows), key=lambda p: p["step_ms"])["degree"]
    agree = measured == pred
    why = None
    if not agree:
        why = disagreement(rows, pred_rows, backend, predicted["node"])
    return {
        "measured_from": measured,
        "measured_best_degree": best,
        "predicted_from": pred,
        "predicted_best_degree": pred_best,
        "agree": agree,
        "explanation": why,
    }


def disagreement(rows: list[dict], pred_rows: dict, backend: str, node: str) -> str:
    """Why the measurement and the prediction put the crossover at different degrees, from this run's ratios."""
    tp1 = next((r for r in rows if r["degree"] == 1), None)
    split = next((r for r in rows if r["degree"] > 1 and r["collective_ms"] > 0), None)
    g = c = None
    if tp1 is not None and pred_rows.get(1, {}).get("local_gemm_ms"):
        g = tp1["local_gemm_ms"] / pred_rows[1]["local_gemm_ms"]
    if split is not None and pred_rows.get(split["degree"], {}).get("collective_ms"):
        c = split["collective_ms"] / pred_rows[split["degree"]]["collective_ms"]
    if g is not None and c is not None:
        shift = (
            "so splitting the GEMMs keeps paying to a higher degree here"
            if g > c
            else "so communication wins at a lower degree here"
        )
        core = (
            f"the local GEMMs ran {number(round(g))}x slower than predicted for {node} "
            f"but the collectives {number(round(c))}x, {shift}"
        )
    else:
        core = f"the time split between GEMMs and collectives differs from the {node} prediction"
    if backend == "cpu":
        core += (
            " (CPU cores multiply far slower than tensor cores, gloo on one host pays no NVLink launch latency, "
            "and CPU ranks share this machine's cores)"
        )
    return core


def predicted_at(params: Params, predicted: dict) -> str:
    """Which block the prediction priced, in words: this run's own shape, or the other one it was asked for."""
    shape = predicted["shape"]
    if (shape["tokens"], shape["hidden"], shape["ffn"]) == (params.tokens, params.hidden, params.ffn):
        return "at this run's shape"
    return f"at {shape['tokens']}x{shape['hidden']}x{shape['ffn']} (not this run's shape)"


def answer(rows: list[dict], cross: dict, predicted: dict, backend: str, at: str = "") -> str:
    """The lab's question ("As the TP degree grows, when does collective time overtake the GEMM time it
    saves?") answered in a headline of at most ~25 words from this run's numbers; the prediction's agreement and
    the reasons sit in the summary below it."""
    where = "On this CPU" if backend == "cpu" else "On these GPUs"
    by = {r["degree"]: r for r in rows}
    best = cross["measured_best_degree"]
    if cross["measured_from"] is not None:
        first = f"{where}, collectives outgrew the GEMMs at TP={cross['measured_from']}"
    else:
        first = f"{where}, collectives stayed below the GEMMs up to TP={max(by)}"
    pf = cross["predicted_from"] or predicted.get("comm_exceeds_gemm_from")
    top = max(p["degree"] for p in predicted["per_degree"])
    pred = f"TP={pf}" if pf is not None else f"no crossover up to TP={top}"
    return f"{first}; TP={best} was fastest. {predicted['node']} prediction{' ' + at if at else ''}: {pred}."


def results(
    params: Params, ctx: LabContext, rows: list[dict], predicted: dict, slots: int, slots_why: str, tol_name: str
) -> dict:
    """The lab's `results`: summary and tables for the page beside the numbers they are built from."""
    cpu = ctx.backend == "cpu"
    timing_note = (
        "CPU timings: ranks are processes sharing this machine's cores over gloo, not GPUs; the step from steps "
        "timed alone, the GEMM and collective split from as many traced steps after them"
        if cpu
        else "GPU timings: the step from CUDA events around steps run alone, no profiler on; the Megatron block "
        "runs in BF16, the precision the prediction prices; GEMM spans from a traced window after them, and at TP>1 "
        "collective, wait and exposed times from each rank's own NCCL kernel durations in a profiled window"
    )
    summary: list[SummaryItem] = [
        SummaryItem(label="Backend", value=ctx.backend, note=ctx.environment["label"]),
        SummaryItem(label="Rank slots", value=slots, note=slots_why),
    ]
    for r in rows:
        summary.append(
            SummaryItem(
                label=f"TP={r['degree']} step (measured)",
                value=round(r["step_ms"], 3),
                unit="ms",
                note=timing_note + (f"; {number(r['step_vs_tp1'], 3)}x TP=1" if r["step_vs_tp1"] else ""),
            )
        )
    worst = max(r["parity"]["max_rel_diff"] for r in rows)
    limit = TOLERANCES[tol_name]["max_rel_diff"]
    assert isinstance(limit, float)
    summary.append(
        SummaryItem(
            label="Worst relative difference vs TP=1",
            value=worst,
            note=f"relative tolerance {number(float(limit))} ({tol_name} in the result): {TOLERANCES[tol_name]['reason']}",
        )
    )
    cross = crossover(rows, predicted, ctx.backend)
    summary.append(
        SummaryItem(
            label="Collective time overtakes local GEMM time (measured)",
            value=f"TP={cross['measured_from']}"
            if cross["measured_from"]
            else f"not within TP<={max(r['degree'] for r in rows)}",
            note=timing_note,
        )
    )
    at = predicted_at(params, predicted)
    summary.append(
        SummaryItem(
            label=f"... and predicted for {predicted['node']} {at}",
            value=f"TP={cross['predicted_from']}" if cross["predicted_from"] else "not within the measured degrees",
            note="they agree" if cross["agree"] else (cross["explanation"] or ""),
        )
    )
    summary.append(
        SummaryItem(
            label=f"Over-sharding begins (predicted for {predicted['node']} {at})",
            value=f"TP={predicted['oversharding_from']}" if predicted["oversharding_from"] else "not within TP<=8",
            note="predicted: first degree whose step stops improving or whose collectives outweigh its GEMMs",
        )
    )
    prof = rows[0].get("profiler")
    if prof is not None:
        summary.append(
            SummaryItem(
                label="Holistic Trace Analysis cross-check",
                value="yes" if prof["applies"] else "does not apply",
                note=prof["note"],
            )
        )
    te_rows = [r for r in rows if "te" in r]
    for r in te_rows:
        t = r["te"]
        summary.append(
            SummaryItem(
                label=f"TP={r['degree']}: te.Linear block vs Megatron mappings (step)",
                value=table_number(t["step_vs_megatron"]),
                unit="x",
                note=f"{duration(t['step_ms'] / 1000)} with TE{' (' + t['recipe'] + ' FP8)' if t['recipe'] else ' (BF16)'}"
                f"{', sequence parallel' if t['sequence_parallel'] else ''}; parity {number(t['parity']['max_rel_diff'], 3)} "
                f"({'within' if t['parity']['within_tolerance'] else 'OUTSIDE'} {t['parity']['tolerance']}); "
                f"{byte_size(t['ring_bytes_per_rank'])} sent per rank vs {byte_size(t['megatron_ring_bytes_per_rank'])}",
            )
        )
    tables: list[Table] = [
        Table(
            title="Per degree (measured; times are medians over steps, in ms)",
            columns=[
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
            rows=[
                [
                    r["degree"],
                    table_number(r["step_ms"]),
                    table_number(r["step_vs_tp1"]),
                    table_number(r["local_gemm_ms"]),
                    table_number(r["collective_ms"]),
                    table_number(r["wait_ms"]),
                    table_number(r["exposed_comm_ms"]),
                    ", ".join(r["collective_kinds"]) or "none",
                    r["collective_bytes_per_step"],
                    r["parity"]["max_rel_diff"],
                    "yes" if r["parity"]["within_tolerance"] else "NO",
                ]
                for r in rows
            ],
        ),
        Table(
            title="Rank mapping: which slice of which weight each rank owns",
            columns=["TP", "rank", "weight", "split", "slice", "local shape", "full shape"],
            rows=[
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
        ),
        Table(
            title="Per rank (measured, ms)",
            columns=[
                "TP",
                "rank",
                "local GEMM shapes (m x n x k)",
                "local GEMM",
                "collectives",
                "collective",
                "wait",
                "step",
            ],
            rows=[
                [
                    r["degree"],
                    k["rank"],
                    "; ".join(f"{g['gemm']} {g['m']}x{g['n']}x{g['k']}" for g in k["local_gemm_shapes"][:2]),
                    table_number(k["local_gemm_ms"]),
                    "; ".join(f"{c['kind']} {c['bytes']} B" for c in k["collectives"]) or "none",
                    table_number(k["collective_ms"]),
                    table_number(k["wait_ms"]),
                    table_number(k["step_ms"]),
                ]
                for r in rows
                for k in r["ranks"]
            ],
        ),
        Table(
            title=f"PREDICTED for {predicted['node_spec']['name']} ({predicted['precision']}, tokens={predicted['shape']['tokens']}, hidden={predicted['shape']['hidden']}, ffn={predicted['shape']['ffn']}; ms)",
            columns=[
                "TP",
                "predicted local GEMM",
                "predicted collective",
                "predicted exposed comm",
                "predicted step",
                "predicted comm fraction",
            ],
            rows=[
                [
                    p["degree"],
                    table_number(p["local_gemm_ms"], 5),
                    table_number(p["collective_ms"], 5),
                    table_number(p["exposed_comm_ms"], 5),
                    table_number(p["step_ms"], 5),
                    table_number(p["comm_fraction"]),
                ]
                for p in predicted["per_degree"]
            ],
        ),
    ]
    if te_rows:
        tables.append(
            Table(
                title="te.Linear block: the collectives one step issues, bytes over all ranks and what they carry",
                columns=["TP", "collective", "kind", "bytes", "carries"],
                rows=[
                    [r["degree"], c["name"], c["kind"], c["bytes"], c["carries"]]
                    for r in te_rows
                    for c in r["te"]["collectives"]
                ],
            )
        )
    return {
        "answer": answer(rows, cross, predicted, ctx.backend, at),
        "summary": summary,
        "tables": tables,
        "crossover": cross,
        "timing": {"kind": "cpu-wall-clock" if cpu else "cuda-events", "unit": "ms", "note": timing_note},
        "rank_slots": {"available": slots, "explanation": slots_why},
        "tolerances": TOLERANCES | TE_TOLERANCES if ctx.backend == "te" else TOLERANCES,
        "tolerance_used": tol_name,
        "fp8": {
            "enabled": params.fp8,
            "mode": (
                "emulated (labs.numerics.fp8, current scaling with each amax reduced over the TP group)"
                if cpu
                else f"Megatron block emulated (labs.numerics.fp8) on GPU; te.Linear block on Transformer Engine's "
                f"{params.recipe} recipe"
                if ctx.backend == "te"
                else "emulated (labs.numerics.fp8) on GPU"
            )
            if params.fp8
            else None,
        },
        "degrees": [{k: v for k, v in r.items()} for r in rows],
        "predicted": predicted,
    }
