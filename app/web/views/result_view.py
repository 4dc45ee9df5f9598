"""How a lab result reads on a page: the answer first, human values, notes said once, long tables folded.

result.json is written for scripts (floats at full precision, `null`, `true`, byte counts); this module is
the one place that turns it into what a learner reads: "100% of tokens", "4.0 MiB", "yes", "—" with the
reason. `present(result)` shapes one result for `templates/jobs/_result.html`; `compare(a, b)` sets the
key numbers of two runs of a lab side by side for the lab page. Both are pure functions of the JSON (no
database, no HTTP), so uploaded bundles and report evidence render the same way as jobs. `present` reads
the bounded excerpt of the result (app/web/views/result_excerpt.py), never the raw JSON, so a huge upload cannot
make a huge page; what the excerpt left out is said in `cut_notes` and each table's `cut_note`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from app.web.views.result_excerpt import MAX_LABEL, FileRef, cut, excerpt
from labs import api, catalog
from labs.api import SummaryItem

PREVIEW_ROWS = 5  # a table longer than FOLD_AFTER rows shows this many, the rest behind <details>
FOLD_AFTER = 8
MISSING = "—"
FOOTNOTE_AT = 60  # characters: a note shared by several numbers and longer than this is said once, below
CARD_NOTE_AT = 100  # characters: a number's own note longer than this goes below too (a card is a number and a
# few words; one paragraph in one card made its whole row of cards tall and mostly empty), all but a short heading
CARD_HEAD_AT = 40
CARD_DECIMALS = 5  # 0.000689 reads "0.00069": a card gives a small number's size, not all its digits


# ---- numbers as people write them ---------------------------------------------------------------


def number(v: float | int) -> str:
    """A number on a card or in a table (labs/words.py via labs.api), at most CARD_DECIMALS places: 209062 -> '209,062',
    0.000689 -> '0.00069', 6.07e-07 -> '6.07 × 10⁻⁷'."""
    return api.number(v, decimals=CARD_DECIMALS)


def human(value: Any, unit: str | None = None) -> str:
    """One value with its unit in words: bytes in binary units, fractions as percentages, booleans as
    yes/no, None as a dash (the caller shows the reason next to it)."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, int | float):
        return f"{value} {unit}" if unit else str(value)
    unit = (unit or "").strip()
    if unit in ("bytes", "B"):
        return api.byte_size(value)
    if unit.startswith("fraction"):  # "fraction of tokens" -> "100% of tokens"
        rest = unit[len("fraction") :].strip()
        return f"{api.percent(value, decimals=1)} {rest}".strip()
    if unit in ("x", "×"):
        return f"{value:.2f}×"
    if unit in ("%", "percent"):
        return f"{number(value)}%"
    return f"{number(value)} {unit}".strip()


_SCIENTIFIC = re.compile(r"^[-+]?\d+(?:\.\d+)?[eE][-+]?\d+$")


def cell(value: Any, column: str = "") -> str:
    """A table cell: the column header carries the unit, so only bytes columns are converted. A number a lab
    wrote as text in e-notation ('6.07e-07') is shown as a number too."""
    if isinstance(value, str) and _SCIENTIFIC.match(value.strip()):
        return number(float(value))
    if isinstance(value, int | float) and not isinstance(value, bool) and "bytes" in column.lower():
        return human(value, "bytes")
    return human(value)


def _is_scientific(value: Any) -> bool:
    return isinstance(value, str) and bool(_SCIENTIFIC.match(value.strip()))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# ---- one result ---------------------------------------------------------------------------------


@dataclass
class Item:
    label: str
    text: str  # the value in words, unit included
    note: str = ""  # what is particular to this number
    marks: list[int] = field(default_factory=list)  # footnotes: notes several numbers share, or a long one of its own
    missing: bool = False
    restates_label: bool = False  # its note was the honesty label (e.g. a "Backend" item): no news in an answer


LONG_CELL = 40  # characters: a longer cell wraps; shorter ones stay on one line and the table scrolls instead
HALF_LINE = 22  # characters of a column's name and its value that share a phone's line with another such pair
# What fits side by side on a 390 px phone, in characters of the page's table text (about 8.5 px each, less the
# page's margins), and what each column's cell padding takes of it.
PHONE_TABLE_CHARS = 38
PHONE_CELL_PADDING = 2


