"""The /play calculators: their inputs, the outputs a learner can predict, and the arithmetic behind them.

Torch-free and HTTP-free, so the lesson loader checks every pause's `check` against the tool it names
(inputs the tool takes, within its bounds; an output the tool computes), and the pages and the JSON API
(app/services/learning/tools.py) read the same definitions.

A tool is
- a pydantic model of its inputs: every field has a `title` (the label the form and the error messages
  use) and bounds; unknown inputs are errors;
- rules across fields, each naming the field it blames, so one pass reports every problem next to its field;
- a calculation returning a flat dict, from app.content.calc (the lessons' one arithmetic) or
  labs.parallel.costmodel (the tp-sweep lab's predictions);
- the outputs a prediction may be about: a label in words and the unit a learner's answer is read in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, get_args, get_origin
from urllib.parse import urlencode

import annotated_types as at
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from labs.api import number

from . import calc
from .practice.answers import convert, parse_number
from .schema import PauseCheck

# ---------------------------------------------------------------- the parts of a tool


class Inputs(BaseModel):
    """Base of every tool's inputs: unknown names are errors."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Output:
    """Something a tool computes that a pause asks the learner to predict."""

    label: str  # in words, as a sentence uses it: "the step time"
    unit: str = ""  # practice.answers units, so "0.017 s" is read as 17 ms
    kind: Literal["number", "yes/no", "degree"] = "number"
    scale: float = 1.0  # shown = computed × scale (a ratio shown in %)
    tolerance: float = 0.05  # relative: a prediction this close counts as right

    def shown(self, value: Any) -> Any:
        if self.kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return value * self.scale
        return value


@dataclass(frozen=True)
class Rule:
    """A condition across fields; checked only when every field it reads is valid, and blamed on `blame`."""

    reads: tuple[str, ...]
    blame: str
    problem: Callable[[dict], str | None]  # a sentence when the values break the rule, else None


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    about: str  # one line under the title: what to try
    model: type[Inputs]
    compute: Callable[[Any], dict]
    outputs: dict[str, Output]
    rules: tuple[Rule, ...] = ()
    choices: dict[str, dict[Any, str]] = field(default_factory=dict)  # select fields: value -> words

    @property
    def short(self) -> str:
        """The title's head, for sentences: "Overlap window"."""
        return self.title.split(":")[0]


# ---------------------------------------------------------------- FP8 range


class Fp8RangeIn(Inputs):
    amax: float = Field(240.0, gt=0, le=1e30, title="amax behind the scale", description="e.g. last step's amax")
    value: float = Field(300.0, ge=-1e30, le=1e30, title="value arriving now")
    fmt: Literal["E4M3", "E5M2"] = Field("E4M3", title="format")
    margin: int = Field(0, ge=0, le=16, title="margin (powers of two of headroom)")


def fp8_range(p: Fp8RangeIn) -> dict:
    scale = calc.fp8_scale(p.amax, p.fmt, margin=p.margin)
    mapped = calc.fp8_map(p.value, scale=scale["scale"], fmt=p.fmt)
    err = abs(mapped["dequantized"] - p.value)
    return {
        "scale": scale["scale"],
        "fp8_max": scale["fp8_max"],
        "scaled": mapped["scaled"],
        "stored": mapped["stored"],
        "clipped": mapped["clipped"],
        "dequantized": mapped["dequantized"],
        "abs_error": err,
        "rel_error": err / abs(p.value) if p.value else 0.0,
        "headroom": scale["fp8_max"] / abs(mapped["scaled"]) if mapped["scaled"] else None,
    }


# ---------------------------------------------------------------- parallel axis


