"""collectives' page: the answer, the bus-bandwidth chart, the α-β fit per collective, the node comparisons,
the hierarchy timeline. Nothing here measures; it lays out what run.py measured."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labs.collectives.params import Params
from labs.result_common import SummaryItem, Table, table_number
from labs.trace.chart import Series
from labs.trace.chrome import chrome_trace_json
from labs.trace.svgplot import line_chart, svg_timeline
from labs.trace.timeline import Span
from labs.words import byte_size, number

if TYPE_CHECKING:
    from labs.runtime import LabContext

CHART = "busbw.svg"
# The result's topology modes, as the summary card says them.
TOPOLOGY_WORDS = {
    "netns": "emulated nodes (Linux network namespaces)",
    "flat": "one node",
    "gpu-groups": "GPUs grouped into nodes",
}


def timeline_artifacts(ctx: LabContext, params: Params, drawn: list[Span], topology: dict) -> dict:
    svg, trace = "timeline_hierarchy.svg", "trace_hierarchy.json"
    where = {
        "netns": f"{topology['nodes']} emulated nodes (network namespaces, {number(topology['link_mbit'] or 0)} Mbit/s links)",
        "flat": "one host, no emulated nodes",
        "gpu-groups": "GPUs grouped into nodes on one host",
    }[topology["mode"]]
    ctx.write_text(
        svg,
        svg_timeline(
            drawn,
            title="Flat all-reduce, then hierarchical (reduce-scatter in node, all-reduce across, all-gather in node)",
            subtitle=f"one untimed pair after the timed loops, an event at each phase boundary; {where}",
            description=f"Communication spans of {params.ranks} ranks: one flat all-reduce and the three phases of a hierarchical one.",
        ),
    )
    ctx.write_text(trace, chrome_trace_json(drawn, metadata={"lab": "collectives", "backend": ctx.backend}))
    ctx.add_artifact("timeline_hierarchy", svg, "image/svg+xml", "Timeline: flat vs hierarchical all-reduce (measured)")
    ctx.add_artifact(
        "trace_hierarchy", trace, "application/json", "Chrome trace: flat vs hierarchical (JSON for Perfetto UI)"
    )
    return {"timeline": svg, "trace": trace}


def _chart(ctx: LabContext, sweeps: list[dict]) -> str:
    series = []
    for sw in sweeps:
        for c in sw["collectives"]:
            label = c["name"] if len(sweeps) == 1 else f"{c['name']} ({sw['algorithm']})"
            series.append(Series(label, [r["bytes"] / 1024 for r in c["rows"]], [r["busbw_gbs"] for r in c["rows"]]))
    kib = sorted({x for s in series for x in s.xs})
    ctx.write_text(
        CHART,
        line_chart(
            series,
            title="Bus bandwidth against message size",
            xlabel="message size S (KiB)",
            ylabel="bus bandwidth (GB/s)",
            log_x=True,
            log_y=True,
            xticks=kib,  # the sweep's own sizes, not powers of ten
            subject="collectives bus bandwidth",
            description="busbw = S/t x the collective's nccl-tests factor; it rises while latency dominates and levels off at the link's bandwidth.",
        ),
    )
    ctx.add_artifact("busbw", CHART, "image/svg+xml", "Bus bandwidth against message size (measured)")
    return CHART


def answer(topology: dict, sweeps: list[dict], hierarchy: dict) -> str:
    """The headline: at most about 25 words, from this run's numbers."""
    h = hierarchy
    if topology["mode"] == "netns":
        e = h["egress"]
        sent = e["measured_flat_bytes"], e["measured_hierarchical_bytes"]
        tail = (
            f"; each node sent {byte_size(sent[1])}, not {byte_size(sent[0])}"
            if sent[0] is not None and sent[1] is not None
            else ""
        )
        return (
            f"Across {topology['nodes']} emulated nodes, a hierarchical {byte_size(h['bytes'])} all-reduce took "
            f"{number(h['hierarchical_ms'], 3)} ms against {number(h['flat_ms'], 3)} ms flat{tail}."
        )
    ar = next((c for c in sweeps[0]["collectives"] if c["name"] == "all-reduce"), sweeps[0]["collectives"][0])
    f = ar["fit"]
    bw = "no bandwidth term" if f["bandwidth_gbs"] is None else f"B = {number(f['bandwidth_gbs'], 3)} GB/s"
    per = "per step" if f["steps"] is not None else "per call"
    return (
        f"{ar['name'].capitalize()} fits the α-β model with α = {number(f['alpha_us'], 3)} µs {per} and {bw}; "
        f"RMS residual {number(100 * f['rms_residual'], 2)}%."
    )


