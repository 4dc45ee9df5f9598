"""What one GPU can check of how the labs measure (gpu-marked: scripts/gpu-check.sh runs these; each skips
without a CUDA GPU and says so). The same loops and pins run on CPU in tests/labs/parallel/test_timing.py,
tests/labs/test_precision.py and the labs' own tests; here they meet CUDA, cuBLAS and NCCL.

- precision: in a process started with NGC's TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 an FP32 GEMM really runs in TF32
  until labs.precision pins it, and in a rank it never does;
- device_id: a rank's default group is bound to its GPU (labs.parallel.dist.init_options), so NCCL connects at
  init, not in a timed step;
- the back-to-back loop with CUDA events: a small NCCL all-reduce timed back to back costs less per call than timed
  one call at a time with a synchronize (the host overhead the loop hides), and the events bracket real device
  work (a 64 MiB copy at a plausible memory bandwidth).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.gpu

CHILD = r"""
import json, time
import torch
import torch.distributed as dist
from labs import precision
from labs.parallel import dist as labdist, timing

def tf32_error():
    # 1 + 2**-11 needs 11 mantissa bits: TF32 keeps 10, so each product rounds to 1 and the sum loses 256 * 2**-11.
    a = torch.full((256, 256), 1 + 2**-11, device="cuda")
    b = torch.ones(256, 256, device="cuda")
    return float((a @ b)[0, 0].item() - 256 * (1 + 2**-11))

def rank(rank, world):
    group = dist.distributed_c10d._get_default_group()
    out = {"bound": str(group.bound_device_id), "precision": precision.state(), "tf32_error": tf32_error()}
    host = dist.new_group([0], backend="gloo")
    ev, sync = timing.events_for("cuda"), torch.cuda.synchronize
    small = torch.zeros(1024, device="cuda")
    x, y = torch.zeros(16 * 2**20, device="cuda"), torch.empty(16 * 2**20, device="cuda")  # 64 MiB each
    for name, call in (("all-reduce 4 KiB", lambda: dist.all_reduce(small)), ("copy 64 MiB", lambda: y.copy_(x))):
        b2b = timing.time_back_to_back(
            call, iters=50, warmup=5, barrier=lambda: dist.barrier(group=host), sync=sync, new_event=ev
        )
        one_at_a_time = []
        for _ in range(50):
            sync(); t0 = time.perf_counter(); call(); sync(); one_at_a_time.append(time.perf_counter() - t0)
        out[name] = {"back_to_back_s": b2b, "synced_s": sorted(one_at_a_time)[25]}
    return out

before = {"tf32_error": tf32_error(), "precision": precision.state()}
precision.pin()
after = {"tf32_error": tf32_error()}
(ranked,) = labdist.launch(rank, 1, device="cuda", timeout_s=300)
print(json.dumps({"before": before, "after": after, "rank": ranked}))
"""


@pytest.fixture(scope="module")
def measured():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: these check the GPU side of the labs' timing and precision")
    env = {**os.environ, "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}  # as NVIDIA's PyTorch containers start
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps(got, indent=1))  # pytest -s shows the numbers in the GPU check's log
    return got


def test_the_override_runs_fp32_gemms_in_tf32_until_the_labs_pin_them(measured):
    assert measured["before"]["precision"]["fp32_matmul"] == "tf32"
    if measured["before"]["tf32_error"] == 0.0:
        pytest.skip("this GPU has no TF32 tensor cores (before Ampere): nothing to pin")
    assert measured["after"]["tf32_error"] == 0.0
    assert measured["rank"]["tf32_error"] == 0.0 and measured["rank"]["precision"]["fp32_matmul"] == "ieee"


def test_a_rank_is_bound_to_its_gpu_at_init(measured):
    assert measured["rank"]["bound"] == "cuda:0"


def test_back_to_back_hides_the_host_overhead_that_one_call_at_a_time_measures(measured):
    small, large = measured["rank"]["all-reduce 4 KiB"], measured["rank"]["copy 64 MiB"]
    assert 0 <= small["back_to_back_s"] < small["synced_s"]
    # The events bracket real device work: 64 MiB read and 64 MiB written, well over 50 GB/s on any data-centre
    # GPU, and no faster than HBM (under 10 TB/s).
    assert 50e9 < 2 * 64 * 2**20 / large["back_to_back_s"] < 10e12
