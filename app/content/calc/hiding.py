"""How real systems hide communication under compute: DDP's gradient buckets, FSDP2's prefetched all-gathers,
and async tensor parallelism's chunked all-gather-matmul. Each returns the serial time, the overlapped time and
what stays exposed, in the units it was given.

Read against PyTorch 2.13: torch/nn/parallel/distributed.py (`bucket_cap_mb`, 25 MiB by default, and a first
bucket of `dist._DEFAULT_FIRST_BUCKET_BYTES`, 1 MiB, when the cap is left at its default);
torch/distributed/fsdp/_fully_shard/ (the all-gather stream, `set_modules_to_forward_prefetch`);
torch/distributed/_symmetric_memory/__init__.py (`_pipelined_multi_all_gather_and_consume`: the local shard is
consumed first, then each remote shard as its copy lands) and torch/_inductor/fx_passes/micro_pipeline_tp.py.
"""

from __future__ import annotations

import math

from labs.api import comm

from ._base import at_least, positive, whole

MIB = 2**20


def ddp_buckets(grads: float, bucket_mb: float = 25.0, first_bucket_mb: float = 1.0) -> dict:
    """How many buckets DDP fills with `grads` bytes of gradients: a first bucket of `first_bucket_mb` MiB (the
    one whose gradients are ready first, so its all-reduce starts early), then buckets of `bucket_mb` MiB.

    This is the count when every parameter is small next to a bucket. DDP never splits a parameter and closes a
    bucket once it reaches its cap (`torch.distributed._compute_bucket_assignment_by_size`), so a bucket that
    ends on a large parameter holds more than the cap, and a model of large parameters has fewer buckets."""
    grads = positive("grads", grads)
    cap, first = positive("bucket_mb", bucket_mb) * MIB, positive("first_bucket_mb", first_bucket_mb) * MIB
    first = min(first, grads)
    rest = grads - first
    count = 1 + (math.ceil(rest / cap - 1e-9) if rest > 0 else 0)
    last = rest - (count - 2) * cap if count > 1 else first
    return {"buckets": count, "grads_mib": grads / MIB, "first_mib": first / MIB, "last_mib": last / MIB}


def bucketed_allreduce(
    grads: float,
    gpus: int,
    bandwidth: float,
    backward: float,
    bucket_mb: float = 25.0,
    first_bucket_mb: float = 1.0,
) -> dict:
    """Milliseconds of DDP's gradient all-reduce left after the backward pass ends.

    Gradients become ready at an even rate over `backward` seconds; each bucket's ring all-reduce
    (2(N−1)/N of its bytes at `bandwidth`) starts when the bucket is full and the previous one is done (one
    communication stream). What runs past the end of backward is exposed; one all-reduce after backward
    (no buckets) exposes all of it.
    """
    grads, bandwidth, backward = (
        positive("grads", grads),
        positive("bandwidth", bandwidth),
        positive("backward", backward),
    )
    gpus = whole("gpus", gpus, least=2)
    b = ddp_buckets(grads, bucket_mb, first_bucket_mb)
    sizes = (
        [b["first_mib"] * MIB]
        + [bucket_mb * MIB] * (b["buckets"] - 2)
        + ([b["last_mib"] * MIB] if b["buckets"] > 1 else [])
    )
    factor = comm.bus_factor("all-reduce", gpus)
    filled, end = 0.0, 0.0
    for size in sizes:
        filled += size
        end = max(end, backward * filled / grads) + factor * size / bandwidth
    serial = factor * grads / bandwidth
    exposed = max(0.0, end - backward)
    return {
        "buckets": b["buckets"],
        "serial_ms": 1e3 * serial,
        "exposed_ms": 1e3 * exposed,
        "hidden_share": 1 - exposed / serial,
        "last_bucket_ms": 1e3 * factor * sizes[-1] / bandwidth,
    }


def layer_prefetch(layers: int, gather: float, compute: float) -> dict:
    """A forward pass over `layers` FSDP units, each needing its weights all-gathered (`gather`) before it computes
    (`compute`), in any one unit of time.

    Without prefetch each unit waits for its own gather: layers·(gather + compute). With the next unit's gather
    issued while this one computes (FSDP2's all-gather stream, one unit ahead), only the first gather is
    exposed, plus whatever each later gather takes beyond the compute it hides under:
    gather + (layers − 1)·max(gather, compute) + compute.
    """
    layers = whole("layers", layers)
    gather, compute = at_least("gather", gather), positive("compute", compute)
    serial = layers * (gather + compute)
    prefetched = gather + (layers - 1) * max(gather, compute) + compute
    return {
        "serial": serial,
        "prefetched": prefetched,
        "exposed": prefetched - layers * compute,
        "comm_bound": gather > compute,
    }


def async_tp(gemm: float, comm: float, degree: int) -> dict:
    """An all-gather followed by a matmul on its output, decomposed the way async TP does it.

    The N-way all-gather becomes N − 1 point-to-point copies of one shard each (`comm` / (N − 1) apiece) and the
    matmul N pieces (`gemm` / N apiece). The local shard's piece runs first, while the first remote shard is
    copied; each later piece starts once its shard has landed and the previous piece is done:
    gemm/N + (N − 1)·max(gemm/N, comm/(N − 1)). Serial: gemm + comm. Smaller GEMMs run less efficiently on a
    real GPU, which this ideal leaves out.
    """
    gemm, comm = positive("gemm", gemm), at_least("comm", comm)
    degree = whole("degree", degree, least=2)
    piece, copy = gemm / degree, comm / (degree - 1)
    overlapped = piece + (degree - 1) * max(piece, copy)
    return {
        "serial": gemm + comm,
        "overlapped": overlapped,
        "piece": piece,
        "copy": copy,
        "exposed": overlapped - gemm,
        "comm_bound": copy > piece,
    }
