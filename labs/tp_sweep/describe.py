"""tp-sweep's runs in the lesson's words (torch-free): what a learner's sweep did, what tells one sweep from
another, and what the report's evidence and stretch slots ask of a sweep. The app shows these through the catalog
(LabSpec.words)."""

from __future__ import annotations

from labs.spec import Ask, RunWords
from labs.words import number


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{number(x, 3)} ms"


def sentences(r: dict) -> list[str]:
    """A finished sweep's `results` told beside the lesson's worked example."""
    rows = sorted(r["degrees"], key=lambda d: d["degree"])
    out = ["Your sweep's step per degree: " + ", ".join(f"TP {d['degree']} {_ms(d['step_ms'])}" for d in rows) + "."]
    slower = next((b for a, b in zip(rows, rows[1:]) if b["step_ms"] >= a["step_ms"]), None)
    comm = next((d for d in rows if d["degree"] > 1 and d["collective_ms"] >= d["local_gemm_ms"]), None)
    if slower is not None:
        out.append(f"It stopped getting faster at TP {slower['degree']}.")
    elif len(rows) > 1:
        out.append(f"It got faster at every degree up to TP {rows[-1]['degree']}.")
    if comm is not None:
        out.append(
            f"From TP {comm['degree']} the all-reduces ({_ms(comm['collective_ms'])}) outweighed the local GEMMs "
            f"({_ms(comm['local_gemm_ms'])}): the crossover."
        )
    p = r.get("predicted") or {}
    if p:
        where = (
            f"from TP {p['oversharding_from']}" if p.get("oversharding_from") else "nowhere up to the largest degree"
        )
        out.append(f"For the same shape the cost model predicts over-sharding {where} on {p['node']} (a prediction).")
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
