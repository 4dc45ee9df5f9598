"""A wrong answer that matches a known wrong idea is told which idea (and still counts as a try); a unit slip
gets a hint (not a try); the out-of-range feedback names the accepted range as the question sets it. The wrong
values are worked by hand from the lessons' numbers, not taken from the generators."""

import pytest

from app.content.practice import grade, make_variant
from tests.content.test_practice import numeric

# (generator, params, right answer, wrong answer, words the feedback must contain)
MISTAKES = [
    # 14 GB over 8 GPUs: 2 × 7/8 × 14 = 24.5 GB; one phase is 12.25; without the 7/8, 28
    ("ring_allreduce", {"size": 14, "gpus": 8}, 24.5, 12.25, "runs two phases"),
    ("ring_allreduce", {"size": 14, "gpus": 8}, 24.5, 28, "its own 1/N"),
    # all-gather: 7/8 × 14 GB ÷ 450 GB/s = 27.2 ms; 31.1 without the 7/8; 54.4 is an all-reduce
    ("collective_time", {"size": 14, "gpus": 8, "bandwidth": 450}, 27.22, 31.11, "its own 1/N"),
    ("collective_time", {"size": 14, "gpus": 8, "bandwidth": 450}, 27.22, 54.44, "an all-reduce's traffic"),
    ("collective_time", {"size": 14, "gpus": 8, "bandwidth": 450, "kind": "all-reduce"}, 54.44, 27.22, "two phases"),
    # 6 · 1e9 · 20e9 ÷ (989e12 × 0.4) = 303,337 s = 84.26 GPU-hours; 2·N·D gives a third, peak FLOP/s 0.4 of it
    ("gpu_hours", {"params": 1, "tokens": 20}, 84.26, 28.09, "the forward pass alone"),
    ("gpu_hours", {"params": 1, "tokens": 20}, 84.26, 33.7, "At 40% MFU they deliver 40% of it"),
    # 6 · 7e9 · 140e9 ÷ (8 × 989e12 × 0.4) = 516.2 h of wall clock; 4,130 GPU-hours
    ("train_hours", {"params": 7, "tokens": 140, "gpus": 8}, 516.2, 4130, "On 8 GPUs the wall clock"),
    # FSDP, 7B BF16 on 8 GPUs at 450 GB/s: 3 × 7/8 × 14 GB ÷ 450 GB/s = 81.7 ms; two collectives 54.4; no 7/8 93.3
    ("fsdp_comm", {}, 81.67, 54.44, "reduce-scatters the gradients: three"),
    ("fsdp_comm", {}, 81.67, 93.33, "its own 1/N"),
    # 512 GPUs in 64 nodes, NCCL's flat ring: 3 × 511/512 × 14 GB ÷ (8 × 50 GB/s) = 104.8 ms; through one NIC per
    # GPU 838.4 ms; the hierarchical floor 3 × 63/64 × 14 GB ÷ 400 GB/s = 103.4 ms is within 2% of it, but on
    # 64 GPUs (8 nodes) it is 3 × 7/8 × 14 ÷ 400 = 91.9 ms against the ring's 103.4 ms
    ("fsdp_comm", {"gpus": 512}, 104.79, 838.36, "one ring per rail"),
    ("fsdp_comm", {"gpus": 64}, 103.36, 91.88, "floor of a hierarchical algorithm"),
    # HSDP: 14 GB ÷ 8 = 1.75 GB shard, 2 × 63/64 × 1.75 GB ÷ 50 GB/s = 68.9 ms; the whole model 551 ms
    ("hsdp_comm", {}, 68.91, 34.45, "two phases"),
    ("hsdp_comm", {}, 68.91, 551.3, "owns 1/8 of them"),
    # KV: 2 × 32 × 8 × 128 × 2 bytes = 128 KiB per token; × 2,000 = 262.1 MB; K alone 131.1; FP32 524.3
    ("kv_cache", {}, 262.1, 131.1, "a key and a value"),
    ("kv_cache", {}, 262.1, 524.3, "BF16: 2 bytes"),
    # decode, 8.03B on one GPU at 3.35 TB/s: 16.06 GB of weights 4.79 ms + 9.44 GB of KV 2.82 ms = 7.61 ms
    ("decode_step", {}, 7.61, 4.79, "the whole KV cache once: 9.44 GB"),
    # the same on 8 GPUs: (16.06 + 9.44) GB ÷ (8 × 3.35 TB/s) = 0.951 ms + 64 all-reduces × 10 µs = 1.591 ms
    ("decode_step", {"gpus": 8}, 1.591, 0.951, "0.64 ms in all"),
    ("decode_step", {"gpus": 8}, 1.591, 8.25, "reads 1/8 of the weights"),
]


