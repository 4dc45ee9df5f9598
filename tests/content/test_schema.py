"""Bad content gives errors that name the file, the field, what was expected and what was found."""

from app.content.loader import load_course, validate_lesson_dir, validate_lesson_texts


def _errors(texts, **changes):
    files = dict(texts)
    files.update(changes)
    lesson, errors = validate_lesson_texts(files, lesson_id="broken")
    assert lesson is None
    return errors


def _find(errors, file, field):
    hits = [e for e in errors if e.file == f"broken/{file}" and e.field == field]
    assert hits, f"no error for {file}:{field} in:\n" + "\n".join(map(str, errors))
    return hits[0]


def test_template_is_valid(template_texts):
    lesson, errors = validate_lesson_texts(template_texts, lesson_id="template")
    assert errors == []
    assert lesson.read_time_minutes == 5
    assert "27%" in lesson.parts[0].blocks[1].body  # {{calc:…}} filled in


def test_wrong_type_names_file_field_expected_found(template_texts):
    lesson_yaml = template_texts["lesson.yaml"].replace("number: 99", 'number: "ninety"')
    e = _find(_errors(template_texts, **{"lesson.yaml": lesson_yaml}), "lesson.yaml", "number")
    assert "integer" in e.expected and "ninety" in e.found
    assert e.line == 2
    assert str(e).startswith("broken/lesson.yaml:2: number: expected")


def test_unknown_field_lists_allowed_fields(template_texts):
    atlas = "vocabulary:\n  - term: x\n    definiton: y\n"
    errors = _errors(template_texts, **{"atlas.yaml": atlas})
    e = _find(errors, "atlas.yaml", "vocabulary[0].definiton")
    assert "allowed: term, definition" in e.expected and e.line == 3
    assert e.expected.startswith("no field named `definiton` here")  # the editor shows the author's key as code
    assert _find(errors, "atlas.yaml", "vocabulary[0].definition").found.startswith("nothing")


def test_several_broken_files_are_all_reported(template_texts):
    part = template_texts["parts/first-part.yaml"]
    errors = _errors(
        template_texts,
        **{
            "lesson.yaml": template_texts["lesson.yaml"] + "colour: red\n",
            "parts/first-part.yaml": part.replace("minutes: 5", "minutes: -3"),
            "questions/example-numeric.yaml": template_texts["questions/example-numeric.yaml"].replace(
                "pipeline_bubble", "pipe_bubble"
            ),
            "questions/unparsable.yaml": "kind: numeric\nprompt: [unclosed\n",
            "questions/no-correct.yaml": "kind: single_choice\nprompt: p\noptions:\n"
            "  - {id: A, text: a, feedback: f}\n  - {id: B, text: b, feedback: f}\n",
            "notes.txt": "stray",
        },
    )
    files = {e.file for e in errors}
    assert {
        "broken/lesson.yaml",
        "broken/parts/first-part.yaml",
        "broken/questions/example-numeric.yaml",
        "broken/questions/unparsable.yaml",
        "broken/questions/no-correct.yaml",
        "broken/notes.txt",
    } <= files
    assert "greater than or equal to 1" in _find(errors, "parts/first-part.yaml", "minutes").expected
    assert "pipeline_bubble" in _find(errors, "questions/example-numeric.yaml", "generator").expected
    assert _find(errors, "questions/unparsable.yaml", "").expected == "valid YAML"
    no_correct = _find(errors, "questions/no-correct.yaml", "")
    assert no_correct.expected == "exactly one option with correct: true" and no_correct.found == "0"


def test_unknown_block_kind_lists_kinds(template_texts):
    part = template_texts["parts/first-part.yaml"].replace("kind: section", "kind: sektion")
    e = _find(_errors(template_texts, **{"parts/first-part.yaml": part}), "parts/first-part.yaml", "blocks[1]")
    assert "'section'" in e.expected and "'code_trace'" in e.expected


def test_code_trace_lines_and_references_are_checked(template_texts):
    second = (
        "number: 2\ntitle: Second\nminutes: 3\nblocks:\n"
        "  - kind: code_trace\n    id: trace\n    title: T\n    code: |\n      a = 1\n      b = 2\n"
        "    steps:\n      - {id: s1, label: L, title: T, body: B, lines: [1, 5]}\n"
        "  - kind: questions\n    ids: [nope]\n"
        "  - kind: timeline\n    eras: [no-such-era]\n"
    )
    errors = _errors(template_texts, **{"parts/second.yaml": second})
    e = _find(errors, "parts/second.yaml", "blocks[0].steps[0].lines[1]")
    assert e.expected == "a line number of this block's code (1..2)" and e.found == "5"
    assert _find(errors, "parts/second.yaml", "blocks[1].ids[0]").found == "'nope'"
    assert _find(errors, "parts/second.yaml", "blocks[2].eras[0]").found == "'no-such-era'"


