"""The catalog's promises to the web tier: importing it (with every params and result model, validating a
result, generating the schema) never imports torch, and nothing under labs/ imports the app."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import labs

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
