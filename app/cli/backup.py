"""A course's state, backed up and restored into a fresh deployment: the database and the data folder's `jobs/`
(lab results) and `bundles/` (uploads), which the database's rows point into.

    python -m app backup DIR     # DIR/database.sql (pg_dump) or DIR/database.sqlite3, DIR/data.tar.gz, DIR/backup.json
    python -m app restore DIR    # into an empty database and a data folder without jobs/ or bundles/; then migrates

Both read the same settings as `serve` (DATABASE_URL, COURSE_DATA_DIR). The database is copied first, then the
files: a run that finishes between the two leaves files no row names, never a row without its files.
PostgreSQL goes through its own tools (`pg_dump`, `psql`; Debian's `postgresql-client`, the server's major
version or newer), with the password in PGPASSWORD rather than on a command line other users can read; the dump
carries no owners or grants, so it restores into a database owned by whichever role the new DATABASE_URL names
(`createdb --owner course course`). SQLite is copied with its online backup API, which a running server's WAL
does not fool. `restore` refuses a database that has tables or a data folder that has results: it fills a fresh
deployment, it never merges into a live one. It then applies the migrations of this checkout, so a backup of an
older version restores into a newer one, and compares each table's rows and each result folder with what the
backup recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, inspect, make_url, select, table, text
from sqlalchemy.engine import URL, Engine

from app.core import migrate
from app.core.config import Settings
from app.core.db import make_engine
from app.core.models import Bundle, Job

FORMAT = 1
FOLDERS = ("jobs", "bundles")  # of the data dir: what rows point into (Job.bundle_dir, Bundle.bundle_dir)
MANIFEST, ARCHIVE = "backup.json", "data.tar.gz"
PG_DUMP, SQLITE_COPY = "database.sql", "database.sqlite3"


class BackupError(RuntimeError):
    """What stopped a backup or restore, in words for the operator."""


def _libpq(url: URL) -> tuple[str, dict[str, str]]:
    """The URL libpq's tools take (no `+psycopg`, no password) and the environment that gives them the password."""
    env = dict(os.environ)
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    plain = url.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _run(cmd: list[str], env: dict[str, str], what: str) -> None:
    if shutil.which(cmd[0]) is None:
        raise BackupError(f"`{cmd[0]}` is not installed here: it comes with PostgreSQL's client tools (Debian: "
                          "apt-get install postgresql-client, the server's major version or newer)")  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise BackupError(f"{what} failed (exit status {out.returncode}): {out.stderr.strip()[-2000:]}")


