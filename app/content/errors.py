"""Errors for lesson authors: pydantic and YAML problems translated into file, line, field, expected, found.

The loader validates; this module explains. A `ContentError` names the file (relative to the lesson
folder's parent, e.g. `transformer-scaling/parts/orient.yaml`), the field path in the author's terms
(`blocks[2].pause.answer`), what was expected and what was found, and the YAML line when it can be
located. `explain()` turns one pydantic `ValidationError` into such triples, merging the alternatives
of a union (a block of unknown `kind` is one error naming the allowed kinds, not nine) and listing the
allowed fields when a key is unknown.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

_TICKS = re.compile(r"`+")


def code(text: str) -> str:
    """`text` as a Markdown code span that code_spans() reads back whole, whatever backticks it holds: what
    an author should type, or a value of theirs, inside an explanation."""
    fence = "`" * (max(map(len, _TICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text[:1] == text[-1:] == " " and text.strip()) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_spans(text: str) -> list[tuple[str, bool]]:
    """`text` as (piece, is code) pieces, the way Markdown reads code spans: a run of backticks opens one that the
    next run of the same length closes, and one space just inside each end is dropped; a run that nothing closes
    is plain text. The editor shows the code pieces as code (templates/instructor/edit.html); the command line
    prints the text as it is."""
    out: list[tuple[str, bool]] = []
    at = pos = 0
    while (opening := _TICKS.search(text, pos)) is not None:
        width = len(opening.group())
        closing = next((m for m in _TICKS.finditer(text, opening.end()) if len(m.group()) == width), None)
        if closing is None:
            pos = opening.end()
            continue
        if opening.start() > at:
            out.append((text[at : opening.start()], False))
        inner = text[opening.end() : closing.start()]
        if len(inner) > 1 and inner[0] == inner[-1] == " " and inner.strip():
            inner = inner[1:-1]
        out.append((inner, True))
        at = pos = closing.end()
    if at < len(text):
        out.append((text[at:], False))
    return out


@dataclass(frozen=True)
class ContentError:
    """One problem in one file, in the author's terms."""

    file: str  # e.g. "transformer-scaling/parts/orient.yaml"
    field: str  # e.g. "blocks[2].pause.answer"; "" for the file as a whole
    expected: str
    found: str
    line: int | None = None  # 1-based line in the YAML, when known
    hint: str = ""  # for a YAML mistake the parser words badly: what the author most likely did, and the fix
    # `expected` and `hint` mark what to type, and the author's own values, as Markdown code spans (`code`)

    @property
    def expected_spans(self) -> list[tuple[str, bool]]:
        return code_spans(self.expected)

    @property
    def hint_spans(self) -> list[tuple[str, bool]]:
        return code_spans(self.hint)

    @property
    def message(self) -> str:
        return f"expected {self.expected}, found {self.found}" + (f". {self.hint}" if self.hint else "")

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field or '(file)'}: {self.message}"


def yaml_problem(exc: yaml.YAMLError) -> tuple[str, int | None]:
    """What the YAML parser tripped on, and its 1-based line when the parser knows it.

    A key whose colon is missing (`title Orient`) is noticed only on the next line ("could not find expected
    ':'" points there); the line at fault is the one the parser was scanning the key on, its context mark."""
    mark = getattr(exc, "problem_mark", None)
    if getattr(exc, "context", None) == "while scanning a simple key" and getattr(exc, "context_mark", None):
        mark = exc.context_mark  # type: ignore[attr-defined]
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return problem, (mark.line + 1 if mark else None)


_DOTS = '"..."'


def yaml_hint(exc: yaml.YAMLError, text: str) -> str:
    """The usual cause of a YAML error, in an author's words, for the mistakes people make in prose files:
    a colon inside a sentence, a tab, a value that starts with a character YAML reserves."""
    problem = str(getattr(exc, "problem", "") or "")
    context = str(getattr(exc, "context", "") or "")
    mark = getattr(exc, "problem_mark", None)
    lines = text.splitlines()
    line = lines[mark.line] if mark is not None and mark.line < len(lines) else ""
    value = line.split(": ", 1)[1].strip() if ": " in line else line.strip().lstrip("- ").strip()
    if "mapping values are not allowed" in problem and mark is not None and ": " not in line[: mark.column].strip():
        # the colon at fault is the line's first: a key indented under a key whose value is on its own line
        return (
            "This line is indented more than the line above it, as if it belonged under that key, but that key "
            "already has its value on its own line. Start this key in the same column as the one above"
        )
    if "mapping values are not allowed" in problem:
        return (
            "This line's text has a second colon followed by a space, which YAML reads as the start of a new key. "
            f"Put the whole text in double quotes ({code(_DOTS)}), or write {code('key: >')} and the text on the "
            "indented lines below"
        )
    if "'\\t'" in problem or "\t" in problem:
        return "Indent with spaces: YAML does not allow tab characters in indentation (this line has one)"
    if "scanning an alias" in context or (value.startswith("*") and "'*'" in problem):
        return (
            f"A value that starts with {code('*')} is read as a YAML alias (a reference to an anchor). Quote the "
            f"text: {_quoted(value)}"
        )
    reserved = re.search(r"found character '([@`%|>!&])' that cannot start any token", problem)
    if reserved:
        return f"YAML reserves {code(reserved.group(1))} at the start of a value. Quote the text: {_quoted(value)}"
    if "expected <block end>" in problem and value.startswith(("{", "[")):
        kind = "mapping" if value[0] == "{" else "list"
        return f"A value that starts with {code(value[0])} is read as a YAML {kind}. Quote the text"
    if "expected <block end>" in problem or "while parsing a block" in context:
        return "This line is indented differently from the lines above it: keys of one mapping start in the same column"
    if "end of stream" in problem and "quoted scalar" in context:
        return "A quote opened on this line or above is never closed"
    if "could not find expected ':'" in problem and "simple key" in context:
        return f"This line has no colon after its key: write {code('key: value')}"
    return ""


