"""The mistakes an author makes on purpose in the editor's audit (a wrong type, an unknown or misspelt key, a block or
question without its `kind`, a duplicate id, a question id that has no file) read in the author's words: what to type,
where the other use is, which ids exist; not pydantic's ("unable to parse string as an integer") or a dump of the
whole block."""

from app.content.loader import validate_lesson_texts


def _error(template_texts, path, text, field):
    lesson, errors = validate_lesson_texts({**template_texts, path: text}, lesson_id="t")
    assert lesson is None
    hits = [e for e in errors if e.file == f"t/{path}" and e.field == field]
    assert hits, "\n".join(map(str, errors))
    return hits[0]


def test_a_word_where_a_number_goes_says_to_type_digits(template_texts):
    part = template_texts["parts/first-part.yaml"].replace("minutes: 5", "minutes: ten")
    e = _error(template_texts, "parts/first-part.yaml", part, "minutes")
    assert e.expected == "a whole number (integer) such as `5`, in digits without quotes" and e.found == "text 'ten'"
    assert "unable to parse" not in str(e)
    q = template_texts["questions/example-numeric.yaml"].replace("{abs: 0.5}", "{abs: half}")
    e = _error(template_texts, "questions/example-numeric.yaml", q, "tolerance.abs")
    assert e.expected.startswith("a number such as `0.5`")


def test_a_misspelt_key_suggests_the_field_and_a_part_does_not_offer_id(template_texts):
    part = template_texts["parts/first-part.yaml"].replace("minutes: 5", "minuts: 5")
    e = _error(template_texts, "parts/first-part.yaml", part, "minuts")
    assert e.expected == (
        "no field named `minuts` here (did you mean `minutes`?) (allowed: number, title, heading, minutes, intro, blocks)"
    )  # `id` is the file name: writing it is an error of its own, so it is not offered


def test_a_block_kind_typo_shows_the_kind_not_the_whole_block(template_texts):
    part = template_texts["parts/first-part.yaml"].replace("kind: objectives", "kind: objective")
    e = _error(template_texts, "parts/first-part.yaml", part, "blocks[0]")
    assert e.found == "kind 'objective'" and "'objectives'" in e.expected


def test_a_question_without_kind_lists_the_question_kinds(template_texts):
    e = _error(template_texts, "questions/example-choice.yaml", "prompt: Which one?\n", "")
    assert e.expected == "a `kind:` line saying what this is (one of single_choice, free_response, numeric, multi_step)"
    assert e.found == "none" and e.line == 1


def test_a_duplicate_id_names_the_line_of_its_first_use(template_texts):
    part = template_texts["parts/first-part.yaml"].replace("id: first-pause", "id: first-objective")
    e = _error(template_texts, "parts/first-part.yaml", part, "blocks[1].pause.id")
    assert e.expected == "an id unique in the lesson (also used in parts/first-part.yaml line 7); rename one of them"


def test_a_question_id_without_a_file_lists_the_questions_there_are(template_texts):
    part = template_texts["parts/first-part.yaml"].replace("ids: [example-choice,", "ids: [example-choise,")
    lesson, errors = validate_lesson_texts({**template_texts, "parts/first-part.yaml": part}, lesson_id="t")
    e = next(e for e in errors if e.field == "blocks[2].ids[0]")
    assert e.expected.startswith("the id of a file in questions/ (example-choice, example-")


def test_display_maths_left_open_is_an_error_with_its_line(template_texts):
    """`$$` with no closing `$$` rendered as two dollar signs and raw TeX on the learner's page, and validated."""
    part = template_texts["parts/first-part.yaml"].replace(
        "answer: More microbatches per batch.", "answer: More microbatches, $$ b = (p - 1) / m."
    )
    e = _error(template_texts, "parts/first-part.yaml", part, "blocks[1].pause.answer")
    assert e.expected.startswith("display maths closed: a `$$` after the formula") and e.line == 16
    assert e.found == "an odd number of them (1)"
    closed = part.replace("(p - 1) / m.", "(p - 1) / m $$")
    assert validate_lesson_texts({**template_texts, "parts/first-part.yaml": closed}, lesson_id="t")[1] == []
