"""Automatic checks of a lab report's evidence: pure functions over a lab's result.json.

Each lab of the catalog has its checks in its own folder (`labs/<lab>/checks.py`, named by its spec's `checks`),
each `checks(slot_kind, result, read_artifact)`; `REGISTRY` is loaded from `labs.catalog`, so a lab whose checks
do not import fails at import, not silently. Statuses and the shared checks live in `common.py`.

`check_item(slot_kind=, lab=, source=)` runs the checks that fit an evidence slot and rolls them up.
Checks run on submit and again on regrade; they read only the result and, for timelines, the trace artifacts.
"""

from __future__ import annotations

from labs import catalog
from labs.checks.claims import check_claims, contradictions
from labs.checks.common import (
    MAX_TRACE_BYTES,
    STATUSES,
    ArtifactUnreadable,
    LabChecks,
    ReadArtifact,
    Source,
    check,
    check_environment,
    check_schema,
    rollup,
    schema_problem,
)

__all__ = [
    "MAX_TRACE_BYTES",
    "REGISTRY",
    "STATUSES",
    "ArtifactUnreadable",
    "Source",
    "check_item",
    "checks_for",
    "contradictions",
    "rollup",
    "schema_problem",
]


REGISTRY: dict[str, LabChecks] = {name: spec.load_checks() for name, spec in catalog.LABS.items()}


def checks_for(slot_kind: str, lab: str, result: dict, read_artifact: ReadArtifact | None = None) -> list[dict]:
    """The lab-specific checks for a slot: kind is 'evidence', 'fallback' or 'stretch'."""
    return REGISTRY[lab](slot_kind, result, read_artifact)


def check_item(*, slot_kind: str, lab: str, source: Source | None) -> dict:
    """Roll-up for one evidence slot: {status, emulated, label, uploaded, source, checks}.

    An upload's environment and label are the learner's claim: its checks say so and list where the result
    contradicts itself (labs/checks/claims.py); `uploaded` tells the page to word it that way.

    status: pass | warn | fail | not_gradable, or 'missing' when nothing is attached.
    """
    if source is None:
        optional = slot_kind in ("fallback", "stretch")
        return {
            "status": "missing",
            "optional": optional,
            "emulated": False,
            "label": "",
            "uploaded": False,
            "source": None,
            "checks": [
                check(
                    "attached",
                    "warn" if optional else "fail",
                    "Nothing attached (optional)." if optional else "No evidence attached for this item.",
                )
            ],
        }
    uploaded = source.kind == "bundle"
    base = {"source": {"kind": source.kind, "id": source.id}, "emulated": False, "label": "", "uploaded": uploaded}
    if source.problem or source.result is None:
        reason = source.problem or "the result is missing"
        return {
            **base,
            "status": "not_gradable",
            "checks": [check("readable", "not_gradable", f"Not gradable ({source.ref}): {reason}.")],
        }
    result = source.result
    env = result["environment"] if isinstance(result.get("environment"), dict) else {}
    base.update(emulated=bool(env.get("emulated")), label=str(env.get("label") or ""))
    checks = [check_schema(result)]
    if checks[0]["status"] != "pass":
        if source.kind == "job":  # our own lab wrote it: an infrastructure fault, never the learner's
            checks[0]["status"] = "not_gradable"
        return {**base, "status": rollup(checks), "checks": checks}
    if result.get("lab") != lab:
        checks.append(
            check("lab", "fail", f"This item needs a {lab} result; the attached one is from {result.get('lab')}.")
        )
        return {**base, "status": "fail", "checks": checks}
    if lab not in REGISTRY:  # a slot naming a lab the catalog no longer has (an old lesson version)
        checks.append(check("lab", "not_gradable", f"The course has no checks for lab {lab!r}."))
        return {**base, "status": "not_gradable", "checks": checks}
    checks.append(check_environment(result, uploaded=uploaded))
    if uploaded:
        checks.append(check_claims(result))
    try:
        checks += checks_for(slot_kind, lab, result, source.read_artifact)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a valid but surprising result: say so
        checks.append(
            check("readable", "not_gradable", f"The checks could not read this result ({type(exc).__name__}: {exc}).")
        )
    return {**base, "status": rollup(checks), "checks": checks}
