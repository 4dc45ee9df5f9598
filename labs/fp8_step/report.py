"""fp8-step's page: the summary, tables and charts built from the evidence (no experiment logic here).

The app renders `summary` and `tables` generically; the two SVG charts are written as artifacts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labs import words
from labs.fp8_step.evidence import finite
from labs.fp8_step.params import Params
from labs.result_common import SummaryItem, Table
from labs.trace import svgplot
from labs.trace.chart import Series

if TYPE_CHECKING:
    from labs.runtime import LabContext

MAX_LOSS_RINGS = 10  # clipped steps ringed on the loss chart
# A healthy recipe keeps the FP8 loss within this fraction of BF16's at every step; the grader's loss-tracks
# check (labs/fp8_step/checks.py LOSS_TRACK_REL) uses the same 5%, and the answer words it the same way.
LOSS_TRACK_REL = 0.05


def loss_gap(ref: list[float | None], f8: list[float | None]) -> tuple[float | None, int | None, int | None]:
    """(worst |FP8 - BF16| / |BF16| over the steps, its step, the first step FP8 was not finite)."""
    bad = next((i for i, v in enumerate(f8) if v is None), None)
    gaps = [
        (abs(f - b) / max(abs(b), 1e-12), i) for i, (b, f) in enumerate(zip(ref, f8)) if b is not None and f is not None
    ]
    if not gaps:
        return None, None, bad
    worst, step = max(gaps)
    return worst, step, bad


def loss(v: float) -> str:
    """A loss as the answer quotes it: at most three decimals, 2.30259 -> "2.303"."""
    return words.number(v, 4, decimals=3)


def percent(x: float) -> str:
    """0.0123 -> "1.2%", 1.7e-05 -> "0.0017%" (not "0.0%"), 0 -> "0%"."""
    if x == 0:
        return "0%"
    return words.percent(x, 1) if x >= 0.001 else f"{words.number(100 * x, 2)}%"


def answer(
    p: Params,
    backend: str,
    runs: dict,
    outlier: dict | None,
    total_clipped: int | None,
    clip_steps: list[int],
    quantizers: list[dict],
) -> str:
    """The lab's question ("Does an FP8 recipe train like BF16, and what do its scales do when an
    activation spikes?") answered in one sentence from this run's numbers."""
    how = "Transformer Engine" if backend == "te" else "emulated"
    who = f"FP8 ({p.recipe}, {how})"
    ref, f8 = runs["reference"], runs["fp8"]
    worst, step, bad = loss_gap(ref["loss"], f8["loss"])
    if bad is not None:
        return f"{who} did not train like BF16: its loss stopped being a finite number at step {bad}."
    final = f"final loss {loss(f8['final_loss'])} vs {loss(ref['final_loss'])}"
    if worst is not None and worst <= LOSS_TRACK_REL:
        first = f"{who} trained like BF16: its loss stayed within {percent(worst)} of BF16's at every step ({final})"
    else:
        first = (
            f"{who} drifted from BF16: its loss was up to {percent(worst or 0)} off at step {step}, beyond the "
            f"{words.percent(LOSS_TRACK_REL, 0)} a healthy recipe keeps ({final})"
        )
    return first + "; " + _scale_clause(p, backend, outlier, total_clipped, clip_steps, quantizers) + "."


def _scale_clause(
    p: Params, backend: str, outlier: dict | None, total_clipped: int | None, clip_steps: list[int], quantizers: list
) -> str:
    """What the scales did: at the spike if there was one, else over the run."""
    if outlier is None or "scale_at_spike" not in outlier:
        if total_clipped is None:
            return "Transformer Engine counts no clipped values (run the cpu backend for counts)"
        if total_clipped == 0:
            return "no value clipped at any step"
        if p.recipe == "delayed":
            return (
                f"delayed scaling clipped {total_clipped} values over {len(clip_steps)} steps, each time a "
                "tensor's amax outgrew the scale set from earlier steps"
            )
        return f"{total_clipped} values clipped over {len(clip_steps)} steps"
    k = outlier["step"]
    if p.recipe != "delayed":
        clipped = outlier.get("clipped_at_spike")
        how = (
            "the scale comes from the tensor being quantized"
            if p.recipe == "current"
            else "each block takes its scale from its own values"
        )
        return (
            f"the {words.number(outlier['scale_factor'])}x spike at step {k} clipped {clipped if clipped is not None else 'nothing'}"
            + (f" ({how})" if not clipped else "")
        )
    if outlier.get("clipped_at_spike") is not None:
        return (
            f"the {words.number(outlier['scale_factor'])}x spike at step {k} clipped {outlier['clipped_at_spike']} values with the "
            f"scale set before it, and the scale caught up at step {k + 1} ({outlier['clipped_after']} clipped)"
        )
    # te: no clip counts, but amax x scale against the format's max says whether the spike saturated.
    amax, scale = outlier.get("amax_at_spike"), outlier.get("scale_at_spike")
    fmax = next((q["fp8_max"] for q in quantizers if q["name"] == outlier["target"]), None)
    if amax is None or scale is None or not fmax:
        return f"the spike at step {k} was not recorded on this backend"
    ratio = amax * scale / fmax
    after = outlier.get("scale_after")
    caught = f"; the scale dropped to {words.number(after)} at step {k + 1}" if after is not None else ""
    return (
        f"the spike at step {k} pushed amax x scale to {words.number(ratio, 3)}x the FP8 maximum "
        f"({'it saturated' if ratio > 1 else 'within range'}; TE counts no clipped values){caught}"
    )


