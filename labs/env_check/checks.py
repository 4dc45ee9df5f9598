"""Checks of an env-check result: FP8 recipe support with reasons, and a matmul that gave finite numbers."""

from __future__ import annotations

from labs.checks.common import ReadArtifact, check


def checks(slot_kind: str, result: dict, read_artifact: ReadArtifact | None) -> list[dict]:
    r = result["results"]
    env = result.get("environment") or {}
    out = []
    recipes = env.get("fp8_recipes") or {}
    unexplained = [k for k, v in recipes.items() if not v.get("supported") and not v.get("reason")]
    if not recipes:
        out.append(check("fp8-recipes", "fail", "No FP8 recipe support is reported."))
    elif unexplained:
        out.append(check("fp8-recipes", "warn", f"Unsupported recipes without a reason: {', '.join(unexplained)}."))
    else:
        supported = [k for k, v in recipes.items() if v.get("supported")]
        out.append(
            check(
                "fp8-recipes",
                "pass",
                f"FP8 recipes reported: {len(supported)} of {len(recipes)} supported natively, "
                "each unsupported one with its reason.",
            )
        )
    smoke = r.get("smoke_test") or {}
    out.append(
        check(
            "smoke-test",
            "pass" if smoke.get("matmul_ok") else "fail",
            f"A matmul on {smoke.get('device', '?')} "
            + ("gave finite numbers." if smoke.get("matmul_ok") else "did not give finite numbers."),
        )
    )
    return out
