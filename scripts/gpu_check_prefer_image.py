"""Set aside carried packages the box's Python already has, so its own copies are the ones imported.

    python3 scripts/gpu_check_prefer_image.py SITE numpy pandas     # run by the box's python, PYTHONPATH unset

scripts/gpu-check.sh installs its carried wheels into SITE and puts SITE first on PYTHONPATH, ahead of the box's
site-packages. For most of them that only fills gaps, but an NGC image builds torch and Transformer Engine against
its own numpy (and pandas beside it): a carried copy ahead of those would replace the build's. So for each named
distribution the box already has, this removes the carried files (listed in the wheel's RECORD) from SITE and
says which version stays; one the box lacks stays carried. Prints one line per name.
"""

from __future__ import annotations

import importlib.metadata as md
import shutil
import sys
from pathlib import Path


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def prefer_image(site: Path, names: list[str]) -> list[str]:
    """Remove from `site` each of `names` that this interpreter's own path already provides; lines saying what."""
    carried = {_canonical(d.metadata["Name"]): d for d in md.distributions(path=[str(site)])}
    own = {_canonical(d.metadata["Name"]): d for d in md.distributions() if not _inside(d, site)}
    lines = []
    for name in names:
        key = _canonical(name)
        if key not in carried:
            lines.append(f"{name}: not carried")
            continue
        if key not in own:
            lines.append(f"{name}: the carried {carried[key].version} (this Python has none)")
            continue
        version = carried[key].version
        _remove(carried[key], site)
        lines.append(f"{name}: this Python's own {own[key].version}; the carried {version} set aside")
    return lines


def _inside(dist: md.Distribution, site: Path) -> bool:
    where = Path(str(dist.locate_file(""))).resolve()
    return where == site.resolve() or site.resolve() in where.parents


def _remove(dist: md.Distribution, site: Path) -> None:
    tops = set()
    for f in dist.files or []:
        path = site / f
        if path.is_file() or path.is_symlink():
            path.unlink()
        tops.add(Path(f).parts[0])
    for top in tops:  # then the folders left empty (bytecode aside): never another distribution's files
        folder = site / top
        if not folder.is_dir():
            continue
        for cache in sorted(folder.rglob("__pycache__"), reverse=True):
            shutil.rmtree(cache, ignore_errors=True)
        for d in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            if not any(d.iterdir()):
                d.rmdir()
        if not any(folder.iterdir()):
            folder.rmdir()


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: gpu_check_prefer_image.py SITE NAME [NAME ...]", file=sys.stderr)
        return 2
    for line in prefer_image(Path(argv[0]), argv[1:]):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