def where_fp8_pays(p: Params) -> str:
    """Where FP8 beats BF16 on a GPU, said with this run's own GEMM size (labs.parallel.costmodel, H100 SXM).

    An FP8 GEMM runs on tensor cores at twice BF16's peak, but its inputs must first be cast to FP8 and their
    amax taken: extra kernels that read every input element. FP8 pays only where the GEMM time it saves
    exceeds that casting (plus the extra kernels' launches, which the estimate leaves out); on small GEMMs
    it is slower than BF16.
    """
    from labs.parallel.costmodel import NODES, gemm_s

    node = NODES["H100-SXM"]
    m, n, k = p.batch * p.seq, p.ffn, p.d_model  # the MLP's first GEMM: (tokens, d_model) @ (d_model, ffn)
    saved_us = (gemm_s(m, n, k, node, "bf16") - gemm_s(m, n, k, node, "fp8")) * 1e6
    # Cast both inputs: read BF16 (2 bytes) for the amax and again for the cast, write FP8 (1 byte).
    cast_us = (m * k + k * n) * (2 + 2 + 1) / node.hbm_bytes_per_s * 1e6
    pays = saved_us > 2 * cast_us  # launches come on top: ask for a clear margin before saying it pays
    return (
        f"Where FP8 pays: on an H100, FP8 would save about {words.number(saved_us, 2)} us of this run's largest GEMM "
        f"({m} x {k} by {k} x {n}) and spend about {words.number(cast_us, 2)} us casting its inputs, before kernel "
        "launches (labs.parallel.costmodel), so "
        + (
            "FP8 should come out ahead at this size"
            if pays
            else "FP8 is expected to be no faster, or slower, than BF16 at this size; it pays once GEMMs are large "
            "enough that the saved time dwarfs the casts"
        )
    )


def timing_note(backend: str, p: Params) -> str:
    """What the step times mean on this backend, and where FP8 would pay."""
    if backend == "cpu":
        return (
            "CPU timings: FP8 is emulated in software and BF16 is not native on most CPUs either, so this ratio "
            "says nothing about GPU speed (and other load on the machine moves it). " + where_fp8_pays(p)
        )
    if backend == "torch-cuda":
        return "GPU timings with plain PyTorch: FP8 is emulated, not run on FP8 tensor cores. " + where_fp8_pays(p)
    return "GPU timings with Transformer Engine FP8 kernels. " + where_fp8_pays(p)


def memory_note(cpu: bool) -> str:
    """How peak memory was measured, or why it was not."""
    if not cpu:
        return (
            "torch.cuda.max_memory_allocated during each run minus what was allocated when it started "
            "(the weights of both models), i.e. activations, gradients, optimizer state and FP8 copies"
        )
    return (
        "not measured on CPU: PyTorch keeps no peak-allocation counter for CPU tensors, and the process RSS "
        "would mix both runs and the interpreter"
    )


