"""fp8-step's runs in the lesson's words (torch-free): what a learner's run did, read from that run alone (its
recipe, shape, spike and counts), what tells one run from another, and what the report's evidence slot asks of a
run. The app shows these through the catalog (LabSpec.words)."""

from __future__ import annotations

from labs.spec import Ask, RunWords
from labs.words import count, number

RECIPE_WORDS = {
    "delayed": "delayed scaling (the scale comes from the amax history of earlier steps)",
    "current": "current scaling (the scale comes from the tensor being quantized)",
    "block": "block scaling (each 1×128 or 128×128 block takes its scale from its own values)",
    "mxfp8": "MXFP8 (each 32 values share a power-of-two scale taken from their own values)",
}


def _spike(recipe: dict, spike: dict) -> str:
    """What the scale did at the spike, in the terms of the recipe that ran."""
    k, factor, kind = spike["step"], number(spike["scale_factor"]), recipe.get("kind")
    clipped, before, after = spike.get("clipped_at_spike"), spike.get("scale_at_spike"), spike.get("scale_after")
    if clipped is None:  # Transformer Engine counts no clipped values
        clip = "went uncounted for clipping (Transformer Engine counts none; the job page's amax × scale says)"
    else:
        clip = "clipped nothing" if clipped == 0 else f"clipped {number(clipped)} values"
    if kind == "delayed":
        said = f"The {factor}× spike at step {k} met a scale set from earlier steps' amaxes and {clip}"
        if before is not None and after is not None and after != before:
            window = recipe.get("amax_history_len")
            said += (
                f"; at step {k + 1} the scale fell {number(before)} → {number(after)}, because the spike's amax had "
                f"entered the amax history"
                + (f" (a window of {window} steps, taking its {recipe.get('amax_compute_algo')})" if window else "")
            )
            if spike.get("clipped_after") is not None:
                said += f", and step {k + 1} clipped {number(spike['clipped_after'])}"
        return said + "."
    if kind == "current":
        said = (
            f"The {factor}× spike at step {k} {clip}: current scaling took the scale from the spiking tensor "
            "itself, so there was no stale scale to clip against"
        )
        if before is not None and after is not None:
            said += f" (its scale was {number(before)} at the spike and {number(after)} the step after)"
        return said + "."
    said = f"The {factor}× spike at step {k} {clip}: each block took its scale from its own values"
    if before is not None and after is not None:
        said += f" (the watched tensor's scale was {number(before)} at the spike and {number(after)} the step after)"
    return said + "."


def sentences(results: dict, params: dict) -> list[str]:
    """A finished run's `results` (and the `params` it ran with) told beside the lesson's worked example."""
    recipe = results.get("recipe") or {}
    kind = str(recipe.get("kind") or params.get("recipe"))
    model = results.get("model") or {}
    out = [
        f"Your latest run: {RECIPE_WORDS.get(kind, kind)}, {recipe.get('fp8_format', 'hybrid')} formats, "
        f"{results['steps']} steps of a {model.get('n_layers', '?')}-layer model {model.get('d_model', '?')} wide."
    ]
    spike = results.get("outlier")
    if spike and "scale_at_spike" in spike:
        out.append(_spike(recipe, spike))
    else:
        clip = results.get("clipping") or {}
        total, steps = clip.get("total_clipped"), clip.get("steps_with_clipping") or []
        if total:
            why = ", each time a tensor's amax outgrew the scale set from earlier steps." if kind == "delayed" else "."
            out.append(
                f"It clipped {number(total)} values in {len(steps)} of {results['steps']} steps (first at step "
                f"{steps[0]}){why}"
            )
        elif total == 0:
            out.append(f"It clipped nothing in {results['steps']} steps.")
        out.append(
            "It had no spike, so it has no counterpart yet to a spike meeting a scale: set an outlier step, as "
            "the Spike at step 20 preset does."
        )
    ref, fp8 = results["runs"]["reference"]["final_loss"], results["runs"]["fp8"]["final_loss"]
    if ref is not None and fp8 is not None:
        out.append(f"Final loss {number(fp8)} with FP8 against {number(ref)} for the higher-precision reference.")
    elif fp8 is None:
        out.append("The FP8 run diverged (its loss became NaN or infinite); the job page shows at which step.")
    acc = results.get("accumulation") or {}
    layers = [layer for layer in acc.get("layers") or [] if layer.get("fast_model_rel_error") is not None]
    if layers:
        widest = max(layers, key=lambda layer: layer["k"])
        said = (
            f"The accumulator model on its widest forward GEMM (K = {widest['k']}): a relative error of "
            f"{number(widest['fast_model_rel_error'], 2)} without promotion, "
            f"{number(widest['promote_128_rel_error'], 2)} promoting every 128 (a model, not a GPU measurement)"
        )
        if widest["k"] <= 128:
            said += f"; at K = {widest['k']} no promotion happens, so the two agree"
        out.append(said + ".")
    return out


def params_words(p: dict) -> list[str]:
    o = p.get("outlier_step")
    return [
        f"spike at step {o}" if o is not None else "no spike",
        count(p.get("steps", 0), "step"),
        str(p.get("recipe")),
    ]


def clipped(result: dict) -> str:
    """ "" when the run clipped something, else why it cannot answer the numerics item (what clipped, and when)."""
    clipping = ((result.get("results") or {}).get("clipping") or {}) if isinstance(result, dict) else {}
    total = clipping.get("total_clipped")
    return "" if isinstance(total, int | float) and total > 0 else "it clipped nothing"


WORDS = RunWords(
    nudge="with an outlier step set (say step 20 of 40) to watch a stale scale clip a spike and then adapt",
    sentences=sentences,
    key_params=("outlier_step", "steps", "recipe"),
    params_words=params_words,
    asks={
        # The clipping and the scale's answer to a spike (checks.py "clipping-scales") need an outlier step, and only
        # delayed scaling clips at one (current, block and MXFP8 scale from the tensor being cast, so the spike fits).
        "evidence": Ask(
            "a delayed-scaling run with an outlier step, so the clipping and the scale's answer show (the lesson's "
            "“step 20 of 40”)",
            lambda p: p.get("outlier_step") is not None and p.get("recipe") == "delayed",
            clipped,
        ),
    },
)
