"""What parsing an uploaded result.json costs per MB, for every shape built to be slow, against a real result.

    .venv/bin/python bench/upload_parse.py [--mb 1] [--tries 3]

Baseline, measured in the same run: plain `json.loads` of real lab results (the golden result.json of every lab,
repeated to --mb MB). Then `bundles.parse_result` (the upload's parser, labs/jsonbounds.py, with the schema check)
on a real result, and on each adversarial shape at --mb MB and at the 5 MB upload limit, in this thread's CPU
milliseconds per MB (the best of --tries) and as a multiple of the baseline. The last column is the longest a
second thread, waking every 0.5 ms, was kept waiting for the GIL while the shape was parsed at the limit: what
any other request of the process waits at worst. Then /login's latency, served by the app in this process, while
the longest-parsing shape is parsed over and over, against /login alone and beside a plain Python loop (what
sharing the GIL with any busy thread costs).

Nothing is asserted: the property that time grows linearly is tests/app/test_upload_parse_linear.py's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.services.jobs import bundles  # noqa: E402

MB = 2**20
SHAPES = {
    "escaped quotes, never closed": ('"', '\\"', ""),
    "a string never closed": ('{"label": "', "x", ""),
    "quotes opening strings": ("", '"a', ""),
    "a long integer": ('{"a": ', "9", "}"),
    "a long fraction": ('{"a": 1.', "0", "}"),
    "deep arrays": ("", "[", ""),
    "a bracket flood": ("[", "[],", "[]]"),
    "a flood of empty strings": ("[", '"",', '""]'),
    "a flood of numbers": ("[", "1,", "1]"),
    "a flood of short floats": ("[", "1.5,", "1.5]"),
}


def build(shape: tuple[str, str, str], size: int) -> bytes:
    before, unit, after = shape
    return (before + unit * max(1, (size - len(before) - len(after)) // len(unit)) + after).encode()


def cpu_ms(fn, tries: int, *args) -> float:
    best = float("inf")
    for _ in range(tries):
        start = time.thread_time()
        fn(*args)
        best = min(best, time.thread_time() - start)
    return best * 1000


def refused(data: bytes) -> None:
    try:
        bundles.parse_result(data)
    except bundles.BundleError:
        pass


class GilProbe:
    """A thread that sleeps 0.5 ms at a time and records how late it wakes: the GIL held by someone else."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            time.sleep(0.0005)
            self.worst = max(self.worst, time.perf_counter() - start - 0.0005)

    def __enter__(self) -> GilProbe:
        self._thread.start()
        time.sleep(0.05)
        self.worst = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def golden_results() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((ROOT / "tests" / "golden").glob("*/result.json"))]


def _busy_python() -> None:
    """Pure-Python work of no interest: what any second busy thread costs /login by sharing the GIL."""
    sum(i * i for i in range(20_000))


def login_latency(worst: bytes, seconds: float) -> tuple[float, float, float]:
    """p99 ms of GET /login: alone, while a plain Python loop runs in another thread (the cost of sharing the GIL
    at all), and while `worst` is parsed over and over in another thread."""
    from fastapi.testclient import TestClient

    from app.core.config import Settings
    from app.services import startup
    from app.web.factory import create_app

    data = Path(tempfile.mkdtemp(prefix="upload-parse-"))
    try:
        settings = Settings.from_env({"COURSE_ENV": "test", "COURSE_DATA_DIR": str(data)}, embedded_workers=0)
        startup.prepare(settings)
        with TestClient(create_app(settings)) as client:

            def p99(until: float) -> float:
                times = []
                while time.perf_counter() < until:
                    start = time.perf_counter()
                    assert client.get("/login").status_code == 200
                    times.append(time.perf_counter() - start)
                return statistics.quantiles(times, n=100)[98] * 1000 if len(times) > 1 else times[0] * 1000

            alone = p99(time.perf_counter() + seconds)
            beside = []
            for work in (_busy_python, lambda: refused(worst)):
                stop = threading.Event()

                def forever(work=work, stop=stop) -> None:
                    while not stop.is_set():
                        work()

                other = threading.Thread(target=forever, daemon=True)
                other.start()
                try:
                    beside.append(p99(time.perf_counter() + seconds))
                finally:
                    stop.set()
                    other.join()
        return alone, beside[0], beside[1]
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1.0, help="size of the per-MB measurement")
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--login-seconds", type=float, default=3.0)
    args = ap.parse_args()
    size = int(args.mb * MB)
    limit = bundles.MAX_RESULT_BYTES

    real = golden_results()
    corpus = json.dumps(real * max(1, size // len(json.dumps(real)))).encode()
    base = cpu_ms(json.loads, args.tries, corpus) / (len(corpus) / MB)
    one = json.dumps(real[0]).encode()
    real_ms = cpu_ms(bundles.parse_result, args.tries, one) / (len(one) / MB)
    print(f"baseline: json.loads of real results, {len(corpus) / MB:.2f} MB: {base:.1f} ms per MB")
    print(f"parse_result of a real result ({real[0]['lab']}, {len(one) / 1024:.0f} KiB): {real_ms:.1f} ms per MB")
    print(f"{'shape':30s} {'ms/MB':>8s} {'x base':>7s} {'ms/MB at limit':>15s} {'GIL wait ms':>12s}")
    worst_name, worst_ms = "", 0.0
    longest: tuple[str, float, bytes] = ("", 0.0, b"")
    for name, shape in SHAPES.items():
        small, big = build(shape, size), build(shape, limit)
        per_mb = cpu_ms(refused, args.tries, small) / (len(small) / MB)
        at_limit = cpu_ms(refused, args.tries, big) / (len(big) / MB)
        with GilProbe() as probe:
            refused(big)
        print(f"{name:30s} {per_mb:8.1f} {per_mb / base:7.2f} {at_limit:15.1f} {probe.worst * 1000:12.1f}")
        if max(per_mb, at_limit) > worst_ms:
            worst_name, worst_ms = name, max(per_mb, at_limit)
        if at_limit * len(big) > longest[1]:
            longest = (name, at_limit * len(big) / MB, big)
    print(f"worst case per MB: {worst_name}, {worst_ms:.1f} ms per MB = {worst_ms / base:.2f}x the baseline")
    worst_data = longest[2]
    print(f"longest single parse: {longest[0]} at the limit, {longest[1]:.0f} ms of CPU (the GIL passed on meanwhile)")
    alone, python, busy = login_latency(worst_data, args.login_seconds)
    print(
        f"GET /login p99: {alone:.1f} ms alone, {python:.1f} ms beside a plain Python loop, {busy:.1f} ms while "
        f"'{longest[0]}' ({len(worst_data) / MB:.0f} MB) is parsed over and over in another thread"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
