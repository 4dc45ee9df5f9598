"""Locating a bundle's artifact files on disk, safely (no path escapes the bundle's folder).

A bundle is a folder holding result.json and the artifacts it lists: a job's output under
data/jobs/<id>/ or an uploaded bundle under data/bundles/<id>/. Both are served the same way.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import HTTPException

from app.config import Settings
from app.models import Job


def resolve_artifact(bundle: Path, result: dict, name: str) -> tuple[Path, str] | str:
    """(absolute path, media type) of artifact `name` (or `result.json`) inside `bundle`, or the reason it is absent."""
    bundle = bundle.resolve()
    if name == "result.json":
        rel, media_type = "result.json", "application/json"
    else:
        match = next((a for a in result.get("artifacts", []) if isinstance(a, dict) and a.get("name") == name), None)
        if match is None:
            return f"no artifact called {name!r}"
        rel, media_type = str(match.get("path", "")), str(match.get("media_type", ""))
    path = (bundle / rel).resolve()
    if bundle not in path.parents or not path.is_file():
        return f"artifact {name!r} is missing from the bundle"
    return path, media_type


def artifact_path(settings: Settings, job: Job, name: str) -> tuple[Path, str]:
    """(absolute path, media type) for artifact `name` (or `result.json`) of a job; 404 if absent."""
    if not job.bundle_dir or not job.result:
        raise HTTPException(404, f"Job {job.id} has no artifacts yet.")
    found = resolve_artifact(settings.data_dir / job.bundle_dir, job.result, name)
    if isinstance(found, str):
        raise HTTPException(404, f"Job {job.id}: {found}.")
    return found