@dataclass(frozen=True)
class Cell:
    text: str
    numeric: bool = False

    @property
    def css(self) -> str:
        return "num" if self.numeric else ("long" if len(self.text) > LONG_CELL else "")


# A table's title is its heading: a lab's longer title keeps its first words there and the rest becomes the
# description under it (a bold heading of five lines on a phone was a paragraph, not a name).
TABLE_HEADING_AT = 56  # characters


def _top_level(title: str, sep: str) -> int:
    """Where `sep` first occurs outside parentheses in `title`, or -1."""
    depth = 0
    for i, ch in enumerate(title):
        if depth == 0 and title.startswith(sep, i):
            return i
        depth += {"(": 1, ")": -1}.get(ch, 0)
    return -1


def _sentence(text: str) -> str:
    first = text.split(" ", 1)[0].rstrip(";,")
    if len(first) > 1 and first.isalpha() and first.islower():  # a word, not a symbol ("t = …") or a name ("bf16")
        text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!", ")")) else text + "."


def table_heading(title: str) -> tuple[str, str]:
    """(heading, description) of a table's title: "Loss per step" stays whole; "Per rank (the median step, ms):
    T_step ≈ …" is headed by what comes before the colon, "Weight-gradient relative error vs BF16 at step 0
    (delayed scaling starts from scale 1, …)" by what comes before its closing parenthesis."""
    title = " ".join(title.split())
    if len(title) <= TABLE_HEADING_AT:
        return title, ""
    colon, paren, comma = (_top_level(title, sep) for sep in (": ", " (", ", "))
    if 0 < colon <= TABLE_HEADING_AT:
        return title[:colon], _sentence(title[colon + 2 :])
    if 0 < paren <= TABLE_HEADING_AT:
        rest = title[paren + 2 :]
        if _top_level(rest, ")") == len(rest) - 1:  # the parenthesis closes the title: its inside describes it
            return title[:paren], _sentence(rest[:-1])
        return title[:paren], _sentence("(" + rest)
    if 0 < comma <= TABLE_HEADING_AT:
        return title[:comma], _sentence(title[comma + 2 :])
    cut_at = title.rfind(" ", 0, TABLE_HEADING_AT)
    return (title, "") if cut_at <= 0 else (title[:cut_at] + " …", "… " + title[cut_at + 1 :])


@dataclass
class TableView:
    title: str
    columns: list[str]
    rows: list[list[Cell]]
    cut_note: str = ""  # "the first 50 of 2,000 rows": the excerpt's bound, said under the table
    description: str = ""  # what the title said beyond its heading (table_heading)

    @property
    def stacks(self) -> bool:
        """Whether a phone shows each row as a block of "column: value" lines rather than a table row: when its
        columns side by side, each as wide as its longest value (or its header's longest word), would not fit a
        390 px screen without cutting a value."""
        width = 0
        for i, name in enumerate(self.columns):
            cells = [len(r[i].text) for r in self.rows if i < len(r)]
            width += max([*cells, *(len(w) for w in name.split())], default=0) + PHONE_CELL_PADDING
        return width > PHONE_TABLE_CHARS

    @cached_property
    def numeric_columns(self) -> set[int]:
        """Columns whose every filled cell is a number: right-aligned, header included."""
        cols = set(range(len(self.columns)))
        for r in self.rows:
            cols -= {i for i, c in enumerate(r) if not c.numeric and c.text != MISSING}
        return cols

    def half(self, i: int, c: Cell) -> bool:
        """Whether cell `i` of a stacked row is short enough, with its column's name, to share a phone's line with
        another such cell ("stride 2", "correct 1/16")."""
        return i > 0 and len(c.text) + len(self.columns[i] if i < len(self.columns) else "") <= HALF_LINE

    @property
    def folded(self) -> bool:
        return len(self.rows) > FOLD_AFTER

    @property
    def preview(self) -> list[list[Cell]]:
        return self.rows[:PREVIEW_ROWS] if self.folded else self.rows


@dataclass(frozen=True)
class Plot:
    name: str
    title: str
    wide: bool  # a timeline: keeps its drawn width and scrolls on narrow screens; the viewer redraws it


