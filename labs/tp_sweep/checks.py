"""Checks of a tp-sweep result: the rank mapping and TP parity against TP=1 (evidence), and the sweep's
width and where collective time overtakes GEMM time (the stretch slot, as information)."""

from __future__ import annotations

from labs.checks.common import ReadArtifact, check, finite
from labs.tp_sweep.params import TOLERANCES
from labs.words import number


def checks(slot_kind: str, result: dict, read_artifact: ReadArtifact | None) -> list[dict]:
    return stretch(result) if slot_kind == "stretch" else mapping(result)


def _tp_tolerance(r: dict) -> tuple[str, float, str]:
    """The named parity limit of the lab (params.TOLERANCES, each with its reason) for what ran: FP8 or not, CPU or
    GPU timings. From our code, never from the bundle: an uploaded result.json could claim any tolerance."""
    fp8 = (r.get("fp8") or {}).get("enabled")
    gpu = (r.get("timing") or {}).get("kind") == "cuda-events"
    name = ("FP8_IN_BF16" if fp8 else "BF16_VS_FP32") if gpu else ("FP8_TP_AMAX" if fp8 else "FP32_REORDER")
    return name, TOLERANCES[name]["max_rel_diff"], TOLERANCES[name]["reason"]


def mapping(result: dict) -> list[dict]:
    r = result["results"]
    degrees = r.get("degrees") or []
    by_degree = {d.get("degree"): d for d in degrees}
    out = []
    sharded = [d for d in degrees if (d.get("degree") or 0) > 1]
    if 1 not in by_degree or not sharded:
        out.append(
            check("tp-baseline", "fail", f"Needs TP=1 and at least one TP>1 run; found degrees {sorted(by_degree)}.")
        )
    else:
        out.append(
            check(
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
        check(
            "rank-mapping",
            "fail" if incomplete or not degrees else "pass",
            f"Rank mapping incomplete for TP={incomplete}."
            if incomplete
            else "Every rank of every degree lists the slice of each weight it holds and its local shapes.",
        )
    )
    name, limit, reason = _tp_tolerance(r)
    diffs: list[tuple[float, int]] = []
    for d in sharded:
        diff = (d.get("parity") or {}).get("max_rel_diff")
        if diff is None or not finite(diff):
            out.append(check("tp-parity", "fail", f"TP={d.get('degree')} has no parity number against TP=1."))
            return out
        diffs.append((float(diff), d["degree"]))
    if diffs:
        diff, deg = max(diffs)
        ok = diff <= limit
        out.append(
            check(
                "tp-parity",
                "pass" if ok else "fail",
                f"TP outputs {'match' if ok else 'differ from'} TP=1: largest relative difference {number(diff, 3)} at TP={deg}, "
                f"tolerance {name} = {number(limit)} ({reason}).",
            )
        )
    return out


def stretch(result: dict) -> list[dict]:
    r = result["results"]
    degrees = sorted((d for d in r.get("degrees") or [] if d.get("degree")), key=lambda d: d["degree"])
    out = []
    if len(degrees) >= 3:
        out.append(
            check(
                "sweep-width",
                "pass",
                f"The sweep covers {len(degrees)} TP degrees: {', '.join(str(d['degree']) for d in degrees)}.",
            )
        )
    else:
        out.append(
            check(
                "sweep-width",
                "warn",
                f"Only {len(degrees)} TP degrees; three or more show where sharding stops paying.",
            )
        )
    timed = [d for d in degrees if finite(d.get("local_gemm_ms")) and finite(d.get("collective_ms"))]
    if len(timed) != len(degrees) or not degrees:
        out.append(check("sweep-times", "fail", "Local GEMM and collective times are missing for some degrees."))
        return out
    crossing = next((d["degree"] for d in timed if d["collective_ms"] > d["local_gemm_ms"]), None)
    cpu = (result.get("environment") or {}).get("emulated")
    where = (
        f"collective time overtakes local GEMM time from TP={crossing}"
        if crossing
        else "collective time never overtakes local GEMM time"
    )
    # Where sharding stops paying is a finding for the grader to read, not something to pass or fail.
    out.append(check("oversharding", "info", f"Measured: {where}" + (" (CPU timings)." if cpu else ".")))
    return out
