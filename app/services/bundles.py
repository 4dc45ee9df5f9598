"""Uploaded lab bundles: a zip of result.json and its artifacts, made by `python -m labs run` elsewhere.

    cd /tmp/fp8 && zip -r ../fp8.zip .        # the folder --out wrote; a single top folder is fine too

An upload is refused, with the exact reason and nothing stored, unless every rule below holds. The
archive is read entry by entry with a byte budget: declared sizes are checked first but never trusted,
so a zip that lies about its sizes is caught while it expands.
"""

from __future__ import annotations

import io
import json
import posixpath
import shutil
import stat
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.models import Bundle, User
from app.services.checks import schema_problem
from labs.api import byte_size

MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # compressed, as received: a bundle of SVGs and traces is a few MiB at most
MAX_TOTAL_BYTES = 100 * 1024 * 1024  # expanded, all entries together
MAX_ENTRIES = 200  # the largest lab writes ~20 files; more is not a lab bundle
MAX_RATIO = 100  # per entry, expanded / compressed; JSON traces compress ~10-20x, bombs 1000x+
RATIO_FLOOR = 64 * 1024  # entries smaller than this expand too little to matter, whatever their ratio
MAX_RESULT_BYTES = 5 * 1024 * 1024  # result.json itself
MAX_NAME = 200  # characters in one entry path
CHUNK = 64 * 1024
# What a bundle may hold: the media types result.schema.json allows, by extension.
MEDIA_TYPES = {".json": "application/json", ".svg": "image/svg+xml", ".txt": "text/plain", ".csv": "text/csv"}


class BundleError(ValueError):
    """An upload refused; str(exc) says exactly why, in the learner's terms."""


@dataclass
class _Entry:
    info: zipfile.ZipInfo
    path: str  # normalised, relative to the bundle root


def _safe_name(info: zipfile.ZipInfo) -> str:
    """The entry's path, or BundleError naming the trick it tries."""
    name = info.filename
    if not name or len(name) > MAX_NAME:
        raise BundleError(f"entry {name[:60]!r}: names must be 1 to {MAX_NAME} characters long")
    if "\\" in name or "\0" in name or any(ord(c) < 32 for c in name):
        raise BundleError(f"entry {name!r}: backslashes and control characters are not allowed in names")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise BundleError(f"entry {name!r}: absolute paths are not allowed; paths must be relative to the bundle")
    parts = [p for p in name.rstrip("/").split("/")]
    if any(p in ("..", ".") or p == "" for p in parts):
        raise BundleError(
            f"entry {name!r}: '..', '.' and empty path parts are not allowed (they could escape the bundle)"
        )
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise BundleError(f"entry {name!r}: symbolic links are not allowed")
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):  # 0: a zip tool that records no file type
        raise BundleError(f"entry {name!r}: only plain files and folders are allowed")
    if info.flag_bits & 0x1:
        raise BundleError(f"entry {name!r}: encrypted entries are not allowed")
    return posixpath.normpath(name)


def _entries(zf: zipfile.ZipFile) -> list[_Entry]:
    infos = zf.infolist()
    if len(infos) > MAX_ENTRIES:
        raise BundleError(f"the zip has {len(infos)} entries; a bundle may hold at most {MAX_ENTRIES}")
    files: list[_Entry] = []
    seen: dict[str, str] = {}
    declared = 0
    for info in infos:
        path = _safe_name(info)
        key = path.lower()  # two names that differ only in case collide on many file systems
        if key in seen:
            raise BundleError(f"entry {info.filename!r}: the name appears twice (also {seen[key]!r})")
        seen[key] = info.filename
        if info.is_dir():
            continue
        ext = posixpath.splitext(path)[1].lower()
        if ext not in MEDIA_TYPES:
            raise BundleError(
                f"entry {info.filename!r}: files of type {ext or '(none)'!r} are not allowed; "
                f"allowed: {', '.join(sorted(MEDIA_TYPES))}"
            )
        declared += info.file_size
        if declared > MAX_TOTAL_BYTES:
            raise BundleError(f"the zip expands to more than {byte_size(MAX_TOTAL_BYTES)}, the limit for a bundle")
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise BundleError(
                f"entry {info.filename!r} expands {info.file_size // max(info.compress_size, 1)}x "
                f"(more than {MAX_RATIO}x): refused as a possible zip bomb"
            )
        files.append(_Entry(info, path))
    return _strip_single_top_folder(files)


def _strip_single_top_folder(files: list[_Entry]) -> list[_Entry]:
    """`zip -r out.zip fp8/` puts everything under fp8/: accept that as the bundle root."""
    if any(e.path == "result.json" for e in files):
        return files
    tops = {e.path.split("/", 1)[0] for e in files}
    if len(tops) == 1 and all("/" in e.path for e in files):
        top = tops.pop() + "/"
        return [_Entry(e.info, e.path[len(top) :]) for e in files]
    return files


