"""tp-sweep's runs in the lesson's words (torch-free): what a learner's sweep did, read from that sweep alone
(its shape, its measured crossover, the shape its prediction priced), what tells one sweep from another, and what
the report's evidence and stretch slots ask of a sweep. The app shows these through the catalog (LabSpec.words)."""

from __future__ import annotations

from labs.spec import Ask, RunWords
from labs.words import ms, number


def _shape(d: dict) -> str:
    return f"{number(d['tokens'])} tokens × {number(d['hidden'])} wide × ffn {number(d['ffn'])}"


def sentences(results: dict, params: dict) -> list[str]:
    """A finished sweep's `results` told beside the lesson's worked example, at the shape the sweep ran (its
    `params`), the prediction at the shape it priced."""
    rows = sorted(results["degrees"], key=lambda d: d["degree"])
    mine = {"tokens": params["tokens"], "hidden": params["hidden"], "ffn": params["ffn"]}
    out = [
        f"Your sweep of a {_shape(mine)} block, step per degree: "
        + ", ".join(f"TP {d['degree']} {ms(d['step_ms'])}" for d in rows)
        + "."
    ]
    slower = next((b for a, b in zip(rows, rows[1:]) if b["step_ms"] >= a["step_ms"]), None)
    if slower is not None:
        out.append(f"It stopped getting faster at TP {slower['degree']}.")
    elif len(rows) > 1:
        out.append(f"It got faster at every degree up to TP {rows[-1]['degree']}.")
    split = [d for d in rows if d["degree"] > 1]
    comm = next((d for d in split if d["collective_ms"] >= d["local_gemm_ms"]), None)
    if comm is not None:
        out.append(
            f"From TP {comm['degree']} its all-reduces ({ms(comm['collective_ms'])}) outweighed its local GEMMs "
            f"({ms(comm['local_gemm_ms'])}): a measured crossover."
        )
    elif split:
        top = split[-1]
        out.append(
            f"Its all-reduces stayed below its local GEMMs at every degree (TP {top['degree']}: "
            f"{ms(top['collective_ms'])} against {ms(top['local_gemm_ms'])}): no measured crossover yet. The "
            "A narrow MLP preset gives each rank little GEMM work per byte it all-reduces."
        )
    p = results.get("predicted") or {}
    if p:
        shape = p.get("shape") or mine
        same = all(shape.get(k) == v for k, v in mine.items())
        at = "for your run's own shape" if same else f"for a {_shape(shape)} block, not your run's shape"
        where = (
            f"from TP {p['oversharding_from']}" if p.get("oversharding_from") else "nowhere up to the largest degree"
        )
        out.append(
            f"The cost model predicts over-sharding {where} on {p['node']} in {str(p.get('precision', '')).upper()} "
            f"{at} (a prediction, not a measurement)."
        )
    if not all(d["parity"]["within_tolerance"] for d in rows):
        out.append("Some degree did not match TP 1 within tolerance: see the job's parity table.")
    return out


def params_words(p: dict) -> list[str]:
    return [f"TP {', '.join(map(str, p.get('degrees') or []))}", "FP8" if p.get("fp8") else "no FP8"]


WORDS = RunWords(
    nudge="with a few degrees (1, 2, 4) to see where your own step stops getting faster",
    sentences=sentences,
    key_params=("degrees", "fp8"),
    params_words=params_words,
    asks={
        # checks.py's parity and rank mapping compare every TP>1 run with TP=1.
        "evidence": Ask(
            "a sweep with TP 1 and at least one degree above it",
            lambda p: 1 in (p.get("degrees") or []) and any(d > 1 for d in p.get("degrees") or []),
        ),
        # checks.py's "sweep-width": three degrees or more show where sharding stops paying.
        "stretch": Ask(
            "a sweep of three or more TP degrees, to see where sharding stops paying",
            lambda p: len(set(p.get("degrees") or [])) >= 3,
        ),
    },
)
