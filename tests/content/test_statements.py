"""The lesson's claims checked against the arithmetic and the facts they rest on.

Each test guards a class of error found in review: a direction stated backwards, a number
typed by hand where calc computes it, a claim about Transformer Engine that its source contradicts. The
facts about TE were read in NVIDIA/TransformerEngine v2.9 (and still hold at 2.20.0.dev0):
- transformer_engine/pytorch/quantization.py: `reduce_tensor_across_group_op_max` calls
  `torch.distributed.all_reduce(..., async_op=False)` from `reduce_and_update_fp8_tensors`, which
  `autocast_exit` runs for forward tensors; module backward passes (module/linear.py) run it for
  gradients; `autocast(recipe=...)` is the API and `fp8_autocast` a deprecated alias;
  `check_mxfp8_support` needs compute capability 10.0; `check_fp8_block_scaling_support` 9.0 + CUDA 12.9.
- transformer_engine/common/recipe/recipe_common.cuh: block scales are fp8_max/amax with the mantissa
  masked off (a multiplier rounded down); common/util/ptx.cuh `float_to_e8m0` rounds amax/fp8_max up.
- transformer_engine/pytorch/module/base.py: amax history and scale live in each module's
  `fp8_meta["scaling_fwd"]` / `["scaling_bwd"]`.
"""

import math
import random
import re
from pathlib import Path

import pytest
import yaml

from app.content import calc
from app.content.loader import load_course

from .conftest import LESSONS


def _text(s: str) -> str:
    return " ".join(s.split())


def _section(lesson, sid):
    return next(b for _, b in lesson.blocks("section") if b.id == sid)


def _sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.:;])\s+(?=[A-Z])", _text(text))


# ---------------------------------------------------------------- Part 01: which way a wrong scale fails


def test_scale_direction_is_stated_the_way_calc_computes_it(l06):
    body = _section(l06, "range-management").body
    sentences = _sentences(body)
    too_large = [s for s in sentences if "too large" in s]
    too_small = [s for s in sentences if "too small" in s]
    assert too_large and too_small, sentences
    assert all(re.search(r"satur|clamp|past the maximum", s) for s in too_large), too_large
    assert all(re.search(r"subnormal|zero", s) for s in too_small), too_small
    assert not any(re.search(r"satur|clamp", s) for s in too_small), too_small
    # The arithmetic behind the words: a multiplier above fp8_max/amax clips amax itself; one far below
    # it sends a small value to zero that the right scale keeps.
    for amax in (0.37, 240.0, 5000.0):
        right = calc.fp8_scale(amax)["scale"]
        assert not calc.fp8_map(amax, scale=right)["clipped"]
        assert calc.fp8_map(amax, scale=right * 1.25)["clipped"]
        small = amax * 2e-5
        assert calc.fp8_map(small, scale=right)["stored"] > 0
        assert calc.fp8_map(small, scale=right / 10)["stored"] == 0
    # and the section's own numbers are the calc's
    spike, low = l06.values["worked-spike"], l06.values["small-low"]
    assert f"lands at {spike['scaled']:.0f} and is stored as {spike['stored']:.0f}" in _text(body)
    assert low["stored"] == 0 and l06.values["small-right"]["stored"] > 0


# ---------------------------------------------------------------- delayed scaling: history and timing


def test_history_stabilises_rather_than_smooths(l06):
    body = _text(_section(l06, "scaling-recipes").body)
    assert "smooths" not in body and "stabilises" in body
    assert "one spike sets the scale" in body
    # max over a window: one spike fixes the scale until it leaves the window (TE's kernel_bulk rule, labs/numerics/delayed.py)
    history = [10.0] * 15 + [100.0]
    scales = [calc.fp8_scale(max(history[max(0, i - 15) : i + 1]))["scale"] for i in range(len(history))]
    assert scales[-1] == calc.fp8_scale(100.0)["scale"] < scales[0]


def test_amax_reduction_timing_matches_current_te(l06):
    body = _text(_section(l06, "delayed-scaling-timing").body)
    assert "asynchronously" not in body and "nothing in the current step waits" not in body
    assert "synchronous" in body and "autocast region exits" in body and "after the backward pass" in body
    assert "*its own* amax" in body  # what delayed scaling does avoid


