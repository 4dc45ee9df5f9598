"""Problem families of lessons 06 and 07: FP8 scales and clipping, overlap, collectives, ZeRO, pipelines,
the TP limit, integer quantization and narrow accumulation. Every solver calls app/content/calc."""

from __future__ import annotations

import math

from labs.api import comm

from .. import calc
from .family import Generator


def _other_format(fmt: str) -> str:
    return "E5M2" if str(fmt).upper() == "E4M3" else "E4M3"


def _fp8_scale(p):
    margin = int(p.get("margin", 0))
    r = calc.fp8_scale(p["amax"], p["fmt"], margin)
    other = calc.fp8_scale(p["amax"], _other_format(p["fmt"]), margin)
    mistakes = [
        (
            1 / r["scale"],
            f"That is amax ÷ fp8_max, the inverse. The scale multiplies values *into* the FP8 range, so amax × scale "
            f"must land on {r['fp8_max']:g}: scale = fp8_max ÷ amax.",
        ),
        (
            other["scale"],
            f"That uses {other['fp8_max']:g}, the largest {_other_format(p['fmt'])} value. {p['fmt']} stops at "
            f"{r['fp8_max']:g}.",
        ),
    ]
    if margin:
        mistakes.append(
            (
                calc.fp8_scale(p["amax"], p["fmt"])["scale"],
                f"That leaves out the margin: the scale is divided by 2^margin = {2**margin:g}.",
            )
        )
    return {"answer": r["scale"], "scale": r["scale"], "fp8_max": r["fp8_max"], "mistakes": mistakes}


def _fp8_clip(p):
    s = calc.fp8_scale(p["amax"], p["fmt"])["scale"]
    m = calc.fp8_map(p["value"], s, p["fmt"])
    clamped = math.copysign(min(abs(m["scaled"]), m["fp8_max"]), m["scaled"])
    # The question asks for the value after the clamp and before rounding; the stored (rounded) value is
    # the one slip worth a hint rather than a wrong attempt.
    slips = [] if m["stored"] == clamped else [(m["stored"], ROUNDED_SLIP.format(fmt=p["fmt"], stored=m["stored"]))]
    # Clipping counts what the clamp takes beyond rounding (calc.clip_threshold): a scaled value just over the
    # maximum is clamped but would round to it anyway, which "clipped: no" alone left looking like a contradiction.
    if m["clipped"]:
        clip_note = "clipped: yes"
    elif abs(m["scaled"]) > m["fp8_max"]:
        clip_note = f"not counted as clipped: within half a grid step of {m['fp8_max']:g}, it would round there anyway"
    else:
        clip_note = "clipped: no"
    mistakes = []
    if abs(m["scaled"]) <= m["fp8_max"]:
        mistakes.append(
            (
                math.copysign(m["fp8_max"], m["scaled"]),
                f"That assumes the value clips. {p['value']:g} × {s:.4g} = {m['scaled']:.4g} is inside ±{m['fp8_max']:g}, "
                "so the clamp leaves it as it is.",
            )
        )
    else:
        mistakes.append(
            (
                m["scaled"],
                f"That is the scaled value before the clamp. It is beyond ±{m['fp8_max']:g}, so the clamp sets it to "
                f"{m['fp8_max']:g}.",
            )
        )
    mistakes.append(
        (
            p["value"] / s,
            "That divides by the scale. Quantizing multiplies by it (fp8_max ÷ amax); dividing is the way back.",
        )
    )
    return {
        "mistakes": mistakes,
        "answer": clamped,
        "scale": s,
        "scaled": m["scaled"],
        "fp8_max": m["fp8_max"],
        "clipped": m["clipped"],
        "clip_note": clip_note,
        "stored": m["stored"],
        "slips": slips,
    }


ROUNDED_SLIP = (
    "{stored:g} is the value after rounding to the {fmt} grid. This question asks for the value after the "
    "clamp and before that rounding: multiply by the scale, then clamp to ±fp8_max."
)


