"""The catalog's promises to the web tier: importing it (with every params and result model, validating a
result, generating the schema) never imports torch, and nothing under labs/ imports the app. And how it finds
labs: each in its own folder with its runner, checks and golden bundle, listed by order, and what COURSE_LAB_PATH
adds or why the catalog refuses it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import labs
from labs import catalog

LABS_DIR = Path(labs.__file__).parent


def _torch_free_modules() -> list[str]:
    """labs.catalog, the modules the web tier reads through it, and every lab's params and result."""
    names = ["labs.catalog", "labs.result_schema", "labs.result_common", "labs.runtime", "labs.memwatch"]
    for folder in sorted(p.parent for p in LABS_DIR.glob("*/params.py")):
        names += [f"labs.{folder.name}.params", f"labs.{folder.name}.result"]
    return names


def test_catalog_params_and_results_import_without_torch():
    modules = _torch_free_modules()
    assert "labs.fp8_step.result" in modules and "labs.tp_sweep.params" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "from labs import catalog, result_schema\n"
        "for spec in catalog.LABS.values():\n"
        "    params = spec.params()\n"
        "    spec.resources(params, 'cpu'); spec.problems(params, 'cpu', catalog.Capacity.local())\n"
        "result_schema.render()\n"
        "assert result_schema.validate({'lab': 'fp8-step'})\n"
        "loaded = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not loaded, loaded[:5]\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_labs_imports_nothing_from_the_app():
    offenders = []
    for path in LABS_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            offenders += [f"{path.relative_to(LABS_DIR.parent)}: {n}" for n in names if n.split(".")[0] == "app"]
    assert offenders == []


def test_each_lab_folder_holds_its_runner_its_checks_and_its_golden_bundle():
    for name, spec in catalog.LABS.items():
        package = f"labs.{catalog.folder(name).name}"
        assert catalog.folder(name) == LABS_DIR / name.replace("-", "_")
        assert (spec.runner, spec.checks) == (f"{package}.run:run", f"{package}.checks:checks"), name
        for run in (spec.tiny, spec.small, spec.nccl_run):
            if run is not None:
                spec.params.model_validate(run)  # every test run a spec names is a valid submission
        assert (catalog.folder(name) / "golden" / "result.json").is_file(), name


def test_labs_are_listed_by_their_order_each_in_its_own_place():
    orders = [catalog.get(name).order for name in catalog.names()]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)


def _catalog_with(lab_path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, catalog.LAB_PATH_ENV: lab_path}
    code = "from labs import catalog; print(catalog.names())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def _lab_folder(root: Path, folder: str, name: str) -> None:
    """A lab folder whose spec is env-check's under another name."""
    (root / folder).mkdir(parents=True)
    (root / folder / "spec.py").write_text(
        "from labs.env_check.spec import SPEC as ENV\nimport dataclasses\n"
        f"SPEC = dataclasses.replace(ENV, name={name!r}, order=999)\n"
    )


@pytest.mark.parametrize(
    "folder, name, said",
    [
        ("other", "another", "lab 'another' lives in folder 'other'; name the folder 'another'"),
        ("tp_sweep", "tp-sweep", "labs.tp_sweep is already"),
        ("trace", "trace", "labs.trace is already"),
        (None, None, "is not a folder (it names folders that hold lab folders)"),
    ],
    ids=["name-not-folder", "lab-folder-taken", "shared-folder-taken", "not-a-folder"],
)
def test_a_lab_path_the_catalog_cannot_use_stops_it_saying_why(tmp_path, folder, name, said):
    if folder is None:
        proc = _catalog_with(str(tmp_path / "missing"))
    else:
        _lab_folder(tmp_path / "more", folder, name)
        proc = _catalog_with(str(tmp_path / "more"))
    assert proc.returncode != 0 and said in proc.stderr, proc.stderr[-2000:]


def test_a_lab_path_adds_its_labs_after_the_course_s_own(tmp_path):
    _lab_folder(tmp_path / "more", "another", "another")
    proc = _catalog_with(f"{tmp_path / 'more'}{os.pathsep}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str([*catalog.names(), "another"])
