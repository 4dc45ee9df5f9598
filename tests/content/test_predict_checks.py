"""Only a pause that asks for a number links to a calculator: the loader refuses a check with nothing to type."""

import shutil

from app.content.loader import load_course

from .conftest import LESSONS


def test_a_check_must_predict_a_number(tmp_path):
    shutil.copytree(LESSONS / "transformer-scaling", tmp_path / "transformer-scaling")
    part = tmp_path / "transformer-scaling" / "parts" / "deep-dives.yaml"
    text = part.read_text()
    assert "predicts: dequantized}" in text
    part.write_text(text.replace("predicts: dequantized}", "predicts: clipped}", 1))
    course = load_course(tmp_path)
    (error,) = course.broken["transformer-scaling"]
    assert error.field.endswith("pause.check.predicts") and error.found == "'clipped'"
    assert "a number the prompt asks for" in error.expected and "stored" in error.expected


def test_every_shipped_check_predicts_a_number(course):
    from app.content import tools

    checks = [p.check for les in course.lessons.values() for p in les.pauses if p.check]
    assert checks
    assert all(tools.TOOLS[c.tool].outputs[c.predicts].kind != "yes/no" for c in checks)


def test_lesson_06_variants_have_no_trivial_answer(l06):
    """No overlap variant hides nothing (0 ms) or everything: the learner always adds compute and exposed comm."""
    from app.content.practice import make_variant

    q = l06.questions["fp8-step-time"]
    for seed in range(200):
        v = make_variant(q, seed).values
        assert 0 < v["overlap"] < v["comm"], (seed, v)
        assert v["compute"] < v["answer"] < v["serial"], (seed, v)


def test_tp_threshold_prompt_says_what_the_numbers_are(l06):
    prompt = " ".join(l06.questions["tp-comm-threshold"].body.prompt.split())
    assert "1,979 in FP8" in prompt and "Blackwell" in prompt and "twice that" in prompt
    assert "989 TFLOP/s in BF16" in prompt


def test_lesson_06_numeric_questions_name_the_mistake(l06):
    """Each numeric question of lesson 06 names at least one wrong idea when a learner's answer matches it."""
    from app.content.practice import grade, make_variant

    inverse = make_variant(l06.questions["fp8-scale-from-amax"], 3)
    fb = grade(l06.questions["fp8-scale-from-amax"], inverse, f"{1 / inverse.answer!r}")
    assert not fb.correct and "inverse" in fb.message
    for qid in ("fp8-scale-from-amax", "fp8-spike-clip", "fp8-step-time", "tp-comm-threshold"):
        q = l06.questions[qid]
        v = make_variant(q, 5)
        wrong, words = v.values["mistakes"][0]
        fb = grade(q, v, f"{wrong!r} {v.unit}")
        assert not fb.correct and words.split(".")[0] in fb.message, (qid, fb.message)