def _step_time(p):
    overlap = min(p["overlap"], p["compute"], p["comm"])  # a range may draw more overlap than exists
    if overlap <= 0:  # compute + comm with nothing hidden teaches nothing: make_variant draws again
        raise calc.CalcError("overlap must be > 0 for a step-time problem (0 ms of overlap is a plain sum)")
    r = calc.step_time(p["compute"], p["comm"], overlap)
    mistakes = [
        (r["serial"], f"That adds all {p['comm']:g} ms of communication. The {overlap:g} ms that run under compute cost nothing."),
        (
            max(p["compute"], p["comm"]),
            f"That hides all the communication. Only {overlap:g} ms of it overlaps; {r['exposed']:g} ms stays exposed.",
        ),
        (p["compute"] - overlap, "That subtracts the overlap from the compute. The compute runs in full; the overlap is hidden *communication*."),
    ]  # fmt: skip
    return {
        "answer": r["total"],
        "overlap": overlap,
        "exposed": r["exposed"],
        "serial": r["serial"],
        "mistakes": mistakes,
    }


# Known wrong ideas about collectives (grading.py: a mistake is a try, and its feedback names the idea).
ONE_PHASE = (
    "That is one phase's traffic, (N−1)/N of the data. A ring all-reduce runs two phases, a reduce-scatter and "
    "then an all-gather, so each GPU sends twice that."
)
NO_OWN_SHARE = (
    "That sends all of the data through each GPU. Each GPU already holds its own 1/N of it, so only the other "
    "(N−1)/N crosses its link."
)


def no_own_share(answer: float, gpus: int) -> list[tuple[float, str]]:
    """The mistake of moving all of the data, not (N−1)/N of it, for an answer proportional to (N−1)/N."""
    return [(answer / comm.bus_factor("all-gather", gpus), NO_OWN_SHARE)] if gpus > 1 else []


def _ring(p):
    r = calc.ring_allreduce(p["size"], int(p["gpus"]))
    mistakes = [(r["half"], ONE_PHASE), (2 * p["size"], NO_OWN_SHARE)]
    return {"answer": r["per_gpu"], "factor": r["factor"], "mistakes": mistakes}


def _collective_time(p):
    gpus = int(p["gpus"])
    r = calc.collective_time(p["size"] * 1e9, gpus, p["bandwidth"] * 1e9, p["kind"])
    mistakes = no_own_share(r["ms"], gpus)
    if p["kind"] == "all-reduce":
        mistakes.append((r["ms"] / 2, ONE_PHASE))
    else:
        mistakes.append((r["ms"] * 2, f"That is an all-reduce's traffic. A {p['kind']} is one phase: (N−1)/N."))
    return {"answer": r["ms"], "moved_gb": r["moved"] / 1e9, "mistakes": mistakes}


# What ZeRO stage k shards over the data-parallel ranks, in the order the stages add them.
SHARDED = {0: "nothing", 1: "the optimizer state", 2: "the optimizer state and the gradients", 3: "everything"}


def stage_mistakes(state_gb, stage: int, words: str = "ZeRO stage") -> list[tuple[float, str]]:
    """The neighbouring stages' memory, each a known wrong idea about what stage `stage` shards. `state_gb(k)` is
    the answer's memory under stage k."""
    out = []
    for k in (stage + 1, stage - 1):
        if 0 <= k <= 3:
            out.append(
                (
                    state_gb(k),
                    f"That is stage {k}'s memory: it shards {SHARDED[k]}. {words} {stage} shards {SHARDED[stage]}.",
                )
            )
    return out


WEIGHTS_ONLY = (
    "That counts the weights alone. Training also keeps the gradients (2 bytes per parameter) and Adam's FP32 "
    "state (12 bytes: a master copy and two moments)."
)
NO_ADAM = (
    "That leaves out the optimizer. Adam keeps 12 bytes per parameter in FP32 (a master copy and two moments), "
    "the largest part of the 16."
)


def _zero(p):
    gpus, stage = int(p["gpus"]), int(p["stage"])
    r = calc.zero_memory(p["params"] * 1e9, gpus, stage)
    state = lambda k: calc.zero_memory(p["params"] * 1e9, gpus, k)["gb"]  # noqa: E731
    parts = calc.zero_memory(p["params"] * 1e9, gpus, stage, grads=0, optim=0)["gb"]
    mistakes = [(parts, WEIGHTS_ONLY), (calc.zero_memory(p["params"] * 1e9, gpus, stage, optim=0)["gb"], NO_ADAM)]
    return {
        "answer": r["gb"],
        "bytes_per_param": r["bytes_per_param"],
        "mistakes": mistakes + stage_mistakes(state, stage),
    }


