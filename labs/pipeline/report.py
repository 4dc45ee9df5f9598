"""pipeline's page: the answer, then per-schedule timelines and traces, bubbles against both formulas,
activations in flight and the p2p each schedule sent. Nothing here measures; it lays out run.py's numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labs import precision
from labs.pipeline import analysis
from labs.pipeline.params import Params
from labs.result_common import SummaryItem, Table, table_number
from labs.trace.chrome import chrome_trace_json
from labs.trace.svgplot import svg_timeline
from labs.trace.timeline import Span
from labs.words import byte_size, number, percent

if TYPE_CHECKING:
    from labs.runtime import LabContext

TITLES = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved-1f1b": "interleaved 1F1B",
    "zero-bubble": "zero-bubble (ZB1P)",
}


# A table cell longer than this is cut by the page (app/web/views/result_excerpt.MAX_TEXT); the whole action
# list stays in the result's `ran`.
CELL = 200


def _cell(text: str) -> str:
    """`text`, or its start cut at a space with an ellipsis, to fit one table cell."""
    if len(text) <= CELL:
        return text
    return text[: text.rfind(" ", 0, CELL - 2)] + " …"


def schedule_artifacts(
    ctx: LabContext, params: Params, schedule: str, all_spans: list[Span], drawn: list[Span], bubble: float, device: str
) -> dict:
    """The timeline SVG of the last measured step (`drawn`) and the Chrome trace of all steps, for one schedule."""
    svg, trace = f"timeline_{schedule}.svg", f"trace_{schedule}.json"
    ctx.write_text(
        svg,
        svg_timeline(
            drawn,
            title=f"{TITLES[schedule]}: one measured step per rank (last of {params.steps})",
            subtitle=f"p = {params.ranks}, m = {params.microbatches}; idle share of the step "
            f"{percent(bubble, 1)} (mean over ranks); 2F0 = stage 2 forward of micro-batch 0, B backward, I input-gradient, "
            "W weight-gradient; p2p is untimed, inside the waits; "
            + ("CPU wall-clock spans on gloo" if device == "cpu" else "CUDA event spans on NCCL (unverified)"),
            description=f"Forward and backward work and idle gaps for {params.ranks} pipeline ranks under {schedule}.",
        ),
    )
    ctx.write_text(
        trace, chrome_trace_json(all_spans, metadata={"lab": "pipeline", "schedule": schedule, "backend": ctx.backend})
    )
    ctx.add_artifact(f"timeline_{schedule}", svg, "image/svg+xml", f"Timeline: {TITLES[schedule]} (measured)")
    ctx.add_artifact(
        f"trace_{schedule}", trace, "application/json", f"Chrome trace: {TITLES[schedule]} (JSON for Perfetto UI)"
    )
    return {"timeline": svg, "trace": trace}


def answer(params: Params, schedules: dict, device: str) -> str:
    """The lab's question ("Where does a pipeline idle, and what do 1F1B, interleaving and zero-bubble
    schedules buy against GPipe?") answered in one sentence of about 25 words from this run's numbers."""
    where = "on this CPU" if device == "cpu" else "on these GPUs"
    first = next(iter(schedules))
    base = schedules[first]
    model = base["formula_step_fraction"]
    model = base["schedule_bubble_fraction"] if model is None else model
    parts = [
        f"With p = {params.ranks}, m = {params.microbatches}, {TITLES[first]} idled {percent(base['bubble_fraction'], 0)} "
        f"of its step {where} (model {percent(model, 0)})"
    ]
    g, o = schedules.get("gpipe"), schedules.get("1f1b")
    if g and o:
        parts.append(
            f"1F1B held {o['peak_microbatches_in_flight']} micro-batches of activations, GPipe "
            f"{g['peak_microbatches_in_flight']}"
        )
    i = schedules.get("interleaved-1f1b")
    if i and o and first != "interleaved-1f1b":
        parts.append(
            f"interleaving idled {percent(i['bubble_fraction'], 0)} for "
            f"{number(i['sends_per_step'] / o['sends_per_step'], 2)}x the sends"
        )
    z = schedules.get("zero-bubble")
    if z and first != "zero-bubble":
        parts.append(f"zero-bubble {percent(z['bubble_fraction'], 0)}")
    return "; ".join(parts) + "."


