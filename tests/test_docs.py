"""The README stays a page a newcomer reads in minutes, and every link in it and in docs/ leads somewhere."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ROOT

README_LIMIT = 8000  # bytes: what it is, the two commands, the layout, where to read on; the rest is in docs/
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; move detail to docs/"


def test_the_readme_points_at_every_guide():
    """Every guide under docs/ is linked from the README's list, so a new guide cannot go unlisted."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    guides = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert len(guides) >= 9  # the glob found the guides (the folder did not move)
    assert [g for g in guides if f"(docs/{g})" not in readme] == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(doc):
    targets = LINK.findall(doc.read_text(encoding="utf-8"))
    broken = [t for t in targets if "://" not in t and not (doc.parent / t).exists()]
    assert broken == []


def test_the_grafana_dashboard_queries_only_metrics_the_course_exposes():
    """docs/grafana-dashboard.json: every metric a panel queries is one app/web/metrics.py or app/services/cluster/metrics.py
    defines (a renamed metric would leave an empty panel nobody notices)."""
    defined = set()
    for src in ("app/web/metrics.py", "app/services/cluster/metrics.py"):
        defined |= set(re.findall(r'"(course_[a-z_]+)"', (ROOT / src).read_text(encoding="utf-8")))
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text(encoding="utf-8"))
    queried = {
        re.sub(r"_(bucket|count|sum|total)$", "", m)
        for p in dashboard["panels"]
        for t in p["targets"]
        for m in re.findall(r"course_[a-z_]+", t["expr"])
    }
    assert queried and queried <= defined, queried - defined
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