OTHER_BUBBLE = (
    "{value:.4g}% is (p − 1)/m, the bubble measured against the ideal compute time: Narayanan et al. (2021) and "
    "the Ultra-Scale Playbook define it so. This question asks for its share of the whole step, bubble "
    "included: (p − 1)/(m + p − 1)."
)


def _bubble(p):
    stages, micro = int(p["stages"]), int(p["microbatches"])
    r = calc.pipeline_bubble(stages, micro)
    # The other definition is a right idea with another denominator: a hint (not a try), never "wrong".
    slips = [(r["overhead_percent"], OTHER_BUBBLE.format(value=r["overhead_percent"]))]
    mistakes = [
        (
            100 - r["percent"],
            "That is the busy share of the step, m/(m + p − 1). The bubble is the rest: (p − 1)/(m + p − 1).",
        ),
        (
            100 * stages / (micro + stages),
            "That counts p slots of filling. The first stage starts at once; the last waits p − 1 slots, and "
            "drains p − 1 slots before the step ends: (p − 1)/(m + p − 1).",
        ),
    ]
    return {
        "answer": r["percent"],
        "fraction": r["fraction"],
        "overhead": r["overhead"],
        "slips": slips,
        "mistakes": mistakes,
    }


def _tp(p):
    r = calc.tp_threshold(p["flops"] * 1e12, p["bandwidth"] * 1e9)
    mistakes = [
        (r["d_min"] / 2, "That is P/W. Each of the 2 ranks computes 2·B·D·F/2 = B·D·F FLOPs and all-reduces its B×F partial sum in "
            "16-bit, 2(N−1)/N × 2·B·F = 2·B·F bytes: compute outlasts it when D > 2P/W."),
        (r["d_min"] / 1000, "That divides TFLOP/s by GB/s as typed. Convert first: 10¹² ÷ 10⁹ = 1,000."),
    ]  # fmt: skip
    return {"answer": r["d_min"], "mistakes": mistakes}


def _vector(p):
    values = list(p["values"])
    values[-1] = p["outlier"]
    idx = int(p["index"])
    if not 0 <= idx < len(values):
        raise calc.CalcError(f"index must be in 0..{len(values) - 1}, got {idx}")
    return values, idx


def code_mistakes(x: float, step: float, qmax: int, bits: int) -> list[tuple[float, str]]:
    """Known wrong ideas about one absmax code: the value read back instead of the code, the unsigned grid's
    2^b − 1 levels instead of 2^(b−1) − 1, truncating instead of rounding."""
    q = round(x / step)
    unsigned = 2**bits - 1
    return [
        (
            q * step,
            f"That is the value read back, code × step. The question asks for the code itself, round(x ÷ step) = "
            f"an integer in ±{qmax}.",
        ),
        (
            round(x / (step * qmax / unsigned)),
            f"That spreads max|x| over {unsigned} steps, the unsigned grid. A symmetric int{bits} grid has "
            f"{qmax} steps on each side of zero: step = max|x| ÷ {qmax}.",
        ),
        (math.trunc(x / step), "That cuts the fraction off. Absmax quantization rounds x ÷ step to the nearest code."),
    ]


def _absmax(p):
    values, idx = _vector(p)
    r = calc.absmax_quant(values, int(p["bits"]))
    return {
        "answer": r[f"q{idx}"],
        "vector": values,
        "x": values[idx],
        "step": r["step"],
        "qmax": r["qmax"],
        "dequantized": r[f"x{idx}"],
        "mistakes": code_mistakes(values[idx], r["step"], r["qmax"], int(p["bits"])),
    }


