"""The /play tools as data: inputs in the learner's words, predictions read from prose, check links, the
loader's guard on pauses' `check`, and defaults that teach what the lessons teach."""

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from app.content import calc, tools
from app.content.loader import validate_lesson_texts

OVERLAP, MEMORY, AXIS = tools.TOOLS["overlap-window"], tools.TOOLS["memory"], tools.TOOLS["parallel-axis"]


def test_every_bad_field_is_reported_at_once_in_plain_words():
    params, problems = tools.validate(MEMORY, {"seq": "abc", "tp": "3", "pp": "5", "recompute": "all", "dp": "0"})
    assert params is None
    assert set(problems) == {"seq", "tp", "pp", "recompute", "dp"}
    assert problems["seq"] == "sequence length (tokens): a whole number from 1 to 1,048,576; you wrote “abc”"
    assert problems["dp"].startswith("data-parallel ranks (DP): a whole number from 1 to ")
    assert problems["tp"] == "tensor-parallel degree (TP): 3 does not divide the number of heads (32)"
    assert problems["recompute"] == "activation recomputation: one of selective, none, full; you wrote “all”"
    for message in problems.values():  # no validator jargon, no dicts
        assert "Input should" not in message and "{" not in message and "type=" not in message


def test_a_rule_waits_for_the_fields_it_reads():
    """window ≤ compute is only judged once compute itself is a valid number; then it names window_ms."""
    _, problems = tools.validate(OVERLAP, {"compute_ms": "x", "window_ms": "3"})
    assert set(problems) == {"compute_ms"}
    _, problems = tools.validate(OVERLAP, {"compute_ms": "2", "window_ms": "3", "comm_ms": "-1"})
    assert problems == {
        "comm_ms": "collective (ms): a number from 0 to 1,000,000; you wrote “-1”",
        "window_ms": "independent work placed in the window (ms): cannot be more than the compute in the step (2 ms)",
    }


def test_unknown_inputs_are_named_with_the_known_ones():
    _, problems = tools.validate(OVERLAP, {"comp_ms": 3})
    assert problems == {"comp_ms": "'comp_ms' is not an input of this tool; its inputs are compute_ms, comm_ms, window_ms, consumer_reads_result"}  # fmt: skip


@pytest.mark.parametrize(
    "text,expected",
    [
        ("17 ms", 17.0),
        ("Hardly at all: 12 + 5 = 17 ms, the same as blocking.", 17.0),
        ("about 0.017 s", 17.0),  # converted to the output's unit
        ("16 ms, give or take, on 8 ranks", 16.0),  # a number with the output's kind of unit beats a bare one
        ("12 plus 5, so 17", 17.0),  # bare numbers only: the last
        ("it would take 17 ms, i.e. 90 GB", 17.0),  # a number in another kind of unit is skipped
        ("It does not change.", None),
        ("", None),
    ],
)
def test_a_prediction_is_read_from_the_learners_words(text, expected):
    assert tools.read_prediction(OVERLAP.outputs["total"], text) == expected


def test_percent_and_degree_predictions():
    assert tools.read_prediction(OVERLAP.outputs["overlap_ratio"], "about 60% hidden") == 60.0
    assert tools.read_prediction(AXIS.outputs["comm_exceeds_gemm_from"], "From 8-way TP") == 8.0
    assert tools.read_prediction(tools.TOOLS["fp8-range"].outputs["clipped"], "yes, 300 clips") is None


def test_judging_a_prediction():
    total = OVERLAP.outputs["total"]
    assert tools.judge(total, 17, 17.0).right
    wrong = tools.judge(total, 14, 17.0)
    assert not wrong.right and wrong.words == "off by 3 ms, 18% too low"
    ratio = OVERLAP.outputs["overlap_ratio"]
    assert tools.judge(ratio, 60, 0.6).right  # the tool's fraction is compared in %
    assert tools.judge(AXIS.outputs["best_degree"], 8, 8).right
    assert tools.judge(AXIS.outputs["oversharding_from"], 4, None).words.startswith("the prediction finds no such")


def test_check_link_carries_every_input_and_the_learners_number():
    link = tools.check_link("overlap-window", {"compute_ms": 12, "comm_ms": 5, "window_ms": 0}, "total", "17 ms")
    url = urlsplit(link.url)
    assert url.path == "/play/overlap-window" and url.fragment == "tool-overlap-window"
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert query == {
        "compute_ms": "12",
        "comm_ms": "5",
        "window_ms": "0",
        "consumer_reads_result": "false",  # every input: a later default cannot change the pause's question
        "predicts": "total",
        "predict": "17",
    }
    assert link.predicted == 17 and link.tool.short == "Overlap window"
    no_number = tools.check_link("overlap-window", {"window_ms": 0}, "total", "It barely differs.")
    assert no_number.predicted is None
    assert "predict=" not in no_number.url and "predicts=total" in no_number.url


