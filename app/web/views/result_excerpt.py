"""What a page shows of a lab result: a bounded excerpt, with links to the whole.

A result.json is the learner's (an uploaded bundle) or a lab's output, and nothing but the upload limit
bounds its size: a 3.4 MB result over five report versions made a 41 MB page. Every page that shows a
result (job card, uploaded bundle, report evidence, grader review) renders `excerpt(result)` instead of
the raw dict: the honesty label and the first rows of the summary and of each table, the first plots and
downloads, each long text cut, each cut said in words, and result.json itself one link away.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


@dataclass
class ResultExcerpt:
    label: str
    emulated: bool
    summary: list[dict]
    summary_total: int
    tables: list[TableExcerpt]
    tables_total: int
    plots: list[dict]
    plots_total: int
    downloads: list[dict]
    downloads_total: int
    notes: list[str] = field(default_factory=list)  # what was left out, in words

    @property
    def cut(self) -> bool:
        return bool(self.notes) or any(t.cut_note for t in self.tables)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _table(table: Any) -> TableExcerpt:
    table = _dict(table)
    columns, rows = _list(table.get("columns")), _list(table.get("rows"))
    width = min(len(columns) or MAX_TABLE_COLUMNS, MAX_TABLE_COLUMNS)
    return TableExcerpt(
        title=cut(str(table.get("title", "")), MAX_LABEL),
        columns=[cut(c) for c in columns[:width]],
        rows=[[cut(v) for v in _list(r)[:width]] for r in rows[:MAX_TABLE_ROWS]],
        rows_total=len(rows),
        columns_total=max(len(columns), max((len(_list(r)) for r in rows[:MAX_TABLE_ROWS]), default=0)),
    )


def excerpt(result: dict) -> ResultExcerpt:
    """The bounded view of `result` (a schema-valid result.json; anything odd is shown as text, not trusted)."""
    env, results = _dict(result.get("environment")), _dict(result.get("results"))
    summary = [r for r in _list(results.get("summary")) if isinstance(r, dict)]
    tables = _list(results.get("tables"))
    named = [a for a in _list(result.get("artifacts")) if isinstance(a, dict) and isinstance(a.get("name"), str)]
    artifacts = [a for a in named if len(a["name"]) <= MAX_NAME]  # a name is part of its link's URL
    plots = [a for a in artifacts if a.get("media_type") == "image/svg+xml"]
    downloads = [a for a in artifacts if a.get("media_type") != "image/svg+xml"]
    view = ResultExcerpt(
        label=cut(str(env.get("label", "")), MAX_LABEL),
        emulated=bool(env.get("emulated")),
        summary=[
            {
                "label": cut(r.get("label")),
                "value": cut(r.get("value")),
                "unit": cut(r.get("unit")),
                "note": cut(r.get("note"), MAX_LABEL),  # a lab's caveat is read in full
            }
            for r in summary[:MAX_SUMMARY_ROWS]
        ],
        summary_total=len(summary),
        tables=[_table(t) for t in tables[:MAX_TABLES]],
        tables_total=len(tables),
        plots=[{"name": a["name"], "title": cut(a.get("title") or a["name"])} for a in plots[:MAX_PLOTS]],
        plots_total=len(plots),
        downloads=[{"name": a["name"], "title": cut(a.get("title") or a["name"])} for a in downloads[:MAX_DOWNLOADS]],
        downloads_total=len(downloads),
    )
    for shown, total, what in (
        (len(view.summary), view.summary_total, "summary rows"),
        (len(view.tables), view.tables_total, "tables"),
        (len(view.plots), view.plots_total, "plots"),
        (len(view.downloads), view.downloads_total, "files"),
    ):
        if total > shown:
            view.notes.append(f"{total - shown:,} more {what}")
    if len(named) > len(artifacts):
        view.notes.append(f"{len(named) - len(artifacts):,} files whose names are too long to link")
    return view
