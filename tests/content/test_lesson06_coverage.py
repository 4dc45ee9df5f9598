"""Content audit: every teaching point of the source lesson page (seed 000) is present in lesson 06.

The items are short ids and key phrases chosen for this course, not the source's sentences.
"""

import pytest

from app.content.practice import make_variant

OBJECTIVES = {
    "fp8-roles": ["format", "scale", "amax", "master"],
    "choose-axis": ["wide", "deep", "sequence", "batch"],
    "draw-dependencies": ["collective", "tensor-parallel"],
    "overlap-window": ["asynchronous", "overlap"],
}
MENTAL_MODEL = {"scale": "amax", "shard": "Tensor parallelism", "overlap": "wait"}
CONCEPT_CARDS = {"e4m3-vs-e5m2": "E5M2", "axes-solve-limits": "PP", "more-tp-more-comm": "GEMM"}
# section id -> pause id, for the three core parts and the depth added from seeds 001–003
SECTIONS = {
    "range-management": "fixed-scale",
    "parallel-axes": "dp-long-context",
    "async-window": "async-then-wait",
    "scaling-recipes": "which-recipe",
    "delayed-scaling-timing": "scale-lag",
    "quantization-by-hand": "block-tradeoff",
    "accumulation-precision": None,
    "collective-costs": "tp-across-nodes",
}
DEPTH_PHRASES = {
    "scaling-recipes": ["Delayed scaling", "Current scaling", "Per-block", "MXFP8", "E8M0", "32"],
    "delayed-scaling-timing": ["kernels", "**next**", "all-reduce", "synchronous", "FP8 metadata of the module"],
    "quantization-by-hand": ["(25, -42, 10, 127)", "(76, -127)", "0.0118"],
    "accumulation-precision": ["18 additions", "reaches\n64", "give\n300", "14 bits"],
    "collective-costs": ["1.75×", "4,396", "inside a node", "latency"],
}
TRACE_STEPS = {"recipe": [1, 2], "local": [3], "async": [4], "wait": [5, 6, 7]}
TRACE_CODE = {
    1: "DelayedScaling",
    2: "te.autocast(enabled=True, recipe=fp8_recipe)",
    3: "column_parallel_linear",
    4: "all_gather_async",
    5: "independent_linear",
    6: ".wait()",
    7: "y_full",
}
QUESTIONS = {
    "wide-layer-axis": "single_choice",
    "format-roles": "free_response",
    "deep-model-axis": "free_response",
    "async-consumer": "free_response",
    "tp8-slower": "free_response",
}
PLAYBOOK = {
    "fp8-loss-spike": ("NaN", "amax", "BF16 control"),
    "tp-slower": ("TP degree", "GEMMs", "sweep"),
    "async-not-hidden": ("async", "independent", "Nsight Systems"),
}
EVIDENCE = {
    "env-capability": "env-check",
    "bf16-fp8-numerics": "fp8-step",
    "tp-rank-mapping": "tp-sweep",
    "timeline": "overlap-trace",
    "static-trace": "fp8-step",
}
ERAS = ["fp32-training", "mixed-precision", "hopper-fp8"]
VOCABULARY = ["FP8", "amax", "Delayed scaling", "Tensor parallel (TP)", "Overlap"]


def _block(lesson, kind):
    found = lesson.blocks(kind)
    assert found, f"no {kind} block"
    return found


def test_header(l06):
    h = l06.header
    assert h.remember and "range" in h.remember
    assert any("03" in p for p in h.prerequisites) and any("PyTorch" in p for p in h.prerequisites)
    assert any("backward" in p for p in h.prerequisites)
    assert {"PyTorch", "Transformer Engine", "NCCL"} <= set(h.tools)
    assert any("Nsight" in t for t in h.tools)
    assert h.connects and "lab" in h.connects
    assert h.path.items == ["GPU workflows", "Profiling", "Model parallelism bridge"]
    assert {"Transformer Engine", "Megatron Core"} <= {r.title.split(" ·")[0] for r in h.references}
    assert all(r.url.startswith("https://") and r.covers for r in h.references)


def test_objectives(l06):
    objectives = {o.id: o.text for o in l06.objectives}
    assert list(objectives) == list(OBJECTIVES)
    assert l06.part("orient").blocks[0].kind == "objectives"
    for oid, words in OBJECTIVES.items():
        for w in words:
            assert w.lower() in objectives[oid].lower(), (oid, w)


def test_mental_model(l06):
    ((_, steps),) = _block(l06, "steps")
    assert [s.id for s in steps.items] == list(MENTAL_MODEL)
    for s in steps.items:
        assert MENTAL_MODEL[s.id] in s.body


