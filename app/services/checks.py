"""Automatic checks of a lab report's evidence: pure functions over a lab's result.json.

Every check returns {"check", "status", "sentence"} with status one of

    pass          the evidence shows what the lab asks for
    warn          present but weak, or blurred by CPU timings; the grader decides
    fail          the evidence contradicts the claim (or is missing)
    not_gradable  an infrastructure problem (job failed, result or artifact unreadable): never the learner's fault

`check_item(slot, source)` runs the checks that fit an evidence slot and rolls them up. Checks run on
submit and again on regrade; they read only the result and, for timelines, the trace artifacts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from labs.runtime import validate_result

STATUSES = ("pass", "warn", "fail", "not_gradable")

# ---- tolerances, each with the reason it is what it is

# FP8 (E4M3) keeps 3 mantissa bits, a 2**-3 relative step per value; summed into a loss the rounding errors
# mostly cancel, so a healthy recipe keeps the loss within a few percent of BF16 at every step.
LOSS_TRACK_REL = 0.05
# Beyond three times that, something structural (overflow, stale scales) is at work, not rounding.
LOSS_DIVERGED_REL = 0.15
# An all-gather waited on at once leaves no window; a few percent of "overlap" is timer granularity at the
# span edges (CPU clocks, CUDA event resolution), not work.
IMMEDIATE_MAX_OVERLAP = 0.05
# TP parity: the same limits the tp-sweep lab states (labs/tp_sweep.py TOLERANCES); a test keeps them equal.
TP_PARITY = {
    "FP32_REORDER": (1e-5, "fp32 partial sums are added across ranks in another order: a few ulps of the largest term"),
    "FP8_PER_SHARD_SCALE": (
        0.125,
        "each rank scales its own shard to FP8, so values land on another E4M3 grid (2**-3 step)",
    ),
}
# A trace artifact larger than this is not parsed (it would only be a timeline of a few ranks).
MAX_TRACE_BYTES = 20 * 1024 * 1024


@dataclass
class Source:
    """Where one evidence item's result comes from: a job or an uploaded bundle."""

    kind: str  # job | bundle
    id: int
    result: dict | None = None
    problem: str | None = None  # an infrastructure reason the result cannot be judged
    root: Path | None = None  # the bundle folder holding result.json and its artifacts
    label: str = ""
    read_artifact: Callable[[str], bytes] | None = field(default=None, repr=False)

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.id}"


class ArtifactUnreadable(Exception):
    """An artifact the result lists cannot be read: an infrastructure problem, not the learner's."""


def _c(check: str, status: str, sentence: str) -> dict:
    return {"check": check, "status": status, "sentence": sentence}


def rollup(checks: list[dict]) -> str:
    for status in ("not_gradable", "fail", "warn"):
        if any(c["status"] == status for c in checks):
            return status
    return "pass"


def _clip(text: str, n: int = 160) -> str:
    """Schema messages quote the offending value, which can be huge: keep the start."""
    return text if len(text) <= n else text[: n - 1] + "…"


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ---------------------------------------------------------------- checks shared by every item


def schema_problem(result: dict) -> str | None:
    """Why result.json does not match labs/schema/result.schema.json (first three errors), or None."""
    errors = validate_result(result)
    if not errors:
        return None
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "result.json does not match the result schema: " + "; ".join(_clip(e) for e in errors[:3]) + more


def check_schema(result: dict) -> dict:
    problem = schema_problem(result)
    if problem:
        return _c("schema", "fail", problem + ".")
    return _c("schema", "pass", f"result.json is valid against result schema version {result.get('schema_version')}.")


def check_environment(result: dict) -> dict:
    env = result.get("environment") or {}
    device = (env.get("device") or {}).get("name")
    backend, label = env.get("backend"), env.get("label")
    if not (device and backend and label):
        missing = [n for n, v in (("device", device), ("backend", backend), ("label", label)) if not v]
        return _c("environment", "fail", f"The environment is not stated: {', '.join(missing)} missing.")
    kind = "CPU emulation" if env.get("emulated") else "measured on the device"
    return _c("environment", "pass", f"Ran on {device} with the {backend} backend ({kind}): “{label}”.")


# ---------------------------------------------------------------- per lab