class AxisIn(Inputs):
    # Defaults: a two-matrix MLP (fc1, fc2, as in the tp-sweep lab and labs/parallel/costmodel.predict_mlp)
    # of Llama-3-8B's widths (H 4096, F 14,336, the lesson's TP-limit example) in FP8, where the prediction
    # shows over-sharding inside one node: at TP = 8 the all-reduces outweigh the local GEMMs (the step is
    # still fastest there). Llama's own MLP is gated (a third matrix), which the tool does not model.
    tokens: int = Field(4096, ge=1, le=1_048_576, title="tokens per step", description="batch × sequence per TP group")
    hidden: int = Field(4096, ge=64, le=65536, title="hidden width H")
    ffn: int = Field(14336, ge=64, le=262144, title="MLP width F", description="split across the TP ranks")
    node: Literal["H100-SXM", "H200"] = Field("H100-SXM", title="node")
    precision: Literal["fp8", "bf16"] = Field("fp8", title="GEMM precision")


def parallel_axis(p: AxisIn) -> dict:
    from labs.api import predict_sweep

    return predict_sweep(p.tokens, p.hidden, p.ffn, [1, 2, 4, 8], p.node, p.precision)


# ---------------------------------------------------------------- overlap window


class OverlapIn(Inputs):
    compute_ms: float = Field(12.0, ge=0, le=1e6, title="compute in the step (ms)")
    comm_ms: float = Field(5.0, ge=0, le=1e6, title="collective (ms)")
    window_ms: float = Field(3.0, ge=0, le=1e6, title="independent work placed in the window (ms)")
    consumer_reads_result: bool = Field(False, title="the work in the window reads the gathered result")


def overlap_window(p: OverlapIn) -> dict:
    # Work that reads the gathered result cannot start before the wait: it hides nothing.
    hidden = 0.0 if p.consumer_reads_result else min(p.window_ms, p.comm_ms)
    out = calc.step_time(p.compute_ms, p.comm_ms, hidden)
    out["unsafe"] = p.consumer_reads_result
    return out


# ---------------------------------------------------------------- memory per GPU

HBM_GB = {"H100-SXM": 80.0, "H200": 141.0}  # datasheet HBM capacity per GPU
ZERO_STAGES = {  # what data parallelism shards, by ZeRO stage
    0: "0 – plain DDP, nothing sharded",
    1: "1 – optimizer state",
    2: "2 – + gradients",
    3: "3 – + weights (FSDP)",
}


class MemoryIn(Inputs):
    # Defaults: lesson 08's 7B-class model on one 8-GPU node (32 layers, H 4096, 32 heads, 4,096 tokens).
    params_b: float = Field(7.0, gt=0, le=10_000, title="parameters (billions)")
    layers: int = Field(32, ge=1, le=1024, title="layers")
    hidden: int = Field(4096, ge=64, le=131072, title="hidden width H")
    heads: int = Field(32, ge=1, le=1024, title="attention heads")
    seq: int = Field(4096, ge=1, le=1_048_576, title="sequence length (tokens)")
    micro_batch: int = Field(1, ge=1, le=4096, title="micro-batch (sequences)")
    dp: int = Field(8, ge=1, le=100_000, title="data-parallel ranks (DP)")
    zero: int = Field(1, ge=0, le=3, title="ZeRO stage (what DP shards)")
    tp: int = Field(1, ge=1, le=64, title="tensor-parallel degree (TP)")
    pp: int = Field(1, ge=1, le=1024, title="pipeline stages (PP)")
    sequence_parallel: bool = Field(True, title="sequence parallelism (with TP)")
    recompute: Literal["selective", "none", "full"] = Field("selective", title="activation recomputation")
    gpu: Literal["H100-SXM", "H200"] = Field("H100-SXM", title="GPU")


