"""fp8-step's runs in the lesson's words (torch-free): what a learner's run did, what tells one run from another,
and what the report's evidence slot asks of a run. The app shows these through the catalog (LabSpec.words)."""

from __future__ import annotations

from labs.spec import Ask, RunWords
from labs.words import count, number


def sentences(r: dict) -> list[str]:
    """A finished run's `results` told beside the lesson's worked example."""
    out: list[str] = []
    spike = r.get("outlier")
    if spike and spike.get("clipped_at_spike") is not None:
        k = spike["step"]
        said = f"Your run clipped {number(spike['clipped_at_spike'])} values at step {k}, where the activation spiked {number(spike['scale_factor'])}×"  # fmt: skip
        before, after = spike.get("scale_at_spike"), spike.get("scale_after")
        if before is not None and after is not None and after != before:
            said += (
                f", and the scale adapted at step {k + 1}: {number(before)} → {number(after)}, because the spike's amax "
                f"had entered the history"
            )
            if spike.get("clipped_after") is not None:
                said += f" (step {k + 1} clipped {number(spike['clipped_after'])})"
        out.append(said + ".")
    else:
        clip = r.get("clipping") or {}
        total, steps = clip.get("total_clipped"), clip.get("steps_with_clipping") or []
        if total:
            out.append(f"Your run clipped {number(total)} values in {len(steps)} of {r['steps']} steps (first at step {steps[0]}).")  # fmt: skip
        elif total == 0:
            out.append(f"Your run clipped nothing in {r['steps']} steps: no spike met a stale scale.")
    ref, fp8 = r["runs"]["reference"]["final_loss"], r["runs"]["fp8"]["final_loss"]
    if ref is not None and fp8 is not None:
        out.append(
            f"Final loss {number(fp8)} with the FP8 recipe against {number(ref)} for the higher-precision reference."
        )
    elif fp8 is None:
        out.append("The FP8 run diverged (its loss became NaN or infinite); the job page shows at which step.")
    return out


def params_words(p: dict) -> list[str]:
    o = p.get("outlier_step")
    return [
        f"spike at step {o}" if o is not None else "no spike",
        count(p.get("steps", 0), "step"),
        str(p.get("recipe")),
    ]


WORDS = RunWords(
    nudge="with an outlier step set (say step 20 of 40) to watch a stale scale clip a spike and then adapt",
    sentences=sentences,
    key_params=("outlier_step", "steps", "recipe"),
    params_words=params_words,
    asks={
        # The clipping and the scale's answer to a spike (checks.py "clipping-scales") need an outlier step.
        "evidence": Ask(
            "a run with an outlier step, so the clipping and the scale's answer show (the lesson's “step 20 of 40”)",
            lambda p: p.get("outlier_step") is not None,
        ),
    },
)
