"""No module under app/ or labs/ grows past 600 lines.

A file that long holds more concepts than a reader keeps in mind at once; it is asking to be split along
the seams it already has (a module per figure, per lesson file, per lab), as content/figures/ and
content/schema/ are.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600
# Modules over the limit while a split is under way: each entry names the file and why it is here.
KNOWN: dict[str, str] = {}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def over_the_limit(root: Path) -> dict[str, int]:
    """{path under root: lines} of every .py file under root/app and root/labs longer than LIMIT."""
    modules = (p for top in ("app", "labs") for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts)
    return {p.relative_to(root).as_posix(): n for p in sorted(modules) if (n := _lines(p)) > LIMIT}


def test_no_module_is_over_the_limit():
    over = over_the_limit(ROOT)
    unexpected = {rel: n for rel, n in over.items() if rel not in KNOWN}
    assert not unexpected, f"modules over {LIMIT} lines (split them along their seams):\n" + "\n".join(
        f"{rel}: {n} lines" for rel, n in sorted(unexpected.items(), key=lambda kv: -kv[1])
    )


def test_known_exceptions_are_still_over():
    """An exception is dropped from KNOWN once its file is split, so the limit then holds for it too."""
    within = [rel for rel in KNOWN if not ((ROOT / rel).is_file() and _lines(ROOT / rel) > LIMIT)]
    assert not within, f"within {LIMIT} lines now, remove from KNOWN: {', '.join(within)}"


def test_the_check_names_each_file_over_and_its_count(tmp_path):
    """One line over is reported with its path and count; at the limit, outside app/ and labs/, or in a
    bytecode cache is not."""
    for rel, n in {
        "app/web/big.py": LIMIT + 1,
        "labs/ok.py": LIMIT,
        "bench/long.py": 900,
        "app/__pycache__/x.py": 900,
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n" * n)
    assert over_the_limit(tmp_path) == {"app/web/big.py": LIMIT + 1}
