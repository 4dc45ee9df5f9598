"""Each lab's memory estimate (labs.catalog: spec.resources) against the peak RSS measured in the same run.

    .venv/bin/python bench/lab_memory.py               # every case below, ~10 min on 2 cores
    .venv/bin/python bench/lab_memory.py tp-sweep      # one lab's cases

Runs `python -m labs run LAB --backend cpu` for the default params and a few larger shapes (each chosen so
one term of the estimate dominates), samples the summed RSS of the whole process tree (the lab process, its
rank processes and multiprocessing's resource tracker) with labs.memwatch, and prints estimate / measured.
The estimate must never be below the measurement, and should stay within about 1.2-2x of it; exit 1 if one
is below. The constants in labs/*/params.py were calibrated from this table.

Measured on the 2-core development machine (torch 2.13.0+cpu, Python 3.11, 23 GiB; summed RSS in MiB;
`bench/lab_memory.py`, the machine shared with other work):

    lab            params                                                               measured  estimate  ratio
    env-check      {}                                                                        314       448   1.43
    fp8-step       {} (200 steps)                                                            529       625   1.18
    fp8-step       d_model 128, ffn 512, 4 layers, seq 256, batch 32 (activations)          1366      1865   1.37
    fp8-step       d_model 1024, ffn 4096, 4 layers, seq 32, batch 4 (50M params)           2584      3923   1.52
    fp8-step       d_model 128, 1 layer, seq 128, batch 16, vocab 32768 (logits)            1664      2755   1.66
    fp8-step       d_model 256, 16 heads, seq 1024, batch 4 (attention)                      934      1507   1.61
    tp-sweep       {} (degrees 1, 2, 4: 6 processes)                                        1927      2474   1.28
    tp-sweep       tokens 1024, hidden 1024, ffn 4096, degrees 1, 2, 4                      2512      3316   1.32
    tp-sweep       tokens 256, hidden 2048, ffn 16384, degrees 1, 2, 4                      3920      7966   2.03
    overlap-trace  {} (2 ranks: 4 processes)                                                1079      1446   1.34
    overlap-trace  4 ranks, tokens 2048, hidden 1024, ffn 8192, window 1024                 2822      4080   1.45
    overlap-trace  2 ranks, tokens 8192, hidden 512, ffn 8192, window 512                   3369      4510   1.34

The widest ratio (tp-sweep with a large ffn x hidden) comes from adding each process's own peak: the
launcher peaks after the ranks have exited.

GPU backends are not in the table: their host memory (CUDA's libraries, the weights built on the host
before the move) has not been measured on a GPU machine.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labs import catalog  # noqa: E402
from labs.memwatch import run_measured  # noqa: E402

CASES: list[tuple[str, dict]] = [
    ("env-check", {}),
    ("fp8-step", {}),
    (
        "fp8-step",
        {"steps": 2, "d_model": 128, "n_heads": 4, "ffn": 512, "n_layers": 4, "seq": 256, "batch": 32, "vocab": 64},
    ),
    (
        "fp8-step",
        {"steps": 2, "d_model": 1024, "n_heads": 8, "ffn": 4096, "n_layers": 4, "seq": 32, "batch": 4, "vocab": 64},
    ),
    (
        "fp8-step",
        {"steps": 2, "d_model": 128, "n_heads": 4, "ffn": 512, "n_layers": 1, "seq": 128, "batch": 16, "vocab": 32768},
    ),
    (
        "fp8-step",
        {"steps": 2, "d_model": 256, "n_heads": 16, "ffn": 512, "n_layers": 2, "seq": 1024, "batch": 4, "vocab": 64},
    ),
    ("tp-sweep", {}),
    ("tp-sweep", {"degrees": [1, 2, 4], "tokens": 1024, "hidden": 1024, "ffn": 4096, "steps": 1, "warmup": 0}),
    ("tp-sweep", {"degrees": [1, 2, 4], "tokens": 256, "hidden": 2048, "ffn": 16384, "steps": 1, "warmup": 0}),
    ("overlap-trace", {}),
    (
        "overlap-trace",
        {"ranks": 4, "tokens": 2048, "hidden": 1024, "ffn": 8192, "window_out": 1024, "steps": 2, "warmup": 0},
    ),
    (
        "overlap-trace",
        {"ranks": 2, "tokens": 8192, "hidden": 512, "ffn": 8192, "window_out": 512, "steps": 1, "warmup": 0},
    ),
]


# The largest cases exceed the default per-job budget of a small host; the budget is what is being calibrated.
ENV = os.environ | {"COURSE_JOB_MEMORY_MB": "65536"}


def mib(n: float) -> str:
    return f"{n / 2**20:8.0f}"


def main(argv: list[str]) -> int:
    only = set(argv)
    under = 0
    print(f"{'lab':14} {'params':70} {'measured':>9} {'procs':>5} {'estimate':>9} {'ratio':>6} {'wall s':>7}")
    for lab, params in CASES:
        if only and lab not in only:
            continue
        spec = catalog.get(lab)
        estimate = spec.resources(spec.params.model_validate(params), "cpu").memory_bytes
        with tempfile.TemporaryDirectory(prefix="lab-memory-") as out:
            cmd = [sys.executable, "-m", "labs", "run", lab, "--params", json.dumps(params), "--out", out]
            m = run_measured(cmd + ["--backend", "cpu"], cwd=ROOT, env=ENV, timeout_s=1800)
        if m.returncode != 0:
            print(f"{lab} {params}: exit {m.returncode}\n{m.stderr[-1500:]}", file=sys.stderr)
            return 1
        ratio = estimate / m.peak_rss_bytes
        under += ratio < 1
        shown = json.dumps(params)
        shown = shown if len(shown) <= 70 else shown[:67] + "..."
        print(
            f"{lab:14} {shown:70} {mib(m.peak_rss_bytes)} {m.peak_processes:5} {mib(estimate)} {ratio:6.2f} "
            f"{m.wall_s:7.1f}{'  UNDER' if ratio < 1 else ''}",
            flush=True,
        )
    print("MiB; ratio = estimate / measured summed RSS of the process tree (labs.memwatch)")
    return 1 if under else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
