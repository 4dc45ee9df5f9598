"""Checks of an overlap-trace result: the immediate-wait schedule overlaps (almost) nothing, the windowed one
overlaps more, and the timeline covers every rank in every schedule."""

from __future__ import annotations

from labs.checks.common import ReadArtifact, check, ranks_covered

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
    out.append(ranks_covered(result, schedules, read_artifact, kind="Schedule", kinds="schedules", span_cat=None))
    return out
