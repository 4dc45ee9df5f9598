"""Checks of an fp8-step result: BF16 vs FP8 from one seed (evidence), or the static FP8 trace of a run on
hardware without FP8 (the fallback slot)."""

from __future__ import annotations

from labs.checks.common import ReadArtifact, check, finite

# FP8 (E4M3) keeps 3 mantissa bits, a 2**-3 relative step per value; summed into a loss the rounding errors
# mostly cancel, so a healthy recipe keeps the loss within a few percent of BF16 at every step.
LOSS_TRACK_REL = 0.05
# Beyond three times that, something structural (overflow, stale scales) is at work, not rounding.
LOSS_DIVERGED_REL = 0.15


def checks(slot_kind: str, result: dict, read_artifact: ReadArtifact | None) -> list[dict]:
    return static_trace(result) if slot_kind == "fallback" else numerics(result)


def numerics(result: dict) -> list[dict]:
    r = result["results"]
    steps = r.get("steps")
    runs = r.get("runs") or {}
    ref, fp8 = (runs.get("reference") or {}).get("loss") or [], (runs.get("fp8") or {}).get("loss") or []
    out = []
    seed = (result.get("params") or {}).get("seed")
    if ref and len(ref) == len(fp8) == steps and seed is not None:
        out.append(check("same-seed-steps", "pass", f"BF16 and FP8 ran from seed {seed} for the same {steps} steps."))
    else:
        out.append(
            check(
                "same-seed-steps",
                "fail",
                f"BF16 ran {len(ref)} steps and FP8 {len(fp8)} (the lab asked for {steps}); "
                "the runs cannot be compared step by step.",
            )
        )
    if ref and fp8 and len(ref) == len(fp8):
        if not all(finite(x) for x in fp8):
            bad = next(i for i, x in enumerate(fp8) if not finite(x))
            out.append(check("loss-tracks", "fail", f"The FP8 loss stopped being a finite number at step {bad}."))
        else:
            gaps = [abs(f - b) / max(abs(b), 1e-12) for b, f in zip(ref, fp8) if finite(b)]
            worst = max(gaps) if gaps else 0.0
            step = gaps.index(worst) if gaps else 0
            if worst <= LOSS_TRACK_REL:
                status = "pass"
            elif worst <= LOSS_DIVERGED_REL:
                status = "warn"
            else:
                status = "fail"
            why = f"tolerance {LOSS_TRACK_REL:.0%}, since E4M3 rounding mostly cancels in a loss"
            if status == "pass":
                sentence = f"FP8 loss stays within {worst:.2%} of BF16 at every step ({why})."
            else:
                sentence = f"FP8 loss departs from BF16 by up to {worst:.2%} at step {step}, beyond the {why}."
            out.append(check("loss-tracks", status, sentence))
    clipping = r.get("clipping") or {}
    quantizers = r.get("quantizers") or []
    with_history = [q for q in quantizers if q.get("scale") and q.get("amax") and q.get("clipped") is not None]
    if "total_clipped" in clipping and clipping.get("clipped_per_step") is not None and with_history:
        out.append(
            check(
                "clipping-scales",
                "pass",
                f"Clip counts ({clipping['total_clipped']} values clipped) and the amax/scale "
                f"history of {len(with_history)} FP8 tensors are recorded.",
            )
        )
    else:
        missing = [
            n
            for n, ok in (("clip counts", "total_clipped" in clipping), ("scale history", bool(with_history)))
            if not ok
        ]
        out.append(check("clipping-scales", "fail", f"Missing from the result: {', '.join(missing)}."))
    return out


def static_trace(result: dict) -> list[dict]:
    r = result["results"]
    recipe, model = r.get("recipe") or {}, r.get("model") or {}
    env = result.get("environment") or {}
    out = []
    if recipe.get("kind") and recipe.get("formats"):
        fmts = ", ".join(f"{k} {v}" for k, v in recipe["formats"].items())
        out.append(check("recipe", "pass", f"Recipe stated: {recipe['kind']} scaling ({fmts})."))
    else:
        out.append(check("recipe", "fail", "The FP8 recipe (scaling kind and formats) is not stated."))
    layers = model.get("fp8_layers") or []
    out.append(
        check(
            "shapes",
            "pass" if layers else "fail",
            f"Shapes traced for {len(layers)} FP8 layers." if layers else "No per-layer shapes are traced.",
        )
    )
    out.append(
        check(
            "labelled",
            "pass" if env.get("label") else "fail",
            "The trace carries its honesty label."
            if env.get("label")
            else "The trace is not labelled with how it was made.",
        )
    )
    return out
