"""Named calculations behind every worked number in the lessons.

Authors never type a derived number. `lesson.yaml` declares it:

    computed:
      worked-scale: {calc: fp8_scale, args: {amax: 240, fmt: E4M3}, format: ".2f"}

(an argument may also be an earlier entry's result, `"=worked-scale.scale"`, so a chain of worked
numbers is typed once) and any Markdown field of the lesson writes `{{calc:worked-scale.scale}}` (or `{{calc:worked-scale.scale|.3f}}`
to override the format). The loader evaluates each entry once, checks every placeholder, and substitutes
the numbers, so the page, the tests and the practice engine all read the same arithmetic.

Each calculation returns a flat dict of named numbers (bools render as yes/no). The modules:

    fp8.py       FP32 scales, FP8 rounding, clipping, accumulation (bit-identical to labs/numerics/fp8.py)
    accumulator.py  the tensor core's ~14-bit accumulator and FP32 promotion (labs/numerics/accumulate.py's model)
    quant.py     integer absmax quantization, per tensor and per block
    parallel.py  overlap, collectives (with the ring's latency term), pipeline bubbles, the TP limit
    memory.py    training state under DP/ZeRO/TP/PP and activations with and without recomputation
    planning.py  6·N·D budgets, compute-optimal tokens, MoE sizes, KV cache and serving
    fabric.py    a node's NVLink domain, rails and egress; the all-to-all a NIC per GPU bounds
    hiding.py    DDP's buckets, FSDP2's prefetch and async TP: serial, overlapped, exposed
    blockscale.py  bits per element of block-scaled formats (DeepSeek-V3, MXFP8, NVFP4) and FP32 promotions

Everything is plain Python, so the web tier never imports torch. FP8 rules follow Transformer Engine
(labs/numerics/fp8.py cites TE's source for each) in one arithmetic: scale = (fp8_max / amax) / 2**margin computed in FP32; quantize = multiply in FP32,
clamp to ±fp8_max explicitly, round to the nearest FP8 value (ties to even). labs/numerics/fp8.py runs the same
rules with torch; tests/content/test_calc.py checks that both give the same bits over the worked numbers
and random cases.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

from labs.api import power_of_ten

from ..formats import spec_problem
from ._base import CalcError
from .accumulator import fast_accumulation, narrow_add
from .blockscale import promotions, recipe_bits, scaled_format
from .fabric import cross_node_all_to_all, node_fabric
from .fp8 import (
    FLT_MAX,
    FP8_BITS,
    FP8_MAX,
    accumulate_fp8,
    clip_threshold,
    f32,
    fp8_grid,
    fp8_map,
    fp8_scale,
    fp8_spacing,
    round_fp8,
)
from .hiding import async_tp, bucketed_allreduce, ddp_buckets, layer_prefetch
from .memory import activations, memory_per_gpu, model_state, zero_memory
from .parallel import (
    collective_time,
    fsdp_step,
    hsdp_step,
    network_collective,
    node_figures,
    pipeline_bubble,
    ring_allreduce,
    ring_time,
    step_time,
    tp_layer_collectives,
    tp_mlp_intensity,
    tp_threshold,
)
from .planning import (
    attention_flops,
    chinchilla_from_budget,
    decode_step,
    forward_time,
    kv_cache,
    logits_memory,
    moe_all_to_all,
    moe_params,
    serving_pools,
    train_budget,
    train_compute,
)
from .quant import absmax_quant, affine_quant, block_quant

__all__ = [
    "CalcError",
    "FLT_MAX",
    "FP8_BITS",
    "FP8_MAX",
    "REGISTRY",
    "clip_threshold",
    "evaluate",
    "f32",
    "format_value",
    "fp8_grid",
    "round_fp8",
]

# ---------------------------------------------------------------- registry

REGISTRY: dict[str, Callable[..., dict]] = {
    fn.__name__: fn
    for fn in (
        fp8_scale,
        fp8_map,
        fp8_spacing,
        accumulate_fp8,
        narrow_add,
        fast_accumulation,
        absmax_quant,
        block_quant,
        affine_quant,
        step_time,
        ring_allreduce,
        ring_time,
        collective_time,
        network_collective,
        fsdp_step,
        hsdp_step,
        pipeline_bubble,
        tp_threshold,
        tp_mlp_intensity,
        tp_layer_collectives,
        node_figures,
        zero_memory,
        model_state,
        activations,
        memory_per_gpu,
        train_compute,
        train_budget,
        chinchilla_from_budget,
        attention_flops,
        logits_memory,
        forward_time,
        moe_params,
        moe_all_to_all,
        kv_cache,
        decode_step,
        serving_pools,
        node_fabric,
        cross_node_all_to_all,
        ddp_buckets,
        bucketed_allreduce,
        layer_prefetch,
        async_tp,
        scaled_format,
        recipe_bits,
        promotions,
    )
}


def evaluate(name: str, args: dict) -> dict:
    """Run one registered calculation; CalcError names the unknown calculation or argument."""
    fn = REGISTRY.get(name)
    if fn is None:
        raise CalcError(f"unknown calculation {name!r}; known: {', '.join(sorted(REGISTRY))}")
    accepted = inspect.signature(fn).parameters
    unknown = sorted(set(args) - set(accepted))
    if unknown:
        raise CalcError(f"{name} does not take {unknown}; it takes {list(accepted)}")
    try:
        return fn(**args)
    except CalcError:
        raise
    except TypeError as exc:  # e.g. a missing required argument
        raise CalcError(f"{name}: {exc}") from None


_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}


def format_value(value, spec: str) -> str:
    """Render one computed value: bools as yes/no, numbers with a Python format spec.

    Two additions for large numbers in prose: ".Nsci" gives N significant digits as a power of ten,
    1.2e20 → "1.2 × 10²⁰" (".2sci"), and SPEC_million / _billion / _trillion scales first,
    1.04e10 → "10.4 billion" (".3g_billion").
    """
    if isinstance(value, bool):
        return "yes" if value else "no"
    problem = spec_problem(spec)
    if problem:
        raise CalcError(problem)
    scaled = re.fullmatch(r"(.*)_(thousand|million|billion|trillion)", spec)
    if scaled and isinstance(value, (int, float)):
        return f"{format_value(value / _SCALES[scaled.group(2)], scaled.group(1))} {scaled.group(2)}"
    sci = re.fullmatch(r"\.(\d+)sci", spec)
    if sci and isinstance(value, (int, float)) and value != 0:
        return power_of_ten(float(value), int(sci.group(1)))
    try:
        return format(value, spec)
    except (TypeError, ValueError) as exc:
        raise CalcError(f"format {spec!r} does not apply to {value!r}: {exc}") from None
