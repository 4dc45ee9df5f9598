"""overlap-trace's runs in the lesson's words (torch-free): what a learner's run did, read from that run alone,
what tells one run from another, and what the report's evidence slot asks of a run. The app shows these through
the catalog (LabSpec.words)."""

from __future__ import annotations

from labs.spec import Ask, RunWords
from labs.words import count, ms, whole_percent


def sentences(results: dict, params: dict) -> list[str]:
    """A finished run's `results` told beside the lesson's worked example."""
    s = results["schedules"]
    out: list[str] = []
    if "windowed" in s:
        w, im = s["windowed"], s.get("immediate")
        said = (
            f"Your windowed schedule hid {whole_percent(w['overlap_ratio'])} of the all-gather under independent "
            f"compute, leaving {ms(w['exposed_comm_ms'])} exposed per step"
        )
        if im is not None:
            said += f"; waiting at once hid {whole_percent(im['overlap_ratio'])} ({ms(im['exposed_comm_ms'])} exposed)"
        out.append(said + ".")
    elif "immediate" in s:
        out.append(
            f"Your run waited at once: it hid {whole_percent(s['immediate']['overlap_ratio'])} of the all-gather. It "
            "ran no windowed schedule, so it has no overlap to compare yet."
        )
    if "dependent" in s:
        out.append("The dependent schedule reads the gathered tensor, so it had to wait: nothing of it can overlap.")
    return out


def params_words(p: dict) -> list[str]:
    schedules = p.get("schedules") or []
    return [f"{', '.join(map(str, schedules))} schedule{'s' if len(schedules) != 1 else ''}",
            count(p.get("ranks", 0), "rank")]  # fmt: skip


WORDS = RunWords(
    nudge="to see how much of the all-gather your windowed schedule hides, against waiting at once",
    sentences=sentences,
    key_params=("schedules", "ranks"),
    params_words=params_words,
    asks={
        # checks.py compares the two: the immediate wait overlaps (almost) nothing, the windowed one more.
        "evidence": Ask(
            "a run of both the immediate and the windowed schedule",
            lambda p: {"immediate", "windowed"} <= set(p.get("schedules") or []),
        ),
    },
)
