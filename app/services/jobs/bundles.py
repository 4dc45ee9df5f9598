"""Uploaded lab bundles: a zip of result.json and its artifacts, made by `python -m labs run` elsewhere.

    cd /tmp/fp8 && zip -r ../fp8.zip .        # the folder --out wrote; a single top folder is fine too

An upload is refused, with the exact reason and nothing stored, unless every rule below holds. The
archive is read entry by entry with a byte budget: declared sizes are checked first but never trusted,
so a zip that lies about its sizes is caught while it expands.

Only result.json and the artifacts it lists are kept: other files are never unpacked, and the answer names
them (a 1 MB zip of a valid result.json and 197 padding files once stored 94 MB). What is kept counts against
the learner's storage quota (app/services/jobs/limits.py), checked with the learner's lock held, so uploads at
once cannot pass it together. result.json is parsed within bounds, in time linear in its size (labs/jsonbounds.py).
"""

from __future__ import annotations

import io
import posixpath
import shutil
import stat
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.models import Bundle, LabReport, ReportVersion, User
from app.services.classes import scopes
from app.services.errors import Conflict
from app.services.jobs import limits as limit_service
from labs.api import byte_size, checks, count, jsonbounds

MAX_UPLOAD_BYTES = 20 * 1024 * 1024  # compressed, as received: a bundle of SVGs and traces is a few MiB at most
MAX_TOTAL_BYTES = 100 * 1024 * 1024  # expanded, all entries together
MAX_ENTRIES = 200  # the largest lab writes ~20 files; more is not a lab bundle
MAX_RATIO = 100  # per entry, expanded / compressed; JSON traces compress ~10-20x, bombs 1000x+
RATIO_FLOOR = 64 * 1024  # entries smaller than this expand too little to matter, whatever their ratio
MAX_RESULT_BYTES = jsonbounds.RESULT.max_bytes  # result.json itself; its other bounds are there too
MAX_DEPTH = jsonbounds.RESULT.max_depth  # nesting of objects and arrays in result.json
MAX_NAME = 200  # characters in one entry path
DROPPED_NAMED = 10  # files not kept, named one by one in the answer; the rest are counted
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
    files_seen: dict[str, str] = {}  # lower-cased path of each file: none may also be a folder
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
        files_seen[key] = info.filename
        declared += info.file_size
        if declared > MAX_TOTAL_BYTES:
            raise BundleError(f"the zip expands to more than {byte_size(MAX_TOTAL_BYTES)}, the limit for a bundle")
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise BundleError(
                f"entry {info.filename!r} expands {info.file_size // max(info.compress_size, 1)}x "
                f"(more than {MAX_RATIO}x): refused as a possible zip bomb"
            )
        files.append(_Entry(info, path))
    for e in files:  # "plot.svg" and "plot.svg/inner.svg" cannot both be unpacked, in either order
        clash = next((files_seen[p.lower()] for p in _parents(e.path) if p.lower() in files_seen), None)
        if clash is not None:
            raise BundleError(
                f"entry {e.info.filename!r}: {clash!r} is a file in this zip, so it cannot also be a folder"
            )
    return _strip_single_top_folder(files)


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _strip_single_top_folder(files: list[_Entry]) -> list[_Entry]:
    """`zip -r out.zip fp8/` puts everything under fp8/: accept that as the bundle root."""
    if any(e.path == "result.json" for e in files):
        return files
    tops = {e.path.split("/", 1)[0] for e in files}
    if len(tops) == 1 and all("/" in e.path for e in files):
        top = tops.pop() + "/"
        return [_Entry(e.info, e.path[len(top) :]) for e in files]
    return files


def _extract(zf: zipfile.ZipFile, files: list[_Entry], dest: Path) -> int:
    """Write every file under dest, counting real bytes (the declared sizes may lie); the bytes written."""
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
    return total