def results(
    params: Params,
    ctx: LabContext,
    device: str,
    sweeps: list[dict],
    topology: dict,
    scopes: list[dict],
    hierarchy: dict,
) -> dict:
    cpu = device == "cpu"
    calls = f"{params.iters} calls back to back after warm-up and a barrier over all ranks, their span / {params.iters}"
    note = (
        f"CPU wall clock (perf_counter) around {calls}; the slowest rank's time; gloo over TCP"
        if cpu
        else f"CUDA events on the stream around {calls}, as nccl-tests times them; the slowest rank's time "
        "(unverified until a GPU runs scripts/gpu-check.sh)"
    )
    chart = _chart(ctx, sweeps)
    summary: list[SummaryItem] = [
        SummaryItem(label="Backend", value=ctx.backend, note=ctx.environment["label"]),
        SummaryItem(label="Topology", value=TOPOLOGY_WORDS[topology["mode"]], note=topology["note"]),
    ]
    for sw in sweeps:
        for c in sw["collectives"]:
            f = c["fit"]
            summary.append(
                SummaryItem(
                    label=f"{c['name']} ({sw['algorithm']}): α per {'step' if f['steps'] else 'call'}",
                    value=round(f["alpha_us"], 2),
                    unit="µs",
                    note=f"B = {'—' if f['bandwidth_gbs'] is None else number(f['bandwidth_gbs'], 3) + ' GB/s'}, "
                    f"RMS residual {number(100 * f['rms_residual'], 2)}%",
                )
            )
    h = hierarchy
    summary.append(
        SummaryItem(
            label=f"All-reduce of {byte_size(h['bytes'])}: flat / hierarchical time",
            value=round(h["flat_over_hierarchical"], 3),
            note=f"{number(h['flat_ms'], 3)} ms flat, {number(h['hierarchical_ms'], 3)} ms hierarchical; results differ by {number(h['max_abs_diff'])}",
        )
    )
    tables: list[Table] = []
    for sw in sweeps:
        nccl_column = sw["algorithm"].startswith("nccl-")
        rows = [
            [
                c["name"],
                r["bytes"],
                table_number(r["time_ms"]),
                table_number(r["algbw_gbs"], 4),
                table_number(r["busbw_gbs"], 4),
                table_number(r["fit_ms"]),
                table_number(100 * r["residual"], 1),
                *([r["nccl_algorithm"]] if nccl_column else []),
            ]
            for c in sw["collectives"]
            for r in c["rows"]
        ]
        tables.append(
            Table(
                title=f"Size sweep, {sw['algorithm']} ({params.ranks} ranks): nccl-tests' time, algbw = S/t, busbw = algbw x factor",
                columns=[
                    "collective",
                    "S (bytes)",
                    "time (ms)",
                    "algbw (GB/s)",
                    "busbw (GB/s)",
                    "α-β fit (ms)",
                    "residual (%)",
                    *(["NCCL algorithm/protocol"] if nccl_column else []),
                ],
                rows=rows,
            )
        )
    tables.append(
        Table(
            title="α-β fit per collective: t = steps·α + factor·S/B (steps: the ring's or the tree's hops; none where "
            "NCCL chose per call, α then per call)",
            columns=[
                "algorithm",
                "collective",
                "steps",
                "factor",
                "α (µs)",
                "B (GB/s)",
                "β (ns/byte)",
                "RMS residual (%)",
                "max |residual| (%)",
            ],
            rows=[
                [
                    sw["algorithm"],
                    c["name"],
                    c["fit"]["steps"],
                    table_number(c["fit"]["busbw_factor"]),
                    table_number(c["fit"]["alpha_us"], 2),
                    table_number(c["fit"]["bandwidth_gbs"], 4),
                    table_number(c["fit"]["beta_ns_per_byte"], 4),
                    table_number(100 * c["fit"]["rms_residual"], 1),
                    table_number(100 * c["fit"]["max_abs_residual"], 1),
                ]
                for sw in sweeps
                for c in sw["collectives"]
            ],
        )
    )
    tables.append(
        Table(
            title="All-reduce of the largest message inside one node, across nodes (one rank per node), over all ranks",
            columns=["scope", "ranks", "S (bytes)", "time (ms)", "busbw (GB/s)"],
            rows=[
                [s["scope"], s["ranks"], s["bytes"], table_number(s["time_ms"]), table_number(s["busbw_gbs"], 4)]
                for s in scopes
            ],
        )
    )
    e = h["egress"]
    tables.append(
        Table(
            title="Flat vs hierarchical all-reduce: time and node egress (bytes one node sends per all-reduce)",
            columns=[
                "all-reduce",
                "time (ms)",
                "egress measured",
                "egress predicted",
                "egress / (NICs x NIC bandwidth) (ms)",
            ],
            rows=[
                [
                    "flat (ring over all ranks)",
                    table_number(h["flat_ms"]),
                    None if e["measured_flat_bytes"] is None else round(e["measured_flat_bytes"]),
                    round(e["predicted_flat_bytes"]),
                    table_number(e["predicted_flat_ms"]),
                ],
                [
                    "hierarchical (RS in node, AR across, AG in node)",
                    table_number(h["hierarchical_ms"]),
                    None if e["measured_hierarchical_bytes"] is None else round(e["measured_hierarchical_bytes"]),
                    round(e["predicted_hierarchical_bytes"]),
                    table_number(e["predicted_hierarchical_ms"]),
                ],
            ],
        )
    )
    return {
        "answer": answer(topology, sweeps, hierarchy),
        "summary": summary,
        "tables": tables,
        "timing": {"kind": "cpu-wall-clock" if cpu else "cuda-synchronized-wall-clock", "unit": "ms", "note": note},
        "ranks": params.ranks,
        "topology": topology,
        "sweeps": sweeps,
        "scopes": scopes,
        "hierarchy": hierarchy,
        "busbw_chart": chart,
        "iters": params.iters,
    }