def test_block_and_mx_roundings_are_two_conventions_of_one_rule(l06):
    body = _text(_section(l06, "scaling-recipes").body)
    assert "*multiplier*" in body and "**down**" in body and "*decode*" in body and "**up**" in body
    assert "Blackwell" in body and "10.0" in body and "Hopper" in body
    rng = random.Random(3)
    for _ in range(2000):
        amax = 10 ** rng.uniform(-8, 8)
        multiplier = 2.0 ** math.floor(math.log2(448 / amax))  # block recipe: mantissa masked off
        decode = 2.0 ** math.ceil(math.log2(amax / 448))  # MX: E8M0 rounded up
        assert multiplier == 1 / decode
        assert amax * multiplier <= 448 and amax / decode <= 448


def test_ring_latency_term_is_not_hidden_behind_the_bytes(l06):
    body = _text(_section(l06, "collective-costs").body)
    assert "barely grow" in body and "*time* does" in body and "2(N-1)" in body
    t8, t1024 = l06.values["ring-time-8"], l06.values["ring-time-1024"]
    assert t1024["latency_ms"] > t1024["transfer_ms"] and t8["latency_ms"] < t8["transfer_ms"]
    assert f"{t1024['latency_ms']:.1f} ms over 1,024" in body


def test_column_row_pairing_is_stated(l06):
    body = _text(_section(l06, "parallel-axes").body)
    assert "**column-parallel**" in body and "**row-parallel**" in body
    layer = l06.values["tp-layer"]
    assert f"runs {layer['all_reduce_fwd']} all-reduces forward and {layer['all_reduce_bwd']} backward" in body
    assert "reduce-scatter" in body and "all-gather" in body


def test_code_trace_shows_the_current_api_and_where_amax_lives(l06):
    ((_, trace),) = l06.blocks("code_trace")
    assert "te.autocast(enabled=True, recipe=fp8_recipe)" in trace.code_lines[1]
    recipe = next(s for s in trace.steps if s.id == "recipe").body
    assert "fp8_autocast" in recipe and "2.9" in recipe and "FP8 metadata" in recipe
    assert "owns" not in recipe


# ---------------------------------------------------------------- a number calc computes is never typed

