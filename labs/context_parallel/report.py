"""context-parallel's page: the answer, then per-method timelines and traces, per-rank causal work, overlap and
the bytes each method moved against its formula. Nothing here measures; it lays out run.py's numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labs import precision
from labs.context_parallel.params import Params, chunk_tokens
from labs.result_common import SummaryItem, Table, table_number
from labs.trace.chrome import chrome_trace_json
from labs.trace.svgplot import svg_timeline
from labs.trace.timeline import Span
from labs.words import byte_size, number, percent

if TYPE_CHECKING:
    from labs.runtime import LabContext

TITLES = {
    "ring-zigzag": "ring, zig-zag split",
    "ring-contiguous": "ring, contiguous split",
    "ring-serial": "ring, zig-zag, no overlap",
    "ulysses": "all-to-all over heads (Ulysses)",
}


def variant_artifacts(
    ctx: LabContext, params: Params, name: str, all_spans: list[Span], drawn: list[Span], device: str
) -> dict:
    """The timeline SVG of the last measured pass (`drawn`) and the Chrome trace of all passes, for one method."""
    svg, trace = f"timeline_{name}.svg", f"trace_{name}.json"
    ctx.write_text(
        svg,
        svg_timeline(
            drawn,
            title=f"{TITLES[name]}: one measured pass per rank (last of {params.steps})",
            subtitle=f"N = {params.ranks}, {params.seq_len} tokens, {'causal' if params.causal else 'no mask'}; "
            "attn K/V2 = attention of this rank's queries on rank 2's K/V block; K/V→1 ←3 = send to rank 1 and "
            "receive from rank 3, posted to completed; wait = blocked on the receive; a2a = all-to-all; "
            + ("CPU wall-clock spans on gloo" if device == "cpu" else "stream-synchronized spans on NCCL (unverified)"),
            description=f"Attention compute, K/V transfers and waits for {params.ranks} ranks: {TITLES[name]}.",
        ),
    )
    ctx.write_text(
        trace,
        chrome_trace_json(all_spans, metadata={"lab": "context-parallel", "method": name, "backend": ctx.backend}),
    )
    ctx.add_artifact(f"timeline_{name}", svg, "image/svg+xml", f"Timeline: {TITLES[name]} (measured)")
    ctx.add_artifact(f"trace_{name}", trace, "application/json", f"Chrome trace: {TITLES[name]} (JSON for Perfetto UI)")
    return {"timeline": svg, "trace": trace}


def _words(error: str) -> str:
    """An error for a summary note: the known CPU refusal said in words (its op name, one 51-letter word, would
    not wrap on a phone), anything else as raised with each long identifier cut to fit."""
    if "flash_attention_for_cpu" in error and "sharding strategy" in error:
        return (
            "PyTorch's context_parallel() runs only on CUDA attention kernels: on a CPU its attention has no way to "
            "be split across ranks, so PyTorch refuses (the lab's own ring above is what ran; PyTorch's "
            "message is in result.json)"
        )
    return " ".join(w if len(w) <= 32 else w[:30] + "…" for w in error.split())


def _short(v: float | None) -> str:
    return "without bound" if v is None else f"{number(v, 2)}x"


def answer(params: Params, variants: dict, device: str) -> str:
    """The lab's question answered in about 25 words from this run's numbers."""
    z, c, u = variants.get("ring-zigzag"), variants.get("ring-contiguous"), variants.get("ulysses")
    parts = []
    if z and c:
        mask = "Causal mask" if params.causal else "No mask"
        parts.append(
            f"{mask}: contiguous ranks' work differs {_short(c['work_imbalance'])}, zig-zag {_short(z['work_imbalance'])}"
        )
    if z:
        ov = z["overlap_ratio"]
        parts.append(f"{percent(ov, 0) if ov is not None else 'none'} of ring sends hid under attention")
    if z and u:
        parts.append(
            f"all-to-all sent {byte_size(u['send_bytes_per_rank'])} per rank, ring {byte_size(z['send_bytes_per_rank'])}"
        )
    return "; ".join(parts) + "."


def results(
    params: Params, ctx: LabContext, variants: dict, torch_cp: dict, backward: dict | None, device: str, tol: float
) -> dict:
    cpu = device == "cpu"
    note = (
        "CPU wall-clock spans; gloo sends progress on a background thread, ranks share cores"
        if cpu
        else "spans end at a stream synchronize (unverified: no GPU has run this path yet)"
    )
    summary: list[SummaryItem] = [
        SummaryItem(label="Backend", value=ctx.backend, note=ctx.environment["label"]),
        SummaryItem(
            label="Ranks N × sequence",
            value=f"{params.ranks} × {params.seq_len} tokens",
            note=f"2N = {2 * params.ranks} chunks of {chunk_tokens(params)} tokens; {params.heads} heads of {params.head_dim}",
        ),
    ]
    for name, v in variants.items():
        summary.append(
            SummaryItem(
                label=f"{TITLES[name]}: largest difference from full attention",
                value=v["max_abs_err"],
                note=f"tolerance {tol:.0e}; "
                + ("within" if v["max_abs_err"] <= tol else "OUTSIDE")
                + f"; {precision.words(ctx.environment)}",
            )
        )
    for name in ("ring-contiguous", "ring-zigzag"):
        if name in variants:
            v = variants[name]
            summary.append(
                SummaryItem(
                    label=f"{TITLES[name]}: busiest / idlest rank's causal work",
                    value=None if v["work_imbalance"] is None else round(v["work_imbalance"], 3),
                    note=f"chunk pairs needed; measured attention CPU time {_short(v['compute_time_imbalance'])}; "
                    f"pass {number(v['pass_ms'], 3)} ms"
                    + (
                        " (more ranks than free cores: an idle rank's core serves a busy one, so the pass shows the "
                        "total work and the per-rank CPU time shows its split; on GPUs every ring step waits for the "
                        "busiest rank)"
                        if cpu and name == "ring-contiguous"
                        else ""
                    ),
                )
            )
    if "ring-zigzag" in variants:
        z = variants["ring-zigzag"]
        summary.append(
            SummaryItem(
                label="Ring (zig-zag): share of the K/V transfers hidden under attention",
                value=None if z["overlap_ratio"] is None else round(100 * z["overlap_ratio"], 1),
                unit="%",
                note=f"exposed {number(z['exposed_communication_ms'], 3)} ms per rank, mean"
                + (
                    f"; without overlap the pass took {number(variants['ring-serial']['pass_ms'], 3)} ms against "
                    f"{number(z['pass_ms'], 3)} ms"
                    if "ring-serial" in variants
                    else ""
                ),
            )
        )
    for name in ("ring-zigzag", "ulysses"):
        if name in variants:
            v = variants[name]
            summary.append(
                SummaryItem(
                    label=f"{TITLES[name]}: bytes sent per rank per pass",
                    value=v["send_bytes_per_rank"],
                    unit="bytes",
                    note=f"formula {byte_size(v['formula_bytes_per_rank'])}"
                    + (
                        " = (N−1) × 2 × (S/N) × H × d × 4"
                        if name != "ulysses"
                        else " = 4 × (N−1)/N × (S/N) × H × d × 4"
                    ),
                )
            )
    if backward is not None:
        worst = max(backward["max_rel_err_dq"], backward["max_rel_err_dk"], backward["max_rel_err_dv"])
        summary.append(
            SummaryItem(
                label="Ring (zig-zag) backward: largest gradient difference from full attention",
                value=worst,
                note=f"dQ {backward['max_rel_err_dq']:.1e}, dK {backward['max_rel_err_dk']:.1e}, dV "
                f"{backward['max_rel_err_dv']:.1e} of each gradient's largest entry; tolerance {backward['tolerance']:.0e}; "
                "K/V gradients returned to their owners with p2p",
            )
        )
    summary.append(
        SummaryItem(
            label="PyTorch's own ring loop against full attention",
            value=torch_cp["ring_max_abs_err"] if torch_cp["ring_error"] is None else "did not run",
            note=_words(torch_cp["ring_error"])
            if torch_cp["ring_error"]
            else "torch's _templated_ring_attention with this device's attention op; it rotates K/V with an "
            "all-to-all (permute_tensor), not point-to-point sends",
        )
    )
    summary.append(
        SummaryItem(
            label="PyTorch's own context_parallel() on this device",
            value="runs" if torch_cp["context_parallel_error"] is None else "needs a GPU",
            note=_words(torch_cp["context_parallel_error"])
            if torch_cp["context_parallel_error"]
            else "patched SDPA ran on this device",
        )
    )
    method_rows = [
        [
            TITLES[n],
            table_number(v["pass_ms"]),
            table_number(v["max_abs_err"], 8),
            table_number(v["work_imbalance"], 3),
            table_number(v["model_work_imbalance"], 3),
            table_number(v["compute_time_imbalance"], 3),
            table_number(v["overlap_ratio"], 4),
            table_number(v["exposed_communication_ms"]),
            byte_size(v["send_bytes_per_rank"]),
            byte_size(v["formula_bytes_per_rank"]),
        ]
        for n, v in variants.items()
    ]
    rank_rows = [
        [
            TITLES[n],
            r["rank"],
            ", ".join(str(x) for x in r["chunks"]),
            r["blocks_computed"],
            r["blocks_needed"],
            number(r["flops_needed"] / 1e9, 3),
            table_number(r["compute_ms"]),
            table_number(r["compute_cpu_ms"]),
            table_number(r["communication_ms"]),
            table_number(r["wait_ms"]),
            table_number(r["overlap_ratio"], 4),
            byte_size(r["send_bytes"]),
        ]
        for n, v in variants.items()
        for r in v["ranks"]
    ]
    tables: list[Table] = [
        Table(
            title="Per method (the median pass): parity with full attention, work balance under the mask (max / min "
            "over ranks, measured and from the split's arithmetic), overlap of K/V transfers with attention, and "
            "bytes sent per rank against the formula",
            columns=[
                "method",
                "pass (ms)",
                "max |out − full|",
                "work max/min",
                "model max/min",
                "compute time max/min",
                "overlap ratio",
                "exposed comm (ms)",
                "bytes sent / rank",
                "formula",
            ],
            rows=method_rows,
        ),
        Table(
            title="Per rank (the median pass, ms): the chunks its queries hold, (query, key) chunk pairs computed and "
            "needed (the diagonal pair computed whole, needed half), attention GFLOPs needed, time",
            columns=[
                "method",
                "rank",
                "chunks",
                "pairs computed",
                "pairs needed",
                "GFLOPs needed",
                "compute",
                "compute CPU",
                "send/recv",
                "wait",
                "overlap ratio",
                "bytes sent",
            ],
            rows=rank_rows,
        ),
    ]
    return {
        "answer": answer(params, variants, device),
        "summary": summary,
        "tables": tables,
        "timing": {"kind": "cpu-wall-clock" if cpu else "cuda-stream-sync", "unit": "ms", "note": note},
        "ranks": params.ranks,
        "seq_len": params.seq_len,
        "heads": params.heads,
        "head_dim": params.head_dim,
        "chunk_tokens": chunk_tokens(params),
        "causal": params.causal,
        "tolerance": tol,
        "variants": variants,
        "torch_context_parallel": torch_cp,
        "backward": backward,
    }