def loss_rings(clipped_per_step: list[int] | None) -> tuple[list[int], str, str]:
    """The loss chart's ringed steps, its legend's word for them and its caption's: (steps, label, caption).

    Delayed scaling clips a few values on many steps while amaxes grow; only the MAX_LOSS_RINGS worst steps are
    ringed so a spike stands out (every step's count is in results.clipping), and then the legend says so, on the
    drawn chart and on the page's redrawing alike, so a ring count never reads as the count of steps that clipped.
    """
    clipping = [(c, i) for i, c in enumerate(clipped_per_step or []) if c]
    worst = sorted(clipping)[-MAX_LOSS_RINGS:]
    label = (
        "clipped step"
        if len(worst) == len(clipping)
        else f"clipped step: the {len(worst)} most-clipped of {len(clipping)}"
    )
    caption = (
        f"red rings mark the {len(worst)} FP8 steps with the most clipped values (of {len(clipping)} steps that "
        f"clipped, {sum(c for c, _ in clipping)} values in all, counted over all FP8 tensors)"
        if clipping
        else "no FP8 step clipped, so no step is ringed"
    )
    return sorted(i for _, i in worst), label, caption


def charts(
    ctx: LabContext,
    p: Params,
    ref_losses: list[float],
    f8_losses: list[float],
    clipped_per_step: list[int] | None,
    focus: dict | None,
) -> None:
    """The loss curves of both runs and, for the tensor worth watching, its amax/scale history."""
    xs = list(range(p.steps))
    clipped_idx, ring_label, rings = loss_rings(clipped_per_step)
    loss_svg = svgplot.line_chart(
        [
            Series("BF16 reference", xs, finite(ref_losses)),
            Series(f"FP8 {p.recipe}", xs, finite(f8_losses), dashed=True, rings=clipped_idx),
        ],
        title="Training loss: BF16 reference vs FP8",
        xlabel="step",
        ylabel="cross-entropy loss",
        subject="training loss",
        description=f"Loss per step for both runs, FP8 {p.recipe} ({p.fp8_format}); {rings}.",
        ring_label=ring_label,
    )
    ctx.write_text("loss.svg", loss_svg)
    ctx.add_artifact("loss_curves", "loss.svg", "image/svg+xml", "Loss curves, BF16 vs FP8")
    if focus is None:
        return
    marks = [i for i, c in enumerate(focus["clipped"] or []) if c]
    scaled = [a * s if a is not None and s is not None else None for a, s in zip(focus["amax"], focus["scale"])]
    hist_svg = svgplot.line_chart(
        [
            Series("amax (unscaled)", focus["steps"], focus["amax"], rings=marks),
            Series("scale", focus["steps"], focus["scale"]),
            Series("amax x scale", focus["steps"], scaled, rings=marks),
            Series(
                f"{focus['format'].upper()} max", focus["steps"], [focus["fp8_max"]] * len(focus["steps"]), dashed=True
            ),
        ],
        title=f"amax and scale history: {focus['name']}",
        xlabel="step",
        ylabel="value",
        log_y=True,
        subject=f"amax and scale history of {focus['name']}",
        description=(
            "Per-step amax of the tensor, the scale used that step, and their product; where the product "
            "rises above the format's max the tensor clipped (red rings)."
        ),
    )
    ctx.write_text("amax_scale.svg", hist_svg)
    ctx.add_artifact("amax_scale_history", "amax_scale.svg", "image/svg+xml", f"amax/scale history of {focus['name']}")


def summary(
    p: Params,
    runs: dict,
    ratio: float | None,
    timing_note: str,
    total_clipped: int | None,
    total_underflow: int | None,
    clip_steps: list[int],
    outlier: dict | None,
    mem_note: str,
) -> list[SummaryItem]:
    """The headline numbers the page shows first."""
    ref, f8 = runs["reference"], runs["fp8"]
    gap = None if ref["final_loss"] is None or f8["final_loss"] is None else f8["final_loss"] - ref["final_loss"]
    out: list[SummaryItem] = [
        SummaryItem(label="FP8 recipe", value=f"{p.recipe} / {p.fp8_format}"),
        SummaryItem(label="Final loss, BF16 reference", value=ref["final_loss"]),
        SummaryItem(label="Final loss, FP8", value=f8["final_loss"]),
        SummaryItem(label="Loss gap (FP8 - BF16)", value=gap),
        SummaryItem(label="Step time, BF16", value=ref["ms_per_step"], unit="ms"),
        SummaryItem(label="Step time, FP8", value=f8["ms_per_step"], unit="ms"),
        SummaryItem(label="FP8 / BF16 step time", value=ratio, unit="x", note=timing_note),  # "this ratio"
        SummaryItem(label="Clipped values (all FP8 tensors, all steps)", value=total_clipped),
        SummaryItem(label="Values flushed to zero", value=total_underflow),
        SummaryItem(label="Steps with clipping", value=len(clip_steps) if total_clipped is not None else None),
    ]
    for name, r in (("BF16", ref), ("FP8", f8)):
        g = r["generation"]
        total = len(g["samples"]) * g["generated_len"]
        out.append(
            SummaryItem(
                label=f"Greedy generation continues the stride, {name}",
                value=g["accuracy"],
                unit="fraction of tokens",
                note=f"{round(g['accuracy'] * total)} of {total} generated tokens follow the prompt's stride",
            )
        )
    if ref["peak_memory_bytes"] is None:
        out.append(SummaryItem(label="Peak memory", value=None, note=mem_note))
    else:
        out.append(SummaryItem(label="Peak memory, BF16", value=ref["peak_memory_bytes"], unit="bytes", note=mem_note))
        out.append(SummaryItem(label="Peak memory, FP8", value=f8["peak_memory_bytes"], unit="bytes"))
    if outlier and "clipped_at_spike" in outlier:
        out.append(
            SummaryItem(
                label=f"Spike at step {outlier['step']}: clipped then / next step",
                value=f"{outlier['clipped_at_spike']} / {outlier['clipped_after']}",
                note=f"scale {words.number(outlier['scale_at_spike'])} at the spike, {words.number(outlier['scale_after'])} after"
                if outlier.get("scale_after") is not None
                else "",
            )
        )
    return out


