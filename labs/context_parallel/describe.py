"""context-parallel's runs in the lesson's words (torch-free): how a learner's run split its tokens, each split's
causal work imbalance and bytes sent, and how far it strayed from full attention. The app shows these through the
catalog (LabSpec.words)."""

from __future__ import annotations

from labs.spec import RunWords
from labs.words import byte_size, number


def sentences(results: dict, params: dict) -> list[str]:
    """A finished run's `results` told beside the lesson's worked example."""
    variants = results.get("variants") or {}
    if not variants:
        return []
    n = results.get("ranks") or params.get("ranks")
    mask = "causal" if results.get("causal") else "full (no mask)"
    out = [f"Your run split {number(results.get('seq_len') or 0)} tokens over {n} ranks with a {mask} mask."]
    work = [
        f"{v['split']} {number(v['work_imbalance'], 3)}×"
        for v in variants.values()
        if v.get("method") == "ring" and v.get("overlapped") and v.get("work_imbalance") is not None
    ]
    if work:
        out.append("Work max/min over ranks: " + ", ".join(work) + ".")
    sent = [
        f"{name} {byte_size(v['send_bytes_per_rank'])}"
        for name, v in variants.items()
        if v.get("send_bytes_per_rank") is not None and name in ("ring-zigzag", "ring-contiguous", "ulysses")
    ]
    if sent:
        out.append("Sent per rank per pass: " + ", ".join(sent) + ".")
    worst = max((v["max_abs_err"] for v in variants.values() if v.get("max_abs_err") is not None), default=None)
    if worst is not None:
        out.append(f"The largest difference from full attention was {number(worst, 2)}.")
    return out


WORDS = RunWords(
    nudge="to count each rank's causal work and bytes under a contiguous and a zig-zag split",
    sentences=sentences,
)
