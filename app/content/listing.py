"""A new question or part in the browser editor, which edits one lesson file at a time: the part files' `questions`
blocks and `number` lines read and changed as text (every other line kept as written), for app/web/routes/authoring.py.

A question must be listed in some part's `questions` block and a part may list only questions that exist, so a new
question published on its own, or a part listing it first, would each be refused. A new questions/NAME.yaml therefore
goes out with its id added to a part (the author picks which; by default the last part that already lists
questions), and a question a part's edit leaves listed nowhere may be removed with it.

Part numbers run 1..N, each once, so a new part in the middle would be refused until every later part's file
were renumbered, one publish each, each of those refused too. A new part whose number is taken may therefore move the parts from
that number on one up, in the same version.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import yaml

from app.content.yamltext import parse_pure_yaml
from app.core.config import ROOT

# The template's example questions, shown beside a new questions/NAME.yaml file (the page is all an author reads).
TEMPLATE_QUESTIONS = ROOT / "lessons" / "_template" / "questions"
NEW_FILE = re.compile(r"^(parts|questions)/[a-z0-9][a-z0-9-]{0,62}\.yaml$|^(lesson|atlas|lab|rubric)\.yaml$")


def new_question(path: str, existing: dict) -> str | None:
    """The id of the question a new questions/NAME.yaml file adds, or None."""
    if path in existing or not NEW_FILE.match(path) or not path.startswith("questions/"):
        return None
    return path[len("questions/") : -len(".yaml")]


def _key(node, name: str):
    return next((v for k, v in node.value if getattr(k, "value", None) == name), None)


def _question_blocks(text: str):
    """A part file's composed YAML: (root, blocks sequence, its `kind: questions` blocks), or None if not a part."""
    try:
        root, _ = parse_pure_yaml(text)
    except yaml.YAMLError:
        return None
    if not isinstance(root, yaml.MappingNode):
        return None
    blocks = _key(root, "blocks")
    if not isinstance(blocks, yaml.SequenceNode):
        return None
    listing = [
        b
        for b in blocks.value
        if isinstance(b, yaml.MappingNode) and getattr(_key(b, "kind"), "value", "") == "questions"
    ]
    return root, blocks, listing


def _lists(text: str, qid: str) -> bool:
    found = _question_blocks(text)
    return bool(found) and any(
        isinstance(ids := _key(b, "ids"), yaml.SequenceNode) and qid in [getattr(i, "value", None) for i in ids.value]
        for b in found[2]
    )


def list_question(text: str, qid: str) -> str | None:
    """The part file's text with `qid` added to its last questions block (or a new one at the end of its blocks),
    every other line as it was; None where the file's shape leaves no safe place to add it."""
    found = _question_blocks(text)
    if found is None:
        return None
    root, blocks, listing = found
    ids = _key(listing[-1], "ids") if listing else None
    if isinstance(ids, yaml.SequenceNode) and ids.value:
        if ids.flow_style:  # ids: [a, b]
            at = ids.end_mark.index - 1
            return text[:at] + f", {qid}" + text[at:] if text[at] == "]" else None
        end = text.find("\n", ids.value[-1].end_mark.index)  # ids:\n  - a\n  - b
        end = len(text) if end < 0 else end
        return text[:end] + "\n" + " " * ids.start_mark.column + f"- {qid}" + text[end:]
    if blocks.flow_style or not blocks.value or root.value[-1][1] is not blocks:
        return None
    indent = " " * blocks.start_mark.column
    return text.rstrip("\n") + f"\n{indent}- kind: questions\n{indent}  ids: [{qid}]\n"


def part_choices(lesson) -> list[tuple[str, str]]:
    return [(f"parts/{p.id}.yaml", f"{p.number:02d} {p.title}") for p in lesson.parts] if lesson else []


def _default_listing(files: dict) -> str | None:
    """The part a new question goes into unless the author picks another: the last one that lists questions."""
    parts = sorted(p for p in files if p.startswith("parts/"))
    with_questions = [p for p in parts if (found := _question_blocks(files[p])) and found[2]]
    order = {path: n for n, path in enumerate(parts)}
    numbered = []
    for p in with_questions or parts:
        try:
            number = parse_pure_yaml(files[p])[1].get("number", 0)
        except (yaml.YAMLError, AttributeError):
            number = 0
        numbered.append((number if isinstance(number, int) else 0, order[p], p))
    return max(numbered)[2] if numbered else None


