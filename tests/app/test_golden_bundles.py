"""The committed golden bundles (in each lab's folder, labs/<lab>/golden, read by the app's report and grading tests)
still have the shape each lab writes today: the same schema version, the same fields of the same kinds, the same
artifact files.

Values are not compared (timings, losses): the fresh run is the lab's SMALL run that tests/labs makes anyway
(tests/labs/runs.py runs each once per session), with other parameters. When this fails, write the bundles again:
`python -m tests.app.labruns [LAB ...]`. It lives here, not in tests/labs, because the GPU check collects tests/labs in a
torch-only environment, without the app's packages that tests/app/labruns.py imports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.app import labruns
from tests.labs import runs


def fields(value: Any, path: str = "") -> dict[str, str]:
    """Every field's path (list items as `[]`) and the kind of value there; `null` where the value is None."""
    if isinstance(value, dict):
        out = {path: "object"}
        for key, item in value.items():
            out.update(fields(item, f"{path}.{key}"))
        return out
    if isinstance(value, list):
        out = {path: "list"}
        for item in value:
            for sub, kind in fields(item, f"{path}[]").items():
                out[sub] = kind if out.get(sub, "null") == "null" else out[sub]
        return out
    if value is None:
        return {path: "null"}
    if isinstance(value, bool):
        return {path: "bool"}
    return {path: "number" if isinstance(value, int | float) else type(value).__name__}


def shape_differences(golden: dict, fresh: dict) -> list[str]:
    """Fields one side has and the other lacks, and fields of another kind. A None on either side matches any
    kind and whatever lies under it there: optional fields are None for some parameters (no outlier step)."""
    a, b = fields(golden), fields(fresh)
    nulls = [p for p in set(a) | set(b) if a.get(p) == "null" or b.get(p) == "null"]

    def under_null(path: str) -> bool:
        return any(path == n or path.startswith(n + ".") or path.startswith(n + "[]") for n in nulls)

    out = []
    for path in sorted(set(a) | set(b)):
        if under_null(path):
            continue
        if path not in a or path not in b:
            out.append(f"{path or '(top)'}: only in the {'fresh run' if path not in a else 'golden bundle'}")
        elif a[path] != b[path]:
            out.append(f"{path}: {a[path]} in the golden bundle, {b[path]} in the fresh run")
    return out


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("lab", sorted(labruns.TINY))
def test_the_golden_bundle_has_the_shape_the_lab_writes_now(lab):
    golden_dir = labruns.bundle(lab)
    golden = json.loads((golden_dir / "result.json").read_text())
    assert golden["params"] == {**golden["params"], **labruns.TINY[lab]}, "the golden run is not of TINY's params"
    fresh = runs.run(lab)
    assert golden["schema_version"] == fresh.result["schema_version"]
    assert shape_differences(golden, fresh.result) == []
    assert _files(golden_dir) == _files(fresh.out)


def test_a_changed_shape_is_noticed():
    golden = {"schema_version": 1, "results": {"rows": [{"tp": 1, "ms": 2.0}], "outlier": None}}
    assert shape_differences(golden, golden) == []
    renamed = {"schema_version": 1, "results": {"rows": [{"tp": 1, "step_ms": 2.0}], "outlier": None}}
    assert shape_differences(golden, renamed) == [
        ".results.rows[].ms: only in the golden bundle",
        ".results.rows[].step_ms: only in the fresh run",
    ]
    retyped = {"schema_version": 1, "results": {"rows": [{"tp": "1", "ms": 2.0}], "outlier": {"step": 3}}}
    assert shape_differences(golden, retyped) == [
        ".results.rows[].tp: number in the golden bundle, str in the fresh run"
    ]
