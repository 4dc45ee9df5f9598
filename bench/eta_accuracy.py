"""How close the queue's run estimates come to what runs really take, on this machine's CPU backend.

    .venv/bin/python bench/eta_accuracy.py                 # 20 runs, a few minutes on the 2-core machine
    .venv/bin/python bench/eta_accuracy.py --runs 8

Queues 20 mixed runs of the four labs at several sizes, one after another, in a throwaway SQLite database,
and runs each with the embedded executor's own worker (`python -m labs run` in a subprocess, as a learner's
job runs). Before each run it asks app/services/jobs/queue.py `run_estimate` how long the run will take, as the
lab form and the job card do: the lab's cost model for a lab that has not run here yet, then the cost model
scaled by that lab's finished runs. It prints each estimate against the run's own started-to-finished time,
the median error and the worst factor, and the issue's targets (median error within 30%, none off by more
than 2x). First runs of a lab (the cost model alone) are listed apart, since nothing here has taught it yet.
Timings are CPU timings on whatever else this machine is doing; nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core import migrate  # noqa: E402
from app.core.config import Settings  # noqa: E402
from app.core.db import make_engine, make_sessionmaker  # noqa: E402
from app.core.models import Job  # noqa: E402
from app.executors.embedded import Worker  # noqa: E402
from app.services.accounts import users  # noqa: E402
from app.services.jobs import lifecycle as job_service  # noqa: E402
from app.services.jobs import queue as queue_service  # noqa: E402
from app.services.jobs.labhost import HostCapacity  # noqa: E402

SMALL_FP8 = {"batch": 2, "seq": 8, "d_model": 16, "n_heads": 2, "ffn": 32, "n_layers": 1, "outlier_step": None}
# Mixed labs and sizes, in the order a class might send them: each lab's second run learns from its first.
RUNS: list[tuple[str, dict]] = [
    ("env-check", {}),
    ("fp8-step", {**SMALL_FP8, "steps": 4}),
    ("tp-sweep", {"degrees": [1, 2], "tokens": 16, "hidden": 32, "ffn": 64, "steps": 1, "warmup": 0}),
    ("overlap-trace", {"ranks": 2, "tokens": 16, "hidden": 32, "ffn": 64, "window_out": 64, "steps": 1, "warmup": 0}),
    ("fp8-step", {**SMALL_FP8, "steps": 8}),
    ("env-check", {}),
    ("tp-sweep", {"degrees": [1, 2], "tokens": 32, "hidden": 64, "ffn": 128, "steps": 2, "warmup": 0}),
    ("fp8-step", {**SMALL_FP8, "steps": 16, "d_model": 32, "ffn": 64}),
    ("overlap-trace", {"ranks": 2, "tokens": 32, "hidden": 64, "ffn": 128, "window_out": 128, "steps": 2, "warmup": 0}),
    ("fp8-step", {"steps": 40}),
    ("tp-sweep", {"degrees": [1, 2], "tokens": 16, "hidden": 32, "ffn": 64, "steps": 1, "warmup": 0}),
    ("env-check", {}),
    ("fp8-step", {**SMALL_FP8, "steps": 8}),
    ("overlap-trace", {"ranks": 2, "tokens": 16, "hidden": 32, "ffn": 64, "window_out": 64, "steps": 1, "warmup": 0}),
    ("tp-sweep", {"degrees": [1, 2], "tokens": 64, "hidden": 64, "ffn": 128, "steps": 2, "warmup": 1}),
    ("fp8-step", {"steps": 60}),
    ("env-check", {}),
    ("overlap-trace", {"ranks": 2, "tokens": 32, "hidden": 64, "ffn": 128, "window_out": 128, "steps": 2, "warmup": 0}),
    ("fp8-step", {**SMALL_FP8, "steps": 4}),
    ("tp-sweep", {"degrees": [1, 2], "tokens": 32, "hidden": 64, "ffn": 128, "steps": 2, "warmup": 0}),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=len(RUNS), help=f"how many of the {len(RUNS)} runs (in order)")
    args = ap.parse_args()
    data = Path(tempfile.mkdtemp(prefix="eta-bench-"))
    settings = Settings.from_env(
        {"COURSE_ENV": "test", "COURSE_DATA_DIR": str(data)}, database_url=f"sqlite:///{data / 'eta.db'}"
    )
    migrate.upgrade(settings.db_url)
    engine = make_engine(settings.db_url)
    db = make_sessionmaker(engine)()
    learners = [users.create_user(db, email=f"eta{i}@example.org", password="correct horse") for i in range(4)]
    host, worker = HostCapacity.local_default(), Worker(settings, worker_id="eta-bench")
    rows, seen = [], set()
    print(f"{'#':>3}  {'lab':<14} {'estimate':>9} {'took':>8} {'ratio':>6}  basis")
    for i, (lab, params) in enumerate(RUNS[: args.runs]):
        est = queue_service.run_estimate(db, lab=lab, params=params, backend="cpu")
        job = job_service.create_job(db, owner=learners[i % len(learners)], lab=lab, params=params, host=host)
        if not worker.run_once():
            print(f"run {i + 1}: the worker found nothing to run", file=sys.stderr)
            return 1
        db.expire_all()
        done = db.get(Job, job.id)
        if done is None or done.status != "succeeded" or not (done.started_at and done.finished_at):
            print(f"run {i + 1} ({lab}) did not succeed: {done.error if done else 'gone'}", file=sys.stderr)
            return 1
        took = (done.finished_at - done.started_at).total_seconds()
        first = lab not in seen
        seen.add(lab)
        ratio = est.seconds / took if est else float("nan")
        rows.append((lab, est.seconds if est else None, took, ratio, first))
        basis = est.basis if est else "no estimate"
        print(f"{i + 1:>3}  {lab:<14} {est.seconds if est else 0:>8.1f}s {took:>7.1f}s {ratio:>6.2f}  {basis}")
    db.close()
    engine.dispose()

    def summary(name: str, picked: list[tuple]) -> None:
        if not picked:
            return
        errors = [abs(r - 1) for *_, r, _ in picked]
        worst = max(max(r, 1 / r) for *_, r, _ in picked)
        med = statistics.median(errors)
        verdict = "met" if med <= 0.30 and worst <= 2.0 else "not met"
        print(
            f"{name}: {len(picked)} runs, median error {med:.0%}, worst off by {worst:.2f}x  (target: median <= 30%, "
            f"none over 2x: {verdict})"
        )

    print()
    summary("all runs", rows)
    summary("learned (a lab's later runs)", [r for r in rows if not r[4]])
    summary("first runs (cost model alone)", [r for r in rows if r[4]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
