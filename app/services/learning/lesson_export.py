"""A published lesson version as files to commit back to the repository: a zip, or a diff to the version before.

An instructor who edits in the browser publishes versions the repository does not have yet; these let
them carry the change home. Both name files as they sit in the repository (`lessons/<id>/parts/x.yaml`):
the zip unpacks at the repository root, and the diff applies there with `git apply`.
"""

from __future__ import annotations

import difflib
import io
import zipfile
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.services.errors import NotFound
from app.services.learning import lessons as lesson_service

# A fixed timestamp: the same version always zips to the same bytes (ZIP stores local times, no zone).
ZIP_TIME = (2000, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Export:
    filename: str
    media_type: str
    body: bytes


def _files(db: Session, lesson_id: str, version: int) -> dict[str, str]:
    row = lesson_service.version_row(db, lesson_id=lesson_id, version=version)
    if row is None:
        raise NotFound(f"Lesson {lesson_id!r} has no version {version}.")
    return dict(row.files)


def version_zip(db: Session, *, lesson_id: str, version: int) -> Export:
    """Every file of the version under lessons/<id>/, ready to unzip at the repository root."""
    files = _files(db, lesson_id, version)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in sorted(files):
            info = zipfile.ZipInfo(f"lessons/{lesson_id}/{rel}", date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, files[rel])
    return Export(f"{lesson_id}-v{version}.zip", "application/zip", buf.getvalue())


def changed_files(new: dict[str, str], old: dict[str, str]) -> list[str]:
    """The files (relative paths, sorted) that differ between two versions' file maps: added, removed or edited."""
    return [rel for rel in sorted(set(old) | set(new)) if old.get(rel) != new.get(rel)]


def version_diff(db: Session, *, lesson_id: str, version: int) -> Export:
    """A unified diff from the previous version to this one, in git's a/ b/ form (`git apply` at the root).

    Version 1 has no predecessor: its diff adds every file."""
    new = _files(db, lesson_id, version)
    old = _files(db, lesson_id, version - 1) if version > 1 else {}
    out: list[str] = []
    for rel in changed_files(new, old):
        a, b = old.get(rel), new.get(rel)
        path = f"lessons/{lesson_id}/{rel}"
        out.append(f"diff --git a/{path} b/{path}\n")
        if a is None:
            out.append("new file mode 100644\n")
        elif b is None:
            out.append("deleted file mode 100644\n")
        out.extend(
            difflib.unified_diff(
                _lines(a),
                _lines(b),
                fromfile=f"a/{path}" if a is not None else "/dev/null",
                tofile=f"b/{path}" if b is not None else "/dev/null",
            )
        )
    body = "".join(out) or f"# version {version} of {lesson_id} has the same files as version {version - 1}\n"
    return Export(f"{lesson_id}-v{version}.diff", "text/x-diff; charset=utf-8", body.encode())


def _lines(text: str | None) -> list[str]:
    """Lines for difflib, each ending in a newline (a last line without one gets git's marker)."""
    if not text:
        return []
    lines = text.splitlines(keepends=True)
    if not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines
