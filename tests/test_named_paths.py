"""Every repository path a source file or a guide names (in code, a comment, a docstring or docs/) exists.

Comments and docstrings point readers at other files ("see app/services/jobs/queue.py"); when a file moves, a
stale pointer sends a newcomer nowhere. A template name such as `lessons/_part.html` is looked up under
templates/, and `labs/parallel/costmodel.predict_sweep` names an attribute of a module.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = ("app", "labs", "tests", "templates", "static", "lessons", "scripts", "bench", "migrations", "docs")
NAMED = re.compile(r"(?<![\w./-])((?:" + "|".join(TOP) + r")/[\w./-]*[\w/])")
FILE_ENDINGS = (".py", ".html", ".yaml", ".yml", ".json", ".js", ".mjs", ".css", ".sh", ".md", ".toml", ".ini")
SOURCES = (".py", ".html", ".js", ".mjs", ".css", ".sh", ".toml", ".ini", ".yml")
SKIP = ("static/vendor/", "static/editor.js", "tests/test_module_size.py")  # third-party, built, or tmp-path examples


def _exists(named: str) -> bool:
    if (ROOT / named).exists() or (ROOT / "templates" / named).exists():
        return True
    module, dot, _attr = named.rpartition(".")
    return bool(dot) and (ROOT / f"{module}.py").exists()


def _candidates(line: str):
    for m in NAMED.finditer(line):
        named = m.group(1).rstrip(".")
        if named.endswith("/") or named.endswith(FILE_ENDINGS) or re.search(r"\.py\.\w+$", named):
            yield named
        elif re.search(r"\.[A-Za-z_]\w*$", named) and "/" in named:  # module/path.attribute
            yield named


def test_every_named_repo_path_exists():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    missing = []
    for rel in tracked.split():
        guide = rel.endswith(".md") and not rel.startswith("lessons/") or rel == "lessons/_template/README.md"
        if not (rel.endswith(SOURCES) or guide) and Path(rel).name not in ("Makefile", "Dockerfile", "Dockerfile.gpu"):
            continue
        if rel.startswith(SKIP) or not (ROOT / rel).is_file():
            continue
        for number, line in enumerate((ROOT / rel).read_text(encoding="utf-8").splitlines(), 1):
            missing += [f"{rel}:{number}: {named}" for named in _candidates(line) if not _exists(named)]
    assert not missing, "paths named in the code that do not exist:\n" + "\n".join(missing)
