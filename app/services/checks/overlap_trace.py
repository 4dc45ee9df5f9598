"""Checks of an overlap-trace result: the immediate-wait schedule overlaps (almost) nothing, the windowed one
overlaps more, and the timeline covers every rank in every schedule."""

from __future__ import annotations

import json

from app.services.checks.common import ArtifactUnreadable, ReadArtifact, check

# An all-gather waited on at once leaves no window; a few percent of "overlap" is timer granularity at the
# span edges (CPU clocks, CUDA event resolution), not work.
IMMEDIATE_MAX_OVERLAP = 0.05


def checks(slot_kind: str, result: dict, read_artifact: ReadArtifact | None) -> list[dict]:
    return timeline(result, read_artifact)


def timeline(result: dict, read_artifact: ReadArtifact | None) -> list[dict]:
    r = result["results"]
    env = result.get("environment") or {}
    cpu = bool(env.get("emulated"))
    schedules = r.get("schedules") or {}
    out = []
    imm, win = schedules.get("immediate"), schedules.get("windowed")
    if not imm or not win:
        missing = [n for n, s in (("immediate", imm), ("windowed", win)) if not s]
        out.append(
            check(
                "overlap", "fail", f"Run both the immediate and the windowed schedule; missing: {', '.join(missing)}."
            )
        )
    else:
        imm_ratios = [rk.get("overlap_ratio") or 0.0 for rk in imm.get("ranks") or []]
        win_ratios = [rk.get("overlap_ratio") or 0.0 for rk in win.get("ranks") or []]
        worst_imm = max(imm_ratios, default=0.0)
        if worst_imm <= IMMEDIATE_MAX_OVERLAP:
            out.append(
                check(
                    "immediate-near-zero",
                    "pass",
                    f"The immediate-wait schedule overlaps at most {worst_imm:.1%} on any rank: "
                    f"near zero (≤ {IMMEDIATE_MAX_OVERLAP:.0%}, timer granularity), as an async call waited on at once should.",
                )
            )
        else:
            out.append(
                check(
                    "immediate-near-zero",
                    "warn" if cpu else "fail",
                    f"The immediate-wait schedule shows {worst_imm:.1%} overlap on some rank, above the {IMMEDIATE_MAX_OVERLAP:.0%} "
                    "that timer granularity explains" + (" (CPU wall-clock spans are noisy)." if cpu else "."),
                )
            )
        mean_imm = sum(imm_ratios) / max(len(imm_ratios), 1)
        mean_win = sum(win_ratios) / max(len(win_ratios), 1)
        if mean_win > mean_imm:
            out.append(
                check(
                    "windowed-more",
                    "pass",
                    f"The windowed schedule overlaps more: {mean_win:.1%} vs {mean_imm:.1%} on average over ranks.",
                )
            )
        else:
            out.append(
                check(
                    "windowed-more",
                    "warn" if cpu else "fail",
                    f"The windowed schedule does not overlap more ({mean_win:.1%} vs {mean_imm:.1%})"
                    + (
                        "; on CPU, ranks share cores and gloo's thread can hide the window, so read the timeline."
                        if cpu
                        else "; the window's work may not be independent or too short."
                    ),
                )
            )
    out.append(_check_ranks_covered(result, schedules, read_artifact))
    return out


def _check_ranks_covered(result: dict, schedules: dict, read_artifact: ReadArtifact | None) -> dict:
    n = (result.get("params") or {}).get("ranks") or result["results"].get("ranks")
    if not isinstance(n, int) or n < 1:
        return check("every-rank", "fail", "The number of ranks is not stated.")
    want = set(range(n))
    for name, s in schedules.items():
        got = {rk.get("rank") for rk in s.get("ranks") or []}
        if got != want:
            return check("every-rank", "fail", f"Schedule {name} reports ranks {sorted(got)}; expected 0..{n - 1}.")
        trace_name = (s.get("artifacts") or {}).get("trace")
        if trace_name and read_artifact is not None:
            artifact = next(
                (
                    a["name"]
                    for a in result.get("artifacts", [])
                    if a.get("path") == trace_name or a.get("name") == trace_name
                ),
                trace_name,
            )
            try:
                events = json.loads(read_artifact(artifact)).get("traceEvents", [])
            except ArtifactUnreadable as exc:
                return check("every-rank", "not_gradable", f"The {name} trace could not be read: {exc}.")
            except (ValueError, AttributeError):
                return check("every-rank", "fail", f"The {name} trace is not Chrome trace JSON.")
            pids = {e.get("pid") for e in events if isinstance(e, dict) and e.get("ph") == "X"}
            if not want <= pids:
                return check(
                    "every-rank",
                    "fail",
                    f"The {name} trace has spans for ranks {sorted(p for p in pids if isinstance(p, int))}; "
                    f"expected every rank 0..{n - 1}.",
                )
    return check(
        "every-rank", "pass", f"The timeline covers every rank (0..{n - 1}) in all {len(schedules)} schedules."
    )