def checks_env_check(result: dict) -> list[dict]:
    r = result["results"]
    env = result.get("environment") or {}
    out = []
    recipes = env.get("fp8_recipes") or {}
    unexplained = [k for k, v in recipes.items() if not v.get("supported") and not v.get("reason")]
    if not recipes:
        out.append(_c("fp8-recipes", "fail", "No FP8 recipe support is reported."))
    elif unexplained:
        out.append(_c("fp8-recipes", "warn", f"Unsupported recipes without a reason: {', '.join(unexplained)}."))
    else:
        supported = [k for k, v in recipes.items() if v.get("supported")]
        out.append(
            _c(
                "fp8-recipes",
                "pass",
                f"FP8 recipes reported: {len(supported)} of {len(recipes)} supported natively, "
                "each unsupported one with its reason.",
            )
        )
    smoke = r.get("smoke_test") or {}
    out.append(
        _c(
            "smoke-test",
            "pass" if smoke.get("matmul_ok") else "fail",
            f"A matmul on {smoke.get('device', '?')} "
            + ("gave finite numbers." if smoke.get("matmul_ok") else "did not give finite numbers."),
        )
    )
    return out


def checks_fp8_numerics(result: dict) -> list[dict]:
    r = result["results"]
    steps = r.get("steps")
    runs = r.get("runs") or {}
    ref, fp8 = (runs.get("reference") or {}).get("loss") or [], (runs.get("fp8") or {}).get("loss") or []
    out = []
    seed = (result.get("params") or {}).get("seed")
    if ref and len(ref) == len(fp8) == steps and seed is not None:
        out.append(_c("same-seed-steps", "pass", f"BF16 and FP8 ran from seed {seed} for the same {steps} steps."))
    else:
        out.append(
            _c(
                "same-seed-steps",
                "fail",
                f"BF16 ran {len(ref)} steps and FP8 {len(fp8)} (the lab asked for {steps}); "
                "the runs cannot be compared step by step.",
            )
        )
    if ref and fp8 and len(ref) == len(fp8):
        if not all(_finite(x) for x in fp8):
            bad = next(i for i, x in enumerate(fp8) if not _finite(x))
            out.append(_c("loss-tracks", "fail", f"The FP8 loss stopped being a finite number at step {bad}."))
        else:
            gaps = [abs(f - b) / max(abs(b), 1e-12) for b, f in zip(ref, fp8) if _finite(b)]
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
            out.append(_c("loss-tracks", status, sentence))
    clipping = r.get("clipping") or {}
    quantizers = r.get("quantizers") or []
    with_history = [q for q in quantizers if q.get("scale") and q.get("amax") and q.get("clipped") is not None]
    if "total_clipped" in clipping and clipping.get("clipped_per_step") is not None and with_history:
        out.append(
            _c(
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
        out.append(_c("clipping-scales", "fail", f"Missing from the result: {', '.join(missing)}."))
    return out


def checks_static_trace(result: dict) -> list[dict]:
    r = result["results"]
    recipe, model = r.get("recipe") or {}, r.get("model") or {}
    env = result.get("environment") or {}
    out = []
    if recipe.get("kind") and recipe.get("formats"):
        fmts = ", ".join(f"{k} {v}" for k, v in recipe["formats"].items())
        out.append(_c("recipe", "pass", f"Recipe stated: {recipe['kind']} scaling ({fmts})."))
    else:
        out.append(_c("recipe", "fail", "The FP8 recipe (scaling kind and formats) is not stated."))
    layers = model.get("fp8_layers") or []
    out.append(
        _c(
            "shapes",
            "pass" if layers else "fail",
            f"Shapes traced for {len(layers)} FP8 layers." if layers else "No per-layer shapes are traced.",
        )
    )
    out.append(
        _c(
            "labelled",
            "pass" if env.get("label") else "fail",
            "The trace carries its honesty label."
            if env.get("label")
            else "The trace is not labelled with how it was made.",
        )
    )
    return out


def _tp_tolerance(r: dict) -> tuple[str, float, str]:
    name = "FP8_PER_SHARD_SCALE" if (r.get("fp8") or {}).get("enabled") else "FP32_REORDER"
    limit, reason = TP_PARITY[name]
    return name, limit, reason


def checks_tp_mapping(result: dict) -> list[dict]:
    r = result["results"]
    degrees = r.get("degrees") or []
    by_degree = {d.get("degree"): d for d in degrees}
    out = []
    sharded = [d for d in degrees if (d.get("degree") or 0) > 1]
    if 1 not in by_degree or not sharded:
        out.append(
            _c("tp-baseline", "fail", f"Needs TP=1 and at least one TP>1 run; found degrees {sorted(by_degree)}.")
        )
    else:
        out.append(
            _c(
                "tp-baseline",
                "pass",
                f"TP=1 and TP={', '.join(str(d['degree']) for d in sharded)} ran on the same block.",
            )
        )
    incomplete = [
        d.get("degree")
        for d in degrees
        if len(d.get("ranks") or []) != d.get("degree") or not all(rk.get("mapping") for rk in d.get("ranks") or [])
    ]
    out.append(
        _c(
            "rank-mapping",
            "fail" if incomplete or not degrees else "pass",
            f"Rank mapping incomplete for TP={incomplete}."
            if incomplete
            else "Every rank of every degree lists the slice of each weight it holds and its local shapes.",
        )
    )
    name, limit, reason = _tp_tolerance(r)
    diffs = []
    for d in sharded:
        diff = (d.get("parity") or {}).get("max_rel_diff")
        if not _finite(diff):
            out.append(_c("tp-parity", "fail", f"TP={d.get('degree')} has no parity number against TP=1."))
            return out
        diffs.append((diff, d["degree"]))
    if diffs:
        diff, deg = max(diffs)
        ok = diff <= limit
        out.append(
            _c(
                "tp-parity",
                "pass" if ok else "fail",
                f"TP outputs {'match' if ok else 'differ from'} TP=1: largest relative difference {diff:.2e} at TP={deg}, "
                f"tolerance {name} = {limit:g} ({reason}).",
            )
        )
    return out


def checks_tp_stretch(result: dict) -> list[dict]:
    r = result["results"]
    degrees = sorted((d for d in r.get("degrees") or [] if d.get("degree")), key=lambda d: d["degree"])
    out = []
    if len(degrees) >= 3:
        out.append(
            _c(
                "sweep-width",
                "pass",
                f"The sweep covers {len(degrees)} TP degrees: {', '.join(str(d['degree']) for d in degrees)}.",
            )
        )
    else:
        out.append(
            _c(
                "sweep-width",
                "warn",
                f"Only {len(degrees)} TP degrees; three or more show where sharding stops paying.",
            )
        )
    timed = [d for d in degrees if _finite(d.get("local_gemm_ms")) and _finite(d.get("collective_ms"))]
    if len(timed) != len(degrees) or not degrees:
        out.append(_c("sweep-times", "fail", "Local GEMM and collective times are missing for some degrees."))
        return out
    crossing = next((d["degree"] for d in timed if d["collective_ms"] > d["local_gemm_ms"]), None)
    cpu = (result.get("environment") or {}).get("emulated")
    where = (
        f"collective time overtakes local GEMM time from TP={crossing}"
        if crossing
        else "collective time never overtakes local GEMM time"
    )
    out.append(_c("oversharding", "pass", f"Measured: {where}" + (" (CPU timings)." if cpu else ".")))
    return out


def checks_timeline(result: dict, read_artifact: Callable[[str], bytes] | None) -> list[dict]:
    r = result["results"]
    env = result.get("environment") or {}
    cpu = bool(env.get("emulated"))
    schedules = r.get("schedules") or {}
    out = []
    imm, win = schedules.get("immediate"), schedules.get("windowed")
    if not imm or not win:
        missing = [n for n, s in (("immediate", imm), ("windowed", win)) if not s]
        out.append(
            _c("overlap", "fail", f"Run both the immediate and the windowed schedule; missing: {', '.join(missing)}.")
        )
    else:
        imm_ratios = [rk.get("overlap_ratio") or 0.0 for rk in imm.get("ranks") or []]
        win_ratios = [rk.get("overlap_ratio") or 0.0 for rk in win.get("ranks") or []]
        worst_imm = max(imm_ratios, default=0.0)
        if worst_imm <= IMMEDIATE_MAX_OVERLAP:
            out.append(
                _c(
                    "immediate-near-zero",
                    "pass",
                    f"The immediate-wait schedule overlaps at most {worst_imm:.1%} on any rank: "
                    f"near zero (≤ {IMMEDIATE_MAX_OVERLAP:.0%}, timer granularity), as an async call waited on at once should.",
                )
            )
        else:
            out.append(
                _c(
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
                _c(
                    "windowed-more",
                    "pass",
                    f"The windowed schedule overlaps more: {mean_win:.1%} vs {mean_imm:.1%} on average over ranks.",
                )
            )
        else:
            out.append(
                _c(
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


def _check_ranks_covered(result: dict, schedules: dict, read_artifact) -> dict:
    n = (result.get("params") or {}).get("ranks") or result["results"].get("ranks")
    if not isinstance(n, int) or n < 1:
        return _c("every-rank", "fail", "The number of ranks is not stated.")
    want = set(range(n))
    for name, s in schedules.items():
        got = {rk.get("rank") for rk in s.get("ranks") or []}
        if got != want:
            return _c("every-rank", "fail", f"Schedule {name} reports ranks {sorted(got)}; expected 0..{n - 1}.")
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
                return _c("every-rank", "not_gradable", f"The {name} trace could not be read: {exc}.")
            except (ValueError, AttributeError):
                return _c("every-rank", "fail", f"The {name} trace is not Chrome trace JSON.")
            pids = {e.get("pid") for e in events if isinstance(e, dict) and e.get("ph") == "X"}
            if not want <= pids:
                return _c(
                    "every-rank",
                    "fail",
                    f"The {name} trace has spans for ranks {sorted(p for p in pids if isinstance(p, int))}; "
                    f"expected every rank 0..{n - 1}.",
                )
    return _c("every-rank", "pass", f"The timeline covers every rank (0..{n - 1}) in all {len(schedules)} schedules.")


# ---------------------------------------------------------------- one evidence slot


def checks_for(slot_kind: str, lab: str, result: dict, read_artifact=None) -> list[dict]:
    """The lab-specific checks for a slot: kind is 'evidence', 'fallback' or 'stretch'."""
    if lab == "env-check":
        return checks_env_check(result)
    if lab == "fp8-step":
        return checks_static_trace(result) if slot_kind == "fallback" else checks_fp8_numerics(result)
    if lab == "tp-sweep":
        return checks_tp_stretch(result) if slot_kind == "stretch" else checks_tp_mapping(result)
    if lab == "overlap-trace":
        return checks_timeline(result, read_artifact)
    return []


def check_item(*, slot_kind: str, lab: str, source: Source | None) -> dict:
    """Roll-up for one evidence slot: {status, emulated, label, source, checks}.

    status: pass | warn | fail | not_gradable, or 'missing' when nothing is attached.
    """
    if source is None:
        optional = slot_kind in ("fallback", "stretch")
        return {
            "status": "missing",
            "optional": optional,
            "emulated": False,
            "label": "",
            "source": None,
            "checks": [
                _c(
                    "attached",
                    "warn" if optional else "fail",
                    "Nothing attached (optional)." if optional else "No evidence attached for this item.",
                )
            ],
        }
    base = {"source": {"kind": source.kind, "id": source.id}, "emulated": False, "label": ""}
    if source.problem or source.result is None:
        reason = source.problem or "the result is missing"
        return {
            **base,
            "status": "not_gradable",
            "checks": [_c("readable", "not_gradable", f"Not gradable ({source.ref}): {reason}.")],
        }
    result = source.result
    env = result.get("environment") if isinstance(result.get("environment"), dict) else {}
    base.update(emulated=bool(env.get("emulated")), label=str(env.get("label") or ""))
    checks = [check_schema(result)]
    if checks[0]["status"] != "pass":
        if source.kind == "job":  # our own lab wrote it: an infrastructure fault, never the learner's
            checks[0]["status"] = "not_gradable"
        return {**base, "status": rollup(checks), "checks": checks}
    if result.get("lab") != lab:
        checks.append(
            _c("lab", "fail", f"This item needs a {lab} result; the attached one is from {result.get('lab')}.")
        )
        return {**base, "status": "fail", "checks": checks}
    checks.append(check_environment(result))
    try:
        checks += checks_for(slot_kind, lab, result, source.read_artifact)
    except (
        KeyError,
        TypeError,
        AttributeError,
        ValueError,
    ) as exc:  # a valid but surprising result: say so, do not crash
        checks.append(
            _c("readable", "not_gradable", f"The checks could not read this result ({type(exc).__name__}: {exc}).")
        )
    return {**base, "status": rollup(checks), "checks": checks}