def memory(p: MemoryIn) -> dict:
    hbm = HBM_GB[p.gpu]

    def per_gpu(zero: int, recompute: str) -> dict:
        return calc.memory_per_gpu(
            p.params_b * 1e9, p.layers, p.hidden, p.heads, p.seq, p.micro_batch,
            dp=p.dp, tp=p.tp, pp=p.pp, zero=zero, sequence_parallel=p.sequence_parallel, recompute=recompute,
            hbm_gb=hbm,
        )  # fmt: skip

    out = per_gpu(p.zero, p.recompute)
    out["hbm_gb"] = hbm
    out["gpus"] = p.dp * p.tp * p.pp
    # The same model under each ZeRO stage and each recomputation choice: what the next knob would buy.
    out["by_zero"] = [per_gpu(z, p.recompute)["total_gb"] for z in (0, 1, 2, 3)]
    out["by_recompute"] = {r: per_gpu(p.zero, r)["activations_gb"] for r in ("none", "selective", "full")}
    return out


def _ffn_splits(v: dict) -> str | None:
    return None if v["ffn"] % 8 == 0 else "must be divisible by 8 so every degree up to 8 gets equal slices"


def _window_fits(v: dict) -> str | None:
    if v["window_ms"] <= v["compute_ms"]:
        return None
    return f"cannot be more than the compute in the step ({v['compute_ms']:g} ms)"


def _divides(a: str, b: str, words: str) -> Callable[[dict], str | None]:
    def problem(v: dict) -> str | None:
        return None if v[b] % v[a] == 0 else f"{v[a]} does not divide {words} ({v[b]})"

    return problem


# ---------------------------------------------------------------- registry

_GB = "GB"
TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "fp8-range",
            "FP8 range: scale, clipping and the stale-scale spike",
            "The lesson's worked example: amax 240, value 120 fits; value 300 under last step's scale clips.",
            Fp8RangeIn,
            fp8_range,
            {
                "scale": Output("the scale"),
                "scaled": Output("the scaled value"),
                "stored": Output("the value stored in FP8"),
                "clipped": Output("whether the value clips", kind="yes/no"),
                "dequantized": Output("the value read back"),
                "rel_error": Output("the relative error", "%", scale=100),
            },
        ),
        Tool(
            "parallel-axis",
            "Parallel axis: where tensor parallelism stops paying (predicted)",
            "A two-matrix MLP of Llama-3-8B's widths in FP8 on one node by default; switch to BF16 and watch the"
            " limit move.",
            AxisIn,
            parallel_axis,
            {
                "best_degree": Output("the fastest TP degree", kind="degree"),
                "oversharding_from": Output("the TP degree where over-sharding begins", kind="degree"),
                "comm_exceeds_gemm_from": Output(
                    "the TP degree from which the all-reduces outweigh the local GEMMs", kind="degree"
                ),
                "step_stops_improving_from": Output("the TP degree from which the step stops improving", kind="degree"),
            },
            rules=(Rule(("ffn",), "ffn", _ffn_splits),),
        ),
        Tool(
            "overlap-window",
            "Overlap window: what an async collective really hides",
            "The lesson's step: 12 ms of compute and a 5 ms collective, 3 ms of it hidden: 14 ms.",
            OverlapIn,
            overlap_window,
            {
                "total": Output("the step time", "ms"),
                "exposed": Output("the exposed communication", "ms"),
                "hidden": Output("the communication hidden under compute", "ms"),
                "overlap_ratio": Output("the overlap ratio", "%", scale=100),
            },
            rules=(Rule(("window_ms", "compute_ms"), "window_ms", _window_fits),),
        ),
        Tool(
            "memory",
            "Memory per GPU: weights, gradients, optimizer state, activations",
            "Lesson 08's 7B model on 8 GPUs; try ZeRO-3, TP = 8 or no recomputation and see what fits.",
            MemoryIn,
            memory,
            {
                "weights_gb": Output("the weights per GPU", _GB),
                "grads_gb": Output("the gradients per GPU", _GB),
                "optim_gb": Output("the optimizer state per GPU", _GB),
                "state_gb": Output("the training state per GPU", _GB),
                "activations_gb": Output("the activation memory per GPU", _GB),
                "total_gb": Output("the memory per GPU", _GB),
                "fits": Output("whether it fits", kind="yes/no"),
            },
            rules=(
                Rule(("hidden", "heads"), "heads", _divides("heads", "hidden", "the hidden width")),
                Rule(("heads", "tp"), "tp", _divides("tp", "heads", "the number of heads")),
                Rule(("layers", "pp"), "pp", _divides("pp", "layers", "the number of layers")),
            ),
            choices={"zero": ZERO_STAGES},
        ),
    )
}