def parse_result(raw: bytes) -> dict:
    """result.json's bytes as a dict that matches the result schema; BundleError saying what is wrong.

    Parsed within bounds (size, nesting, string and number lengths, count of strings and containers) in time
    linear in its size, never by a regular expression that backtracks (labs/jsonbounds.py)."""
    try:
        result = jsonbounds.loads(raw, what="result.json", bounds=jsonbounds.RESULT)
    except jsonbounds.TooMuch as exc:
        raise BundleError(str(exc)) from None
    if not isinstance(result, dict):
        raise BundleError("result.json must hold a JSON object")
    problem = checks.schema_problem(result)
    if problem:
        raise BundleError(problem)
    return result


def _read_entry(zf: zipfile.ZipFile, entry: _Entry, limit: int) -> bytes:
    """One entry's bytes, read no further than `limit` + 1 whatever it declares."""
    if entry.info.file_size > limit:
        raise BundleError(f"{entry.path} is {byte_size(entry.info.file_size)}; at most {byte_size(limit)}")
    try:
        with zf.open(entry.info) as src:
            data = src.read(limit + 1)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
        raise BundleError(f"the zip could not be read: {exc}") from None
    except OSError as exc:
        raise BundleError(f"the zip could not be read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > entry.info.file_size:
        raise BundleError(f"entry {entry.info.filename!r} expands beyond the size it declares: refused")
    return data


def _listed(zf: zipfile.ZipFile, files: list[_Entry]) -> tuple[dict, list[_Entry], list[str]]:
    """(result.json, the entries to keep: result.json and every artifact it lists, the paths of the others)."""
    by_path = {e.path: e for e in files}
    if "result.json" not in by_path:
        raise BundleError(
            "the zip has no result.json at its top level (zip the folder `python -m labs run --out` wrote)"
        )
    result = parse_result(_read_entry(zf, by_path["result.json"], MAX_RESULT_BYTES))
    keep = {"result.json"}
    for a in result["artifacts"]:
        path = posixpath.normpath(a["path"])  # the schema's pattern already refuses absolute paths and '..'
        if path not in by_path:
            raise BundleError(f"artifact {a['name']!r} is listed in result.json at {a['path']!r} but is not in the zip")
        ext = posixpath.splitext(path)[1].lower()
        if MEDIA_TYPES.get(ext) != a["media_type"]:
            raise BundleError(
                f"artifact {a['name']!r}: {a['path']!r} is declared as {a['media_type']} "
                f"but its extension says {MEDIA_TYPES.get(ext, 'an unknown type')}"
            )
        keep.add(path)
    return result, [by_path[p] for p in sorted(keep)], sorted(set(by_path) - keep)


def bundles_dir(settings: Settings) -> Path:
    return settings.data_dir / "bundles"


def _open_zip(data: bytes, what: str, hint: str = "") -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise BundleError(f"{what} is not a zip archive{hint}") from None


def unpack(data: bytes, dest: Path) -> dict:
    """Extract a lab's zipped output folder into `dest` under the upload rules (sizes, names, ratio, schema) and
    return its result.json; BundleError otherwise. The Ray dispatcher stores a task's returned output with it:
    the lab's own output, kept whole."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise BundleError(
            f"the output is {byte_size(len(data))} zipped; at most {byte_size(MAX_UPLOAD_BYTES)} is accepted"
        )
    dest.mkdir(parents=True, exist_ok=True)
    with _open_zip(data, "the output") as zf:
        files = _entries(zf)
        result, _, _ = _listed(zf, files)
        try:
            _extract(zf, files, dest)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, OSError) as exc:
            raise BundleError(f"the zip could not be read: {exc}") from None
    return result


@dataclass
class Stored:
    """An upload kept: its row, and the files of the zip that result.json does not list (not kept)."""

    bundle: Bundle
    dropped: list[str]

    @property
    def dropped_words(self) -> str:
        """The files not kept, for the learner: empty when every file was kept."""
        if not self.dropped:
            return ""
        named = ", ".join(self.dropped[:DROPPED_NAMED])
        more = f" and {len(self.dropped) - DROPPED_NAMED} more" if len(self.dropped) > DROPPED_NAMED else ""
        return (
            f"Not kept, because result.json does not list {'it' if len(self.dropped) == 1 else 'them'}: "
            f"{named}{more} ({count(len(self.dropped), 'file')})."
        )


def store(db: Session, *, settings: Settings, owner: User, filename: str, data: bytes) -> Stored:
    """Validate an uploaded zip and keep result.json and the artifacts it lists; BundleError (a rule broken) or
    limits.QuotaExceeded (the learner's storage quota), with nothing stored, otherwise."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise BundleError(
            f"the file is {byte_size(len(data))}; a bundle may be at most {byte_size(MAX_UPLOAD_BYTES)} compressed"
        )
    if not data:
        raise BundleError("the file is empty")
    zf = _open_zip(data, "the file", " (make one with `zip -r bundle.zip .` inside the folder you gave `--out`)")
    limit_service.check_storage(db, user=owner, adding_bytes=0)  # already at the quota: refuse before unpacking
    db.commit()  # end the read transaction: the lock below must start the one that inserts
    root = bundles_dir(settings)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".upload-{uuid.uuid4().hex}"
    try:
        with zf:
            files = _entries(zf)
            result, keep, dropped = _listed(zf, files)
            tmp.mkdir()
            try:
                kept_bytes = _extract(zf, keep, tmp)
            except OSError as exc:  # str(exc) would carry the absolute path under the data dir
                raise BundleError(f"the zip could not be read: {exc.strerror or type(exc).__name__}") from None
            except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
                raise BundleError(f"the zip could not be read: {exc}") from None
        # Unpacking took the time; the lock is held only for the count, the insert and the rename.
        limit_service.hold(db, user_id=owner.id)
        limit_service.check_storage(db, user=owner, adding_bytes=kept_bytes)
        bundle = Bundle(
            owner_id=owner.id,
            lab=result["lab"],
            filename=(filename or "bundle.zip")[:255],
            size_bytes=len(data),
            stored_bytes=kept_bytes,
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
        return Stored(bundle, dropped)
    except BaseException:
        db.rollback()
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ingest(db: Session, *, settings: Settings, owner: User, filename: str, data: bytes) -> Bundle:
    """`store`, for callers that need only the row."""
    return store(db, settings=settings, owner=owner, filename=filename, data=data).bundle


def delete(db: Session, *, settings: Settings, bundle: Bundle) -> None:
    """Remove an upload and its files, and take it out of its owner's report drafts. Conflict when a submitted
    report version cites it: what was handed in is kept, whole."""
    reports = list(db.scalars(select(LabReport).where(LabReport.owner_id == bundle.owner_id)))
    ref = {"bundle": bundle.id}
    if reports:
        versions = db.scalars(select(ReportVersion).where(ReportVersion.report_id.in_([r.id for r in reports])))
        cited = sorted({v.number for v in versions if ref in (v.evidence or {}).values()})
        if cited:
            raise Conflict(
                f"Upload {bundle.id} is evidence in your submitted report "
                f"(version {', '.join(map(str, cited))}), so it is kept; delete another upload to free space."
            )
    for report in reports:
        evidence = (report.draft or {}).get("evidence", {})
        if ref in evidence.values():
            kept = {slot: r for slot, r in evidence.items() if r != ref}
            report.draft = {**report.draft, "evidence": kept}  # a new dict: the JSON column sees the change
    folder = settings.data_dir / bundle.bundle_dir if bundle.bundle_dir else None
    db.delete(bundle)
    db.commit()
    if folder is not None and folder.resolve().parent == bundles_dir(settings).resolve():
        shutil.rmtree(folder, ignore_errors=True)


def list_for(db: Session, *, owner: User) -> list[Bundle]:
    """The owner's uploads, newest first (what their storage quota counts)."""
    return list(db.scalars(select(Bundle).where(Bundle.owner_id == owner.id).order_by(Bundle.id.desc())))


def get_for(db: Session, *, bundle_id: int, user: User, as_learner: bool = False) -> Bundle | None:
    """The bundle if `user` owns it or instructs a class its owner learns in (unless `as_learner`: then only their
    own); None otherwise (graders reach bundles through reports)."""
    bundle = db.get(Bundle, bundle_id)
    if bundle is None:
        return None
    if bundle.owner_id == user.id:
        return bundle
    if not as_learner and scopes.instructs(db, user_id=user.id, owner_id=bundle.owner_id):
        return bundle
    return None