def _quoted(value: str) -> str:
    """The author's value in double quotes, as code: what to type instead (the first 40 characters)."""
    return code(f'"{value[:40]}"')


def yaml_error(file: str, exc: yaml.YAMLError, text: str) -> ContentError:
    """A file that is not valid YAML, with the parser's words, its line, and a hint when the cause is a usual one."""
    problem, line = yaml_problem(exc)
    found = problem[len("found ") :] if problem.startswith("found ") else problem  # "found found character"
    return ContentError(file, "", "valid YAML", found, line, yaml_hint(exc, text))


def describe_value(value: Any) -> str:
    """A found value as an author reads it: its kind and a short repr."""
    if value is None:
        return "nothing"
    text = repr(value)
    kind = type(value).__name__.replace("str", "text").replace("dict", "mapping").replace("NoneType", "nothing")
    return f"{kind} {text[:60] + '…' if len(text) > 60 else text}"


def loc_to_path(loc: tuple) -> str:
    out = ""
    for item in loc:
        out += f"[{item}]" if isinstance(item, int) else (f".{item}" if out else str(item))
    return out


def path_to_loc(path: str) -> tuple:
    loc: list = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        loc.append(int(index) if index else name)
    return tuple(loc)


def line_of(node: Any, loc: tuple) -> int | None:
    """1-based line of the value at loc in a composed YAML tree (the deepest node that exists)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for item in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if getattr(k, "value", None) == item), None)
            if match is None:
                return line
            key, node = match
            line = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(item, int) and item < len(node.value):
            node = node.value[item]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _model_at(root: Any, data: Any, loc: tuple) -> type[BaseModel] | None:
    """The model class that validates the mapping at loc (to list its allowed fields), or None."""
    tp: Any = root
    for item in loc:
        tp = _unwrap(tp)
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            members = [m for m in map(_unwrap, typing.get_args(tp)) if isinstance(m, type) and issubclass(m, BaseModel)]
            kind = data.get("kind") if isinstance(data, dict) else None
            tp = next(
                (
                    m
                    for m in members
                    if kind
                    and m.model_fields.get("kind")
                    and kind in typing.get_args(m.model_fields["kind"].annotation)
                ),
                members[0] if len(members) == 1 else None,
            )
            if tp is None:
                return None
            origin = None
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if not isinstance(data, dict) or item not in tp.model_fields:
                return None
            tp, data = tp.model_fields[item].annotation, data.get(item)
        elif origin is list and isinstance(item, int) and isinstance(data, list) and item < len(data):
            tp, data = typing.get_args(tp)[0], data[item]
        elif origin is dict and isinstance(data, dict):
            tp, data = typing.get_args(tp)[1], data.get(item)
        else:
            return None
    tp = _unwrap(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [m for m in map(_unwrap, typing.get_args(tp)) if isinstance(m, type) and issubclass(m, BaseModel)]
        kind = data.get("kind") if isinstance(data, dict) else None
        tp = next(
            (
                m
                for m in members
                if "kind" in m.model_fields and kind in typing.get_args(m.model_fields["kind"].annotation)
            ),
            None,
        )
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def explain(exc: ValidationError, data: Any, root: Any) -> list[tuple[tuple, str, str]]:
    """pydantic errors -> (loc in the author's data, expected, found), merging union alternatives."""
    merged: dict[tuple, tuple[list[str], str]] = {}
    for e in exc.errors(include_url=False):
        loc, node, walked = [], data, list(e["loc"])
        for n, item in enumerate(walked):
            if isinstance(node, dict) and item in node:
                loc.append(item)
                node = node[item]
            elif isinstance(node, list) and isinstance(item, int) and item < len(node):
                loc.append(item)
                node = node[item]
            elif n == len(walked) - 1 and e["type"] in ("missing", "extra_forbidden"):
                loc.append(item)
                node = None
            # else: a union member's tag (e.g. 'section', 'Range'): not part of the author's data
        key = tuple(loc)
        expected, found = _expected(e, data, root, key), describe_value(e.get("input"))
        if e["type"] == "missing":
            found = "nothing (the field is missing)"
        elif e["type"] == "union_tag_invalid":
            found = f"kind {e.get('ctx', {}).get('tag', '')!r}"
        elif e["type"] == "union_tag_not_found":
            found = "none"
        elif e["type"] == "value_error" and "; found " in expected:  # our validators: "EXPECTED; found FOUND"
            expected, found = expected.split("; found ", 1)
            key, expected = _inner_field(node, key, expected)
        if key in merged:
            if expected not in merged[key][0]:
                merged[key][0].append(expected)
        else:
            merged[key] = ([expected], found)
    return [(loc, " or ".join(exp), found) for loc, (exp, found) in merged.items()]


_FIELD_FIRST = re.compile(r"([A-Za-z_]\w*(?:\[\d+\]|\.[A-Za-z_]\w*)*): (.+)", re.S)


def _inner_field(node: Any, loc: tuple, expected: str) -> tuple[tuple, str]:
    """A model's validator that checks one of its fields against the others names that field first
    ("mistakes[0].value: ..."): where the path is in the author's data, the error is that field's, and its line."""
    m = _FIELD_FIRST.fullmatch(expected)
    if m is None:
        return loc, expected
    inner = path_to_loc(m.group(1))
    for item in inner:
        if isinstance(node, dict) and item in node:
            node = node[item]
        elif isinstance(node, list) and isinstance(item, int) and item < len(node):
            node = node[item]
        else:
            return loc, expected
    return loc + inner, m.group(2)


# pydantic's words for a value of the wrong type, in an author's: what to type instead
_PLAIN = {
    "int_parsing": f"a whole number (integer) such as {code('5')}, in digits without quotes",
    "int_type": f"a whole number (integer) such as {code('5')}, in digits without quotes",
    "int_from_float": f"a whole number (integer) such as {code('5')}, without a fraction",
    "float_parsing": f"a number such as {code('0.5')} or {code('448')}, in digits without quotes",
    "float_type": f"a number such as {code('0.5')} or {code('448')}, in digits without quotes",
    "bool_parsing": f"{code('true')} or {code('false')}",
    "bool_type": f"{code('true')} or {code('false')}",
    "string_type": "text",
    "list_type": f"a list ({code('- item')} lines, or {code('[a, b]')})",
    "dict_type": f"a mapping ({code('key: value')} lines)",
    "model_type": f"a mapping ({code('key: value')} lines)",
    "model_attributes_type": f"a mapping ({code('key: value')} lines)",
    "string_too_short": "some text (it may not be empty)",
}
ID_REGEX = "^[a-z0-9][a-z0-9-]*$"  # schema.ID_PATTERN (the schema imports nothing from here, and the reverse)


def _kinds(root: Any, loc: tuple) -> str:
    """The `kind:` values allowed where a mapping has none: a question file's, a block's or a problem step's."""
    from . import schema  # the schema is import-light; imported here so that this module stays usable on its own

    tp: Any = (
        root
        if not loc
        else schema.Block
        if len(loc) >= 2 and loc[-2] == "blocks"
        else schema.ProblemStep
        if len(loc) >= 2 and loc[-2] == "steps"
        else None
    )
    tp = _unwrap(tp) if tp is not None else None
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return ""
    tags = [
        t
        for m in map(_unwrap, typing.get_args(tp))
        if isinstance(m, type) and issubclass(m, BaseModel) and "kind" in m.model_fields
        for t in typing.get_args(m.model_fields["kind"].annotation)
    ]
    return ", ".join(tags)


def _expected(e: Any, data: Any, root: Any, loc: tuple) -> str:
    kind = e["type"]
    if kind == "missing":
        return "a value (required field)"
    if kind == "extra_forbidden":
        model = _model_at(root, data, loc[:-1]) if root else None
        fields = list(model.model_fields) if model else []
        near = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.6)
        allowed = ", ".join(fields)
        return (
            f"no field named {code(str(loc[-1]))} here"
            + (f" (did you mean {code(near[0])}?)" if near else "")
            + (f" (allowed: {allowed})" if allowed else "")
        )
    if kind == "union_tag_invalid":
        ctx = e.get("ctx", {})
        return f"`kind` one of {ctx.get('expected_tags', 'the known kinds')}"
    if kind == "union_tag_not_found":
        kinds = _kinds(root, loc)
        return f"a {code('kind:')} line saying what this is" + (f" (one of {kinds})" if kinds else "")
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind == "string_pattern_mismatch" and e.get("ctx", {}).get("pattern") == ID_REGEX:
        return f"an id of lowercase letters, digits and dashes, such as {code('my-section')}"
    msg = e["msg"]
    for prefix in ("Input should be ", "Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    return msg