def with_listing(files: dict, path: str, existing: dict, list_in: str) -> tuple[dict, str | None]:
    """The files to validate and publish, and the part a new question was listed in (None when not new, already
    listed by the author, or no part could take it)."""
    qid = new_question(path, existing)
    if qid is None or any(_lists(t, qid) for p, t in files.items() if p.startswith("parts/")):
        return files, None
    part = list_in if list_in in existing and list_in.startswith("parts/") else _default_listing(files)
    changed = list_question(files[part], qid) if part else None
    if changed is None:
        return files, None
    return {**files, part: changed}, part


def _listed_ids(text: str) -> set[str]:
    found = _question_blocks(text)
    return {
        str(getattr(i, "value", ""))
        for b in (found[2] if found else [])
        if isinstance(ids := _key(b, "ids"), yaml.SequenceNode)
        for i in ids.value
    }


def unlisted_questions(files: dict, path: str, existing: dict) -> list[str]:
    """The question files a part's edit leaves listed nowhere. Such a file is an error, and the editor cannot delete
    files, so taking a question out of a part could not be published either; the author may remove them with it."""
    if not path.startswith("parts/") or path not in existing:
        return []
    dropped = _listed_ids(existing[path]) - set().union(
        *(_listed_ids(t) for p, t in files.items() if p.startswith("parts/"))
    )
    return sorted(f"questions/{q}.yaml" for q in dropped if f"questions/{q}.yaml" in files)


# A part's top-level `number: N` line (loader.py reads the same key through YAML; only the digits are rewritten).
_NUMBER = re.compile(r"^(number:[ \t]*)(\d+)(?=[ \t]*(?:#.*)?$)", re.M)


def part_number(text: str) -> int | None:
    found = _NUMBER.search(text)
    return int(found.group(2)) if found else None


def crowded_parts(files: dict, path: str, existing: dict) -> list[tuple[str, int]]:
    """The parts a new part's number lands on and after, with their numbers, in order, when another part holds that
    number; else []."""
    number = part_number(files[path]) if path.startswith("parts/") and path not in existing else None
    if number is None:
        return []
    others = {p: n for p, t in files.items() if p.startswith("parts/") and p != path and (n := part_number(t))}
    if number not in others.values():
        return []
    return sorted(((p, n) for p, n in others.items() if n >= number), key=lambda pn: pn[1])


# Prose that names a part by its number ("see part 4", "Parts 3 and 4"); a leading zero ("Part 01", a figure's panel)
# is not a part's number.
_PART_MENTION = re.compile(r"\bparts? ([1-9]\d*)\b", re.I)
MENTION_CONTEXT = 40  # characters shown either side of a mention


def part_mentions(files: dict, path: str, lowest: int) -> list[tuple[str, int, str]]:
    """(file, line, the words around it) for each line of the version, but the edited file's and comment lines, that
    names a part numbered `lowest` or more: making room renumbers those parts but not the text that names them."""
    found = []
    for name in sorted(files):
        if name == path:
            continue  # written now, against the new numbers
        for line_no, line in enumerate(files[name].splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue  # a YAML comment: the author's note, never on a learner's page
            hits = [m for m in _PART_MENTION.finditer(line) if int(m.group(1)) >= lowest]
            if hits:
                start, end = max(hits[0].start() - MENTION_CONTEXT, 0), hits[-1].end() + MENTION_CONTEXT
                words = ("…" if start else "") + line[start:end].strip() + ("…" if end < len(line) else "")
                found.append((name, line_no, words))
    return found


def _moved_up(text: str) -> str:
    return _NUMBER.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + 1}", text, count=1)


def template_questions() -> list[tuple[str, str]]:
    return [(f.name, f.read_text(encoding="utf-8")) for f in sorted(TEMPLATE_QUESTIONS.glob("*.yaml"))]


class Edit(NamedTuple):
    files: dict  # the version's files with the edit and what the author ticked
    listed_in: str | None  # the part a new question was listed in
    unlisted: list[str]  # question files the edit left listed nowhere (removed when ticked)
    crowded: list[tuple[str, int]]  # (part, number): the part a new part's number takes and those after it


def edited_files(row, path: str, text: str, list_in: str, drop: bool, make_room: bool = False) -> Edit:
    """The version's files with the edit: a new question listed in a part; the questions a part's edit left listed
    nowhere, removed when the author ticked so; the parts a new part's number lands on, moved up when ticked."""
    files = dict(row.files)
    files[path] = text
    files, listed_in = with_listing(files, path, row.files, list_in)
    unlisted = unlisted_questions(files, path, row.files)
    if drop:
        files = {p: t for p, t in files.items() if p not in unlisted}
    crowded = crowded_parts(files, path, row.files)
    if make_room:
        files |= {p: _moved_up(files[p]) for p, _ in crowded}
    return Edit(files, listed_in, unlisted, crowded)