def test_a_pauses_link_is_its_checks_link(l06):
    checks = [p.check for p in l06.pauses if p.check]
    assert checks, "lesson 06 has pauses with a check"
    for check in checks:
        link = tools.pause_link(check, "17 ms")
        assert link == tools.check_link(check.tool, check.inputs, check.predicts, "17 ms")
        assert link.url.startswith(f"/play/{check.tool}?")
    assert tools.pause_link(checks[0]).predicted is None


def test_parallel_axis_default_shows_where_tp_stops_paying(l06):
    """The default is the lesson's Llama-3-8B MLP (mlp-tp8's F, H = 4096) in FP8: TP = 8 over-shards."""
    params, _ = tools.validate(AXIS, {})
    assert params.ffn == 14336 and params.hidden == 4096 and params.precision == "fp8"
    out = AXIS.compute(params)
    assert out["oversharding_from"] == 8 and out["comm_exceeds_gemm_from"] == 8
    row8 = next(r for r in out["per_degree"] if r["degree"] == 8)
    assert row8["collective_ms"] > row8["local_gemm_ms"]
    # In BF16 the GEMMs take twice as long and still outweigh the all-reduces at 8: precision moves the limit.
    bf16, _ = tools.validate(AXIS, {"precision": "bf16"})
    assert AXIS.compute(bf16)["oversharding_from"] is None
    assert l06.values["mlp-tp8"]["comm_bound"]  # the lesson's forward-only count already calls TP = 8 comm-bound


def test_memory_tool_agrees_with_lesson_08(course):
    """The default is lesson 08's 7B model on 8 GPUs with ZeRO-1 and selective recomputation."""
    l08 = course.lesson("planning-at-scale")
    params, _ = tools.validate(MEMORY, {})
    out = MEMORY.compute(params)
    assert out["state_gb"] == pytest.approx(l08.values["zero1-7b"]["state_gb"])
    assert out["activations_gb"] == pytest.approx(l08.values["act-sel"]["gb"])
    assert out["by_zero"][3] == pytest.approx(l08.values["zero3-7b"]["state_gb"] + l08.values["act-sel"]["gb"])
    assert out["by_recompute"]["none"] == pytest.approx(l08.values["act-none"]["gb"])
    assert out["fits"] and out["hbm_gb"] == 80 and out["gpus"] == 8
    # DP does not touch activations; PP under 1F1B does not shrink the first stage's either (the two pauses)
    for change in ({"dp": 64}, {"pp": 4, "dp": 2}):
        other, _ = tools.validate(MEMORY, change)
        assert MEMORY.compute(other)["activations_gb"] == pytest.approx(out["activations_gb"])
    tp8, _ = tools.validate(MEMORY, {"tp": 8, "dp": 1})
    expected = calc.memory_per_gpu(7e9, 32, 4096, 32, 4096, tp=8, sequence_parallel=True, recompute="selective", zero=1)
    assert MEMORY.compute(tp8)["total_gb"] == pytest.approx(expected["total_gb"])


def _with_check(template_texts, check: str) -> dict:
    part = template_texts["parts/first-part.yaml"].replace(
        "      answer: More microbatches per batch.\n",
        f"      answer: More microbatches per batch.\n      check: {check}\n",
    )
    lesson_yaml = template_texts["lesson.yaml"] + "interactive: [overlap-window]\n"
    return {**template_texts, "parts/first-part.yaml": part, "lesson.yaml": lesson_yaml}


def test_loader_checks_a_pauses_inputs_and_output(template_texts):
    files = _with_check(template_texts, "{tool: overlap-window, inputs: {comp_ms: 3, comm_ms: -1}, predicts: speed}")
    lesson, errors = validate_lesson_texts(files, lesson_id="broken")
    assert lesson is None
    by_field = {e.field: e for e in errors}
    assert "comp_ms" in by_field["blocks[1].pause.check.inputs.comp_ms"].expected
    comm = by_field["blocks[1].pause.check.inputs.comm_ms"]
    assert "a number from 0 to 1,000,000" in comm.expected and comm.line == 17
    assert by_field["blocks[1].pause.check.predicts"].found == "'speed'"
    assert "total" in by_field["blocks[1].pause.check.predicts"].expected
    good = _with_check(template_texts, "{tool: overlap-window, inputs: {window_ms: 0}, predicts: total}")
    assert validate_lesson_texts(good, lesson_id="fine")[1] == []


def test_loader_refuses_an_unknown_interactive_tool(template_texts):
    files = {**template_texts, "lesson.yaml": template_texts["lesson.yaml"] + "interactive: [pipeline-sim]\n"}
    lesson, errors = validate_lesson_texts(files, lesson_id="broken")
    assert lesson is None
    (e,) = [e for e in errors if e.field == "interactive[0]"]
    assert e.found == "'pipeline-sim'" and re.search(r"memory", e.expected)
