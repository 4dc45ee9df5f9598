"""Locating a bundle's artifact files on disk, safely (no path escapes the bundle's folder).

A bundle is a folder holding result.json and the artifacts it lists: a job's output under
data/jobs/<id>/ or an uploaded bundle under data/bundles/<id>/. Both are served the same way, by
app/web/routes/artifacts.py; the functions here return an `Artifact` or raise NotFound.
"""

from __future__ import annotations

import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path

from app.core.config import Settings
from app.core.models import Bundle, Job
from app.services.errors import NotFound


@dataclass(frozen=True)
class Artifact:
    path: Path  # absolute, inside its bundle folder
    media_type: str
    # Set for a file that is for other tools (a Chrome trace for Perfetto): sent as an attachment under this
    # name, so a browser saves it instead of showing raw JSON in the tab.
    download_name: str | None = None


def download_name(result: dict, name: str, path: Path, source: str | None) -> str | None:
    """The file name a JSON artifact downloads as, `<lab>-<source>-<artifact>.json` ("overlap-trace-job12-windowed.json",
    a trace's `trace_` prefix dropped), or None for a file the browser shows itself (result.json, SVG plots)."""
    if name == "result.json" or path.suffix != ".json":
        return None
    parts = [str(result.get("lab") or "lab"), source, path.stem.removeprefix("trace_")]
    # Only letters, digits, dot, dash and underscore, so the name needs no quoting in Content-Disposition.
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(p for p in parts if p)) + ".json"


def resolve_artifact(bundle: Path, result: dict, name: str) -> tuple[Path, str] | str:
    """(absolute path, media type) of artifact `name` (or `result.json`) inside `bundle`, or the reason it is absent.

    `name` is an artifact's name or its `path` as result.json lists it (a script that read result.json
    fetches what it lists); only listed files are served, whatever the path says."""
    bundle = bundle.resolve()
    if name == "result.json":
        rel, media_type = "result.json", "application/json"
    else:
        listed = [a for a in result.get("artifacts", []) if isinstance(a, dict)]
        match = next((a for a in listed if a.get("name") == name), None) or next(
            (a for a in listed if a.get("path") == name), None
        )
        if match is None:
            return f"no artifact called {name!r}"
        rel, media_type = str(match.get("path", "")), str(match.get("media_type", ""))
    path = (bundle / rel).resolve()
    if bundle not in path.parents or not path.is_file():
        return f"artifact {name!r} is missing from the bundle"
    return path, media_type


def in_folder(root: Path, result: dict, name: str, what: str, source: str | None = None) -> Artifact:
    """Artifact `name` of the bundle folder `root`; NotFound saying `what` lacks it. `source` ("job12",
    "upload3") goes into the name a trace downloads as."""
    found = resolve_artifact(root, result, name)
    if isinstance(found, str):
        raise NotFound(f"{what}: {found}.")
    path, media_type = found
    return Artifact(
        path,
        media_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream",
        download_name(result, name, path, source),
    )


def of_job(settings: Settings, job: Job, name: str) -> Artifact:
    """Artifact `name` (or `result.json`) of a job; NotFound until the job has written its bundle."""
    if not job.bundle_dir or not job.result:
        raise NotFound(f"Job {job.id} has no artifacts yet.")
    return in_folder(settings.data_dir / job.bundle_dir, job.result, name, f"Job {job.id}", f"job{job.id}")


def of_bundle(settings: Settings, bundle: Bundle, name: str) -> Artifact:
    return in_folder(
        settings.data_dir / bundle.bundle_dir, bundle.result, name, f"Upload {bundle.id}", f"upload{bundle.id}"
    )