def _block(p):
    values, idx = _vector(p)
    r = calc.block_quant(values, int(p["block"]), int(p["bits"]))
    whole = calc.absmax_quant(values, int(p["bits"]))
    block = idx // int(p["block"])
    outlier_block = (len(values) - 1) // int(p["block"])
    step = r[f"step_b{block}"]
    mistakes = []
    if block != outlier_block:
        mistakes.append(
            (
                whole[f"q{idx}"],
                "That uses one step for the whole vector, set by the outlier. With blocks, only the values of "
                f"{values[idx]:g}'s own block set its step.",
            )
        )
    else:
        first = r["step_b0"]
        mistakes += [
            (
                round(values[idx] / first),
                "That uses the first block's step. This value shares its block with the outlier, so the outlier's "
                "absmax sets its step.",
            ),
            (
                math.copysign(whole["qmax"], values[idx]),
                f"That takes the step from {values[idx]:g} alone. The block's absmax is its largest magnitude, the "
                "outlier's.",
            ),
        ]
    mistakes += code_mistakes(values[idx], step, whole["qmax"], int(p["bits"]))
    return {
        "answer": r[f"q{idx}"],
        "vector": values,
        "x": values[idx],
        "step": r[f"step_b{block}"],
        "q_tensor": whole[f"q{idx}"],
        "block_no": block + 1,
        "outlier_block_no": outlier_block + 1,
        "outlier_step": r[f"step_b{outlier_block}"],
        "in_outlier_block": block == outlier_block,
        "qmax": whole["qmax"],
        "mistakes": mistakes,
    }


def _accumulate(p):
    every = int(p["promote_every"])
    r = calc.accumulate_fp8(p["addend"], int(p["count"]), every, p["fmt"])
    promotion = (
        f"every {every} terms the partial sum is moved into an FP32 total and the running sum restarts at 0"
        if every
        else "the sum is never moved into a wider accumulator"
    )
    return {"answer": r["total"], "exact": r["exact"], "stuck_after": r["stuck_after"], "promotion": promotion}


TRUNCATES = (
    "That rounds to the nearest value the accumulator holds. The tensor core aligns the addend to the larger "
    "exponent and drops the bits below the spacing: it cuts toward zero."
)


def _narrow_add(p):
    r = calc.narrow_add(p["partial"], p["addend"], int(p["bits"]))
    mistakes = [
        (r["exact"], f"That keeps every bit, as an FP32 accumulator would. This one keeps {r['significant_bits']} "
         f"significant bits, so near {p['partial']:g} its values are {r['spacing']:g} apart."),
        (r["nearest"], TRUNCATES),
        (calc.round_fp8(r["exact"]), "That stores the sum in E4M3. Only the GEMM's inputs are FP8; the sum lives "
         "in the tensor core's wider accumulator (and 448 is as far as E4M3 goes)."),
    ]  # fmt: skip
    return {
        "answer": r["stored"],
        **{k: r[k] for k in ("exact", "lost", "spacing", "significant_bits")},
        # every digit: the accumulator's values are exact binary fractions, and the answer is graded exactly
        "exact_text": exact_digits(r["exact"]),
        "spacing_text": exact_digits(r["spacing"]),
        "mistakes": mistakes,
    }


def exact_digits(x: float) -> str:
    """x with all the digits it has (up to 12), thousands grouped: 1500.625 -> "1,500.625", 0.0625 -> "0.0625"."""
    return format(x, ",.12g")