def test_calc_placeholders_are_checked(template_texts):
    part = template_texts["parts/first-part.yaml"].replace(
        "{{calc:example-bubble.percent}}", "{{calc:missing.x}} {{calc:example-bubble.nofield}}"
    )
    errors = _errors(template_texts, **{"parts/first-part.yaml": part})
    messages = [e.expected for e in errors if e.field == "blocks[1].body"]
    assert any("computed" in m for m in messages)
    assert any("fraction, percent" in m for m in messages)


def test_bad_calculation_arguments(template_texts):
    lesson_yaml = template_texts["lesson.yaml"].replace("stages: 4", "stages: 4, colour: 1")
    e = _find(_errors(template_texts, **{"lesson.yaml": lesson_yaml}), "lesson.yaml", "computed.example-bubble")
    assert "colour" in e.found


def test_yaml_float_without_exponent_sign_is_reported(template_texts):
    lesson_yaml = template_texts["lesson.yaml"].replace(
        "computed:\n", "computed:\n  tp: {calc: tp_threshold, args: {flops: 9.89e14, bandwidth: 4.5e+11}}\n"
    )
    e = _find(_errors(template_texts, **{"lesson.yaml": lesson_yaml}), "lesson.yaml", "computed.tp")
    assert "flops must be a number" in e.found


def test_ids_come_from_paths(template_texts):
    part = "id: other\n" + template_texts["parts/first-part.yaml"]
    e = _find(_errors(template_texts, **{"parts/first-part.yaml": part}), "parts/first-part.yaml", "id")
    assert "file name" in e.expected


def test_duplicate_stable_ids(template_texts):
    part = template_texts["parts/first-part.yaml"].replace("id: first-pause", "id: first-objective")
    e = _find(_errors(template_texts, **{"parts/first-part.yaml": part}), "parts/first-part.yaml", "blocks[1].pause.id")
    assert "unique" in e.expected


def test_texts_override_files_on_disk(tmp_path, template_texts):
    for rel, text in template_texts.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    edited = template_texts["lesson.yaml"].replace("My lesson title", "Edited title")
    lesson, errors = validate_lesson_texts({"lesson.yaml": edited}, lesson_id="x", base_dir=tmp_path)
    assert errors == [] and lesson.title == "Edited title"
    _, errors = validate_lesson_texts({"lesson.yaml": "title: [\n"}, lesson_id="x", base_dir=tmp_path)
    assert errors and errors[0].expected == "valid YAML"


def test_broken_lesson_does_not_take_down_the_course(tmp_path, template_texts):
    for name, mutate in [("good", lambda t: t), ("bad", lambda t: t.replace("minutes: 5", "minutes: zero"))]:
        for rel, text in template_texts.items():
            path = tmp_path / name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            text = text.replace("number: 99", "number: 98") if name == "bad" and rel == "lesson.yaml" else text
            path.write_text(mutate(text))
    (tmp_path / "_skipped").mkdir()
    (tmp_path / "_skipped" / "lesson.yaml").write_text("not: valid")
    course = load_course(tmp_path)
    assert list(course.lessons) == ["good"]
    assert set(course.broken) == {"bad"}
    assert validate_lesson_dir(tmp_path / "good") == []
    assert validate_lesson_dir(tmp_path / "bad")[0].field == "minutes"


def test_duplicate_lesson_numbers(tmp_path, template_texts):
    for name in ("one", "two"):
        for rel, text in template_texts.items():
            (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / rel).write_text(text)
    course = load_course(tmp_path)
    assert list(course.lessons) == ["one"]
    assert course.errors[0].file == "two/lesson.yaml" and course.errors[0].field == "number"


def test_unknown_lab_names_the_catalog_labs(template_texts):
    from labs import catalog

    lab = (
        "title: t\nminutes_min: 1\nminutes_max: 2\nrequirements: r\ngoal: g\n"
        "procedure:\n  - {id: s, text: t, lab: fp8-stp}\n"
        "evidence:\n  - {id: e, title: t, description: d, lab: tp-sweep}\n"
    )
    e = _find(_errors(template_texts, **{"lab.yaml": lab}), "lab.yaml", "procedure[0].lab")
    assert e.found == "'fp8-stp'" and e.line == 7
    assert e.expected == f"a lab from labs/catalog.py ({', '.join(catalog.names())})"
    # Every catalog lab is accepted: the schema has no list of its own.
    for name in catalog.names():
        ok = lab.replace("fp8-stp", name)
        lesson, errors = validate_lesson_texts({**template_texts, "lab.yaml": ok}, lesson_id="fine")
        assert errors == [], (name, errors)


def test_pause_check_must_name_an_interactive_tool(template_texts):
    part = template_texts["parts/first-part.yaml"].replace(
        "      answer: More microbatches per batch.\n",
        "      answer: More microbatches per batch.\n      check: {tool: pipeline-sim, inputs: {stages: 4}}\n",
    )
    e = _find(
        _errors(template_texts, **{"parts/first-part.yaml": part}),
        "parts/first-part.yaml",
        "blocks[1].pause.check.tool",
    )
    assert e.found == "'pipeline-sim'" and "interactive" in e.expected and e.line == 17
