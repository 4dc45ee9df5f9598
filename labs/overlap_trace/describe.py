"""overlap-trace's runs in the lesson's words (torch-free): what a learner's run did, what tells one run from
another, and what the report's evidence slot asks of a run. The app shows these through the catalog
(LabSpec.words)."""

from __future__ import annotations

from labs.spec import Ask, RunWords
from labs.words import count, number, percent


def _pct(x: float | None) -> str:
    return "—" if x is None else percent(x, 0)


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{number(x, 3)} ms"


def sentences(r: dict) -> list[str]:
    """A finished run's `results` told beside the lesson's worked example."""
    s = r["schedules"]
    out: list[str] = []
    if "windowed" in s:
        w = s["windowed"]
        said = f"Your windowed schedule hid {_pct(w['overlap_ratio'])} of the all-gather under independent compute, leaving {_ms(w['exposed_comm_ms'])} exposed per step"  # fmt: skip
        if "immediate" in s:
            said += f"; waiting at once hid {_pct(s['immediate']['overlap_ratio'])} ({_ms(s['immediate']['exposed_comm_ms'])} exposed)"  # fmt: skip
        out.append(said + ".")
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
