"""Numeric question generators: each learner's own variant, drawn deterministically from a seed.

A generator is a family of problems: default parameters (a seed's worked numbers), a unit and a solver
that reuses app/content/calc.py, so a question and the lesson's worked example share one arithmetic.
`make_variant(question, seed)` draws the question's `params` ranges from a random stream fixed by
(question id, seed), solves, and fills the prompt, hint and explanation; `check_numeric` is what the
loader runs so an author learns at validation time that a generator, parameter or placeholder is wrong.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import calc
from ..schema import Choices, Numeric, Question, Range


@dataclass(frozen=True)
class Variant:
    """One learner's instance of a question: fixed by (question id, seed)."""

    question_id: str
    seed: int
    params: dict[str, Any]
    prompt: str  # Markdown, placeholders filled in
    answer: float | None  # None for non-numeric questions
    unit: str
    explanation: str  # Markdown
    values: dict[str, Any] = field(default_factory=dict)  # params + derived numbers
    hint: str = ""  # Markdown, placeholders filled in


class PracticeError(ValueError):
    """A question cannot produce a variant (unknown generator, bad parameter, unknown placeholder)."""


# ---------------------------------------------------------------- number formatting and placeholders


def fmt_number(v: Any) -> str:
    """Readable number: integers with thousands separators, others to 4 significant digits."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(fmt_number(x) for x in v) + ")"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return f"{int(v):,}"
    text = f"{v:.4g}"
    if "e" in text:
        mant, exp = text.split("e")
        return f"{mant}·10^{int(exp)}"
    return text


PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*(?:\|([^}]*))?\}\}")


def fill(template: str, values: dict[str, Any]) -> str:
    """Replace {{name}} / {{name|.2f}} with values; PracticeError names an unknown placeholder."""

    def sub(m: re.Match) -> str:
        name, spec = m.group(1), m.group(2)
        if name not in values:
            raise PracticeError(f"unknown placeholder {{{{{name}}}}}; available: {', '.join(sorted(values))}")
        v = values[name]
        if spec:
            try:
                return format(v, spec.strip())
            except (TypeError, ValueError) as exc:
                raise PracticeError(f"format {spec!r} does not apply to {name}={v!r}: {exc}") from None
        return fmt_number(v)

    return PLACEHOLDER.sub(sub, template)


# ---------------------------------------------------------------- generators


@dataclass(frozen=True)
class Generator:
    """A family of numeric problems: default parameters (a seed's worked numbers) and a solver."""

    name: str
    defaults: dict[str, Any]
    unit: str
    prompt: str  # a model prompt for authors (the template README shows it); questions write their own
    explanation: str
    solve: Callable[[dict[str, Any]], dict[str, Any]]  # params -> values incl. "answer"


def _fp8_scale(p):
    r = calc.fp8_scale(p["amax"], p["fmt"], p.get("margin", 0))
    return {"answer": r["scale"], "scale": r["scale"], "fp8_max": r["fp8_max"]}


def _fp8_clip(p):
    s = calc.fp8_scale(p["amax"], p["fmt"])["scale"]
    m = calc.fp8_map(p["value"], s, p["fmt"])
    clamped = math.copysign(min(abs(m["scaled"]), m["fp8_max"]), m["scaled"])
    return {
        "answer": clamped,
        "scale": s,
        "scaled": m["scaled"],
        "fp8_max": m["fp8_max"],
        "clipped": m["clipped"],
        "stored": m["stored"],
    }


def _step_time(p):
    overlap = min(p["overlap"], p["compute"], p["comm"])  # a range may draw more overlap than exists
    r = calc.step_time(p["compute"], p["comm"], overlap)
    return {"answer": r["total"], "overlap": overlap, "exposed": r["exposed"], "serial": r["serial"]}


def _ring(p):
    r = calc.ring_allreduce(p["size"], int(p["gpus"]))
    return {"answer": r["per_gpu"], "factor": r["factor"]}


def _collective_time(p):
    r = calc.collective_time(p["size"] * 1e9, int(p["gpus"]), p["bandwidth"] * 1e9, p["kind"])
    return {"answer": r["ms"], "moved_gb": r["moved"] / 1e9}


def _zero(p):
    r = calc.zero_memory(p["params"] * 1e9, int(p["gpus"]), int(p["stage"]))
    return {"answer": r["gb"], "bytes_per_param": r["bytes_per_param"]}


def _bubble(p):
    r = calc.pipeline_bubble(int(p["stages"]), int(p["microbatches"]))
    return {"answer": r["percent"], "fraction": r["fraction"]}


def _tp(p):
    r = calc.tp_threshold(p["flops"] * 1e12, p["bandwidth"] * 1e9)
    return {"answer": r["d_min"]}


def _vector(p):
    values = list(p["values"])
    values[-1] = p["outlier"]
    idx = int(p["index"])
    if not 0 <= idx < len(values):
        raise calc.CalcError(f"index must be in 0..{len(values) - 1}, got {idx}")
    return values, idx


def _absmax(p):
    values, idx = _vector(p)
    r = calc.absmax_quant(values, int(p["bits"]))
    return {
        "answer": r[f"q{idx}"],
        "vector": values,
        "x": values[idx],
        "step": r["step"],
        "qmax": r["qmax"],
        "dequantized": r[f"x{idx}"],
    }


def _block(p):
    values, idx = _vector(p)
    r = calc.block_quant(values, int(p["block"]), int(p["bits"]))
    whole = calc.absmax_quant(values, int(p["bits"]))
    return {
        "answer": r[f"q{idx}"],
        "vector": values,
        "x": values[idx],
        "step": r[f"step_b{idx // int(p['block'])}"],
        "q_tensor": whole[f"q{idx}"],
    }


def _accumulate(p):
    r = calc.accumulate_fp8(p["addend"], int(p["count"]), int(p["promote_every"]), p["fmt"])
    return {"answer": r["total"], "exact": r["exact"], "stuck_after": r["stuck_after"]}


GENERATORS: dict[str, Generator] = {
    g.name: g
    for g in [
        Generator(
            "fp8_scale",
            {"amax": 240, "fmt": "E4M3", "margin": 0},
            "",
            "amax = {{amax}}, format {{fmt}}: what scale maps amax to the largest {{fmt}} value?",
            "scale = {{fp8_max}} ÷ {{amax}} ≈ {{scale|.3f}}.",
            _fp8_scale,
        ),
        Generator(
            "fp8_clip",
            {"amax": 240, "value": 300, "fmt": "E4M3"},
            "",
            "The scale comes from amax = {{amax}}. Where does {{value}} land after scaling and the clamp?",
            "scale = {{fp8_max}} ÷ {{amax}} ≈ {{scale|.3f}}; {{value}} × scale ≈ {{scaled|.1f}}; "
            "clipped: {{clipped}}; the stored {{fmt}} value is {{stored}}.",
            _fp8_clip,
        ),
        Generator(
            "fp8_step_time",
            {"compute": 12, "comm": 5, "overlap": 3},
            "ms",
            "Compute {{compute}} ms, communication {{comm}} ms, {{overlap}} ms of it hidden. Step time?",
            "T ≈ {{compute}} + {{comm}} − {{overlap}} = {{answer}} ms; {{exposed}} ms of communication stays "
            "on the critical path.",
            _step_time,
        ),
        Generator(
            "ring_allreduce",
            {"size": 14, "gpus": 8},
            "GB",
            "A ring all-reduce of {{size}} GB over {{gpus}} GPUs: how much does each GPU send?",
            "Each GPU sends 2(N−1)/N = {{factor|.3f}} × {{size}} GB ≈ {{answer|.2f}} GB "
            "(reduce-scatter, then all-gather).",
            _ring,
        ),
        Generator(
            "collective_time",
            {"size": 14, "gpus": 8, "bandwidth": 450, "kind": "all-gather"},
            "ms",
            "A {{kind}} of {{size}} GB over {{gpus}} GPUs at {{bandwidth}} GB/s per GPU takes how long?",
            "(N−1)/N of the data crosses each GPU ({{moved_gb|.2f}} GB); at {{bandwidth}} GB/s that is "
            "{{answer|.1f}} ms.",
            _collective_time,
        ),
        Generator(
            "zero_memory",
            {"params": 7, "gpus": 4, "stage": 1},
            "GB",
            "{{params}}B parameters, mixed precision with Adam (16 bytes/parameter), {{gpus}} GPUs, "
            "ZeRO stage {{stage}}: memory per GPU for the training state?",
            "{{bytes_per_param}} bytes per parameter × {{params}}B = {{answer|.1f}} GB per GPU.",
            _zero,
        ),
        Generator(
            "pipeline_bubble",
            {"stages": 4, "microbatches": 8},
            "%",
            "A pipeline of {{stages}} stages runs {{microbatches}} microbatches. What fraction is bubble?",
            "(p − 1) / (m + p − 1) = {{fraction|.3f}} ≈ {{answer|.1f}}%.",
            _bubble,
        ),
        Generator(
            "tp_threshold",
            {"flops": 989, "bandwidth": 450},
            "",
            "At {{flops}} TFLOP/s and {{bandwidth}} GB/s, above which inner dimension D does a 2-way TP "
            "matmul compute longer than it communicates?",
            "D > 2·P / W = 2 × {{flops}}·10^12 / ({{bandwidth}}·10^9) ≈ {{answer|,.0f}}.",
            _tp,
        ),
        Generator(
            "absmax_int8",
            {"values": [0.3, -0.5, 0.12, 1.5], "outlier": 1.5, "index": 0, "bits": 8},
            "",
            "Quantize {{vector}} to int{{bits}} with one absmax scale. What integer does {{x}} become?",
            "step = {{step|.4f}} (max |x| ÷ {{qmax}}); round({{x}} ÷ step) = {{answer}}.",
            _absmax,
        ),
        Generator(
            "block_absmax",
            {"values": [0.3, -0.5, 0.12, 1.5], "outlier": 30, "index": 0, "block": 2, "bits": 8},
            "",
            "Quantize {{vector}} to int{{bits}} in blocks of {{block}}. What integer does {{x}} become?",
            "Its block's step is {{step|.4f}}, so {{x}} → {{answer}}; one scale for the whole vector "
            "would give {{q_tensor}}.",
            _block,
        ),
        Generator(
            "e4m3_accumulate",
            {"addend": 3, "count": 100, "promote_every": 0, "fmt": "E4M3"},
            "",
            "Add {{addend}} to itself {{count}} times, rounding the running sum to {{fmt}} after each add "
            "(promote to FP32 every {{promote_every}} terms; 0 = never). Final sum?",
            "The exact sum is {{exact}}; with this accumulation it ends at {{answer}}.",
            _accumulate,
        ),
    ]
}


# ---------------------------------------------------------------- variants


def _rng(question_id: str, seed: int) -> random.Random:
    digest = hashlib.sha256(f"{question_id}|{seed}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _draw(spec: Any, rng: random.Random) -> Any:
    if isinstance(spec, Range):
        k = int(math.floor((spec.max - spec.min) / spec.step + 1e-9))
        v = round(spec.min + rng.randint(0, k) * spec.step, 10)
        return int(v) if float(v).is_integer() and float(spec.step).is_integer() else v
    if isinstance(spec, Choices):
        return rng.choice(spec.choices)
    return spec


def check_numeric(q: Numeric) -> list[tuple[str, str, str]]:
    """Problems a parameterized question has: (field, expected, found) triples; [] when it is usable."""
    if q.generator is None:
        return []
    gen = GENERATORS.get(q.generator)
    if gen is None:
        return [("generator", f"one of {', '.join(sorted(GENERATORS))}", repr(q.generator))]
    unknown = sorted(set(q.params) - set(gen.defaults))
    problems = [
        (f"params.{name}", f"a parameter of {gen.name}: {', '.join(gen.defaults)}", repr(name)) for name in unknown
    ]
    if q.unit != gen.unit:
        problems.append(("unit", repr(gen.unit) + f" (the unit {gen.name} answers in)", repr(q.unit)))
    if problems:
        return problems
    for seed in range(5):  # every template must fill and every draw must solve
        try:
            make_variant(Question(id="check", body=q), seed)
        except PracticeError as exc:
            return [("params", "parameters and placeholders the generator can use", str(exc))]
    return []


def make_variant(question: Question, seed: int) -> Variant:
    """Deterministic per (question id, seed): params drawn from the ranges, prompt and answer computed."""
    q = question.body
    if isinstance(q, Numeric) and q.generator is not None:
        gen = GENERATORS.get(q.generator)
        if gen is None:
            raise PracticeError(f"unknown generator {q.generator!r}")
        rng = _rng(question.id, seed)
        for _attempt in range(20):  # redraw the rare combination the solver rejects
            params = {**gen.defaults, **{k: _draw(v, rng) for k, v in q.params.items()}}
            try:
                values = {**params, **gen.solve(params)}
                break
            except calc.CalcError as exc:
                last = exc
        else:
            raise PracticeError(f"{gen.name}: no valid draw in 20 tries: {last}")
        params = {k: values.get(k, v) for k, v in params.items()}  # what the solver actually used
        prompt = fill(q.prompt, values)
        explanation = fill(q.explanation or gen.explanation, values)
        hint = fill(q.hint, values) if q.hint else ""
        return Variant(question.id, seed, params, prompt, float(values["answer"]), q.unit, explanation, values, hint)
    if isinstance(q, Numeric):
        return Variant(question.id, seed, {}, q.prompt, q.answer, q.unit, q.explanation or "", {}, q.hint or "")
    return Variant(question.id, seed, {}, q.prompt, None, "", getattr(q, "explanation", None) or "", {}, q.hint or "")
