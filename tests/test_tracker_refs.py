"""No code, YAML, template, guide or test name points at this project's issue tracker.

Why a line is as it is belongs in the line's comment; the story of how it got so ("issue 30 §4", "#42", a test
named after an issue's item) belongs in the commit body, where it stays true. Other projects' issues are
citations and stay: they name the project next to the number ("NVIDIA/nccl issue 1250", "nccl-tests issue
#169") or give the URL.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.conftest import ROOT

TEXT = (".py", ".html", ".yaml", ".yml", ".js", ".mjs", ".css", ".sh", ".md", ".toml", ".ini", ".cfg", ".txt")
NAMED_FILES = ("Makefile", "Dockerfile", "Dockerfile.gpu", ".importlinter", ".ci/run")
# third-party code; this file's own examples
SKIP = ("static/vendor/", "tests/test_tracker_refs.py")
# "issue 30", "Issue #42", "issue-35", "issues 10 and 29", "PR #7", "(#42)", "fixes #12"
TRACKER = re.compile(r"\b(?:[Ii]ssues?|PR|[Pp]ull request)[\s-]*#?\d+|\(#\d+\)|\b(?:[Ff]ixes|[Cc]loses)\s+#\d+")
# a project named just before the number: owner/repo or a dashed name (nccl-tests, pytest-xdist); or a URL on the line
PROJECT = re.compile(r"[\w.-]+/[\w.-]+|[\w.]+-[\w.-]+")
URL = re.compile(r"https?://\S+/(?:issues|pull)/\d+")
# test names that carry an issue's numbering: test_issue_30_..., test_item3_..., test_point_2_...
NUMBERED_NAME = re.compile(r"issue_?\d|(?:^|_)(?:item|point|section)_?\d")


def _files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    return [
        rel
        for rel in listed
        if rel and (rel.endswith(TEXT) or rel in NAMED_FILES) and not rel.startswith(SKIP) and (ROOT / rel).is_file()
    ]


def tracker_refs(line: str) -> list[str]:
    """The references in `line` to this project's tracker: those with no project just before them and no URL."""
    if URL.search(line):
        return []
    refs = []
    for m in TRACKER.finditer(line):
        before = line[: m.start()].split()
        named = before[-1].strip("([{\"'`").rstrip(",:;") if before else ""
        if not PROJECT.fullmatch(named):
            refs.append(m.group(0))
    return refs


@pytest.mark.parametrize(
    "line,found",
    [
        ("# a connection holds no slot (issue 30: eight posts froze every page)", ["issue 30"]),
        ('"""Issue 10 item 10: HTML pages send a CSP', ["Issue 10"]),
        ("Targets (issue 10) on a 2-core machine", ["issue 10"]),
        ("Then the attack of issue 30, held for --seconds", ["issue 30"]),
        ("What the issue-35 walk-through showed", ["issue-35"]),
        ("as fixed in PR #7 and (#42)", ["PR #7", "(#42)"]),
        ("see #42 for the measurements", []),  # a bare number is too often a run or a colour to judge
        ("measured in (#42)", ["(#42)"]),
        ("keeps CUDA_VISIBLE_DEVICES (ray-project/ray issue 54868; checked in Ray 2.60.0", []),
        ("NVIDIA/nccl issue 1250, all-reduce time across 2 nodes", []),
        ("the busy-wait of nccl-tests issue #169", []),
        ("xdist's controller (pytest-xdist issue #1386)", []),
        ("all-reduce times, https://github.com/NVIDIA/nccl/issues/1250", []),
        ('fill="#444" and "Run / #4 / (A)" and ProfilerStep#0', []),
    ],
)
def test_a_tracker_reference_is_told_from_a_citation(line, found):
    assert tracker_refs(line) == found


def test_no_line_points_at_the_projects_tracker():
    found = []
    for rel in _files():
        for number, line in enumerate((ROOT / rel).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            found += [f"{rel}:{number}: {ref}" for ref in tracker_refs(line)]
    assert not found, "issue references (say why in the comment; the history goes in the commit body):\n" + "\n".join(
        found
    )


def test_no_test_is_named_after_an_issue():
    named = []
    for rel in _files():
        if not (rel.startswith("tests/") and rel.endswith(".py")):
            continue
        if NUMBERED_NAME.search(rel.rsplit("/", 1)[-1]):
            named.append(rel)
        text = (ROOT / rel).read_text(encoding="utf-8")
        named += [f"{rel}: {n}" for n in re.findall(r"def (test_\w+)", text) if NUMBERED_NAME.search(n)]
    assert named == []
