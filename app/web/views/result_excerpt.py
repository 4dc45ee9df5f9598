"""What a page shows of a lab result: a bounded excerpt, with links to the whole.

A result.json is the learner's (an uploaded bundle) or a lab's output, and nothing but the upload limit
bounds its size: a 3.4 MB result over five report versions made a 41 MB page. Every page that shows a
result (job card, uploaded bundle, report evidence, grader review) renders `excerpt(result)` instead of
the raw dict: the honesty label and the first rows of the summary and of each table, the first plots and
downloads, each long text cut, each cut said in words, and result.json itself one link away.

Summary items and tables are read as the labs build them (labs.api SummaryItem and Table, validated), so the
page reads their fields by name and a key the labs renamed fails mypy here, not silently on the page. An
entry that is not one (a result written before a shape changed) is left out and counted in words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labs.api import SummaryItem, read_summary_item, read_table

# Enough for every result our labs write today (their biggest table has a row per step: 50 rows is a
# 50-step run), small enough that a page with a dozen results stays well under a megabyte.
MAX_SUMMARY_ROWS = 40
MAX_TABLES = 12
MAX_TABLE_ROWS = 50
MAX_TABLE_COLUMNS = 16
MAX_PLOTS = 12
MAX_DOWNLOADS = 40
MAX_TEXT = 200  # characters of one cell, value, title or note
MAX_LABEL = 600  # the honesty label, a table title, a number's note: a few sentences, never cut mid-thought
MAX_NAME = 255  # an artifact's name, which its link carries


def cut(value: Any, limit: int = MAX_TEXT) -> Any:
    """A string longer than `limit` ends in an ellipsis; other values (numbers) pass unchanged."""
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 1] + "…"
    if isinstance(value, (list, dict)):  # a nested structure in a cell: its text, cut
        return cut(str(value), limit)
    return value


@dataclass
class TableExcerpt:
    title: str
    columns: list[Any]
    rows: list[list[Any]]
    rows_total: int
    columns_total: int

    @property
    def cut_note(self) -> str:
        parts = []
        if self.rows_total > len(self.rows):
            parts.append(f"the first {len(self.rows)} of {self.rows_total:,} rows")
        if self.columns_total > len(self.columns):
            parts.append(f"the first {len(self.columns)} of {self.columns_total:,} columns")
        return " and ".join(parts)


@dataclass(frozen=True)
class FileRef:
    """An artifact a page links: its name (in its URL) and what the link says."""

    name: str
    title: str


@dataclass
class ResultExcerpt:
    label: str
    emulated: bool
    summary: list[SummaryItem]
    summary_total: int
    tables: list[TableExcerpt]
    tables_total: int
    plots: list[FileRef]
    plots_total: int
    downloads: list[FileRef]
    downloads_total: int
    notes: list[str] = field(default_factory=list)  # what was left out, in words

    @property
    def cut(self) -> bool:
        return bool(self.notes) or any(t.cut_note for t in self.tables)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _table(raw: Any) -> TableExcerpt | None:
    """The first rows of a table, or None when it is not a Table. Its rows are bounded before they are
    validated: an upload's 50,000-row table costs a page what 50 rows do."""
    raw = _dict(raw)
    rows_total = len(_list(raw.get("rows")))
    table = read_table({**raw, "rows": _list(raw.get("rows"))[:MAX_TABLE_ROWS]} if "rows" in raw else raw)
    if table is None:
        return None
    columns, rows = table["columns"], table["rows"]
    width = min(len(columns) or MAX_TABLE_COLUMNS, MAX_TABLE_COLUMNS)
    return TableExcerpt(
        title=cut(table["title"], MAX_LABEL),
        columns=[cut(c) for c in columns[:width]],
        rows=[[cut(v) for v in r[:width]] for r in rows],
        rows_total=rows_total,
        columns_total=max(len(columns), max((len(r) for r in rows), default=0)),
    )


def _item(item: SummaryItem) -> SummaryItem:
    """One summary item with its long texts cut; a lab's caveat (its note) is read in full."""
    out = SummaryItem(label=cut(item["label"]), value=cut(item["value"]))
    if "unit" in item:
        out["unit"] = cut(item["unit"])
    if "note" in item:
        out["note"] = cut(item["note"], MAX_LABEL)
    return out


def excerpt(result: dict) -> ResultExcerpt:
    """The bounded view of `result` (a schema-valid result.json; anything odd is left out and said, not trusted)."""
    env, results = _dict(result.get("environment")), _dict(result.get("results"))
    raw_summary, raw_tables = _list(results.get("summary")), _list(results.get("tables"))
    summary = [i for i in map(read_summary_item, raw_summary[:MAX_SUMMARY_ROWS]) if i is not None]
    tables = [t for t in map(_table, raw_tables[:MAX_TABLES]) if t is not None]
    named = [a for a in _list(result.get("artifacts")) if isinstance(a, dict) and isinstance(a.get("name"), str)]
    artifacts = [a for a in named if len(a["name"]) <= MAX_NAME]  # a name is part of its link's URL
    plots = [a for a in artifacts if a.get("media_type") == "image/svg+xml"]
    downloads = [a for a in artifacts if a.get("media_type") != "image/svg+xml"]
    view = ResultExcerpt(
        label=cut(str(env.get("label", "")), MAX_LABEL),
        emulated=bool(env.get("emulated")),
        summary=[_item(i) for i in summary],
        summary_total=len(raw_summary),
        tables=tables,
        tables_total=len(raw_tables),
        plots=[FileRef(a["name"], cut(str(a.get("title") or a["name"]))) for a in plots[:MAX_PLOTS]],
        plots_total=len(plots),
        downloads=[FileRef(a["name"], cut(str(a.get("title") or a["name"]))) for a in downloads[:MAX_DOWNLOADS]],
        downloads_total=len(downloads),
    )
    for raw, bound, read, what in (
        (raw_summary, MAX_SUMMARY_ROWS, summary, "summary rows"),
        (raw_tables, MAX_TABLES, tables, "tables"),
    ):
        if min(len(raw), bound) > len(read):
            view.notes.append(f"{min(len(raw), bound) - len(read):,} {what} not in the shape the labs write")
        if len(raw) > bound:
            view.notes.append(f"{len(raw) - bound:,} more {what}")
    for shown, total, what in (
        (len(view.plots), view.plots_total, "plots"),
        (len(view.downloads), view.downloads_total, "files"),
    ):
        if total > shown:
            view.notes.append(f"{total - shown:,} more {what}")
    if len(named) > len(artifacts):
        view.notes.append(f"{len(named) - len(artifacts):,} files whose names are too long to link")
    return view