@pytest.mark.parametrize(("generator", "params", "right", "wrong", "words"), MISTAKES)
def test_a_known_wrong_idea_is_named_and_counts_as_a_try(generator, params, right, wrong, words):
    q = numeric(generator, params=params, tolerance={"rel": 0.01})
    v = make_variant(q, seed=0)
    assert v.answer == pytest.approx(right, rel=2e-3)
    fb = grade(q, v, str(wrong))
    assert fb.status == "incorrect" and fb.counts_as_attempt
    assert words in fb.message and "accepted range" not in fb.message, fb.message
    assert grade(q, v, str(right)).status == "correct"


@pytest.mark.parametrize(
    ("generator", "wrong", "words"),
    [
        ("gpu_hours", "303337", "looks like GPU-seconds"),  # 84.26 GPU-hours × 3,600
        ("kv_cache", "250", "looks like MiB"),  # 262,144,000 bytes ÷ 2²⁰
    ],
)
def test_a_unit_slip_gets_a_hint_not_a_try(generator, wrong, words):
    q = numeric(generator, tolerance={"rel": 0.01})
    fb = grade(q, make_variant(q, seed=0), wrong)
    assert fb.status == "hint" and not fb.counts_as_attempt and words in fb.message


def test_a_mistake_the_tolerance_cannot_tell_from_the_answer_is_not_named():
    """On 64 GPUs 2 × 63/64 = 1.969 is within 2% of 2, the value without the 63/64: 2.03 is out of range, and close
    to that mistake, but the mistake is no wrong idea at this tolerance, so only the range is named."""
    q = numeric("ring_allreduce", params={"size": 1, "gpus": 64}, tolerance={"rel": 0.02})
    v = make_variant(q, seed=0)
    assert grade(q, v, "2").status == "correct"
    fb = grade(q, v, "2.03")
    assert (
        fb.status == "incorrect" and fb.message == "Not quite: 2.03 GB is too high, outside the accepted range (±2%)."
    )
    q = numeric("ring_allreduce", params={"size": 1, "gpus": 64}, tolerance={"rel": 0.001})
    assert "its own 1/N" in grade(q, make_variant(q, seed=0), "2").message  # told apart at 0.1%


def test_the_accepted_range_reads_as_the_question_sets_it():
    q = numeric("tp_threshold", tolerance={"rel": 0.005})
    assert "outside the accepted range (±0.5%)" in grade(q, make_variant(q, seed=0), "3000").message  # was ±0%
    q = numeric("fp8_step_time", tolerance={"abs": 0.5})
    assert "outside the accepted range (±0.5 ms)" in grade(q, make_variant(q, seed=0), "20").message
    q = numeric("absmax_int8", tolerance={"abs": 0})
    fb = grade(q, make_variant(q, seed=0), "24")
    assert fb.message == "Not quite: 24 is not the answer, which is exact here." and fb.counts_as_attempt


def test_answer_in_is_only_for_a_unitless_answer():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="`answer_in` only for a unitless answer .*unit is 'ms'"):
        numeric("fp8_step_time", answer_in="milliseconds")
    q = numeric("gpu_hours", answer_in="GPU-hours", tolerance={"rel": 0.01})
    v = make_variant(q, seed=0)
    assert grade(q, v, "84.26 gpu-hours").message == "Correct: 84.26 GPU-hours."
    assert grade(q, v, "90").message == "Not quite: 90 GPU-hours is too high, outside the accepted range (±1%)."
    assert grade(q, v, "1").message == "Not quite: 1 GPU-hour is too low, outside the accepted range (±1%)."
    assert grade(q, v, "1 GPU-hour").status == "incorrect"  # the singular is read like the plural
    tokens = numeric("gpu_hours", answer_in="billion tokens", tolerance={"abs": 1})
    assert "(±1 billion tokens)" in grade(tokens, make_variant(tokens, seed=0), "1").message  # "billion" agrees
    assert tokens.body.answer_in_one == "billion tokens" and q.body.answer_in_one == "GPU-hour"


# A question's own rules (`mistakes:` in its YAML, lessons/_template/README.md "Known mistakes"): `value` on a fixed
# question, as lessons 07-09 name theirs, `times_answer` on any, as the question statistics page drafts them.


def test_a_fixed_questions_named_value_is_a_try_with_its_feedback():
    q = numeric(
        answer=8, unit="bits", tolerance={"abs": 0}, mistakes=[{"value": 4, "feedback": "That is FP4's width."}]
    )
    v = make_variant(q, seed=0)
    fb = grade(q, v, "4")
    assert fb.status == "incorrect" and fb.counts_as_attempt and fb.message.endswith("That is FP4's width.")
    assert "FP4" not in grade(q, v, "5").message and grade(q, v, "8").correct