def results(params: Params, ctx: LabContext, schedules: dict, reference_loss: float, device: str) -> dict:
    cpu = device == "cpu"
    note = (
        "CPU wall-clock spans; gloo p2p and Python overhead count as idle, and ranks share cores"
        if cpu
        else "CUDA event spans (unverified: no GPU has run this path yet)"
    )
    summary: list[SummaryItem] = [
        SummaryItem(label="Backend", value=ctx.backend, note=ctx.environment["label"]),
        SummaryItem(label="Pipeline ranks p × micro-batches m", value=f"{params.ranks} × {params.microbatches}"),
    ]
    for name, s in schedules.items():
        t = TITLES[name]
        form = s["formula_step_fraction"]
        summary.append(
            SummaryItem(
                label=f"{t}: idle share of the step, % (mean over ranks)",
                value=round(100 * s["bubble_fraction"], 1),
                note=(f"formula (p−1)/(vm+p−1) = {percent(form, 1)}; " if form is not None else "")
                + f"its own order at uniform stage cost {percent(s['schedule_bubble_fraction'], 1)}",
            )
        )
        summary.append(
            SummaryItem(
                label=f"{t}: peak micro-batches in flight",
                value=s["peak_microbatches_in_flight"],
                note=f"{byte_size(s['peak_activation_bytes'])} of saved activations at the peak (busiest rank)",
            )
        )
    if "1f1b" in schedules:
        p = params.ranks
        summary.append(
            SummaryItem(
                label="GPipe held to 1F1B's memory (m = p micro-batches in flight): idle share, %",
                value=round(100 * analysis.gpipe_bubble_at_1f1b_memory(p), 1),
                note=f"idle share (p−1)/(2p−1) against 1F1B's {percent(analysis.bubble_step_fraction(p, params.microbatches), 1)} "
                f"at m = {params.microbatches}: at equal memory GPipe idles more",
            )
        )
    summary.append(
        SummaryItem(
            label="Largest gradient difference from the unpipelined model",
            value=max(s["max_grad_rel_err"] for s in schedules.values()),
            note="relative to each layer's largest gradient; loss "
            + number(reference_loss, 4)
            + f" unpipelined; {precision.words(ctx.environment)}",
        )
    )
    bubble_rows = [
        [
            TITLES[n],
            s["stages_per_rank"],
            table_number(s["step_ms"]),
            table_number(s["bubble_fraction"], 4),
            table_number(s["formula_step_fraction"], 4),
            table_number(s["schedule_bubble_fraction"], 4),
            table_number(s["simulated_bubble_fraction"], 4),
            table_number(s["bubble_over_ideal"], 4),
            table_number(s["formula_over_ideal"], 4),
            s["peak_microbatches_in_flight"],
            byte_size(s["peak_activation_bytes"]),
            s["sends_per_step"],
            byte_size(s["send_bytes_per_step"]),
        ]
        for n, s in schedules.items()
    ]
    rank_rows = [
        [
            TITLES[n],
            r["rank"],
            ", ".join(str(x) for x in r["stages"]),
            table_number(r["step_ms"]),
            table_number(r["forward_ms"]),
            table_number(r["backward_ms"]),
            table_number(r["weight_grad_ms"]),
            table_number(r["idle_ms"]),
            table_number(r["idle_fraction"], 4),
            r["peak_microbatches_in_flight"],
            byte_size(r["peak_activation_bytes"]),
            r["sends"],
            _cell(" ".join(r["ran"])),
        ]
        for n, s in schedules.items()
        for r in s["ranks"]
    ]
    tables: list[Table] = [
        Table(
            title="Bubble, activations and p2p per schedule and step. Idle share = idle / step, formula (p−1)/(vm+p−1) "
            "(GPipe paper, the course); bubble / ideal = idle / busy, formula (p−1)/(vm) (Narayanan et al. 2021, "
            "Ultra-Scale Playbook). The executed order replayed with free p2p: at uniform stage cost (F 1, B 2, "
            "I = W = 1), and at each action's own measured compute time",
            columns=[
                "schedule",
                "stages per rank v",
                "step (ms)",
                "idle share",
                "formula",
                "order, uniform cost",
                "order, own compute",
                "bubble / ideal",
                "formula",
                "peak in flight",
                "peak activations",
                "sends",
                "bytes sent",
            ],
            rows=bubble_rows,
        ),
        Table(
            title="Per rank (the median step, ms): what each rank ran, in the module's notation (stage, F/B/I/W, micro-batch)",
            columns=[
                "schedule",
                "rank",
                "stages",
                "step",
                "forward",
                "backward (B or I)",
                "weight grad (W)",
                "idle",
                "idle share",
                "peak in flight",
                "peak activations",
                "sends",
                "actions as run",
            ],
            rows=rank_rows,
        ),
    ]
    return {
        "answer": answer(params, schedules, device),
        "summary": summary,
        "tables": tables,
        "timing": {"kind": "cpu-wall-clock" if cpu else "cuda-events", "unit": "ms", "note": note},
        "ranks": params.ranks,
        "microbatches": params.microbatches,
        "reference_loss": reference_loss,
        "schedules": schedules,
    }
