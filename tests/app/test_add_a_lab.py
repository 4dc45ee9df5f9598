"""Adding a lab touches only its folder: docs/architecture.md's "Add a lab", done for real.

The test writes a small new lab folder (spec, params, result model, run, report, checks) outside the repository and
points COURSE_LAB_PATH at it, the operator's way to add lab folders. In a fresh interpreter started with that
environment (tests/app/add_a_lab.py), as a server would be, the lab is in the catalog after the course's own labs,
`python -m tests.app.labruns squares` runs it with `python -m labs run` and keeps its golden bundle in its folder,
`GET /api/v1/labs` lists it, its form page renders its field, a submitted form queues a job of it, and the grader's
checks (labs.api.checks.check_item) run its own checks on the bundle. Nothing outside the folder names it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from labs import catalog
from tests.conftest import ROOT

# The whole lab: what docs/architecture.md's walkthrough writes, file by file.
FILES = {
    "__init__.py": '''
        """squares: the sum of the first n squares, in float64, against n(n+1)(2n+1)/6."""
    ''',
    "params.py": '''
        """squares' parameters and resources (torch-free: the web tier reads this through labs.catalog)."""

        from __future__ import annotations

        from pydantic import Field

        from labs.params import LabParams
        from labs.resources import PROCESS_BASE_BYTES, Resources

        # float64 holds every integer sum below 2**53 exactly, and n**3 stays far below that for n <= 10000.
        TOLERANCE = 0.0


        class Params(LabParams):
            n: int = Field(10, ge=1, le=10000, description="How many squares to add", title="Squares to add")


        def resources(params: Params, backend: str) -> Resources:
            return Resources(ranks=1, gpus=0, cpus=1, memory_bytes=PROCESS_BASE_BYTES, memory_note="one process")
    ''',
    "result.py": '''
        """squares' `results` in result.json (torch-free)."""

        from __future__ import annotations

        from labs.result_common import LabResults


        class SquaresResults(LabResults):
            total: float
            formula: float
    ''',
    "report.py": '''
        """squares' page: the answer and one summary line."""

        from __future__ import annotations

        from labs.words import number


        def results(n: int, total: float, formula: float) -> dict:
            return {
                "answer": f"The first {n} squares add up to {number(total)}; the formula says {number(formula)}.",
                "summary": [{"label": "Sum of squares", "value": total}],
                "tables": [],
                "total": total,
                "formula": formula,
            }
    ''',
    "run.py": '''
        """squares: add the first n squares with torch.

        python -m labs run squares --params '{"n": 10}' --out /tmp/squares
        """

        from __future__ import annotations

        from typing import TYPE_CHECKING

        from labs.squares import report
        from labs.squares.params import Params

        if TYPE_CHECKING:
            from labs.runtime import LabContext


        def run(params: Params, ctx: LabContext) -> dict:
            import torch

            ctx.progress(0.5, f"adding {params.n} squares on {ctx.device}")
            total = float(torch.arange(1, params.n + 1, dtype=torch.float64, device=ctx.device).square().sum())
            n = params.n
            return report.results(n, total, n * (n + 1) * (2 * n + 1) / 6)
    ''',
    "checks.py": '''
        """Checks of a squares result: the sum is the formula's."""

        from __future__ import annotations

        from labs.checks.common import ReadArtifact, check

        # The lab's own limit with its reason (params.py), never what the judged result.json claims.
        from labs.squares.params import TOLERANCE


        def checks(slot_kind: str, result: dict, read_artifact: ReadArtifact | None) -> list[dict]:
            r = result["results"]
            ok = abs(r["total"] - r["formula"]) <= TOLERANCE
            return [check("sum", "pass" if ok else "fail", f"The sum is {'' if ok else 'not '}the formula's.")]
    ''',
    "spec.py": '''
        """squares in the catalog (torch-free)."""

        from __future__ import annotations

        from labs.spec import LabSpec
        from labs.squares import params
        from labs.squares.result import SquaresResults

        SPEC = LabSpec(
            name="squares",
            order=1000,
            title="Squares: a sum against its formula",
            question="Does adding the first n squares give n(n+1)(2n+1)/6?",
            params=params.Params,
            result=SquaresResults,
            backends=("cpu",),
            runner="labs.squares.run:run",
            checks="labs.squares.checks:checks",
            needs=params.resources,
            uses_fp8=lambda p: False,
            cost=lambda p, backend: 2.0,
            tiny={"n": 4},
        )
    ''',
}


def write_lab(root: Path) -> Path:
    folder = root / "squares"
    folder.mkdir(parents=True)
    for name, text in FILES.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    return folder


def test_a_lab_folder_on_course_lab_path_is_in_the_catalog_api_form_runner_and_checks(tmp_path):
    folder = write_lab(tmp_path / "more-labs")
    env = {**os.environ, catalog.LAB_PATH_ENV: str(tmp_path / "more-labs")}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.app.add_a_lab", str(tmp_path / "data")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])

    assert seen["names"] == [*catalog.names(), "squares"]  # after the course's own labs, in their order
    assert seen["folder"] == str(folder)
    assert (folder / "golden" / "result.json").is_file()  # `python -m tests.app.labruns squares` kept its run
    assert seen["result"]["lab"] == "squares" and seen["result"]["params"] == {"n": 4}
    assert seen["result"]["results"]["total"] == 30.0
    assert seen["api"] == [*catalog.names(), "squares"]
    assert seen["api_params"] == ["n"]
    assert seen["form"] == {"status": 200, "title": True, "field": True}
    assert seen["submitted"] == {"status": 303, "lab": "squares", "params": {"n": 7}}
    assert seen["checks"]["status"] == "pass"
    assert [c["check"] for c in seen["checks"]["checks"]] == ["schema", "environment", "self-consistent", "sum"]


def test_without_course_lab_path_the_catalog_is_the_course_s_own():
    assert "squares" not in catalog.names()
    assert all(catalog.ships_with_course(name) for name in catalog.names())