def test_times_answer_names_a_multiple_of_each_learners_own_answer():
    """On a generated question every learner's answer differs: the rule is a multiple of theirs, and its feedback
    may use the generator's values."""
    q = numeric(
        "fp8_scale",
        params={"amax": {"min": 120, "max": 400, "step": 20}},
        mistakes=[{"times_answer": 2, "feedback": "Twice {{fp8_max}} ÷ amax: that doubles the scale."}],
    )
    for seed in range(3):
        v = make_variant(q, seed=seed)
        fb = grade(q, v, repr(2 * v.answer))
        assert fb.status == "incorrect" and fb.message.endswith(
            f"Twice {v.values['fp8_max']:g} ÷ amax: that doubles the scale."
        )
    # the generator's own known mistakes still name theirs (fp8_scale's: amax ÷ fp8_max, the inverse)
    v = make_variant(q, seed=0)
    assert "inverse" in grade(q, v, repr(1 / v.answer)).message


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {"generator": "fp8_scale", "unit": "", "mistakes": [{"value": 2, "feedback": "x"}]},
            "`times_answer` on a generated question",
        ),
        (
            {"answer": 8, "tolerance": {"rel": 0.02}, "mistakes": [{"times_answer": 1.01, "feedback": "x"}]},
            "tolerance tells apart",
        ),
        ({"answer": 8, "mistakes": [{"value": 8.01, "feedback": "x"}]}, "tolerance tells apart"),
        (
            {"generator": "fp8_scale", "unit": "", "mistakes": [{"times_answer": 1.005, "feedback": "x"}]},
            "tolerance tells apart",
        ),
        ({"answer": 8, "mistakes": [{"value": 4, "times_answer": 2, "feedback": "x"}]}, "exactly one of `value`"),
        ({"answer": 8, "mistakes": [{"feedback": "x"}]}, "exactly one of `value`"),
        ({"answer": 8, "mistakes": [{"times_answer": 0, "feedback": "x"}]}, "other than 0"),
        ({"answer": 8, "mistakes": [{"value": 4, "feedback": ""}]}, "the idea that gives it; found none yet"),
    ],
)
def test_a_rule_that_names_nothing_is_refused(body, words):
    from pydantic import ValidationError

    from app.content.schema import Numeric

    with pytest.raises(ValidationError) as exc:
        Numeric.model_validate({"kind": "numeric", "prompt": "Q?", **body})
    assert words in str(exc.value), str(exc.value)


def test_the_statistics_draft_is_the_format_the_schema_reads():
    """The editor's draft from a frequent wrong answer: `times_answer` on a generated question, `value` on a fixed
    one, appended to an existing `mistakes:` list; once its feedback is written the file validates and the rule
    grades."""
    import yaml

    from app.content import mistake_rule
    from app.content.schema import Numeric

    generated = "kind: numeric\ngenerator: fp8_scale\nunit: ''\nprompt: Scale?\ntolerance: {rel: 0.01}\n"
    q = numeric("fp8_scale", prompt="Scale?")
    text, drafted = mistake_rule.drafted(generated, 2.0, q)
    assert drafted.key == "times_answer: 2" and text.splitlines()[drafted.line - 1] == '    feedback: ""'
    body = yaml.safe_load(text.replace('feedback: ""', "feedback: Doubled."))
    assert body["mistakes"] == [{"times_answer": 2, "feedback": "Doubled."}]
    Numeric.model_validate(body)

    fixed = 'kind: numeric\nprompt: Bits?\nanswer: 24.5\nunit: GB\nmistakes:\n  - value: 12.25\n    feedback: "One phase."\n\nexplanation: Two.\n'
    q = numeric(answer=24.5, unit="GB", prompt="Bits?", mistakes=[{"value": 12.25, "feedback": "One phase."}])
    text, drafted = mistake_rule.drafted(fixed, 2.0, q)
    assert drafted.key == "value: 49"
    body = yaml.safe_load(text.replace('feedback: ""', "feedback: Without the 7/8."))
    assert [m["value"] for m in body["mistakes"]] == [12.25, 49] and body["explanation"] == "Two."
    commented = "kind: numeric\nprompt: Bits?\nanswer: 8\nmistakes: []  # none named yet\n"
    text, drafted = mistake_rule.drafted(commented, 4.0, numeric(answer=8, prompt="Bits?"))
    assert text.splitlines()[3] == "mistakes:  # none named yet" and drafted.key == "value: 32"
    assert yaml.safe_load(text.replace('feedback: ""', "feedback: FP32."))["mistakes"] == [
        {"value": 32, "feedback": "FP32."}
    ]
    assert mistake_rule.yaml_number(4.5e6) == "4500000" and mistake_rule.yaml_number(1e-7) == "0.0000001"
    with pytest.raises(mistake_rule.DraftError, match="numeric question"):
        mistake_rule.drafted("kind: free_response\n", 2.0, None)