@dataclass
class ResultView:
    lab: str
    title: str
    question: str
    answer: str
    answer_from_lab: bool  # False: built here from the summary (a result from before labs wrote one)
    label: str
    emulated: bool
    backend: str
    items: list[Item]
    footnotes: list[str]
    plots: list[Plot]
    tables: list[TableView]
    downloads: list[FileRef]
    cut_notes: list[str] = field(default_factory=list)  # what the excerpt left out ("1,900 more summary rows")


def _notes(summary: list[SummaryItem], label: str) -> tuple[list[list[str]], set[str]]:
    """Each item's note split into its clauses, and the clauses said by two or more items (footnotes); the
    honesty label (already shown once, prominently) is dropped wherever a lab repeated it."""
    split = []
    for row in summary:
        note = (row.get("note") or "").strip()
        if label:
            note = note.replace(label, "").strip(" ;")
        parts = [p.strip() for p in note.split("; ")] if note else []
        split.append([p for p in parts if p])
    counts: dict[str, int] = {}
    for parts in split:
        for p in set(parts):
            counts[p] = counts.get(p, 0) + 1
    # Only a long clause is worth a footnote: a short one (a definition, "64 of 64 tokens") reads best in place.
    return split, {p for p in counts if counts[p] > 1 and len(p) > FOOTNOTE_AT}


def _headed(note: str) -> tuple[str, str]:
    """A long note split into what its card keeps and its footnote: "not measured on CPU: PyTorch keeps ..."
    keeps its short heading in the card; a note without one goes below whole."""
    head, sep, rest = note.partition(": ")
    if sep and len(head) <= CARD_HEAD_AT and rest:
        return head, rest[:1].upper() + rest[1:]
    return "", note


def _lower_first(text: str) -> str:
    """'Final loss' -> 'final loss' inside a sentence; 'FP8 recipe' and 'TP=2 step' keep their capitals."""
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def _fallback_answer(title: str, items: list[Item]) -> str:
    """A sentence from the first numbers of the summary, for results written before labs stated an answer."""
    shown = [i for i in items if not i.missing and not i.restates_label][:3]
    if not shown:
        return f"{title}: this run finished; its numbers are below."
    parts = [f"{_lower_first(i.label)} was {i.text}" for i in shown]
    joined = parts[0] if len(parts) == 1 else "; ".join(parts[:-1]) + "; and " + parts[-1]
    return f"In this run, {joined}."


def _download_title(title: str) -> str:
    """A download's link text says what the link does: a Chrome trace downloads (the timeline viewer's button opens
    one in Perfetto UI); results written before the labs said so called the download "open in Perfetto"."""
    return title.replace("(open in Perfetto)", "(JSON for Perfetto UI)")


def present(result: dict) -> ResultView:
    lab = str(result.get("lab", ""))
    spec = catalog.LABS.get(lab)
    env, results = result.get("environment"), result.get("results")
    env = env if isinstance(env, dict) else {}
    results = results if isinstance(results, dict) else {}
    ex = excerpt(result)  # bounded: the rest stays in result.json, one link away
    label = ex.label
    summary = ex.summary
    split, shared = _notes(summary, label)
    footnotes: list[str] = []  # numbered in the order the cards first point to them

    def mark(note: str) -> int:
        if note not in footnotes:
            footnotes.append(note)
        return footnotes.index(note) + 1

    items = []
    for row, clauses in zip(summary, split):
        value = row["value"]
        marks = [mark(c) for c in clauses if c in shared]
        own = "; ".join(c for c in clauses if c not in shared)
        if len(own) > CARD_NOTE_AT:
            own, rest = _headed(own)
            marks.append(mark(rest))
        text = human(value, row.get("unit"))
        if value is None and not own and not marks:
            own = "not reported by this run"
        restates = bool(label) and label in row.get("note", "")
        items.append(Item(row["label"], text, own, marks, missing=value is None, restates_label=restates))
    title = spec.title if spec else lab
    answer = results.get("answer")
    tables = []
    for t in ex.tables:
        columns = [str(c) for c in t.columns]
        rows = [
            [
                Cell(cell(v, columns[i] if i < len(columns) else ""), _is_number(v) or _is_scientific(v))
                for i, v in enumerate(r)
            ]
            for r in t.rows
        ]
        heading, description = table_heading(str(t.title))
        tables.append(TableView(heading, columns, rows, t.cut_note, description))
    stated = isinstance(answer, str) and bool(answer.strip())
    return ResultView(
        lab=lab,
        title=title,
        question=spec.question if spec else "",
        answer=cut(answer, MAX_LABEL) if stated else _fallback_answer(title, items),
        answer_from_lab=stated,
        label=label,
        emulated=ex.emulated,
        backend=str(cut(str(env.get("backend", "")))),
        items=items,
        footnotes=footnotes,
        plots=[Plot(a.name, a.title, a.name.startswith("timeline")) for a in ex.plots],
        tables=tables,
        downloads=[FileRef(d.name, _download_title(d.title)) for d in ex.downloads],
        cut_notes=ex.notes,
    )


