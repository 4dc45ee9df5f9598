"""Checks of a collectives result: the α-β fit explains the sweep, bus bandwidth grows with message size,
the hierarchical all-reduce gives the flat one's result, and (across emulated nodes) node egress matches the
model and crossing a node costs more than staying inside one."""

from __future__ import annotations

from labs.checks.common import ArtifactUnreadable, ReadArtifact, check, trace_json
from labs.words import byte_size, number, percent

# The fit's RMS relative residual above which the straight line t = a + b·S no longer explains the sweep. CPU
# timings on a shared machine scatter by tens of percent at small sizes, so only a GPU run fails beyond it.
FIT_RMS_MAX = 0.35
# Measured node egress against the model's bytes: TCP/IP headers and the barriers add a few percent.
EGRESS_TOLERANCE = 0.15


def checks(slot_kind: str, result: dict, read_artifact: ReadArtifact | None) -> list[dict]:
    r = result["results"]
    cpu = bool((result.get("environment") or {}).get("emulated"))
    return [
        _fit(r, cpu),
        _busbw_rises(r, cpu),
        _parity(r),
        *_topology(r, cpu),
        _ranks_covered(result, r, read_artifact),
    ]


def _fit(r: dict, cpu: bool) -> dict:
    worst = max(
        (
            (c["fit"]["rms_residual"], f"{c['name']} ({sw['algorithm']})")
            for sw in r["sweeps"]
            for c in sw["collectives"]
        ),
        default=None,
    )
    if worst is None:
        return check("alpha-beta-fit", "fail", "The result has no size sweep to fit.")
    rms, name = worst
    if rms <= FIT_RMS_MAX:
        return check(
            "alpha-beta-fit",
            "pass",
            f"The α-β line explains every sweep: the worst RMS residual is {percent(rms, 0)} ({name}), within {percent(FIT_RMS_MAX, 0)}.",
        )
    return check(
        "alpha-beta-fit",
        "warn" if cpu else "fail",
        f"The α-β line misses {name} by {percent(rms, 0)} RMS (more than {percent(FIT_RMS_MAX, 0)})"
        + ("; CPU timings on a shared machine scatter, so read the residual column." if cpu else "."),
    )


def _busbw_rises(r: dict, cpu: bool) -> dict:
    flat = []
    for sw in r["sweeps"]:
        for c in sw["collectives"]:
            rows = c["rows"]
            if rows[-1]["busbw_gbs"] <= rows[0]["busbw_gbs"]:
                flat.append(f"{c['name']} ({sw['algorithm']})")
    if not flat:
        return check(
            "busbw-rises",
            "pass",
            "Bus bandwidth is higher at the largest message than at the smallest for every collective: small messages pay α.",
        )
    return check(
        "busbw-rises",
        "warn" if cpu else "fail",
        f"Bus bandwidth does not rise from the smallest to the largest message for {', '.join(flat)}; widen the size range.",
    )


def _parity(r: dict) -> dict:
    d = r["hierarchy"]["max_abs_diff"]
    if d == 0:
        return check(
            "hierarchy-parity", "pass", "The hierarchical all-reduce gives exactly the flat one's sums (integer data)."
        )
    return check(
        "hierarchy-parity", "fail", f"The hierarchical all-reduce differs from the flat one by up to {number(d)}."
    )


def _topology(r: dict, cpu: bool) -> list[dict]:
    t = r["topology"]
    if t["mode"] != "netns":
        return [
            check(
                "emulated-nodes",
                "info",
                f"No emulated nodes in this run ({t['mode']}): {t['note']}. The node comparisons need nodes > 1 on a "
                "worker that may create network namespaces.",
            )
        ]
    out = []
    scopes = {s["scope"]: s for s in r["scopes"]}
    intra, cross = scopes.get("intra-node"), scopes.get("cross-node")
    if intra and cross:
        ratio = cross["time_ms"] / intra["time_ms"]
        out.append(
            check(
                "cross-node-slower",
                "pass" if ratio > 1 else "fail",
                f"The same all-reduce took {number(ratio, 2)}x as long across nodes ({number(cross['time_ms'], 3)} ms) as "
                f"inside one ({number(intra['time_ms'], 3)} ms)"
                + ("." if ratio > 1 else ": the emulated link did not slow it."),
            )
        )
    e = r["hierarchy"]["egress"]
    for kind in ("flat", "hierarchical"):
        got, want = e[f"measured_{kind}_bytes"], e[f"predicted_{kind}_bytes"]
        if got is None or not want:
            out.append(check(f"egress-{kind}", "fail", f"The {kind} all-reduce's node egress was not measured."))
            continue
        off = abs(got - want) / want
        out.append(
            check(
                f"egress-{kind}",
                "pass" if off <= EGRESS_TOLERANCE else "warn",
                f"Each node sent {byte_size(got)} per {kind} all-reduce; the model says {byte_size(want)} "
                f"({percent(off, 0)} apart, tolerance {percent(EGRESS_TOLERANCE, 0)}).",
            )
        )
    return out


def _ranks_covered(result: dict, r: dict, read_artifact: ReadArtifact | None) -> dict:
    n = r.get("ranks")
    name = (r["hierarchy"].get("artifacts") or {}).get("trace")
    if not isinstance(n, int) or not name or read_artifact is None:
        return check("every-rank", "info", "The hierarchy trace was not read (no artifact reader).")
    artifact = next((a["name"] for a in result.get("artifacts", []) if a.get("path") == name), name)
    try:
        events = trace_json(read_artifact(artifact)).get("traceEvents", [])
    except ArtifactUnreadable as exc:
        return check("every-rank", "not_gradable", f"The hierarchy trace could not be read: {exc}.")
    except (ValueError, AttributeError):
        return check("every-rank", "fail", "The hierarchy trace is not Chrome trace JSON.")
    pids = {e.get("pid") for e in events if isinstance(e, dict) and e.get("ph") == "X"}
    if set(range(n)) <= pids:
        return check("every-rank", "pass", f"The flat-vs-hierarchical timeline covers every rank (0..{n - 1}).")
    return check(
        "every-rank",
        "fail",
        f"The hierarchy trace has spans for ranks {sorted(p for p in pids if isinstance(p, int))}; expected 0..{n - 1}.",
    )
