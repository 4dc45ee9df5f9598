"""The usual YAML mistakes in prose files get a hint that names the fix, next to the parser's own words."""

import pytest
import yaml

from app.content.errors import code, code_spans, yaml_error


@pytest.mark.parametrize(
    "text, line, hint",
    [
        (
            "title: Hello\nbody: The answer: forty two\n",
            2,
            'Put the whole text in double quotes (`"..."`), or write `key: >`',
        ),
        ("title: x\nblocks:\n\t- a\n", 3, "Indent with spaces"),
        ("title: *bold* text\n", 1, 'Quote the text: `"*bold* text"`'),
        ("items:\n  - *emphasis*\n", 2, "read as a YAML alias"),
        ("title: @handle\n", 1, 'YAML reserves `@` at the start of a value. Quote the text: `"@handle"`'),
        ("title: `code` here\n", 1, 'YAML reserves `` ` `` at the start of a value. Quote the text: ``"`code` here"``'),
        ("a:\n  b: 1\n c: 2\n", 3, "indented differently"),
        # a key indented under one whose value is on its line: not a colon in the text, as the hint said before
        ("number: 1\ntitle: Orient\n  minutes: 5\n", 3, "indented more than the line above it"),
        ('title: "unclosed\n', 2, "never closed"),
        # the parser notices a missing colon on the next line; the line at fault is the key's own
        ("id: orient\ntitle Orient + objectives\nminutes: 5\n", 2, "no colon after its key: write `key: value`"),
    ],
)
def test_hint_for_a_usual_mistake(text, line, hint):
    with pytest.raises(yaml.YAMLError) as exc:
        yaml.safe_load(text)
    err = yaml_error("lesson/parts/x.yaml", exc.value, text)
    assert err.line == line and err.expected == "valid YAML"
    assert hint in err.hint
    assert not err.found.startswith("found ")  # "expected valid YAML, found found character" read badly
    assert err.hint in str(err)  # the CLI's `lessons validate` shows it too


@pytest.mark.parametrize(
    "text, spans",
    [
        ("write `key: >` below", [("write ", False), ("key: >", True), (" below", False)]),
        ("a lone ` stays text", [("a lone ` stays text", False)]),
        ("``a`b`` then", [("a`b", True), (" then", False)]),
        ("`` ` `` and `x`", [("`", True), (" and ", False), ("x", True)]),
        ("no code", [("no code", False)]),
    ],
)
def test_code_spans_read_like_markdown(text, spans):
    assert code_spans(text) == spans


@pytest.mark.parametrize("value", ["plain", "`", "`tick", "tick`", "a``b", ' "quoted" ', "*"])
def test_an_authors_value_as_code_reads_back_whole(value):
    """What the author wrote goes into a hint as a code span, whatever backticks it holds, so the editor shows
    exactly that text as code and nothing around it turns into code."""
    assert code_spans(f"before {code(value)} after") == [("before ", False), (value, True), (" after", False)]


def test_the_editor_can_show_a_hint_with_a_backtick_in_the_authors_text():
    text = "title: `code` here\n"
    with pytest.raises(yaml.YAMLError) as exc:
        yaml.safe_load(text)
    spans = yaml_error("lesson/lesson.yaml", exc.value, text).hint_spans
    assert [s for s, is_code in spans if is_code] == ["`", '"`code` here"']


def test_a_colon_inside_the_text_still_gets_the_quoting_hint_not_the_indent_one():
    text = "items:\n  - id: a\n    text: Judge: whether it overlaps\n"
    with pytest.raises(yaml.YAMLError) as exc:
        yaml.safe_load(text)
    err = yaml_error("lesson/parts/x.yaml", exc.value, text)
    assert err.line == 3 and "Put the whole text in double quotes" in err.hint
