"""What a running lab gets (`LabContext`) and how its bundle is written and checked."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from labs import SCHEMA_VERSION, result_schema
from labs.resources import GPU_BACKENDS


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def emit(event: str, **data) -> None:
    """One JSON line on stdout: the worker reads these for progress and heartbeats."""
    sys.stdout.write(json.dumps({"event": event, **data}) + "\n")
    sys.stdout.flush()


@dataclass
class LabContext:
    """What `python -m labs run` hands a lab's `run(params, ctx)`: where to write, what runs, and how to say so."""

    out_dir: Path  # the bundle folder: result.json and every artifact, relative to it
    backend: str  # the backend that runs (te, torch-cuda or cpu), already resolved and fallen back
    environment: dict  # result.json's environment block, with the honesty label
    available_backends: list[str]  # what this host could run
    artifacts: list[dict] = field(default_factory=list)

    @property
    def device(self) -> str:
        """The torch device type the run's tensors live on: cuda for a GPU backend, cpu otherwise."""
        return "cuda" if self.backend in GPU_BACKENDS else "cpu"

    def progress(self, fraction: float, message: str = "") -> None:
        emit("progress", fraction=round(max(0.0, min(1.0, fraction)), 4), message=message)

    def add_artifact(self, name: str, relpath: str, media_type: str, title: str | None = None) -> None:
        """Register a file already written under out_dir."""
        if not (self.out_dir / relpath).is_file():
            raise FileNotFoundError(f"artifact {name!r}: {relpath} was not written")
        self.artifacts.append({"name": name, "path": relpath, "media_type": media_type, "title": title or name})

    def write_text(self, relpath: str, text: str) -> Path:
        path = self.out_dir / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path


def validate_result(result: dict) -> list[str]:
    """Why `result` is not a valid result.json, as readable "path: problem" strings ([] when valid).

    Checked against the result models (labs.result_common, labs/<lab>/result.py), the same models
    labs/schema/result.schema.json is generated from.
    """
    return result_schema.validate(result)


def build_result(*, lab: str, params: dict, ctx: LabContext, started_at: str, results: dict) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "lab": lab,
        "params": params,
        "environment": ctx.environment,
        "started_at": started_at,
        "finished_at": now_iso(),
        "results": results,
        "artifacts": ctx.artifacts,
    }
