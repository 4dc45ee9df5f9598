"""The usual YAML mistakes in prose files get a hint that names the fix, next to the parser's own words."""

import pytest
import yaml

from app.content.errors import yaml_error


@pytest.mark.parametrize(
    "text, line, hint",
    [
        ("title: Hello\nbody: The answer: forty two\n", 2, 'Put the whole text in double quotes ("...")'),
        ("title: x\nblocks:\n\t- a\n", 3, "Indent with spaces"),
        ("title: *bold* text\n", 1, 'Quote the text: "*bold* text"'),
        ("items:\n  - *emphasis*\n", 2, "read as a YAML alias"),
        ("title: @handle\n", 1, 'YAML reserves @ at the start of a value. Quote the text: "@handle"'),
        ("title: `code` here\n", 1, "YAML reserves ` at the start"),
        ("a:\n  b: 1\n c: 2\n", 3, "indented differently"),
        ('title: "unclosed\n', 2, "never closed"),
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