def _extract(zf: zipfile.ZipFile, files: list[_Entry], dest: Path) -> None:
    """Write every file under dest, counting real bytes (the declared sizes may lie)."""
    total = 0
    for e in files:
        target = dest / e.path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            out = open(target, "wb")
        except OSError as exc:  # e.g. "a.json" and "a.json/b.svg": name the entry, never the server's path
            raise BundleError(f"entry {e.info.filename!r} could not be unpacked: {exc.strerror or exc}") from None
        written = 0
        with zf.open(e.info) as src, out:
            while True:
                chunk = src.read(CHUNK)
                if not chunk:
                    break
                written += len(chunk)
                total += len(chunk)
                if written > e.info.file_size:
                    raise BundleError(f"entry {e.info.filename!r} expands beyond the size it declares: refused")
                if total > MAX_TOTAL_BYTES:
                    raise BundleError(
                        f"the zip expands to more than {byte_size(MAX_TOTAL_BYTES)}, the limit for a bundle"
                    )
                out.write(chunk)


def _read_result(dest: Path) -> dict:
    path = dest / "result.json"
    if not path.is_file():
        raise BundleError(
            "the zip has no result.json at its top level (zip the folder `python -m labs run --out` wrote)"
        )
    if path.stat().st_size > MAX_RESULT_BYTES:
        raise BundleError(f"result.json is {byte_size(path.stat().st_size)}; at most {byte_size(MAX_RESULT_BYTES)}")
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise BundleError("result.json is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise BundleError(
            f"result.json is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    if not isinstance(result, dict):
        raise BundleError("result.json must hold a JSON object")
    problem = schema_problem(result)
    if problem:
        raise BundleError(problem)
    for a in result["artifacts"]:
        f = (dest / a["path"]).resolve()
        if dest.resolve() not in f.parents or not f.is_file():
            raise BundleError(f"artifact {a['name']!r} is listed in result.json at {a['path']!r} but is not in the zip")
        ext = posixpath.splitext(a["path"])[1].lower()
        if MEDIA_TYPES.get(ext) != a["media_type"]:
            raise BundleError(
                f"artifact {a['name']!r}: {a['path']!r} is declared as {a['media_type']} "
                f"but its extension says {MEDIA_TYPES.get(ext, 'an unknown type')}"
            )
    return result


def bundles_dir(settings: Settings) -> Path:
    return settings.data_dir / "bundles"


def unpack(data: bytes, dest: Path) -> dict:
    """Extract a lab's zipped output folder into `dest` under the upload rules (sizes, names, ratio, schema) and
    return its result.json; BundleError otherwise. The Ray dispatcher stores a task's returned output with it."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise BundleError(
            f"the output is {byte_size(len(data))} zipped; at most {byte_size(MAX_UPLOAD_BYTES)} is accepted"
        )
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise BundleError("the output is not a zip archive") from None
    dest.mkdir(parents=True, exist_ok=True)
    with zf:
        files = _entries(zf)
        try:
            _extract(zf, files, dest)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, OSError) as exc:
            raise BundleError(f"the zip could not be read: {exc}") from None
    return _read_result(dest)


def ingest(db: Session, *, settings: Settings, owner: User, filename: str, data: bytes) -> Bundle:
    """Validate and store an uploaded zip; BundleError (nothing stored) when any rule fails."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise BundleError(
            f"the file is {byte_size(len(data))}; a bundle may be at most {byte_size(MAX_UPLOAD_BYTES)} compressed"
        )
    if not data:
        raise BundleError("the file is empty")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise BundleError(
            "the file is not a zip archive (make one with `zip -r bundle.zip .` inside the folder you gave `--out`)"
        ) from None
    root = bundles_dir(settings)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".upload-{uuid.uuid4().hex}"
    try:
        with zf:
            files = _entries(zf)
            tmp.mkdir()
            try:
                _extract(zf, files, tmp)
            except OSError as exc:  # str(exc) would carry the absolute path under the data dir
                raise BundleError(f"the zip could not be read: {exc.strerror or type(exc).__name__}") from None
            except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
                raise BundleError(f"the zip could not be read: {exc}") from None
        result = _read_result(tmp)
        bundle = Bundle(
            owner_id=owner.id,
            lab=result["lab"],
            filename=(filename or "bundle.zip")[:255],
            size_bytes=len(data),
            bundle_dir="",
            result=result,
        )
        db.add(bundle)
        db.flush()
        final = root / str(bundle.id)
        if final.exists():  # left over from a rolled-back upload that got the same id
            shutil.rmtree(final)
        tmp.rename(final)
        bundle.bundle_dir = final.relative_to(settings.data_dir).as_posix()
        try:
            db.commit()
        except Exception:
            shutil.rmtree(final, ignore_errors=True)
            raise
        return bundle
    except BaseException:
        db.rollback()
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def get_for(db: Session, *, bundle_id: int, user: User) -> Bundle | None:
    """The bundle if `user` owns it or is an instructor; None otherwise (graders reach bundles through reports)."""
    bundle = db.get(Bundle, bundle_id)
    if bundle is None or not (bundle.owner_id == user.id or user.has_role("instructor")):
        return None
    return bundle