def test_concept_cards(l06):
    ((part, cards),) = _block(l06, "concept_cards")
    assert part.id == "deep-dives"
    assert {c.id: c for c in cards.cards}.keys() == CONCEPT_CARDS.keys()
    for c in cards.cards:
        assert CONCEPT_CARDS[c.id] in c.body
    assert "448" in cards.cards[0].body and "57,344" in cards.cards[0].body


def test_sections_and_pauses(l06):
    sections = {b.id: b for _, b in _block(l06, "section")}
    assert list(sections)[:3] == ["range-management", "parallel-axes", "async-window"]
    for sid, pid in SECTIONS.items():
        assert sid in sections, sid
        pause = sections[sid].pause
        assert (pause.id if pause else None) == pid
        if pause:
            assert pause.prompt.endswith("?") and len(pause.answer) > 30
    for sid, phrases in DEPTH_PHRASES.items():
        text = " ".join(sections[sid].body.split())  # line breaks in the YAML are not part of a phrase
        for phrase in phrases:
            assert " ".join(phrase.split()) in text, (sid, phrase)


def test_code_trace(l06):
    ((part, trace),) = _block(l06, "code_trace")
    assert part.id == "code-trace"
    assert {s.id: s.lines for s in trace.steps} == TRACE_STEPS
    for n, needle in TRACE_CODE.items():
        assert needle in trace.code_lines[n - 1], (n, needle)


def test_history(l06):
    part = l06.part("history")
    anchor = next(b for b in part.blocks if b.kind == "callout")
    assert anchor.style == "anchor" and "2022" in anchor.title
    for word in ("FP8", "Transformer Engine", "amax", "Megatron Core", "CP"):
        assert word in anchor.body
    timeline = next(b for b in part.blocks if b.kind == "timeline")
    assert timeline.eras == ERAS
    for eid in ERAS:
        era = l06.era(eid)
        assert era.what_changed and era.cost


def test_practice_questions(l06):
    part = l06.part("practice")
    listed = [qid for b in part.blocks if b.kind == "questions" for qid in b.ids]
    assert listed[:5] == list(QUESTIONS)
    for qid, kind in QUESTIONS.items():
        q = l06.questions[qid].body
        assert q.kind == kind
        if kind == "free_response":
            assert q.hint and q.reference_answer
    q1 = l06.questions["wide-layer-axis"].body
    assert [(o.id, o.correct) for o in q1.options] == [("A", True), ("B", False), ("C", False)]
    assert "Tensor parallelism" in q1.options[0].text and all(o.feedback for o in q1.options)
    assert "Pipeline parallelism" in l06.questions["deep-model-axis"].body.reference_answer


def test_parameterized_practice_in_lesson_06(l06):
    numeric = [q for q in l06.questions.values() if q.kind == "numeric"]
    assert {q.body.generator for q in numeric} >= {"fp8_scale", "fp8_clip", "fp8_step_time"}
    assert all(make_variant(q, 1).answer is not None for q in numeric)


def test_atlas(l06):
    atlas = l06.atlas
    assert set(VOCABULARY) <= {t.term for t in atlas.vocabulary}
    steps = {s.id: s.body for s in atlas.worked_example.steps}
    assert list(steps) == ["compute-scale", "watch-spike", "step-time"]
    assert "1.87" in steps["compute-scale"] and "224" in steps["compute-scale"]
    assert "560" in steps["watch-spike"] and "448" in steps["watch-spike"]
    assert "= 14 ms" in steps["step-time"] and "2 ms" in steps["step-time"]
    assert "2 ms" in atlas.worked_example.result and atlas.worked_example.why
    rows = {r.id: r for r in atlas.playbook}
    assert list(rows) == list(PLAYBOOK)
    for rid, (symptom, inspect, evidence) in PLAYBOOK.items():
        assert symptom in rows[rid].symptom and inspect in rows[rid].inspect and evidence in rows[rid].evidence
    assert [e.id for e in atlas.hardware_ecosystem] == ERAS


def test_lab(l06):
    lab = l06.lab
    assert (lab.minutes_min, lab.minutes_max) == (45, 70)
    assert [s.id for s in lab.procedure] == ["bf16-reference", "enable-recipe", "compare-tp", "profile-overlap"]
    assert {e.id: e.lab for e in lab.evidence} == EVIDENCE
    assert [e.id for e in lab.evidence if e.fallback] == ["static-trace"]
    assert "static" in lab.evidence[-1].description and "labelled" in lab.evidence[-1].description
    assert lab.stretch.lab == "tp-sweep" and "TP degree" in lab.stretch.text
    assert {r.title for r in lab.entry_points} == {
        "Transformer Engine documentation",
        "Megatron Core parallelism guide",
    }


@pytest.mark.parametrize("tool", ["fp8-range", "parallel-axis", "overlap-window"])
def test_interactive_tools_listed(l06, tool):
    assert tool in l06.header.interactive
