"""Locating a job's artifact files on disk, safely (no path escapes the job's bundle)."""

from __future__ import annotations

from pathlib import Path

from fastapi import HTTPException

from app.config import Settings
from app.models import Job


def artifact_path(settings: Settings, job: Job, name: str) -> tuple[Path, str]:
    """(absolute path, media type) for artifact `name` (or `result.json`); 404 if absent."""
    if not job.bundle_dir or not job.result:
        raise HTTPException(404, f"Job {job.id} has no artifacts yet.")
    bundle = (settings.data_dir / job.bundle_dir).resolve()
    if name == "result.json":
        rel, media_type = "result.json", "application/json"
    else:
        match = next((a for a in job.result.get("artifacts", []) if a.get("name") == name), None)
        if match is None:
            raise HTTPException(404, f"Job {job.id} has no artifact called {name!r}.")
        rel, media_type = match["path"], match["media_type"]
    path = (bundle / rel).resolve()
    if bundle not in path.parents or not path.is_file():
        raise HTTPException(404, f"Artifact {name!r} of job {job.id} is missing.")
    return path, media_type