# ---------------------------------------------------------------- inputs in the learner's words


def _fmt_bound(x: float) -> str:
    return number(x, 15)


def expected(tool: Tool, name: str) -> str:
    """What a field accepts, in words: "a whole number from 1 to 64", "one of E4M3, E5M2"."""
    info = tool.model.model_fields[name]
    ann = info.annotation
    if name in tool.choices:
        return "one of " + ", ".join(str(k) for k in tool.choices[name])
    if get_origin(ann) is Literal:
        return "one of " + ", ".join(map(str, get_args(ann)))
    if ann is bool:
        return "on or off"
    lo: float | None = None
    hi: float | None = None
    lo_strict = False
    for m in info.metadata:
        if isinstance(m, at.Ge):
            lo = float(m.ge)  # type: ignore[arg-type]  # our bounds are numbers
        elif isinstance(m, at.Gt):
            lo, lo_strict = float(m.gt), True  # type: ignore[arg-type]
        elif isinstance(m, at.Le):
            hi = float(m.le)  # type: ignore[arg-type]
    kind = "a whole number" if ann is int else "a number"
    if lo is not None and hi is not None:
        if lo_strict:
            return f"{kind} above {_fmt_bound(lo)} and at most {_fmt_bound(hi)}"
        return f"{kind} from {_fmt_bound(lo)} to {_fmt_bound(hi)}"
    return kind


@cache
def _adapter(tool_name: str, name: str) -> TypeAdapter:
    info = TOOLS[tool_name].model.model_fields[name]
    return TypeAdapter(info.rebuild_annotation())


def label(tool: Tool, name: str) -> str:
    return tool.model.model_fields[name].title or name


def validate(tool: Tool, data: Mapping[str, Any]) -> tuple[Inputs | None, dict[str, str]]:
    """The tool's inputs from `data` (missing ones take their defaults), or every problem at once.

    Problems are {field: sentence}: each field is checked on its own, then the rules whose fields are all
    valid, so a learner sees every mistake in one pass, next to the field it concerns.
    """
    fields = tool.model.model_fields
    problems: dict[str, str] = {}
    for name in data:
        if name not in fields:
            problems[name] = f"{name!r} is not an input of this tool; its inputs are {', '.join(fields)}"
    values: dict[str, Any] = {}
    for name, info in fields.items():
        if name not in data:
            values[name] = info.default
            continue
        raw = data[name]
        try:
            values[name] = _adapter(tool.name, name).validate_python(raw)
        except ValidationError:
            shown = raw if isinstance(raw, str) else repr(raw)
            problems[name] = f"{label(tool, name)}: {expected(tool, name)}; you wrote “{shown}”"
    for rule in tool.rules:
        if rule.blame in problems or any(r in problems for r in rule.reads):
            continue
        found = rule.problem(values)
        if found:
            problems[rule.blame] = f"{label(tool, rule.blame)}: {found}"
    if problems:
        return None, problems
    return tool.model.model_validate(values), {}


# ---------------------------------------------------------------- predictions

_NUMBER_IN_TEXT = re.compile(
    r"(?<![\w.])[+\-−]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:e[+-]?\d+)?(?:\s*(?:%|×|[A-Za-zµμ]+))?", re.IGNORECASE
)
# Words after a number that are units (practice.answers converts them); any other word is prose.
_UNIT_WORDS = set("ms s sec us µs μs ns min h d gb gib mb mib tb kb b bytes % percent x ×".split())


