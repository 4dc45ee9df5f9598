"""Command line: `python -m labs probe|list [--nccl-runs]|check|schema` and `python -m labs run LAB --params P --out DIR`.

Exit codes (labs/exits.py): 0 success, 2 bad parameters (one-line reason on stderr), 3 a rank process was
stopped from outside the run (the reason on stderr's last line), 1 any other failure.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from pydantic import ValidationError

from labs import catalog, env, exits, precision, result_schema
from labs.parallel.dist import RankStopped
from labs.params import one_line
from labs.runtime import LabContext, build_result, emit, now_iso, validate_result


class BadParams(Exception):
    pass


def _read_params(raw: str) -> dict:
    text = raw
    if not raw.lstrip().startswith("{"):
        path = Path(raw)
        if not path.is_file():
            raise BadParams(f"--params: {raw!r} is neither a JSON object nor a readable file")
        text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadParams(f"--params: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(data, dict):
        raise BadParams('--params: expected a JSON object like {"steps": 4}')
    return data


def local_capacity(report: dict) -> catalog.Capacity:
    cuda = report["device"]["type"] == "cuda"
    gpus = report["device"].get("count", 0) if cuda else 0
    return catalog.Capacity.local(
        gpus=gpus,
        gpu_name=report["device"].get("name", "") if cuda else "",
        fp8_unsupported=env.unsupported_recipes(report),
    )


def run_lab(name: str, raw_params: str, out: Path, backend_req: str) -> int:
    try:
        spec = catalog.get(name)
    except KeyError as exc:
        raise BadParams(f"lab: {exc.args[0]}") from None
    data = _read_params(raw_params)
    try:
        params = spec.params.model_validate(data)
    except ValidationError as exc:
        raise BadParams(one_line(exc)) from None
    report = env.probe()
    try:
        backend = spec.backend_for(env.resolve_backend(backend_req, report))
    except ValueError as exc:
        raise BadParams(str(exc)) from None
    problems = spec.problems(params, backend, local_capacity(report))
    if problems:
        raise BadParams(
            "; ".join(f"{p.message} ({'; '.join(p.detail.splitlines())})" if p.detail else p.message for p in problems)
        )
    run = spec.load_runner()
    out.mkdir(parents=True, exist_ok=True)
    ranks = spec.resources(params, backend).ranks
    ctx = LabContext(
        out_dir=out,
        backend=backend,
        environment=env.environment_for(backend, report, collectives=ranks > 1, fp8=spec.uses_fp8(params)),
        available_backends=env.available_backends(report),
    )
    # FP32 as IEEE FP32 before the lab computes anything here; rank processes pin again and overwrite this
    # with what they read back (labs.parallel.dist.run_ranks).
    ctx.environment["precision"] = precision.pin() | {"checked_in": "launcher"}
    started = now_iso()
    emit("start", lab=name, backend=backend, label=ctx.environment["label"])
    results = run(params, ctx)
    result = build_result(lab=name, params=params.model_dump(mode="json"), ctx=ctx, started_at=started, results=results)
    errors = validate_result(result)
    (out / "result.json").write_text(json.dumps(result, indent=2, allow_nan=False))
    if errors:
        print("result.json failed its schema: " + "; ".join(errors[:5]), file=sys.stderr)
        return 1
    emit("done", result="result.json", fraction=1.0, message="result written; storing it")
    return 0


def _schema(*, check: bool) -> int:
    path = result_schema.SCHEMA_PATH
    if check:
        if result_schema.is_current():
            return 0
        print(f"{path} differs from the result models; run `{result_schema.REGENERATE}`", file=sys.stderr)
        return 1
    print(f"{path}: {'written' if result_schema.write() else 'already up to date'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs", description="Run the course labs.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("probe", help="print the environment capability report as JSON")
    listing = sub.add_parser("list", help="list the labs, one name a line, in page order")
    listing.add_argument(
        "--nccl-runs",
        action="store_true",
        help="instead: each lab's two-rank NCCL run (LabSpec.nccl_run) as NAME PARAMS_JSON, for scripts/gpu-check.sh",
    )
    sub.add_parser("check", help="import every lab's runner; exit 1 naming each that fails")
    schema = sub.add_parser("schema", help="regenerate labs/schema/result.schema.json from the result models")
    schema.add_argument("--check", action="store_true", help="exit 1 if the committed file differs; write nothing")
    run = sub.add_parser("run", help="run one lab and write DIR/result.json")
    run.add_argument("lab")
    run.add_argument("--params", default="{}", help="a JSON object or a path to a JSON file")
    run.add_argument("--out", required=True, type=Path)
    run.add_argument("--backend", default="auto", help="auto | te | torch-cuda | cpu")
    args = parser.parse_args(argv)

    if args.cmd == "probe":
        print(json.dumps(env.probe(), indent=2))
        return 0
    if args.cmd == "list":
        for name, spec in catalog.LABS.items():
            if not args.nccl_runs:
                print(name)
            elif spec.nccl_run is not None:
                print(name, json.dumps(spec.nccl_run))
        return 0
    if args.cmd == "schema":
        return _schema(check=args.check)
    if args.cmd == "check":
        failures = catalog.check_runners()
        for lab, reason in failures.items():
            print(f"lab {lab}: its runner does not import: {reason}", file=sys.stderr)
        return 1 if failures else 0
    try:
        return run_lab(args.lab, args.params, args.out, args.backend)
    except BadParams as exc:
        print(str(exc), file=sys.stderr)
        return exits.BAD_PARAMS
    except RankStopped as exc:
        print(str(exc), file=sys.stderr)
        return exits.STOPPED
    except Exception as exc:  # a lab bug or a device error: keep the reason readable
        traceback.print_exc()
        print(f"lab {args.lab} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