FAMILIES: list[Generator] = [
    Generator(
        "fp8_scale",
        {"amax": 240, "fmt": "E4M3", "margin": 0},
        "",
        "amax = {{amax}}, format {{fmt}}: what scale maps amax to the largest {{fmt}} value?",
        "scale = {{fp8_max}} ÷ {{amax}} ≈ {{scale|.3f}}.",
        _fp8_scale,
    ),
    Generator(
        "fp8_clip",
        {"amax": 240, "value": 300, "fmt": "E4M3"},
        "",
        "The scale comes from amax = {{amax}}. Where does {{value}} land after scaling and the clamp?",
        "scale = {{fp8_max}} ÷ {{amax}} ≈ {{scale|.3f}}; {{value}} × scale ≈ {{scaled|.1f}}; "
        "clipped: {{clipped}}; the stored {{fmt}} value is {{stored}}.",
        _fp8_clip,
    ),
    Generator(
        "fp8_step_time",
        {"compute": 12, "comm": 5, "overlap": 3},
        "ms",
        "Compute {{compute}} ms, communication {{comm}} ms, {{overlap}} ms of it hidden. Step time?",
        "T ≈ {{compute}} + {{comm}} − {{overlap}} = {{answer}} ms; {{exposed}} ms of communication stays "
        "on the critical path.",
        _step_time,
    ),
    Generator(
        "ring_allreduce",
        {"size": 14, "gpus": 8},
        "GB",
        "A ring all-reduce of {{size}} GB over {{gpus}} GPUs: how much does each GPU send?",
        "Each GPU sends 2(N−1)/N = {{factor|.3f}} × {{size}} GB ≈ {{answer|.2f}} GB (reduce-scatter, then all-gather).",
        _ring,
    ),
    Generator(
        "collective_time",
        {"size": 14, "gpus": 8, "bandwidth": 450, "kind": "all-gather"},
        "ms",
        "A {{kind}} of {{size}} GB over {{gpus}} GPUs at {{bandwidth}} GB/s per GPU takes how long?",
        "(N−1)/N of the data crosses each GPU ({{moved_gb|.2f}} GB); at {{bandwidth}} GB/s that is {{answer|.1f}} ms.",
        _collective_time,
    ),
    Generator(
        "zero_memory",
        {"params": 7, "gpus": 4, "stage": 1},
        "GB",
        "{{params}}B parameters, mixed precision with Adam (16 bytes/parameter), {{gpus}} GPUs, "
        "ZeRO stage {{stage}}: memory per GPU for the training state?",
        "{{bytes_per_param}} bytes per parameter × {{params}}B = {{answer|.1f}} GB per GPU.",
        _zero,
    ),
    Generator(
        "pipeline_bubble",
        {"stages": 4, "microbatches": 8},
        "%",
        "A pipeline of {{stages}} stages runs {{microbatches}} microbatches. What fraction is bubble?",
        "(p − 1) / (m + p − 1) = {{fraction|.3f}} ≈ {{answer|.1f}}%.",
        _bubble,
    ),
    Generator(
        "tp_threshold",
        {"flops": 989, "bandwidth": 450},
        "",
        "At {{flops}} TFLOP/s and {{bandwidth}} GB/s, above which inner dimension D does a 2-way TP "
        "matmul compute longer than it communicates?",
        "D > 2·P / W = 2 × {{flops}}·10^12 / ({{bandwidth}}·10^9) ≈ {{answer|,.0f}}.",
        _tp,
    ),
    Generator(
        "absmax_int8",
        {"values": [0.3, -0.5, 0.12, 1.5], "outlier": 1.5, "index": 0, "bits": 8},
        "",
        "Quantize {{vector}} to int{{bits}} with one absmax scale. What integer does {{x}} become?",
        "step = {{step|.4f}} (max |x| ÷ {{qmax}}); round({{x}} ÷ step) = {{answer}}.",
        _absmax,
    ),
    Generator(
        "block_absmax",
        {"values": [0.3, -0.5, 0.12, 1.5], "outlier": 30, "index": 0, "block": 2, "bits": 8},
        "",
        "Quantize {{vector}} to int{{bits}} in blocks of {{block}}. What integer does {{x}} become?",
        "Its block's step is {{step|.4f}}, so {{x}} → {{answer}}; one scale for the whole vector "
        "would give {{q_tensor}}.",
        _block,
    ),
    Generator(
        "narrow_add",
        {"partial": 3000, "addend": 0.9, "bits": 13},
        "",
        "The accumulator keeps {{significant_bits}} significant bits, cutting toward zero. It holds {{partial}}; "
        "the next group of products adds {{addend}}. What does it hold after the add?",
        "Near {{partial}} its values are {{spacing_text}} apart; {{exact_text}} is cut down to {{answer}}, losing "
        "{{lost|.3g}}.",
        _narrow_add,
    ),
    Generator(
        "e4m3_accumulate",
        {"addend": 3, "count": 100, "promote_every": 0, "fmt": "E4M3"},
        "",
        "Add {{addend}} to itself {{count}} times, rounding the running sum to {{fmt}} after each add; "
        "{{promotion}}. Final sum?",
        "The exact sum is {{exact}}; with this accumulation it ends at {{answer}}.",
        _accumulate,
    ),
]
