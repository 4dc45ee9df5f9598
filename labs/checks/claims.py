"""What an uploaded result says about itself, checked against itself.

A job's result.json was written by the course's own worker; an upload's was written wherever the learner ran it,
and every field of it, its environment and honesty label included, is the learner's claim. Its checks say so
("self-reported", the label "in the uploader's words"), never "measured on the device", and the environment is
compared with the rest of the result for what cannot all be true at once: a `te` backend whose FP8 numbers say
they were emulated, a GPU's name on a CPU device, CPU wall-clock timings from a GPU backend, a label that
`python -m labs run` would not write for the backend and device the result states. Each contradiction is shown to
the grader, who decides which part to believe.

    contradictions(result)       -> ["the te backend, but its FP8 numerics are emulated", ...]
    check_claims(result)         -> a check: warn listing them, or info saying none was found
"""

from __future__ import annotations

import re
from typing import Any

from labs.env import honesty_label
from labs.resources import GPU_BACKENDS

# A device name that is a GPU's: what torch.cuda.get_device_name returns for the GPUs the course's labs run on.
_GPU_NAME = re.compile(r"\b(NVIDIA|GeForce|Quadro|Tesla|RTX|CUDA|Radeon|Instinct|[ABHL]\d{2,3}|GB?\d{3})\b", re.I)
# Result fields (anywhere under `results`) whose values say how a number was made.
_SOURCE_KEYS = ("source", "fp8_numerics")
_WALK_LIMIT = 200_000  # nodes visited under `results`; the upload's parser allows no more (labs/jsonbounds.py)


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _labels_for(backend: str, device: str) -> set[str]:
    return {honesty_label(backend, device, collectives=c, fp8=f) for c in (True, False) for f in (True, False)}


def _emulation_marks(results: Any) -> list[str]:
    """Values under `results` that say a number was emulated (a `source` of "emulation"). Words are not read: a
    te run's sentences may rightly say "emulated" of a reference it computed beside TE's kernels."""
    found: list[str] = []
    stack, seen = [results], 0
    while stack and seen < _WALK_LIMIT and len(found) < 3:
        node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _SOURCE_KEYS and isinstance(value, str) and value.startswith("emulat"):
                    found.append(f"{key}: {value}")
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return found


def contradictions(result: dict) -> list[str]:
    """Sentences naming each part of `result` that contradicts another; [] when it reads as one run."""
    env, results = _dict(result.get("environment")), _dict(result.get("results"))
    device, versions = _dict(env.get("device")), _dict(env.get("versions"))
    backend, kind, name = str(env.get("backend")), device.get("type"), str(device.get("name") or "")
    gpu = backend in GPU_BACKENDS
    out = []
    if gpu and kind != "cuda":
        out.append(f"the {backend} backend, which runs on a GPU, on a device of type {kind!r}")
    elif kind == "cpu" and _GPU_NAME.search(name):
        out.append(f"a CPU device named like a GPU (“{_clip(name)}”)")
    if backend == "cpu" and kind == "cuda":
        out.append(f"the cpu backend, but the device is a GPU ({_clip(name)})")
    if isinstance(env.get("emulated"), bool) and env["emulated"] != (backend == "cpu"):
        out.append(
            f"emulated is {str(env['emulated']).lower()} with the {backend} backend (a run is a CPU emulation "
            "exactly when its backend is cpu)"
        )
    if backend == "te":
        te = _dict(env.get("transformer_engine"))
        if not te.get("available") or not versions.get("transformer_engine"):
            out.append("the te backend, but Transformer Engine is not available or has no version")
        marks = _emulation_marks(results)
        if env.get("fp8_numerics") == "emulated":
            marks.insert(0, "fp8_numerics: emulated")
        if marks:
            out.append(f"the te backend (Transformer Engine's FP8 kernels), but {'; '.join(dict.fromkeys(marks))}")
    if gpu and not versions.get("cuda"):
        out.append(f"the {backend} backend, but no CUDA version")
    clock = _dict(results.get("timing")).get("kind")
    if isinstance(clock, str) and gpu and clock.startswith("cpu"):
        out.append(f"the {backend} backend on a GPU, but CPU timings (timing kind {clock})")
    if isinstance(clock, str) and backend == "cpu" and clock.startswith("cuda"):
        out.append(f"the cpu backend, but GPU timings (timing kind {clock})")
    label = env.get("label")
    if isinstance(label, str) and backend in (*GPU_BACKENDS, "cpu") and label not in _labels_for(backend, name):
        out.append(f"a label `python -m labs run` does not write for the {backend} backend on that device")
    return out


def check_claims(result: dict) -> dict:
    """The grader's view of an upload's self-description: warn naming each contradiction, or info."""
    found = contradictions(result)
    if found:
        return {
            "check": "self-consistent",
            "status": "warn",
            "sentence": "This upload contradicts itself: "
            + "; ".join(found)
            + ". The grader decides which to believe.",
        }
    return {
        "check": "self-consistent",
        "status": "info",
        "sentence": "Its environment, label and timings agree with each other (all of them as the uploader states).",
    }
