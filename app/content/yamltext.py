"""One YAML text of a lesson, parsed once: its composed tree (the marks give errors their line numbers) and its
data. Aliases (ALIAS_PROBLEM) and nesting past MAX_DEPTH (DEPTH_PROBLEM) are refused before anything recurses."""

from __future__ import annotations

from typing import Any

import yaml

_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str) -> tuple[Any, Any]:
    """The composed tree of one YAML text (its marks give errors their line numbers) and the data built from that
    same tree: one parse, by libyaml where PyYAML was built with it (about ten times faster than pure Python).

    libyaml words its problems differently from the pure-Python parser that errors.yaml_hint reads, and the two
    differ on a few edge cases, so a text libyaml refuses is parsed again in pure Python: that parser's data or
    error is the answer."""
    if _FAST_LOADER is not yaml.SafeLoader:
        try:
            return _parse_with(_FAST_LOADER, text)
        except yaml.YAMLError:
            pass
    return _parse_with(yaml.SafeLoader, text)


def parse_pure_yaml(text: str) -> tuple[Any, Any]:
    """`parse_yaml` by the pure-Python parser alone, for code that edits the text by its marks and styles exactly as
    PyYAML gives them (app/content/listing.py); the same refusals, the same YAMLError."""
    return _parse_with(yaml.SafeLoader, text)


def _parse_with(loader_class: Any, text: str) -> tuple[Any, Any]:
    _check_events(loader_class, text)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


# An alias (*name) repeats an anchored value (&name) without repeating its text: nine levels of five aliases each are
# 280 bytes that every walk over the data (placeholders, validation, error messages) sees as 5**9 strings, seconds
# of CPU per preview ("billion laughs"). Lesson files are prose and numbers written out, so aliases are refused.
ALIAS_PROBLEM = "an alias (*{anchor}); aliases and anchors (&name) are not allowed in lesson files: write the value out"
# The composer and the constructors recurse once per level of nesting, and so do the walks over the data after them:
# 600 nested brackets were a RecursionError (a 500) in a preview. The deepest shipped lesson file nests 8.
MAX_DEPTH = 64
DEPTH_PROBLEM = (
    "mappings and lists nested more than {limit} levels deep (the nesting limit); a lesson file nests a few: "
    "write the deeper part flatter"
)


def _check_events(loader_class: Any, text: str) -> None:
    """Raise a YAMLError at the first alias (by its name and line) or the first level of nesting past MAX_DEPTH,
    from the parser's events: the parser is a state machine, so this pass recurses nowhere, and it stops there,
    before the composer sees the text. A syntax error raises here too, in the same parser's words."""
    loader = loader_class(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    _refuse(DEPTH_PROBLEM.format(limit=MAX_DEPTH), event)
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                _refuse(ALIAS_PROBLEM.format(anchor=event.anchor), event)
    finally:
        loader.dispose()


def _refuse(problem: str, event: Any) -> None:
    mark = event.start_mark  # libyaml's Mark or PyYAML's: the same line and column
    raise yaml.composer.ComposerError(None, None, problem, mark)
