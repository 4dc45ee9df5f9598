"""Variants are deterministic per seed; grading handles right, wrong, malformed, tolerance and units."""

import pytest

from app.content.practice import GENERATORS, fill, grade, make_variant, parse_number
from app.content.schema import FreeResponse, Numeric, Question, SingleChoice


def numeric(generator=None, **kw):
    body = {"kind": "numeric", "prompt": kw.pop("prompt", "Q?"), **kw}
    if generator:
        body["generator"] = generator
        body.setdefault("unit", GENERATORS[generator].unit)
    qid = body.pop("qid", "q")
    return Question(id=qid, body=Numeric.model_validate(body))


# (generator, fixed params, expected answer) — numbers worked in the source material by hand
SEED_NUMBERS = [
    ("fp8_scale", {"amax": 240, "fmt": "E4M3"}, 448 / 240),  # ≈ 1.87
    ("fp8_clip", {"amax": 240, "value": 120, "fmt": "E4M3"}, 224),
    ("fp8_clip", {"amax": 240, "value": 300, "fmt": "E4M3"}, 448),  # 560 clips at 448
    ("fp8_step_time", {"compute": 12, "comm": 5, "overlap": 3}, 14),
    ("ring_allreduce", {"size": 4, "gpus": 4}, 6),  # 6 numbers sent for an array of 4
    ("ring_allreduce", {"size": 1, "gpus": 8}, 1.75),
    ("collective_time", {"size": 14, "gpus": 8, "bandwidth": 450}, 27.2),  # ≈ 27 ms
    ("zero_memory", {"params": 7, "gpus": 4, "stage": 0}, 112),
    ("zero_memory", {"params": 7, "gpus": 4, "stage": 1}, 49),
    ("zero_memory", {"params": 7, "gpus": 4, "stage": 2}, 38.5),
    ("zero_memory", {"params": 7, "gpus": 4, "stage": 3}, 28),
    ("pipeline_bubble", {"stages": 4, "microbatches": 8}, 100 * 3 / 11),  # ≈ 27%
    ("tp_threshold", {"flops": 989, "bandwidth": 450}, 4396),  # ≈ 4,400
    ("absmax_int8", {"index": 0}, 25),
    ("absmax_int8", {"index": 1}, -42),
    ("absmax_int8", {"index": 1, "outlier": 30}, -2),
    ("block_absmax", {"index": 0}, 76),
    ("block_absmax", {"index": 1}, -127),
    ("e4m3_accumulate", {}, 64),
    ("e4m3_accumulate", {"promote_every": 8}, 300),
]


@pytest.mark.parametrize("generator,params,expected", SEED_NUMBERS)
def test_generator_reproduces_hand_computed_number(generator, params, expected):
    v = make_variant(numeric(generator, params=params), seed=0)
    assert v.answer == pytest.approx(expected, rel=2e-3)


