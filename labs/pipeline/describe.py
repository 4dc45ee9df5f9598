"""pipeline's runs in the lesson's words (torch-free): how long a learner's stages idled under each schedule,
beside the formula, and how many micro-batches each held at its peak. The app shows these through the catalog
(LabSpec.words)."""

from __future__ import annotations

from labs.spec import RunWords
from labs.words import whole_percent

SCHEDULE_WORDS = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved-1f1b": "interleaved 1F1B",
    "zero-bubble": "zero-bubble",
}


def sentences(results: dict, params: dict) -> list[str]:
    """A finished run's `results` told beside the lesson's worked example."""
    schedules = results.get("schedules") or {}
    if not schedules:
        return []
    p, m = results.get("ranks") or params.get("ranks"), results.get("microbatches") or params.get("microbatches")
    idle = []
    for name, s in schedules.items():
        model = s.get("formula_step_fraction")
        idle.append(
            f"{SCHEDULE_WORDS.get(name, name)} {whole_percent(s['bubble_fraction'])}"
            + (f" (formula {whole_percent(model)})" if model is not None else "")
        )
    out = [f"Your run, p = {p} stages and m = {m} micro-batches, idled: " + ", ".join(idle) + " of its step."]
    peaks = ", ".join(f"{SCHEDULE_WORDS.get(n, n)} {s['peak_microbatches_in_flight']}" for n, s in schedules.items())
    out.append(f"Micro-batches held at the peak: {peaks}.")
    return out


WORDS = RunWords(nudge="to measure your own stages' bubble against the formula", sentences=sentences)
