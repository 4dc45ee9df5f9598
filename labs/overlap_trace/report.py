"""overlap-trace's page: per-schedule timelines and traces, whether each window is safe, summary and tables.

Nothing here measures; it lays out what run.py measured on each rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labs.overlap_trace.params import Params
from labs.result_common import SummaryItem, Table, table_number
from labs.trace.chrome import chrome_trace_json
from labs.trace.svgplot import svg_timeline
from labs.trace.timeline import Span
from labs.words import number, whole_percent

if TYPE_CHECKING:
    from labs.runtime import LabContext


def schedule_artifacts(
    ctx: LabContext,
    params: Params,
    schedule: str,
    all_spans: list[Span],
    drawn: list[Span],
    mean_ratio: float | None,
    device: str,
) -> dict:
    """The timeline SVG of the last measured step (`drawn`) and the Chrome trace of all steps, for one schedule."""
    svg, trace = f"timeline_{schedule}.svg", f"trace_{schedule}.json"
    ctx.write_text(
        svg,
        svg_timeline(
            drawn,
            title=f"Schedule '{schedule}': one measured step per rank (last of {params.steps})",
            subtitle=f"mean overlap ratio {'not measured' if mean_ratio is None else number(mean_ratio, 2)}; "
            + ("CPU wall-clock spans on gloo" if device == "cpu" else "CUDA event spans on NCCL"),
            description=f"Compute, communication and wait lanes for {params.ranks} ranks in the {schedule} schedule.",
        ),
    )
    ctx.write_text(
        trace,
        chrome_trace_json(all_spans, metadata={"lab": "overlap-trace", "schedule": schedule, "backend": ctx.backend}),
    )
    ctx.add_artifact(f"timeline_{schedule}", svg, "image/svg+xml", f"Timeline: {schedule} (measured)")
    ctx.add_artifact(f"trace_{schedule}", trace, "application/json", f"Chrome trace: {schedule} (JSON for Perfetto UI)")
    return {"timeline": svg, "trace": trace}


def safety(schedule: str, ranks: list[dict], device: str) -> dict:
    """Whether the work in the window may run before wait(), and why, in the page's words."""
    if schedule == "dependent":
        seen = [r.get("unwritten_at_read") for r in ranks]
        evidence = (
            f"when it wanted it, up to {number(max(v for v in seen if v is not None))} of its elements were still unwritten: "
            "NaN"
            if device == "cpu" and any(v is not None for v in seen)
            else "the all-gather's output buffer"
        )
        # one table cell: at most app/web/views/result_excerpt.MAX_TEXT (200) characters, or the page cuts it
        return {
            "safe_to_overlap": False,
            "must_wait": True,
            "explanation": f"UNSAFE: this work reads the gathered tensor ({evidence}), so it must come after wait() "
            "and hides none of the all-gather.",
        }
    if schedule == "windowed":
        return {
            "safe_to_overlap": True,
            "must_wait": False,
            "explanation": "Safe: the window's linear reads x2 and its own weight, nothing the all-gather writes; wait() comes before any use of the gathered tensor.",
        }
    return {
        "safe_to_overlap": True,
        "must_wait": False,
        "explanation": "Async in name only: wait() is called at once, so the all-gather is fully exposed, as if it were synchronous.",
    }


def answer(schedules: dict, device: str) -> str:
    """The lab's question ("How much of an all-gather can independent work hide, and what must wait for it?")
    answered in one sentence from this run's numbers."""
    where = "on this CPU" if device == "cpu" else "on these GPUs"
    parts = []
    w, i = schedules.get("windowed"), schedules.get("immediate")
    if w is not None and w["overlap_ratio"] is not None:
        hid = f"Independent work in the window hid {whole_percent(w['overlap_ratio'])} of the all-gather {where} (mean over ranks)"
        if i is not None:
            hid += (
                f", leaving {number(w['exposed_comm_ms'], 3)} ms exposed against {number(i['exposed_comm_ms'], 3)} ms when wait() "
                "comes at once"
            )
        parts.append(hid)
    elif i is not None:
        parts.append(
            f"Waiting at once hid nothing: all {number(i['exposed_comm_ms'], 3)} ms of the all-gather stayed exposed {where}"
        )
    d = schedules.get("dependent")
    if d is not None:
        unwritten = [r.get("unwritten_at_read") for r in d["ranks"] if r.get("unwritten_at_read") is not None]
        seen = (
            f" (up to {number(max(unwritten))} of its elements were still unwritten when it wanted them)"
            if unwritten
            else ""
        )
        parts.append(f"a linear that reads the gathered tensor must wait for it{seen}, so it hides nothing")
    sentence = "; ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