def tables(
    p: Params,
    runs: dict,
    grad_err: list[dict],
    quantizers: list[dict],
    timing_kind: str,
    accumulation: dict | None = None,
) -> list[Table]:
    """Loss per step, step-0 gradient error, every FP8 tensor, step time and memory, generation samples."""
    every = max(1, p.steps // 20)
    idx = sorted(set(range(0, p.steps, every)) | {p.steps - 1})
    ref_l, f8_l = runs["reference"]["loss"], runs["fp8"]["loss"]
    tables: list[Table] = [
        Table(
            title="Loss per step" if every == 1 else f"Loss every {every} steps",
            columns=["step", "BF16", "FP8"],
            rows=[[i, ref_l[i], f8_l[i]] for i in idx],
        ),
        Table(
            title="Weight-gradient relative error vs BF16 at step 0 (delayed scaling starts from scale 1, "
            "before any amax history exists)"
            if p.recipe == "delayed"
            else "Weight-gradient relative error vs BF16 at step 0",
            columns=["layer", "relative error"],
            rows=[[g["layer"], g["rel_error"]] for g in grad_err],
        ),
        Table(
            title="FP8 tensors",
            columns=["tensor", "format", "last amax", "last scale", "clipped (all steps)", "flushed to zero"],
            rows=[
                [
                    q["name"],
                    q["format"],
                    q["amax"][-1] if q["amax"] else None,
                    q["scale"][-1] if q["scale"] else None,
                    q["total_clipped"],
                    q["total_underflow"],
                ]
                for q in quantizers
            ],
        ),
        Table(
            title=f"Step time ({timing_kind.upper()}) and memory",
            columns=["run", "ms/step", "peak memory (bytes)"],
            rows=[[r["label"], r["ms_per_step"], r["peak_memory_bytes"]] for r in runs.values()],
        ),
        Table(
            title="Greedy generation",
            columns=["run", "prompt", "generated", "stride", "correct"],
            rows=[
                [
                    r["label"],
                    " ".join(map(str, s["prompt"])),
                    " ".join(map(str, s["generated"])),
                    s["stride"],
                    f"{s['correct']}/{r['generation']['generated_len']}",
                ]
                for r in runs.values()
                for s in r["generation"]["samples"]
            ],
        ),
    ]
    if accumulation is not None:
        tables.append(
            Table(
                title="Forward GEMM accumulation, MODEL: error vs exact FP32 of the same FP8 operands "
                f"({accumulation['model']})",
                columns=["layer", "K", "fast (no promotion)", "promoted every 128", "FP8 rounding itself"],
                rows=[
                    [
                        a["layer"],
                        a["k"],
                        a["fast_model_rel_error"],
                        a["promote_128_rel_error"],
                        a["fp8_inputs_rel_error"],
                    ]
                    for a in accumulation["layers"]
                ]
                + [
                    [
                        f"demo: positive E4M3 values, K={d['k']}",
                        d["k"],
                        d["fast"],
                        d["promote_128"],
                        "",
                    ]
                    for d in accumulation["demo"]
                ],
            )
        )
    return tables