# ---- two runs side by side ----------------------------------------------------------------------


@dataclass
class CompareRow:
    label: str
    a: str
    b: str
    change: str = ""  # "+12.3 ms (1.41×)" for two numbers of the same unit
    differs: bool = False


@dataclass
class Comparison:
    params: list[CompareRow]  # the parameters that differ
    same_params: str  # the ones that do not, compactly
    answers: tuple[str, str]
    labels: tuple[str, str]
    numbers: list[CompareRow]


def _change(a: Any, b: Any, unit: str | None) -> str:
    if not (_is_number(a) and _is_number(b)) or not (math.isfinite(a) and math.isfinite(b)):
        return ""
    diff = b - a
    if diff == 0:
        return "same"
    sign = "+" if diff > 0 else "−"
    text = sign + human(abs(diff), unit)
    ratio = b / a if a else 0.0
    # A ratio says more than the difference when the two are of one sign and clearly apart.
    if (
        ratio > 0
        and abs(ratio - 1) >= 0.01
        and (unit or "") not in ("x", "×")
        and not (unit or "").startswith("fraction")
    ):
        text += f" ({ratio:.2f}× A)"
    return text


def _summary_by_label(result: dict) -> dict[str, SummaryItem]:
    """A result's summary items by label; entries that are not SummaryItems are not compared."""
    rows = (result.get("results") or {}).get("summary")
    items = (api.read_summary_item(r) for r in (rows if isinstance(rows, list) else []))
    return {i["label"]: i for i in items if i is not None}


def compare(result_a: dict, result_b: dict) -> Comparison:
    """The parameters that differ and every summary number of both runs, matched by label, with B − A."""
    pa, pb = result_a.get("params") or {}, result_b.get("params") or {}
    params, same = [], []
    for key in dict.fromkeys([*pa, *pb]):
        va, vb = pa.get(key), pb.get(key)
        if va == vb:
            same.append(f"{key}={_param_text(va)}")
        else:
            params.append(CompareRow(key, _param_text(va), _param_text(vb), differs=True))
    rows_a, rows_b = _summary_by_label(result_a), _summary_by_label(result_b)
    numbers = []
    for label in dict.fromkeys([*rows_a, *rows_b]):
        ra, rb = rows_a.get(label), rows_b.get(label)
        unit = (ra.get("unit") if ra else None) or (rb.get("unit") if rb else None)
        va, vb = (ra["value"] if ra else None), (rb["value"] if rb else None)
        ta = human(va, unit) if label in rows_a else f"{MISSING} (not in this run)"
        tb = human(vb, unit) if label in rows_b else f"{MISSING} (not in this run)"
        numbers.append(CompareRow(label, ta, tb, _change(va, vb, unit), differs=ta != tb))
    va, vb = present(result_a), present(result_b)
    return Comparison(
        params=params,
        same_params=", ".join(same),
        answers=(va.answer, vb.answer),
        labels=(va.label, vb.label),
        numbers=numbers,
    )


def _param_text(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return str(v)


def params_text(lab: str, params: dict | None) -> str:
    """A run's parameters at a glance: the ones that differ from the lab's defaults ('defaults' if none)."""
    spec = catalog.LABS.get(lab)
    params = params or {}
    defaults = {}
    if spec is not None:
        defaults = {k: f.default for k, f in spec.params.model_fields.items()}
    changed = [f"{k}={_param_text(v)}" for k, v in params.items() if k not in defaults or defaults[k] != v]
    return ", ".join(changed) if changed else "defaults"