NUMBER = re.compile(r"(?<![\w.,])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
# Placeholders, math and code are not prose numbers.
NOT_PROSE = re.compile(r"\{\{.*?\}\}|\$\$.*?\$\$|\$[^$]*\$|`[^`]*`", re.S)
# A number that names a format, a shape or a version is not a quantity: 16-bit, 14 bits, 1×128, 10.0.
NOT_A_QUANTITY = re.compile(r"^(?:-bit| bits?\b|-way|×)|(?:×|capability |CUDA |Engine )$")
SKIPPED_KEYS = {"id", "params", "lines", "code", "url", "number", "minutes"}


def _forms(v) -> set[str]:
    """How a computed value may appear in prose: common formats within 0.5% of it, not tiny integers."""
    if isinstance(v, bool) or v == 0:
        return set()
    out = set()
    for spec in (".0f", ",.0f", ".1f", ".2f", ".3f", ".4f", ".2g", ".3g", ".4g", "g", ",g"):
        t = format(float(v), spec)
        x = float(t.replace(",", ""))
        if x != 0 and not (abs(x) < 10 and x.is_integer()) and abs(x - v) <= 0.005 * abs(v):
            out.add(t)
    return out


def _computed_forms(lesson, header: dict) -> dict[str, str]:
    """Derived outputs of every computed entry, plus the worked example's inputs (typed once, in lesson.yaml)."""
    known: dict[str, str] = {}
    for name, fields in lesson.values.items():
        inputs = _inputs(header["computed"][name].get("args", {}))
        for key, value in fields.items():
            echo = isinstance(value, (int, float)) and float(value) in inputs
            if echo and not name.startswith("worked-"):
                continue  # a problem's own input restated; the worked example's inputs must not be
            for t in _forms(value):
                known.setdefault(t, f"{name}.{key}")
    return known


def _inputs(args: dict) -> set[float]:
    flat = [x for a in args.values() for x in (a if isinstance(a, list) else [a])]
    return {float(x) for x in flat if isinstance(x, (int, float)) and not isinstance(x, bool)}


def _restated_inputs(header: dict) -> set[float]:
    """Inputs of the lesson's problems (not the worked example's): typing them states the problem."""
    return {
        x
        for name, e in header["computed"].items()
        if not name.startswith("worked-")
        for x in _inputs(e.get("args", {}))
    }


def _strings(node, path=()):
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for k, v in node.items():
            if k not in SKIPPED_KEYS:
                yield from _strings(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strings(v, (*path, i))


def typed_computed_numbers(lesson_dir: Path, lesson) -> list[str]:
    header = yaml.safe_load((lesson_dir / "lesson.yaml").read_text())
    known = _computed_forms(lesson, header)
    restated = _restated_inputs(header)
    found = []
    for f in sorted(lesson_dir.rglob("*.yaml")):
        if f.name == "lesson.yaml":
            continue
        for path, text in _strings(yaml.safe_load(f.read_text())):
            prose = NOT_PROSE.sub(" ", text)
            for m in NUMBER.finditer(prose):
                token = m.group(0).replace("−", "-")
                before, after = prose[max(0, m.start() - 12) : m.start()], prose[m.end() : m.end() + 6]
                if float(token.replace(",", "")) in restated and not known.get(token, "").startswith("worked-"):
                    continue
                if token in known and not (NOT_A_QUANTITY.search(after) or NOT_A_QUANTITY.search(before)):
                    where = ".".join(map(str, path))
                    found.append(f"{f.relative_to(lesson_dir.parent)} {where}: {token} is calc:{known[token]}")
    return found


@pytest.mark.parametrize("lesson_id", sorted(p.name for p in LESSONS.iterdir() if p.is_dir() and p.name[0] not in "_."))
def test_no_part_types_a_number_that_calc_computes(course, lesson_id):
    found = typed_computed_numbers(LESSONS / lesson_id, course.lesson(lesson_id))
    assert found == [], "write these as {{calc:NAME.FIELD}} placeholders:\n" + "\n".join(found)


def test_the_typed_number_check_can_fail(tmp_path):
    import shutil

    shutil.copytree(LESSONS / "transformer-scaling", tmp_path / "transformer-scaling")
    atlas = tmp_path / "transformer-scaling" / "atlas.yaml"
    atlas.write_text(
        atlas.read_text().replace("{{calc:worked-spike.scaled}}", "560").replace("{{calc:worked-normal.value}}", "120")
    )
    lesson = load_course(tmp_path).lesson("transformer-scaling")
    found = typed_computed_numbers(tmp_path / "transformer-scaling", lesson)
    assert any("560 is calc:worked-spike.scaled" in f for f in found), found
    assert any("120 is calc:worked-normal.value" in f for f in found), found  # an input typed twice


def test_pause_checks_name_real_tool_inputs_and_outputs(course):
    """Every "predict, then check" link names a /play tool of its lesson, valid inputs and a computed output."""
    from app.content import tools

    checks = [
        (les, b.pause) for les in course.lessons.values() for _, b in les.blocks("section") if b.pause and b.pause.check
    ]
    assert len(checks) >= len(CHECKABLE)
    for lesson, pause in checks:
        tool = tools.TOOLS[pause.check.tool]
        assert pause.check.tool in lesson.header.interactive
        params, problems = tools.validate(tool, pause.check.inputs)
        assert not problems, (pause.id, problems)
        assert pause.check.predicts in tool.outputs and pause.check.predicts in tool.compute(params), pause.id


CHECKABLE = {
    # pause id -> the tool that can check it: every pause whose answer a /play tool computes carries `check`
    "fixed-scale": "fp8-range",
    "scale-lag": "fp8-range",
    "dp-long-context": "memory",
    "async-then-wait": "overlap-window",
    "tp-across-nodes": "parallel-axis",
    "pp-activations": "memory",
}


def test_every_checkable_pause_has_its_check(course):
    found = {p.id: p.check.tool for les in course.lessons.values() for p in les.pauses if p.check}
    for pause_id, tool in CHECKABLE.items():
        assert found.get(pause_id) == tool, pause_id
