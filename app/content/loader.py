"""Load lessons from `lessons/`, collecting every error instead of stopping at the first.

- `load_course(root)`: every `root/<lesson-id>/` (folders starting with `_` or `.` are skipped), each
  validated on its own; a broken lesson is left out and its errors reported, the others load.
- `validate_lesson_dir(path)`: the errors of one lesson folder.
- `validate_lesson_texts(texts, …)`: the same for YAML texts held in memory (the browser editor), with
  any file not posted read from `base_dir`.

Errors are `ContentError`s (app/content/errors.py turns YAML and pydantic errors into the author's
terms: file, line, field path, expected, found).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from . import calc, figures, practice
from . import tools as tools_mod
from .errors import ContentError, describe_value, explain, line_of, loc_to_path, path_to_loc, yaml_error
from .schema import (
    SLUG,
    Atlas,
    CodeTraceBlock,
    FigureBlock,
    FigureRef,
    Lab,
    Lesson,
    LessonFile,
    Part,
    PartFile,
    Question,
    QuestionFile,
    QuestionsBlock,
    Rendered,
    Rubric,
    SectionBlock,
    TimelineBlock,
)
from .timing import part_minutes
from .yamltext import parse_yaml

LESSON_FILE = "lesson.yaml"
OPTIONAL_FILES = {"atlas.yaml": Atlas, "lab.yaml": Lab, "rubric.yaml": Rubric}
IGNORED_FILES = {"README.md"}
CALC_PLACEHOLDER = re.compile(r"\{\{\s*calc:\s*([a-z0-9][a-z0-9-]*)(?:\.([a-z_][a-z0-9_]*))?(?:\|([^}]*))?\s*\}\}")
_QUESTION_ADAPTER = TypeAdapter(QuestionFile)
# A computed entry's argument may be another entry's result, "=NAME.FIELD", so a chain of worked numbers
# (prefill time, then the serving pools it sizes) is typed once.
CHAINED_ARG = re.compile(r"^=([a-z0-9][a-z0-9-]*)\.([a-z_][a-z0-9_]*)$")
# Saved answers key on "<question id>:<step id>" and "<question id>:self-check" in 64-character columns.
MAX_QUESTION_ID = 40
MAX_STEP_ID = 20


@dataclass
class Course:
    """Every lesson that loaded cleanly, in lesson-number order, and every error found."""

    lessons: dict[str, Lesson] = field(default_factory=dict)
    errors: list[ContentError] = field(default_factory=list)

    def lesson(self, lesson_id: str) -> Lesson | None:
        return self.lessons.get(lesson_id)

    def ordered(self) -> list[Lesson]:
        return sorted(self.lessons.values(), key=lambda lesson: (lesson.number, lesson.id))

    @property
    def broken(self) -> dict[str, list[ContentError]]:
        """Lesson id -> its errors, for lessons left out."""
        out: dict[str, list[ContentError]] = {}
        for e in self.errors:
            out.setdefault(e.file.split("/", 1)[0], []).append(e)
        return out


# ---------------------------------------------------------------- public entry points


def load_course(root: Path) -> Course:
    root = Path(root)
    course = Course()
    if not root.is_dir():
        course.errors.append(ContentError(str(root), "", "a lessons folder", "no such folder"))
        return course
    numbers: dict[int, str] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        lesson, errors = load_lesson_dir(folder)
        course.errors.extend(errors)
        if lesson is None:
            continue
        if lesson.number in numbers:
            course.errors.append(
                ContentError(
                    f"{folder.name}/{LESSON_FILE}",
                    "number",
                    f"a lesson number not used by another lesson ({numbers[lesson.number]} has it)",
                    str(lesson.number),
                )
            )
            continue
        numbers[lesson.number] = lesson.id
        course.lessons[lesson.id] = lesson
    return course


def load_lesson_dir(path: Path) -> tuple[Lesson | None, list[ContentError]]:
    path = Path(path)
    return validate_lesson_texts(read_lesson_texts(path), lesson_id=path.name)


def validate_lesson_dir(path: Path) -> list[ContentError]:
    return load_lesson_dir(path)[1]


def read_lesson_texts(path: Path) -> dict[str, str]:
    """Every file of a lesson folder as {relative path: text} (non-UTF-8 files come back as '\\0binary')."""
    texts: dict[str, str] = {}
    for f in sorted(Path(path).rglob("*")):
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(path).parts):
            try:
                texts[f.relative_to(path).as_posix()] = f.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                texts[f.relative_to(path).as_posix()] = "\0binary"
    return texts


def validate_lesson_texts(
    texts: dict[str, str], lesson_id: str = "preview", base_dir: Path | None = None
) -> tuple[Lesson | None, list[ContentError]]:
    """Validate a lesson given as {relative path: YAML text}; files absent here are read from base_dir.

    Returns (lesson, []) when everything is valid, else (None, errors). Never raises for bad content.
    """
    files = dict(read_lesson_texts(base_dir)) if base_dir else {}
    files.update(texts)
    return _LessonBuild(lesson_id, files).run()


# ---------------------------------------------------------------- the build of one lesson


class _LessonBuild:
    def __init__(self, lesson_id: str, files: dict[str, str]):
        self.id = lesson_id
        self.files = files
        self.errors: list[ContentError] = []
        self.trees: dict[str, Any] = {}  # rel path -> composed YAML node, for line numbers
        self.header_broken = False  # lesson.yaml exists but did not parse or validate

    def err(self, rel: str, loc: tuple | str, expected: str, found: str) -> None:
        if self.header_broken and "{{calc:" in found:
            return  # a placeholder lesson.yaml would have filled: its own error is the news, not every use
        path = loc if isinstance(loc, str) else loc_to_path(loc)
        line = line_of(self.trees.get(rel), loc if isinstance(loc, tuple) else path_to_loc(loc))
        self.errors.append(ContentError(f"{self.id}/{rel}", path, expected, found, line))

    def run(self) -> tuple[Lesson | None, list[ContentError]]:
        if not SLUG.match(self.id):
            self.err(LESSON_FILE, "", "a folder name of lowercase letters, digits and dashes", repr(self.id))
        raw: dict[str, Any] = {}
        for rel, text in sorted(self.files.items()):
            if rel in IGNORED_FILES:
                continue
            if not _known_file(rel):
                self.err(
                    rel,
                    "",
                    "lesson.yaml, atlas.yaml, lab.yaml, rubric.yaml, parts/<id>.yaml or questions/<id>.yaml",
                    "a file the loader does not know",
                )
                continue
            data = self.parse(rel, text)
            if data is not None:
                raw[rel] = data
        if LESSON_FILE not in self.files:
            self.err(LESSON_FILE, "", "a lesson.yaml file", "no such file")

        for rel, data in raw.items():
            self.check_display_math(rel, data, ())
        values, pending = self.evaluate_computed(raw.get(LESSON_FILE))
        for rel in list(raw):
            raw[rel] = self.substitute(rel, raw[rel], (), values, pending, raw.get(LESSON_FILE))

        header = self.validate(LESSON_FILE, LessonFile, raw[LESSON_FILE]) if LESSON_FILE in raw else None
        self.header_broken = LESSON_FILE in self.files and header is None
        parts = []
        for rel in sorted(r for r in raw if r.startswith("parts/")):
            data = raw[rel]
            stem = Path(rel).stem
            if isinstance(data, dict) and "id" in data:
                self.err(rel, ("id",), "no `id` field (the id is the file name)", repr(data["id"]))
                continue
            if not SLUG.match(stem):
                self.err(rel, "", "a file name of lowercase letters, digits and dashes", repr(stem))
                continue
            # explained as PartFile: the id comes from the file name, so it is not offered as a field to write
            part = self.validate(rel, Part, {**data, "id": stem} if isinstance(data, dict) else data, PartFile)
            if part:
                parts.append((rel, part))
        questions: dict[str, Question] = {}
        for rel in sorted(r for r in raw if r.startswith("questions/")):
            stem = Path(rel).stem
            if not SLUG.match(stem):
                self.err(rel, "", "a file name of lowercase letters, digits and dashes", repr(stem))
                continue
            if len(stem) > MAX_QUESTION_ID:
                self.err(
                    rel,
                    "",
                    f"a file name of at most {MAX_QUESTION_ID} characters (answers are saved under it)",
                    repr(stem),
                )
                continue
            body = self.validate(rel, _QUESTION_ADAPTER, raw[rel])
            if body is None:
                continue
            problems = _question_problems(body)
            for fld, expected, found in problems:
                self.err(rel, fld, expected, found)
            if body.kind == "multi_step" and not problems:
                _fill_steps(stem, body)
            questions[stem] = Question(id=stem, body=body)
        extras = {rel: self.validate(rel, model, raw[rel]) for rel, model in OPTIONAL_FILES.items() if rel in raw}

        if not parts and not any(r.startswith("parts/") for r in self.files):
            self.err("parts/", "", "at least one part file under parts/", "none")
        self.cross_check(parts, questions, extras.get("atlas.yaml"), raw)
        self.check_pauses(parts, header)
        parts = self.time_parts(parts, questions, extras.get("atlas.yaml"))
        drawn = self.draw_figures(parts)
        self.check_rubric(extras.get("rubric.yaml"), extras.get("lab.yaml"), "lab.yaml" in self.files)
        if self.errors or header is None:
            return None, sorted(self.errors, key=lambda e: (e.file, e.line or 0))
        lesson = Lesson(
            id=self.id,
            header=header,
            parts=[p for _, p in sorted(parts, key=lambda rp: rp[1].number)],
            questions=questions,
            atlas=extras.get("atlas.yaml"),
            lab=extras.get("lab.yaml"),
            rubric=extras.get("rubric.yaml"),
            values=values,
            figures=drawn,
        )
        return lesson, []

    # -- steps

    def parse(self, rel: str, text: str) -> Any:
        if text == "\0binary":
            self.err(rel, "", "a UTF-8 text file", "bytes that are not UTF-8")
            return None
        try:
            self.trees[rel], data = parse_yaml(text)
        except yaml.YAMLError as exc:
            self.errors.append(yaml_error(f"{self.id}/{rel}", exc, text))
            return None
        if not isinstance(data, dict):
            self.err(rel, "", "a mapping of fields (key: value lines)", describe_value(data))
            return None
        return data

    def validate(self, rel: str, model: Any, data: Any, explain_as: Any = None) -> Any:
        try:
            if isinstance(model, TypeAdapter):
                return model.validate_python(data)
            return model.model_validate(data)
        except ValidationError as exc:
            root = explain_as or (model if isinstance(model, type) else QuestionFile)
            for loc, expected, found in explain(exc, data, root):
                self.err(rel, loc, expected, found)
            return None

    def evaluate_computed(self, header: Any) -> tuple[dict, set]:
        """Evaluate lesson.yaml's `computed` entries; returns values and the names that failed."""
        values: dict[str, dict] = {}
        failed: set[str] = set()
        entries = header.get("computed") if isinstance(header, dict) else None
        if not isinstance(entries, dict):
            return values, failed
        for name, entry in entries.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("calc"), str):
                failed.add(name)  # the schema reports the shape
                continue
            args = entry.get("args") or {}
            args = dict(args) if isinstance(args, dict) else {}
            chained = True
            for key, arg in args.items():
                ref = CHAINED_ARG.match(arg) if isinstance(arg, str) else None
                if ref is None:
                    continue
                source, fld = ref.group(1), ref.group(2)
                if source not in values or fld not in values[source]:
                    earlier = ", ".join(f"{n}.{f}" for n in values for f in values[n]) or "none yet"
                    self.err(
                        LESSON_FILE,
                        ("computed", name, "args", key),
                        f"=NAME.FIELD of an entry computed above this one ({earlier[:300]})",
                        repr(arg),
                    )
                    chained = False
                    continue
                args[key] = values[source][fld]
            if not chained:
                failed.add(name)
                continue
            try:
                result = calc.evaluate(entry["calc"], args)
            except calc.CalcError as exc:
                self.err(LESSON_FILE, ("computed", name), "a calculation that runs", str(exc))
                failed.add(name)
                continue
            values[name] = result
        return values, failed

    def substitute(self, rel: str, node: Any, loc: tuple, values: dict, failed: set, header: Any) -> Any:
        """Replace {{calc:…}} placeholders in every string of a file, reporting the ones that do not resolve."""
        if isinstance(node, dict):
            return {k: self.substitute(rel, v, loc + (k,), values, failed, header) for k, v in node.items()}
        if isinstance(node, list):
            return [self.substitute(rel, v, loc + (i,), values, failed, header) for i, v in enumerate(node)]
        if not isinstance(node, str) or "{{" not in node:
            return node
        entries = header.get("computed", {}) if isinstance(header, dict) else {}

        def sub(m: re.Match) -> str:
            name, fld, spec = m.group(1), m.group(2), m.group(3)
            if name in failed or not isinstance(header, dict):  # lesson.yaml's own error is the news
                return m.group(0)
            if name not in values:
                known = ", ".join(sorted(values)) or "none declared"
                self.err(rel, loc, f"a name from lesson.yaml `computed` ({known})", f"{{{{calc:{name}}}}}")
                return m.group(0)
            result = values[name]
            if fld is None or fld not in result:
                self.err(rel, loc, f"calc:{name}.FIELD with FIELD one of {', '.join(result)}", repr(m.group(0)))
                return m.group(0)
            default = entries.get(name, {}).get("format", ".4g") if isinstance(entries.get(name), dict) else ".4g"
            try:
                return calc.format_value(result[fld], (spec or default).strip())
            except calc.CalcError as exc:
                self.err(rel, loc, "a Python format spec such as .2f or ,.0f", str(exc))
                return m.group(0)

        return CALC_PLACEHOLDER.sub(sub, node)

    def check_display_math(self, rel: str, node: Any, loc: tuple) -> None:
        """A `$$` that opens display maths and is never closed showed on the learner's page as two dollar signs and
        raw TeX, and validated: it is an error with its line. (A code trace's `code` is code, not Markdown.)"""
        if isinstance(node, dict):
            for k, v in node.items():
                if k != "code":
                    self.check_display_math(rel, v, loc + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self.check_display_math(rel, v, loc + (i,))
        elif isinstance(node, str) and node.count("$$") % 2:
            self.err(
                rel,
                loc,
                "display maths closed: a `$$` after the formula for each `$$` before it (`$…$` for maths in a line)",
                f"an odd number of them ({node.count('$$')})",
            )

    def draw_figures(self, parts: list[tuple[str, Part]]) -> dict[str, Rendered]:
        """Draw every figure of every part once, for this version; a bad name or parameter is an error here."""
        drawn: dict[str, Rendered] = {}
        for rel, part in parts:
            for i, block in enumerate(part.blocks):
                refs: list[tuple[tuple, FigureRef]] = []
                if isinstance(block, FigureBlock):
                    refs.append((("blocks", i), block))
                elif isinstance(block, SectionBlock):
                    refs += [(("blocks", i, "figures", j), ref) for j, ref in enumerate(block.figures)]
                for loc, ref in refs:
                    try:
                        drawn[ref.id] = figures.render(ref.name, ref.params, ref.id)
                    except figures.FigureError as exc:
                        for where, expected, found in exc.problems:
                            self.err(rel, loc + where, expected, found)
        return drawn

    def time_parts(self, parts: list[tuple[str, Part]], questions: dict, atlas: Atlas | None) -> list[tuple[str, Part]]:
        """Give every part without a typed `minutes` the minutes its content takes (app/content/timing.py).

        A typed value is kept as written; tests/content/test_timing.py holds every shipped lesson's typed
        minutes to the same formula, so a part that grows shows it.
        """
        eras = {e.id: e for e in atlas.hardware_ecosystem} if atlas else {}
        timed = []
        for rel, part in parts:
            est = part_minutes(part, questions, eras)
            minutes = est.minutes if part.minutes is None else part.minutes
            timed.append((rel, part.model_copy(update={"minutes": minutes, "optional_minutes": est.optional})))
        return timed

    def check_pauses(self, parts: list[tuple[str, Part]], header: LessonFile | None) -> None:
        """Interactive tools must exist; a pause's `check` must name one of the lesson's interactive tools,
        give inputs that tool accepts and predict one of its outputs (app/content/tools.py)."""
        if header is None:
            return  # lesson.yaml's own error is reported; its tools are unknown, not missing
        known = tools_mod.TOOLS
        names = header.interactive
        for i, name in enumerate(names):
            if name not in known:
                self.err(LESSON_FILE, ("interactive", i), f"a tool of /play ({', '.join(known)})", repr(name))
        for rel, part in parts:
            for i, block in enumerate(part.blocks):
                pause = block.pause if isinstance(block, SectionBlock) else None
                if not (pause and pause.check):
                    continue
                loc = ("blocks", i, "pause", "check")
                check = pause.check
                if check.tool not in names or check.tool not in known:
                    self.err(
                        rel,
                        (*loc, "tool"),
                        f"a tool from lesson.yaml `interactive` ({', '.join(names) or 'none declared'})",
                        repr(check.tool),
                    )
                    continue
                tool = known[check.tool]
                _, problems = tools_mod.validate(tool, check.inputs)
                for name, message in problems.items():
                    self.err(rel, (*loc, "inputs", name), message, repr(check.inputs.get(name)))
                # "Predict, then check" is for a number: a pause links to a calculator only to check the number
                # its prompt asks for, and the calculator keeps its answer back until that number is typed.
                numeric = [k for k, o in tool.outputs.items() if o.kind != "yes/no"]
                if check.predicts is None or check.predicts not in tool.outputs:
                    self.err(
                        rel,
                        (*loc, "predicts"),
                        f"an output of {check.tool} ({', '.join(tool.outputs)})",
                        repr(check.predicts),
                    )
                elif tool.outputs[check.predicts].kind == "yes/no":
                    self.err(
                        rel,
                        (*loc, "predicts"),
                        f"a number the prompt asks for ({', '.join(numeric)}); a yes/no output has nothing to predict",
                        repr(check.predicts),
                    )

    def check_rubric(self, rubric: Rubric | None, lab: Lab | None, lab_written: bool) -> None:
        """A rubric line may name an evidence item or report question; both must exist in lab.yaml."""
        if rubric is None:
            return
        if not lab_written:
            self.err("rubric.yaml", "", "a lab.yaml next to rubric.yaml (the rubric grades its report)", "no lab.yaml")
            return
        if lab is None:
            return  # lab.yaml's own errors are reported already
        slots = [s.id for s in lab.report_slots]
        questions = [q.id for q in lab.report_questions]
        for i, item in enumerate(rubric.items):
            if item.evidence and item.evidence not in slots:
                self.err(
                    "rubric.yaml",
                    ("items", i, "evidence"),
                    f"an evidence or stretch id from lab.yaml ({', '.join(slots)})",
                    repr(item.evidence),
                )
            if item.question and item.question not in questions:
                self.err(
                    "rubric.yaml",
                    ("items", i, "question"),
                    f"a report question id from lab.yaml ({', '.join(questions) or 'none declared'})",
                    repr(item.question),
                )

    def cross_check(self, parts, questions: dict, atlas: Atlas | None, raw: dict) -> None:
        numbers = sorted(p.number for _, p in parts)
        # A part file that failed leaves a gap in the numbering: then only clashes are news, not the gap,
        # or one broken file would put an error in every other part.
        all_parts = len(parts) == sum(1 for r in self.files if r.startswith("parts/"))
        if parts and numbers != list(range(1, len(parts) + 1)):
            for rel, p in parts:
                if numbers.count(p.number) > 1 or (all_parts and numbers != list(range(1, len(parts) + 1))):
                    self.err(rel, ("number",), f"part numbers 1..{len(parts)}, each once", str(p.number))
        listed: set[str] = set()
        era_ids = {e.id for e in atlas.hardware_ecosystem} if atlas else set()
        atlas_broken = atlas is None and "atlas.yaml" in self.files  # its own error is reported
        seen: dict[str, str] = {}
        for rel, part in parts:
            for i, block in enumerate(part.blocks):
                if isinstance(block, QuestionsBlock):
                    for j, qid in enumerate(block.ids):
                        if qid in listed:
                            self.err(rel, ("blocks", i, "ids", j), "each question listed once", repr(qid))
                        listed.add(qid)
                        if qid not in questions and f"questions/{qid}.yaml" not in self.files:
                            known = sorted(
                                r[len("questions/") : -len(".yaml")] for r in self.files if r.startswith("questions/")
                            )
                            self.err(
                                rel,
                                ("blocks", i, "ids", j),
                                f"the id of a file in questions/ ({', '.join(known)[:300] or 'none yet'})",
                                repr(qid),
                            )
                if isinstance(block, CodeTraceBlock):
                    n = len(block.code_lines)
                    for j, step in enumerate(block.steps):
                        for k, ln in enumerate(step.lines):
                            if not 1 <= ln <= n:
                                self.err(
                                    rel,
                                    ("blocks", i, "steps", j, "lines", k),
                                    f"a line number of this block's code (1..{n})",
                                    str(ln),
                                )
                if isinstance(block, TimelineBlock) and not atlas_broken:
                    for j, eid in enumerate(block.eras):
                        if eid not in era_ids:
                            self.err(
                                rel, ("blocks", i, "eras", j), "an id from atlas.yaml hardware_ecosystem", repr(eid)
                            )
                for loc, ident in _stable_ids(block):
                    if ident in seen:
                        self.err(
                            rel,
                            ("blocks", i) + loc,
                            f"an id unique in the lesson (also used in {seen[ident]}); rename one of them",
                            repr(ident),
                        )
                    first = line_of(self.trees.get(rel), ("blocks", i) + loc)
                    seen.setdefault(ident, f"{rel} line {first}" if first else rel)
        parts_ok = len(parts) == sum(1 for r in self.files if r.startswith("parts/"))
        for qid in questions if parts_ok else ():  # a part that failed would hide its listing
            if qid not in listed:
                self.err(
                    f"questions/{qid}.yaml",
                    "",
                    "a question listed in some part's questions block",
                    "a question no part lists",
                )


# ---------------------------------------------------------------- helpers


def _known_file(rel: str) -> bool:
    if rel == LESSON_FILE or rel in OPTIONAL_FILES:
        return True
    parts = rel.split("/")
    return len(parts) == 2 and parts[0] in ("parts", "questions") and parts[1].endswith(".yaml")


def _question_problems(body: Any) -> list[tuple[str, str, str]]:
    """Generator problems of a numeric question, or of each numeric step of a multi-step problem."""
    if body.kind == "numeric":
        return practice.check_numeric(body)
    out = []
    if body.kind == "multi_step":
        for i, step in enumerate(body.steps):
            if len(step.id) > MAX_STEP_ID:
                out.append((f"steps[{i}].id", f"at most {MAX_STEP_ID} characters", repr(step.id)))
            if step.kind == "numeric":
                out += [
                    (f"steps[{i}].{fld}".rstrip("."), exp, found) for fld, exp, found in practice.check_numeric(step)
                ]
    return out


def _fill_steps(question_id: str, body: Any) -> None:
    """Write each numeric step's computed numbers into its text once, at build time: a problem's steps are
    the same for every learner, so the page shows them as stored and grading recomputes the same answer."""
    for step in body.steps:
        if step.kind == "numeric" and step.generator:
            v = practice.make_variant(Question(id=f"{question_id}:{step.id}", body=step), 0)
            step.prompt, step.explanation, step.hint = v.prompt, v.explanation, v.hint or None


def _stable_ids(block: Any) -> list[tuple[tuple, str]]:
    """Ids learners' saved answers and progress hang on (sections, pauses, objectives, trace steps) and figure ids."""
    out: list[tuple[tuple, str]] = []
    if getattr(block, "kind", "") == "figure":
        out.append((("id",), block.id))
    if getattr(block, "kind", "") == "section":
        out.append((("id",), block.id))
        out += [(("figures", j, "id"), f.id) for j, f in enumerate(block.figures)]
        if block.pause:
            out.append((("pause", "id"), block.pause.id))
    if getattr(block, "kind", "") == "objectives":
        out += [(("items", i, "id"), o.id) for i, o in enumerate(block.items)]
    if getattr(block, "kind", "") == "code_trace":
        out.append((("id",), block.id))
        out += [(("steps", i, "id"), s.id) for i, s in enumerate(block.steps)]
    return out
