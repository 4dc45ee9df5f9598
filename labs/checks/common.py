"""What every evidence check shares: the status vocabulary, the source of a result, and the checks that
apply to any lab (schema, environment).

Every check returns {"check", "status", "sentence"} with status one of

    pass          the evidence shows what the lab asks for
    warn          present but weak, or blurred by CPU timings; the grader decides
    fail          the evidence contradicts the claim (or is missing)
    not_gradable  an infrastructure problem (job failed, result or artifact unreadable): never the learner's fault
    info          a finding shown to the grader that passes no judgement (it never changes the roll-up)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labs import jsonbounds
from labs.runtime import validate_result

STATUSES = ("pass", "warn", "fail", "not_gradable", "info")

ReadArtifact = Callable[[str], bytes]
# A lab's checks: (slot kind: evidence | fallback | stretch, result.json, artifact reader or None) -> checks
LabChecks = Callable[[str, dict, ReadArtifact | None], list[dict]]

# A trace artifact larger than this is not parsed (it would only be a timeline of a few ranks).
MAX_TRACE_BYTES = jsonbounds.TRACE.max_bytes


@dataclass
class Source:
    """Where one evidence item's result comes from: a job or an uploaded bundle."""

    kind: str  # job | bundle
    id: int
    result: dict | None = None
    problem: str | None = None  # an infrastructure reason the result cannot be judged
    root: Path | None = None  # the bundle folder holding result.json and its artifacts
    label: str = ""
    read_artifact: ReadArtifact | None = field(default=None, repr=False)

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.id}"


class ArtifactUnreadable(Exception):
    """An artifact the result lists cannot be read: an infrastructure problem, not the learner's."""


def trace_json(raw: bytes) -> Any:
    """A trace artifact's JSON, parsed within the trace bounds (an upload's traces are the learner's files);
    jsonbounds.TooMuch, a ValueError, when it breaks one."""
    return jsonbounds.loads(raw, what="the trace", bounds=jsonbounds.TRACE)


def check(name: str, status: str, sentence: str) -> dict:
    return {"check": name, "status": status, "sentence": sentence}


def rollup(checks: list[dict]) -> str:
    """The worst judgement among the checks; `info` findings judge nothing and are left out."""
    for status in ("not_gradable", "fail", "warn"):
        if any(c["status"] == status for c in checks):
            return status
    return "pass"


def clip(text: str, n: int = 160) -> str:
    """Schema messages quote the offending value, which can be huge: keep the start."""
    return text if len(text) <= n else text[: n - 1] + "…"


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def schema_problem(result: dict) -> str | None:
    """Why result.json does not match labs/schema/result.schema.json (first three errors), or None."""
    errors = validate_result(result)
    if not errors:
        return None
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "result.json does not match the result schema: " + "; ".join(clip(e) for e in errors[:3]) + more


def check_schema(result: dict) -> dict:
    problem = schema_problem(result)
    if problem:
        return check("schema", "fail", problem + ".")
    return check(
        "schema", "pass", f"result.json is valid against result schema version {result.get('schema_version')}."
    )


def check_environment(result: dict, *, uploaded: bool = False) -> dict:
    """Whether the result states where it ran. A job's environment is the course's own record of the run; an
    upload's is the learner's claim, so its sentence says so and passes no judgement (info), and its label is
    quoted as the uploader's words, never as "measured on the device"."""
    env = result.get("environment") or {}
    device = (env.get("device") or {}).get("name")
    backend, label = env.get("backend"), env.get("label")
    if not (device and backend and label):
        missing = [n for n, v in (("device", device), ("backend", backend), ("label", label)) if not v]
        return check("environment", "fail", f"The environment is not stated: {', '.join(missing)} missing.")
    if uploaded:
        kind = "a CPU emulation" if env.get("emulated") else "a GPU run"
        return check(
            "environment",
            "info",
            f"Uploaded, so self-reported: the course did not run it. The bundle says it is {kind} on {device} with "
            f"the {backend} backend, and labels itself, in the uploader's words: “{label}”.",
        )
    kind = "CPU emulation" if env.get("emulated") else "measured on the device"
    return check("environment", "pass", f"Ran on {device} with the {backend} backend ({kind}): “{label}”.")


def stated_ranks(result: dict) -> int | None:
    """The run's number of ranks, from its parameters or its results; None when neither states a positive one."""
    n = (result.get("params") or {}).get("ranks") or result["results"].get("ranks")
    return n if isinstance(n, int) and n >= 1 else None


def ranks_covered(
    result: dict, runs: dict, read_artifact: ReadArtifact | None, *, kind: str, kinds: str, span_cat: str | None
) -> dict:
    """Every rank 0..N-1 in each run's result rows (`runs`: name -> run with `ranks` and `artifacts.trace`) and in
    its Chrome trace, which must carry spans (of category `span_cat`, when given) for every rank. `kind`/`kinds`
    name a run in the sentences ("Schedule"/"schedules")."""
    n = stated_ranks(result)
    if n is None:
        return check("every-rank", "fail", "The number of ranks is not stated.")
    want = set(range(n))
    for name, run in runs.items():
        got = {rk.get("rank") for rk in run.get("ranks") or []}
        if got != want:
            return check("every-rank", "fail", f"{kind} {name} reports ranks {sorted(got)}; expected 0..{n - 1}.")
        trace_name = (run.get("artifacts") or {}).get("trace")
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
                events = trace_json(read_artifact(artifact)).get("traceEvents", [])
            except ArtifactUnreadable as exc:
                return check("every-rank", "not_gradable", f"The {name} trace could not be read: {exc}.")
            except jsonbounds.TooMuch as exc:
                return check("every-rank", "fail", f"The {name} trace was not read: {exc}.")
            except (ValueError, AttributeError):
                return check("every-rank", "fail", f"The {name} trace is not Chrome trace JSON.")
            pids = {
                e.get("pid")
                for e in events
                if isinstance(e, dict) and e.get("ph") == "X" and (span_cat is None or e.get("cat") == span_cat)
            }
            if not want <= pids:
                spans = f"{span_cat} spans" if span_cat else "spans"
                return check(
                    "every-rank",
                    "fail",
                    f"The {name} trace has {spans} for ranks {sorted(p for p in pids if isinstance(p, int))}; "
                    f"expected every rank 0..{n - 1}.",
                )
    return check("every-rank", "pass", f"The timeline covers every rank (0..{n - 1}) in all {len(runs)} {kinds}.")
