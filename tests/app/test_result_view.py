"""Lab results read as answers: human values, the honesty label once, shared notes said once, long tables
folded, and two runs side by side. Over real `python -m labs run` output where the shape matters."""

from __future__ import annotations

import copy

import pytest

from app.web.views import result_view as rv
from labs import catalog
from tests.app import labruns


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (1.0, "fraction of tokens", "100% of tokens"),
        (0.015625, "fraction of tokens", "1.6% of tokens"),
        (4194304, "bytes", "4.0 MiB"),
        (512, "bytes", "512 B"),
        (True, None, "yes"),
        (False, None, "no"),
        (None, None, "—"),
        (724.2502930002956, "ms", "724.3 ms"),
        (1.405703545913438, "x", "1.41×"),
        (209062, None, "209,062"),
        (0.0006895065307617188, None, "0.00069"),
        (0.0123456, None, "0.01235"),
        (6.068043643311656e-07, None, "6.07 × 10⁻⁷"),
        (3.4658470153808594, None, "3.466"),
        (0.0, None, "0"),
        ("delayed / hybrid", None, "delayed / hybrid"),
        (float("nan"), None, "not a number"),
    ],
)
def test_human_values(value, unit, text):
    assert rv.human(value, unit) == text


def test_table_cells_convert_bytes_columns_only():
    assert rv.cell(1048576, "bytes/step") == "1.0 MiB"
    assert rv.cell(1048576, "tokens") == "1,048,576"
    assert rv.cell(None, "peak memory (bytes)") == "—"


def _result(summary, label="CPU emulation: numbers are emulated; timings are CPU timings.", **results):
    return {
        "lab": "tp-sweep",
        "params": {},
        "environment": {"label": label, "emulated": True, "backend": "cpu"},
        "results": {"summary": summary, "tables": [], **results},
        "artifacts": [],
    }


SHARED = "CPU timings: ranks are processes sharing this machine's cores over gloo, not GPUs"


def test_the_honesty_label_is_dropped_from_notes_and_shared_notes_become_footnotes():
    label = "CPU emulation: numbers are emulated; timings are CPU timings."
    view = rv.present(
        _result(
            [
                {"label": "Backend", "value": "cpu", "note": label},
                {
                    "label": "TP=1 step",
                    "value": 100.0,
                    "unit": "ms",
                    "note": f"{SHARED}; 1.00x TP=1",
                },
                {
                    "label": "TP=2 step",
                    "value": 60.0,
                    "unit": "ms",
                    "note": f"{SHARED}; 0.60x TP=1",
                },
                {"label": "ratio A", "value": 0.5, "note": "|a ∩ b| / |b|"},
                {"label": "ratio B", "value": 0.7, "note": "|a ∩ b| / |b|"},
                {"label": "Peak memory", "value": None, "note": "not measured on CPU"},
                {"label": "Mystery", "value": None},
            ],
            label=label,
        )
    )
    backend, tp1, tp2, ratio_a, _, peak, mystery = view.items
    assert backend.note == "" and backend.marks == []  # the label is shown once, above, not in a card
    assert view.footnotes == [SHARED]
    assert (ratio_a.note, ratio_a.marks) == ("|a ∩ b| / |b|", [])  # a short shared note stays in place
    assert (tp1.text, tp1.note, tp1.marks) == ("100 ms", "1.00x TP=1", [1])
    assert (tp2.note, tp2.marks) == ("0.60x TP=1", [1])
    assert (peak.text, peak.note) == ("—", "not measured on CPU")  # the dash comes with its reason
    assert (mystery.text, mystery.note) == ("—", "not reported by this run")


def test_a_long_note_of_one_number_goes_below_its_card_numbered_in_card_order():
    long_own = "on CPU this ratio says nothing about GPU speed, and other load on the machine moves it; " * 2
    view = rv.present(
        _result(
            [
                {"label": "Step A", "value": 1.0, "unit": "ms", "note": long_own.strip("; ")},
                {"label": "TP=1 step", "value": 100.0, "unit": "ms", "note": f"{SHARED}; 1.00x TP=1"},
                {"label": "TP=2 step", "value": 60.0, "unit": "ms", "note": f"{SHARED}; 0.60x TP=1"},
                {"label": "Short", "value": 2.0, "note": "x" * rv.CARD_NOTE_AT},
                {"label": "Peak", "value": None, "note": "not measured on CPU: " + "there is no counter " * 5},
            ]
        )
    )
    step, tp1, tp2, short, peak = view.items
    assert view.footnotes == [
        long_own.strip("; "),
        SHARED,
        ("There is no counter " + "there is no counter " * 4).strip(),
    ]
    assert (step.note, step.marks) == ("", [1])
    assert (tp1.note, tp1.marks) == ("1.00x TP=1", [2]) and tp2.marks == [2]
    assert (short.note, short.marks) == ("x" * rv.CARD_NOTE_AT, [])  # up to the bound, a note stays in its card
    assert (peak.text, peak.note, peak.marks) == ("—", "not measured on CPU", [3])  # its heading stays


def test_the_labs_answer_leads_and_a_sentence_is_built_when_there_is_none():
    summary = [
        {"label": "Backend", "value": "cpu", "note": "CPU emulation: numbers are emulated; timings are CPU timings."},
        {"label": "Final loss", "value": 0.25},
        {"label": "FP8 recipe", "value": "delayed"},
        {"label": "Peak memory", "value": None},
        {"label": "Steps with clipping", "value": 3},
    ]
    view = rv.present(_result(summary, answer="FP8 trains like BF16 here: the loss gap is 0.07%."))
    assert view.answer == "FP8 trains like BF16 here: the loss gap is 0.07%." and view.answer_from_lab
    built = rv.present(_result(summary))
    assert not built.answer_from_lab
    # no restated label ("Backend"), no missing value; lower-case inside the sentence unless an acronym
    assert built.answer == "In this run, final loss was 0.25; FP8 recipe was delayed; and steps with clipping was 3."