def results(
    params: Params, ctx: LabContext, schedules: dict, comparison: dict | None, gathered_bytes: int, device: str
) -> dict:
    """The lab's `results`: summary and tables for the page beside the numbers they are built from."""
    cpu = device == "cpu"
    note = (
        "CPU wall-clock spans; gloo runs the collective on a background thread and ranks share cores"
        if cpu
        else "CUDA event spans on the compute and communication streams"
    )
    summary: list[SummaryItem] = [
        SummaryItem(label="Backend", value=ctx.backend, note=ctx.environment["label"]),
        SummaryItem(label="All-gather size (per rank, gathered)", value=gathered_bytes, unit="bytes"),
    ]
    for name, s in schedules.items():
        summary.append(
            SummaryItem(
                label=f"{name}: overlap ratio (mean over ranks)",
                value=None if s["overlap_ratio"] is None else round(100 * s["overlap_ratio"], 1),
                unit="%",
                note="|compute ∩ communication| / |communication|: the share of the all-gather hidden",
            )
        )
        summary.append(
            SummaryItem(
                label=f"{name}: exposed communication (mean)",
                value=round(s["exposed_comm_ms"], 3),
                unit="ms",
                note=note,
            )
        )
    if "dependent" in schedules:
        summary.append(
            SummaryItem(
                label="dependent: safe to overlap?",
                value="no, it must wait",
                note="it reads the gathered tensor (see “Is the window safe?” below)",
            )
        )
    if comparison:
        summary.append(
            SummaryItem(
                label="windowed overlap ratio > immediate on every rank",
                value=all(comparison["windowed_overlap_gt_immediate_per_rank"]),
            )
        )
    rows = []
    for name, s in schedules.items():
        for r in s["ranks"]:
            rows.append(
                [
                    name,
                    r["rank"],
                    table_number(r["step_ms"]),
                    table_number(r["compute_ms"]),
                    table_number(r["communication_ms"]),
                    table_number(r["overlap_ms"]),
                    table_number(r["overlap_ratio"]),
                    table_number(r["exposed_communication_ms"]),
                    table_number(r["wait_ms"]),
                    table_number(r["identity_ms"]),
                    table_number(r["identity_residual_ms"]),
                ]
            )
    tables: list[Table] = [
        Table(
            title="Per rank and schedule (the median step of each rank, ms): T_step ≈ compute + communication − overlap",
            columns=[
                "schedule",
                "rank",
                "measured step",
                "compute",
                "communication",
                "overlap",
                "overlap ratio",
                "exposed comm",
                "wait",
                "compute + comm − overlap",
                "residual (idle)",
            ],
            rows=rows,
        ),
        Table(
            title="Is the window safe?",
            columns=["schedule", "safe to overlap", "must wait before the work", "why"],
            rows=[
                [n, "yes" if s["safe_to_overlap"] else "NO", "yes" if s["must_wait"] else "no", s["explanation"]]
                for n, s in schedules.items()
            ],
        ),
    ]
    first = next(iter(schedules.values()))
    summary.append(
        SummaryItem(
            label="Holistic Trace Analysis cross-check",
            value="yes" if first["profiler"]["applies"] else "does not apply",
            note=first["profiler"]["note"],
        )
    )
    return {
        "answer": answer(schedules, device),
        "summary": summary,
        "tables": tables,
        "timing": {"kind": "cpu-wall-clock" if cpu else "cuda-events", "unit": "ms", "note": note},
        "ranks": params.ranks,
        "gathered_bytes": gathered_bytes,
        "schedules": schedules,
        "comparison": comparison,
    }