def read_prediction(output: Output, text: str | None) -> float | None:
    """The number a learner's written answer predicts for `output`, in the output's unit, or None.

    In prose a number written with a unit that fits the output wins over bare numbers, and among those the
    last (a conclusion usually comes last: "12 + 5 = 17 ms"); numbers with another kind of unit are skipped.
    The page shows which number was read, and the learner can change it on /play.
    """
    if output.kind == "yes/no" or not text:
        return None
    found: list[float] = []
    with_unit: list[float] = []
    for m in _NUMBER_IN_TEXT.finditer(text):
        try:
            value, unit = parse_number(m.group(0))
        except ValueError:
            continue
        unit = unit.strip()
        if unit and unit.lower() not in _UNIT_WORDS:
            unit = ""  # a word after the number ("8 ranks", "4 stages"): not a unit
        try:
            value = convert(value, unit, output.unit) if unit else value
        except ValueError:
            continue
        if math.isfinite(value):
            (with_unit if unit else found).append(value)
    if with_unit and output.unit:
        return with_unit[-1]
    numbers = found or with_unit
    return numbers[-1] if numbers else None


@dataclass(frozen=True)
class Verdict:
    predicted: float
    actual: Any
    right: bool
    words: str


def judge(output: Output, predicted: float, actual: Any) -> Verdict:
    """Compare a prediction with what the tool computed, in words."""
    unit = f" {output.unit}" if output.unit and output.unit != "%" else output.unit
    shown = output.shown(actual)
    if output.kind == "degree":
        if actual is None:
            return Verdict(predicted, None, False, "the prediction finds no such degree up to TP = 8")
        right = predicted == actual
        return Verdict(predicted, actual, right, "right" if right else f"the calculator says TP = {actual}")
    if not isinstance(shown, (int, float)) or isinstance(shown, bool):
        return Verdict(predicted, shown, False, "not a number to compare")
    diff = predicted - shown
    right = abs(diff) <= max(output.tolerance * abs(shown), 1e-9)
    if right:
        return Verdict(predicted, shown, True, f"right (within {output.tolerance:.0%})")
    rel = f", {abs(diff) / abs(shown):.0%}" if shown else ""
    return Verdict(
        predicted, shown, False, f"off by {abs(diff):.3g}{unit}{rel} {'too high' if diff > 0 else 'too low'}"
    )


# ---------------------------------------------------------------- predict, then check: the link


@dataclass(frozen=True)
class CheckLink:
    """A pause's "check your prediction" link to /play, with the learner's number when they wrote one."""

    url: str
    tool: Tool
    about: Output | None
    predicted: float | None
    scenario: list[tuple[str, str]]  # (label, value) of the inputs that pose the pause's question


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def check_link(tool_name: str, inputs: Mapping[str, Any], predicts: str | None, answer: str | None) -> CheckLink:
    """The URL that opens `tool_name` on /play with the pause's scenario (every input, so defaults changing
    later cannot change the question) and, when the learner's answer holds a number, that number as their
    prediction of `predicts`."""
    tool = TOOLS[tool_name]
    params = tool.model.model_validate(dict(inputs))
    values = params.model_dump()
    about = tool.outputs.get(predicts) if predicts else None
    predicted = read_prediction(about, answer) if about else None
    query = {k: _query_value(v) for k, v in values.items()}
    if predicts:
        query["predicts"] = predicts
    if predicted is not None:
        query["predict"] = f"{predicted:.6g}"
    scenario = [(label(tool, k), _query_value(values[k])) for k in inputs]
    return CheckLink(f"/play/{tool_name}?{urlencode(query)}#tool-{tool_name}", tool, about, predicted, scenario)


def pause_link(check: PauseCheck, answer: str | None = None) -> CheckLink:
    """The link of a pause's `check`, carrying the number `answer` (the learner's text) predicts. It lives
    here rather than on PauseCheck so that the schema stays data: the schema imports no tool."""
    return check_link(check.tool, check.inputs, check.predicts, answer)
