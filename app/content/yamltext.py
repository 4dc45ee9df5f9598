"""One YAML text of a lesson, parsed once: its composed tree (the marks give errors their line numbers) and its
data. Anchors and aliases are refused (ALIAS_PROBLEM)."""

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


def _parse_with(loader_class: Any, text: str) -> tuple[Any, Any]:
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is not None and _shares_nodes(node):
            _refuse_alias(loader_class, text)
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


# An alias (*name) repeats an anchored value (&name) without repeating its text: nine levels of five aliases each are
# 280 bytes that every walk over the data (placeholders, validation, error messages) sees as 5**9 strings, seconds
# of CPU per preview ("billion laughs"). Lesson files are prose and numbers written out, so aliases are refused.
ALIAS_PROBLEM = "an alias (*{anchor}); aliases and anchors (&name) are not allowed in lesson files: write the value out"


def _shares_nodes(root: Any) -> bool:
    """Whether some node of the composed tree appears in it twice: what an alias makes, and nothing else does."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            return True
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack += (key, value)
    return False


def _refuse_alias(loader_class: Any, text: str) -> None:
    """Raise a YAMLError at the first alias, by its name and line (the composed tree has lost both)."""
    loader = loader_class(text)
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark  # libyaml's Mark or PyYAML's: the same line and column
                raise yaml.composer.ComposerError(None, None, ALIAS_PROBLEM.format(anchor=event.anchor), mark)  # type: ignore[arg-type]
    finally:
        loader.dispose()
