"""The loader parses with libyaml where it can; what authors get must not depend on which parser ran."""

import pytest
import yaml

from app.content.loader import parse_yaml, read_lesson_texts
from tests.content.conftest import LESSONS


def _texts():
    for folder in sorted(p for p in LESSONS.iterdir() if p.is_dir()):
        for rel, text in sorted(read_lesson_texts(folder).items()):
            if rel.endswith(".yaml"):
                yield f"{folder.name}/{rel}", text


@pytest.mark.parametrize("name,text", list(_texts()), ids=lambda v: v if "/" in v else "")
def test_every_lesson_file_parses_to_what_the_pure_python_parser_reads(name, text):
    tree, data = parse_yaml(text)
    assert data == yaml.safe_load(text)
    reference = yaml.compose(text, Loader=yaml.SafeLoader)
    assert [k.start_mark.line for k, _ in tree.value] == [k.start_mark.line for k, _ in reference.value]


def test_a_broken_file_reports_the_pure_python_parsers_words_and_line():
    """errors.yaml_hint reads the pure-Python parser's wording ("mapping values are not allowed here"; libyaml
    says "... in this context")."""
    text = "title: Orient\nsummary: a: b\n"
    with pytest.raises(yaml.MarkedYAMLError) as caught:
        parse_yaml(text)
    assert caught.value.problem == "mapping values are not allowed here"
    assert caught.value.problem_mark is not None and caught.value.problem_mark.line == 1


def test_an_empty_file_is_no_data():
    assert parse_yaml("") == (None, None)
    assert parse_yaml("# only a comment\n") == (None, None)