def test_long_tables_fold_after_a_preview_and_numeric_columns_are_known():
    result = _result([])
    result["results"]["tables"] = [
        {"title": "Long", "columns": ["name", "value"], "rows": [[f"r{i}", i * 1.5] for i in range(20)]},
        {"title": "Short", "columns": ["name", "ok"], "rows": [["a", True], ["b", None]]},
    ]
    long, short = rv.present(result).tables
    assert long.folded and len(long.preview) == rv.PREVIEW_ROWS and len(long.rows) == 20
    assert long.numeric_columns == {1} and long.rows[3][1].text == "4.5" and long.rows[3][1].css == "num"
    assert not short.folded and short.rows[0][1].text == "yes" and short.rows[1][1].text == "—"


@pytest.mark.parametrize("lab", catalog.names())
def test_real_results_present_without_raw_python_values(lab):
    view = rv.present(labruns.result(lab))
    assert view.answer and view.label
    texts = [i.text for i in view.items] + [c.text for t in view.tables for r in t.rows for c in r]
    for raw in ("None", "True", "False", "e-0", "e+0"):
        assert not [t for t in texts if raw in t], raw
    assert not [t for t in texts if t.endswith("…")]  # what our own labs write fits the page's bounds uncut
    notes = [i.note for i in view.items]
    assert not [n for n in notes if view.label in n]  # the label is not repeated in a card
    assert not [n for n in notes if len(n) > rv.CARD_NOTE_AT]


def test_comparison_sets_key_numbers_side_by_side_with_the_difference():
    a = labruns.result("fp8-step")
    b = copy.deepcopy(a)
    b["params"]["recipe"] = "current"
    for row in b["results"]["summary"]:
        if row["label"] == "Step time, FP8":
            row["value"] = row["value"] * 2
    b["results"]["summary"].append({"label": "Only in B", "value": 1})
    c = rv.compare(a, b)
    assert [(r.label, r.a, r.b) for r in c.params] == [("recipe", "delayed", "current")]
    assert "steps=4" in c.same_params
    rows = {r.label: r for r in c.numbers}
    step = rows["Step time, FP8"]
    assert step.differs and step.change.startswith("+") and step.change.endswith("(2.00× A)")
    assert rows["Final loss, FP8"].change == "same" and not rows["Final loss, FP8"].differs
    assert rows["Only in B"].a == "— (not in this run)"


def test_params_text_lists_what_differs_from_the_defaults():
    assert rv.params_text("fp8-step", {}) == "defaults"
    assert rv.params_text("fp8-step", {"steps": 4, "recipe": "delayed"}) == "steps=4"
    assert rv.params_text("tp-sweep", {"degrees": [1, 2]}) == "degrees=1, 2"


@pytest.mark.parametrize(
    ("title", "heading", "description"),
    [
        ("Loss per step", "Loss per step", ""),
        (
            "Weight-gradient relative error vs BF16 at step 0 (delayed scaling starts from scale 1, before any amax "
            "history exists)",
            "Weight-gradient relative error vs BF16 at step 0",
            "Delayed scaling starts from scale 1, before any amax history exists.",
        ),
        (
            "Per rank and schedule (the median step of each rank, ms): T_step ≈ compute + communication − overlap",
            "Per rank and schedule (the median step of each rank, ms)",
            "T_step ≈ compute + communication − overlap.",
        ),
        (
            "Rank mapping: which slice of which weight each rank owns, per degree",
            "Rank mapping",
            "Which slice of which weight each rank owns, per degree.",
        ),  # fmt: skip
        (
            "PREDICTED for 8x H200 SXM, NVLink 4 + NVSwitch (bf16, tokens=16; ms)",
            "PREDICTED for 8x H200 SXM, NVLink 4 + NVSwitch",
            "bf16, tokens=16; ms.",
        ),  # fmt: skip
    ],
)
def test_a_long_table_title_is_a_short_heading_and_a_description(title, heading, description):
    assert rv.table_heading(title) == (heading, description)


def test_a_phone_stacks_the_tables_whose_columns_do_not_fit_and_pairs_short_cells():
    view = rv.present(labruns.result("fp8-step"))
    tables = {t.title: t for t in view.tables}
    assert not tables["Loss per step"].stacks  # step, BF16, FP8: three short numbers fit 390 px
    assert tables["FP8 tensors"].stacks and tables["Greedy generation"].stacks
    assert all(len(t.title) <= rv.TABLE_HEADING_AT for t in view.tables)
    greedy = tables["Greedy generation"]
    row = greedy.rows[0]
    assert not greedy.half(0, row[0])  # the row's name takes its own line
    assert greedy.half(3, row[3]) and greedy.half(4, row[4])  # "stride 2" and "correct 1/16" share one
    assert not greedy.half(2, row[2])  # the generated tokens take a whole line


def test_a_trace_download_does_not_claim_to_open_perfetto():
    """The link downloads the trace (the timeline viewer's button opens Perfetto UI); results written before the labs
    said so called it "open in Perfetto", and read the same."""
    result = copy.deepcopy(labruns.result("overlap-trace"))
    for a in result["artifacts"]:
        if a["name"].startswith("trace_"):
            a["title"] = f"Chrome trace: {a['name'][6:]} (open in Perfetto)"
    titles = [d.title for d in rv.present(result).downloads if d.name.startswith("trace_")]
    assert titles and all(t.endswith("(JSON for Perfetto UI)") for t in titles), titles