def test_at_least_eight_generators():
    assert len(GENERATORS) >= 8


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generator_is_deterministic_per_seed_and_varies(name):
    gen = GENERATORS[name]
    ranges = {}
    for key, default in gen.defaults.items():
        if isinstance(default, (int, float)) and not isinstance(default, bool) and key not in ("index", "bits"):
            ranges[key] = (
                {"min": max(1, default // 2), "max": default * 2 + 2, "step": 1}
                if key != "overlap"
                else {"min": 0, "max": 4}
            )
    if name in ("absmax_int8", "block_absmax"):
        ranges = {"outlier": {"choices": [1.5, 3.0, 30.0]}, "index": {"min": 0, "max": 2}}
    if name == "e4m3_accumulate":
        ranges = {"addend": {"choices": [1, 2, 3, 5]}, "count": {"min": 20, "max": 120}}
    if name == "fp8_scale" or name == "fp8_clip":
        ranges.pop("margin", None)
    if name == "zero_memory":
        ranges["stage"] = {"min": 0, "max": 3}
    q = numeric(name, params=ranges, prompt=gen.prompt)
    a, b = make_variant(q, 11), make_variant(q, 11)
    assert a == b
    variants = {make_variant(q, s).prompt for s in range(12)}
    assert len(variants) > 1, "seeds should change the numbers"
    assert "{{" not in a.prompt and "{{" not in a.explanation
    assert grade(q, a, repr(a.answer)).correct


def test_variant_depends_on_question_id_and_seed():
    spec = {"amax": {"min": 100, "max": 400, "step": 1}}
    one = numeric("fp8_scale", params=spec, prompt="{{amax}}", qid="one")
    two = numeric("fp8_scale", params=spec, prompt="{{amax}}", qid="two")
    draws_one = [make_variant(one, s).params["amax"] for s in range(8)]
    draws_two = [make_variant(two, s).params["amax"] for s in range(8)]
    assert draws_one == [make_variant(one, s).params["amax"] for s in range(8)]
    assert draws_one != draws_two  # two questions with the same seed do not share numbers
    assert all(100 <= a <= 400 and float(a).is_integer() for a in draws_one)


def test_grading_correct_incorrect_and_tolerance():
    q = numeric("fp8_step_time", params={}, tolerance={"abs": 0.5})
    v = make_variant(q, 0)
    assert v.answer == 14
    assert grade(q, v, "14").correct
    assert grade(q, v, "14.4 ms").correct
    wrong = grade(q, v, "18")  # no named mistake: compute + comm is 17, compute alone 12
    assert wrong.status == "incorrect" and wrong.counts_as_attempt
    assert wrong.expected == 14 and wrong.unit == "ms" and wrong.expected_text == "14 ms"
    assert "±0.5 ms" in wrong.message and "too high" in wrong.message
    assert "too low" in grade(q, v, "10").message
    rel = numeric("fp8_scale", params={}, tolerance={"rel": 0.01})
    rv = make_variant(rel, 0)
    assert grade(rel, rv, "1.87").correct and grade(rel, rv, "1.866").correct
    assert not grade(rel, rv, "1.9").correct  # 1.8% off


def test_units_convert_within_a_dimension():
    q = numeric("fp8_step_time", params={})
    v = make_variant(q, 0)
    assert grade(q, v, "0.014 s").correct
    assert grade(q, v, "14000 us").correct
    bad = grade(q, v, "14 GB")
    assert bad.status == "invalid" and not bad.counts_as_attempt and "ms" in bad.message
    z = numeric("zero_memory", params={})
    zv = make_variant(z, 0)
    assert zv.answer == 49 and grade(z, zv, "49,000 MB").correct and grade(z, zv, "49 gb").correct
    pct = numeric("pipeline_bubble", params={}, tolerance={"abs": 0.5})
    pv = make_variant(pct, 0)
    assert grade(pct, pv, "27.3%").correct and grade(pct, pv, "27 %").correct


@pytest.mark.parametrize("raw", ["", "   ", "abc", "fourteen", "1.2.3", "nan", "inf", "--3"])
def test_non_numbers_are_invalid_not_attempts(raw):
    q = numeric("fp8_step_time", params={})
    fb = grade(q, make_variant(q, 0), raw)
    assert fb.status == "invalid" and not fb.correct and not fb.counts_as_attempt
    assert fb.message


@pytest.mark.parametrize(
    "raw,value,unit",
    [
        ("14", 14, ""),
        ("-2.5e3 ms", -2500, "ms"),
        ("1,234.5", 1234.5, ""),
        ("16 384", 16384, ""),
        ("0,5", 0.5, ""),
        ("−3", -3, ""),
        (".5x", 0.5, "x"),
        ("27%", 27, "%"),
    ],
)
def test_parse_number(raw, value, unit):
    assert parse_number(raw) == (pytest.approx(value), unit)


def test_fixed_numeric_question():
    q = numeric(answer=300, unit="", tolerance={"abs": 0})
    v = make_variant(q, 5)
    assert v.answer == 300 and grade(q, v, "300").correct and not grade(q, v, "64").correct


def test_single_choice_feedback_per_option():
    q = Question(
        id="sc",
        body=SingleChoice.model_validate(
            {
                "kind": "single_choice",
                "prompt": "Which?",
                "explanation": "Because.",
                "options": [
                    {"id": "A", "text": "TP", "correct": True, "feedback": "Yes, TP."},
                    {"id": "B", "text": "DP", "feedback": "DP replicates."},
                ],
            }
        ),
    )
    right, wrong = grade(q, None, "a"), grade(q, None, "B")
    assert right.correct and right.message == "Yes, TP." and right.chosen == "A"
    assert wrong.status == "incorrect" and wrong.message == "DP replicates." and wrong.expected_text == "A"
    assert grade(q, None, "Z").status == "invalid"


def test_free_response_needs_text_then_reveals_reference():
    q = Question(
        id="fr",
        body=FreeResponse.model_validate(
            {"kind": "free_response", "prompt": "Why?", "hint": "Think.", "reference_answer": "Range."}
        ),
    )
    assert grade(q, None, "  ").status == "invalid"
    fb = grade(q, None, "because of range")
    assert fb.status == "answered" and fb.message == "Range." and fb.counts_as_attempt


def test_a_fraction_shown_as_a_percentage():
    assert fill("at {{mfu|%}} MFU, × {{mfu}}", {"mfu": 0.4}) == "at 40% MFU, × 0.4"
    assert fill("{{f|%}}", {"f": 0.55}) == "55%" and fill("{{f|%}}", {"f": 0.375}) == "37.5%"  # never rounded away
    q = numeric("gpu_hours", params={"mfu": 0.3}, prompt="{{mfu|%}} MFU: GPU-hours?")
    assert make_variant(q, seed=0).prompt == "30% MFU: GPU-hours?"


def test_unknown_placeholder_and_params_are_reported():
    from app.content.practice import PracticeError, check_numeric

    with pytest.raises(PracticeError, match="unknown placeholder"):
        fill("{{nope}}", {"a": 1})
    bad = numeric("fp8_scale", params={"colour": 1}).body
    assert check_numeric(bad)[0][0] == "params.colour"
    wrong_unit = numeric("fp8_step_time", params={}, unit="s").body
    assert check_numeric(wrong_unit)[0][0] == "unit"
    bad_prompt = numeric("fp8_scale", params={}, prompt="{{amx}}").body
    assert "amx" in check_numeric(bad_prompt)[0][2]


# ---------------------------------------------------------------- slips get a hint, not a wrong attempt


def test_fraction_for_a_percentage_gets_a_hint_not_an_attempt(course):
    q = course.lesson("precision-by-numbers").questions["pipeline-bubble"]
    v = make_variant(q, 0)
    fraction = v.answer / 100
    fb = grade(q, v, f"{fraction:.3f}")
    assert fb.status == "hint" and not fb.counts_as_attempt
    assert "As a percentage?" in fb.message
    assert grade(q, v, f"{v.answer:.2f}").correct
    assert grade(q, v, f"{v.answer / 100:.3f} %").status == "hint"  # the slip, even with the sign typed
    assert grade(q, v, f"{v.answer + 20:.1f}").status == "incorrect"


def test_percentage_slip_only_on_percentage_questions():
    q = numeric("pipeline_bubble", params={"stages": 4, "microbatches": 8})
    v = make_variant(q, 0)
    assert grade(q, v, "0.2727").status == "hint"
    ratio = numeric(answer=27.27, unit="", prompt="How many?")
    assert grade(ratio, make_variant(ratio, 0), "0.2727").status == "incorrect"


def test_spike_clip_asks_before_rounding_and_hints_at_the_rounded_value(l06):
    q = l06.questions["fp8-spike-clip"]
    assert "**before** it is rounded" in q.body.prompt
    seen_slip = False
    for seed in range(40):
        v = make_variant(q, seed)
        assert grade(q, v, repr(v.answer)).correct
        stored = v.values["stored"]
        if abs(stored - v.answer) > 0.003 * abs(v.answer):
            fb = grade(q, v, repr(stored))
            assert fb.status == "hint" and "before that rounding" in fb.message and not fb.counts_as_attempt
            seen_slip = True
    assert seen_slip


def test_spike_clip_explanation_never_says_not_clipped_of_a_clamped_value(l06):
    """A scaled value just over 448 is clamped but rounds to 448 anyway, so it does not count as clipped; the
    explanation said "after the clamp 448.0 (clipped: no)" for it, which reads as a contradiction."""
    q = l06.questions["fp8-spike-clip"]
    seen = set()
    for seed in range(400):
        v = make_variant(q, seed)
        scaled, top = v.values["scaled"], v.values["fp8_max"]
        if v.values["clipped"]:
            seen.add("clipped")
            assert "(clipped: yes)" in v.explanation
        elif scaled > top:
            seen.add("rounds")
            assert "not counted as clipped: within half a grid step of 448" in v.explanation
        else:
            seen.add("inside")
            assert "(clipped: no)" in v.explanation
    assert seen == {"clipped", "rounds", "inside"}


def test_narrow_accumulator_question_truncates_and_names_the_wrong_mechanisms(course):
    q = course.lesson("precision-by-numbers").questions["narrow-accumulator"]
    seen_lost_all = False
    for seed in range(24):
        v = make_variant(q, seed)
        exact, spacing = v.values["exact"], v.values["spacing"]
        assert v.answer <= exact < v.answer + spacing and (v.answer / spacing).is_integer()
        seen_lost_all |= v.answer == v.params["partial"]  # an add below the spacing vanishes
        fb = grade(q, v, repr(exact))
        assert fb.status == "incorrect" and "FP32 accumulator" in fb.message, fb.message
        assert "E4M3" in grade(q, v, "448").message
    assert seen_lost_all
    # 3,000 + 0.9 with 14 significant bits: spacing 0.25, truncation keeps 3,000.75, nearest would give 3,001
    fixed = numeric("narrow_add", params={"partial": 3000, "addend": 0.9}, tolerance={"abs": 0})
    v = make_variant(fixed, 0)
    assert v.answer == 3000.75 and grade(fixed, v, "3000.75").correct
    assert "cuts toward zero" in grade(fixed, v, "3001").message


def test_block_questions_cover_both_blocks(course):
    from app.content import calc

    lesson = course.lesson("precision-by-numbers")
    listed = [qid for _, b in lesson.blocks("questions") for qid in b.ids]
    assert listed.index("block-int8-outlier") == listed.index("block-int8-code") + 1
    for seed in range(10):
        v = make_variant(lesson.questions["block-int8-outlier"], seed)
        assert v.values["in_outlier_block"] and v.values["x"] == 0.12
        expected = calc.block_quant(v.values["vector"], 2)["q2"]
        assert v.answer == expected == v.values["q_tensor"]
        first = make_variant(lesson.questions["block-int8-code"], seed)
        assert not first.values["in_outlier_block"]


def test_hours_and_days_convert():
    q = numeric("train_hours", params={"params": 7, "tokens": 140, "gpus": 8, "flops": 989, "mfu": 0.4})
    v = make_variant(q, 0)
    assert grade(q, v, f"{v.answer:.1f} h").correct
    assert grade(q, v, f"{v.answer / 24:.2f} days").correct
    assert grade(q, v, f"{v.answer * 60:.0f} min").correct


# ---------------------------------------------------------------- multi-step problems


def _problem():
    from app.content.schema import MultiStep

    body = MultiStep.model_validate(
        {
            "kind": "multi_step",
            "prompt": "Plan it.",
            "steps": [
                {
                    "kind": "numeric",
                    "id": "ddp",
                    "prompt": "DDP state per GPU?",
                    "generator": "model_state",
                    "params": {"params": 7, "dp": 8, "zero": 0},
                    "unit": "GB",
                },
                {
                    "kind": "single_choice",
                    "id": "fix",
                    "prompt": "Then?",
                    "options": [
                        {"id": "A", "text": "Shard", "correct": True, "feedback": "Yes."},
                        {"id": "B", "text": "TP", "feedback": "No."},
                    ],
                    "explanation": "Shard the state.",
                },
            ],
        }
    )
    return Question(id="plan", body=body)


def test_multi_step_grades_each_step_with_the_practice_rules():
    from app.content.practice import grade_step, step_question

    q = _problem()
    assert grade_step(q, "ddp", "112 GB").correct
    assert grade_step(q, "ddp", "112000 MB").correct
    assert grade_step(q, "ddp", "56").status == "incorrect"
    assert grade_step(q, "ddp", "lots").status == "invalid"
    assert grade_step(q, "fix", "A").correct and grade_step(q, "fix", "B").status == "incorrect"
    assert step_question(q, "ddp").id == "plan:ddp"
    with pytest.raises(ValueError, match="no step 'nope'"):
        grade_step(q, "nope", "1")
    assert grade(q, None, "112").status == "invalid"


def test_multi_step_numeric_steps_must_be_fixed():
    from pydantic import ValidationError

    from app.content.schema import MultiStep

    with pytest.raises(ValidationError, match="every learner works the same scenario"):
        MultiStep.model_validate(
            {
                "kind": "multi_step",
                "prompt": "p",
                "steps": [
                    {"kind": "numeric", "id": "a", "prompt": "p", "generator": "model_state", "unit": "GB",
                     "params": {"dp": {"min": 2, "max": 8}}},
                    {"kind": "numeric", "id": "b", "prompt": "p", "answer": 1},
                ],
            }
        )  # fmt: skip


def test_fsdp_and_hsdp_questions_draw_only_setups_that_fit(course):
    from app.content import calc

    lesson = course.lesson("planning-at-scale")
    fsdp, hsdp = lesson.questions["fsdp-step-comm"], lesson.questions["hsdp-cross-node"]
    seen = set()
    for seed in range(40):
        p = make_variant(fsdp, seed).params
        assert calc.model_state(p["params"] * 1e9, dp=p["gpus"], zero=3)["state_gb"] <= 80, p
        seen.add((p["params"], p["gpus"]))
        h = make_variant(hsdp, seed).params
        assert calc.model_state(h["params"] * 1e9, dp=h["gpus_per_node"], zero=3)["state_gb"] <= 80, h
    assert (70, 8) not in seen and {(70, 64), (7, 8), (7, 512)} <= seen  # 70B needs more than one node