def _rows(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        names = sorted(inspect(conn).get_table_names())
        return {n: int(conn.scalar(select(func.count()).select_from(table(n))) or 0) for n in names}


def _folders_named(engine: Engine) -> list[str]:
    """The result and upload folders the database's rows point into."""
    with engine.connect() as conn:
        jobs = conn.scalars(select(Job.bundle_dir).where(Job.bundle_dir.is_not(None)))
        bundles = conn.scalars(select(Bundle.bundle_dir))
        return sorted({str(p) for p in [*jobs, *bundles] if p})


def backup(settings: Settings, out: Path) -> str:
    """Write the backup into `out` (new, or empty); the summary line."""
    if out.exists() and any(out.iterdir()):
        raise BackupError(f"{out} is not empty: back up into a new folder")
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)  # password hashes, session and API token digests: for the course's own user only
    url = make_url(settings.db_url)
    engine = make_engine(settings.db_url)
    try:
        rows = _rows(engine)
        with engine.connect() as conn:
            revision = conn.scalar(text("SELECT version_num FROM alembic_version"))
        if url.get_backend_name() == "sqlite":
            with sqlite3.connect(str(url.database)) as src, sqlite3.connect(str(out / SQLITE_COPY)) as dst:
                src.backup(dst)
            src.close()
            dst.close()
        else:
            where, env = _libpq(url)
            _run(["pg_dump", "--no-owner", "--no-privileges", f"--file={out / PG_DUMP}", where], env, "pg_dump")
        named = _folders_named(engine)
    finally:
        engine.dispose()
    folders = [f for f in named if (settings.data_dir / f).is_dir()]
    absent = len(named) - len(folders)
    files = 0
    with tarfile.open(out / ARCHIVE, "w:gz") as tar:
        for name in FOLDERS:
            folder = settings.data_dir / name
            if folder.is_dir():
                tar.add(folder, arcname=name)
                files += sum(1 for p in folder.rglob("*") if p.is_file())
    manifest = {
        "format": FORMAT,
        "made_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "database": url.get_backend_name(),
        "revision": revision,
        "rows": rows,
        "folders": folders,
        "files": files,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    gone = f"; {absent} result or upload folders the database names were already missing" if absent else ""
    return (
        f"backed up {settings.db_where} (migration {revision}; {rows.get('users', 0)} users, {rows.get('jobs', 0)} "
        f"jobs, {rows.get('bundles', 0)} uploads) and {files} files of {settings.data_dir} into {out}{gone}"
    )


def _check_empty(settings: Settings, engine: Engine) -> None:
    with engine.connect() as conn:
        tables = sorted(inspect(conn).get_table_names())
    if tables:
        raise BackupError(
            f"{settings.db_where} already has tables ({', '.join(tables[:5])}{', ...' if len(tables) > 5 else ''}): "
            "restore into a new, empty database (PostgreSQL: `createdb --owner course course`; SQLite: a "
            "COURSE_DATA_DIR without course.db), never over a course that has served"
        )
    for name in FOLDERS:
        folder = settings.data_dir / name
        if folder.is_dir() and any(folder.iterdir()):
            raise BackupError(f"{folder} is not empty: restore into a data folder without {name}/")


def restore(settings: Settings, src: Path) -> str:
    """Fill the fresh deployment the settings name from the backup in `src`; the summary line."""
    try:
        manifest = json.loads((src / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackupError(
            f"{src / MANIFEST} cannot be read ({exc}): is {src} a folder `python -m app backup` wrote?"
        ) from None
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{src / MANIFEST}: format {manifest.get('format')!r}; this version reads {FORMAT}")
    url = make_url(settings.db_url)
    kind = url.get_backend_name()
    if manifest["database"] != kind:
        raise BackupError(f"the backup is of a {manifest['database']} database and DATABASE_URL names {kind}: "
                          "restore into the same kind of database")  # fmt: skip
    engine = make_engine(settings.db_url)
    try:
        _check_empty(settings, engine)
    finally:
        engine.dispose()
    if kind == "sqlite":
        with sqlite3.connect(str(src / SQLITE_COPY)) as copy, sqlite3.connect(str(url.database)) as dst:
            copy.backup(dst)
        copy.close()
        dst.close()
    else:
        where, env = _libpq(url)
        _run(
            ["psql", "--quiet", "--no-psqlrc", "--set=ON_ERROR_STOP=1", "--single-transaction",
             f"--file={src / PG_DUMP}", where],
            env,
            "psql (restoring the dump)",
        )  # fmt: skip
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(src / ARCHIVE, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.name.split("/")[0] in FOLDERS]
        tar.extractall(settings.data_dir, members=members, filter="data")  # no links out, no absolute paths
    engine = make_engine(settings.db_url)
    try:
        rows = _rows(engine)
        differ = {t: (n, rows.get(t)) for t, n in manifest["rows"].items() if rows.get(t) != n}
        missing = [f for f in manifest["folders"] if not (settings.data_dir / f).is_dir()]
    finally:
        engine.dispose()
    if differ:
        raise BackupError(
            f"restored rows differ from the backup's (table: backup, now): {differ}; this deployment is incomplete: "
            "drop its database and data folder and restore again"
        )
    if missing:
        raise BackupError(
            f"{len(missing)} result or upload folders the database names are not in the archive, e.g. {missing[0]}; "
            "this deployment is incomplete: drop its database and data folder and restore again"
        )
    migrate.upgrade(settings.db_url)
    return (
        f"restored {settings.db_where} from {src} (made {manifest['made_at']}, migration {manifest['revision']}, "
        f"now at the latest): {rows.get('classes', 0)} classes, {rows.get('users', 0)} users, {rows.get('responses', 0)} answers, {rows.get('jobs', 0)} "
        f"jobs, {rows.get('bundles', 0)} uploads, and {len(manifest['folders'])} result and upload folders in "
        f"{settings.data_dir}"
    )


def main(settings: Settings, command: str, folder: Path) -> int:
    try:
        said = backup(settings, folder) if command == "backup" else restore(settings, folder)
    except BackupError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 1
    print(said)
    return 0
