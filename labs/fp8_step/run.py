"""fp8-step: one seeded GPT trained twice, BF16 reference vs an FP8 recipe, with the evidence.

    python -m labs run fp8-step --params '{}' --out /tmp/fp8-step                          # CPU, 10-20 s
    python -m labs run fp8-step --params '{"outlier_step": 60}' --out /tmp/fp8-spike       # scale lag
    python -m labs run fp8-step --params '{"recipe": "current", "outlier_step": 60}' --out /tmp/fp8-cur
    python -m labs run fp8-step --backend te --params '{"d_model": 768, "n_heads": 12, "ffn": 3072,
        "n_layers": 4, "seq": 256, "batch": 32, "vocab": 96, "steps": 200}' --out /tmp/fp8-h100

Read top to bottom: parameters -> the precisions being compared -> one training loop -> evidence.
Both runs start from the same weights and see the same batches (arithmetic-stride sequences), so
any difference in loss, gradients or generation comes from the FP8 recipe. On the `cpu` and
`torch-cuda` backends FP8 is emulated by labs.fp8 (TE's rules, FP32 products); on `te` the same
model uses te.Linear under te.autocast and the scales are read back from TE's own metadata.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from labs import svgplot
from labs.fp8 import FP8_MAX, Fp8Recipe, fp8_end_step, fp8_frozen, fp8_quantizers
from labs.fp8_step.params import Params, te_alignment
from labs.model import GPT, GPTConfig, fp8_linear_factory, stride_batch, te_linear_factory, torch_linear

# Where the outlier goes: the first MLP's input, a GEMM input after a LayerNorm, like the
# activation outliers seen in real LLMs. One token's whole activation row is multiplied.
OUTLIER_TARGET = "blocks.0.mlp.fc_in"
MAX_HISTORY_POINTS = 512  # per-quantizer points kept in result.json for long runs
PROMPT_LEN, GEN_LEN, N_PROMPTS = 8, 16, 4
MAX_LOSS_RINGS = 10  # clipped steps ringed on the loss chart


def model_config(p: Params) -> GPTConfig:
    return GPTConfig(vocab=p.vocab, seq=p.seq, d_model=p.d_model, n_layers=p.n_layers, n_heads=p.n_heads, ffn=p.ffn)


def fp8_recipe(p: Params) -> Fp8Recipe:
    return Fp8Recipe(
        kind=p.recipe,
        fp8_format=p.fp8_format,
        margin=p.margin,
        amax_history_len=p.amax_history_len,
        amax_compute_algo=p.amax_compute_algo,
    )


# --------------------------------------------------------------------------- precisions


@dataclass
class Precision:
    """How one run executes: the same model class and loop, a different numeric policy."""

    key: str  # "reference" | "fp8"
    label: str  # shown on the page
    autocast: Callable[[], Any]  # context manager entered around every forward
    end_step: Callable[[torch.nn.Module], None] = lambda m: None  # after optimizer.step()
    after_step: Callable[[torch.nn.Module, int], None] = lambda m, s: None  # evidence from TE
    pad_to: int = 1  # generation pads windows to this multiple (TE's FP8 GEMM shape rules)


def _bf16_autocast(device: str) -> Callable[[], Any]:
    return lambda: torch.autocast(device_type=device, dtype=torch.bfloat16)


def te_recipe_for(p: Params):
    """The Transformer Engine recipe object matching Params (only called on the te backend)."""
    from transformer_engine.common import recipe as te_recipe

    fmt = te_recipe.Format.HYBRID if p.fp8_format == "hybrid" else te_recipe.Format.E4M3
    if p.recipe == "delayed":
        return te_recipe.DelayedScaling(
            margin=p.margin, fp8_format=fmt, amax_history_len=p.amax_history_len, amax_compute_algo=p.amax_compute_algo
        )
    if p.recipe == "current":
        return te_recipe.Float8CurrentScaling(fp8_format=fmt)
    if p.recipe == "block":
        return te_recipe.Float8BlockScaling(fp8_format=fmt)
    return te_recipe.MXFP8BlockScaling(fp8_format=fmt)


def te_fp8_autocast(te, recipe, enabled: bool = True):
    """te.autocast(recipe=...) on current TE; te.fp8_autocast(fp8_recipe=...) before it existed."""
    if hasattr(te, "autocast"):
        return te.autocast(enabled=enabled, recipe=recipe)
    return te.fp8_autocast(enabled=enabled, fp8_recipe=recipe)


@dataclass
class Built:
    reference: torch.nn.Module
    fp8: torch.nn.Module
    ref_precision: Precision
    fp8_precision: Precision
    device: str
    te_recipe: Any = None
    te_trace: dict = field(default_factory=dict)  # {layer: [(step, {...}), ...]} read from TE


def build(p: Params, backend: str, collect: bool = True) -> Built:
    """Both models from one seeded initialisation, and the precision each runs under."""
    device = "cpu" if backend == "cpu" else "cuda"
    cfg = model_config(p)
    torch.manual_seed(p.seed)
    bf16 = _bf16_autocast(device)
    if backend == "te":
        import transformer_engine.pytorch as te  # the te backend exists only when this import works

        make = te_linear_factory(torch.float32)
        reference = GPT(cfg, make).to(device)
        fp8 = GPT(cfg, make).to(device)
        _copy_weights(reference, fp8)
        rec = te_recipe_for(p)
        trace: dict = {}

        @contextlib.contextmanager
        def fp8_ctx():
            with bf16(), te_fp8_autocast(te, rec, True):
                yield

        built = Built(
            reference,
            fp8,
            Precision("reference", "BF16 (te.Linear, FP8 off)", bf16),
            Precision("fp8", f"FP8 {p.recipe} (Transformer Engine)", fp8_ctx, pad_to=te_alignment(p)),
            device,
            te_recipe=rec,
            te_trace=trace,
        )
        if p.recipe == "delayed":
            # Only delayed scaling keeps an amax history/scale per module in fp8_meta; the other
            # recipes compute scales inside TE's quantizers, per tensor or per block.
            built.fp8_precision.after_step = lambda m, s: _read_te_meta(m, s, trace)
        else:
            trace["__error__"] = f"TE keeps no per-step amax history for the {p.recipe} recipe"
        return built
    reference = GPT(cfg, torch_linear).to(device)
    fp8 = GPT(cfg, fp8_linear_factory(fp8_recipe(p), collect=collect)).to(device)
    _copy_weights(reference, fp8)
    where = "CPU" if device == "cpu" else "GPU, no FP8 kernels"
    return Built(
        reference,
        fp8,
        Precision("reference", "BF16 (torch.autocast)", bf16),
        Precision("fp8", f"FP8 {p.recipe}, emulated ({where})", bf16, end_step=fp8_end_step),
        device,
    )


def _copy_weights(src: torch.nn.Module, dst: torch.nn.Module) -> None:
    # TE modules carry an `_extra_state` entry (their FP8 metadata); weights must match exactly.
    missing, unexpected = dst.load_state_dict(src.state_dict(), strict=False)
    bad = [k for k in missing + unexpected if not k.endswith("_extra_state")]
    if bad:
        raise RuntimeError(f"models differ in parameters: {bad[:5]}")


def _read_te_meta(model: torch.nn.Module, step: int, trace: dict) -> None:
    """Copy each te.Linear's delayed-scaling state after the step (TE's own numbers).

    TE rolls the history when it updates the scale: the step's amax then sits in the last row and
    row 0 is zeroed. A version that defers the update to the next forward still has it in row 0.
    Any surprise in TE's internals is kept as a reason instead of failing the run.
    """
    if "__error__" in trace:
        return
    try:
        _read_te_meta_unguarded(model, step, trace)
    except Exception as exc:  # TE internals differ between versions
        trace["__error__"] = f"could not read TE fp8_meta: {type(exc).__name__}: {exc}"


def _read_te_meta_unguarded(model: torch.nn.Module, step: int, trace: dict) -> None:
    for name, mod in model.gemm_layers():
        meta = getattr(mod, "fp8_meta", None)
        if not meta or "scaling_fwd" not in meta:
            continue
        entry = {}
        for direction, roles in (("scaling_fwd", ("input", "weight")), ("scaling_bwd", ("grad_output",))):
            s = meta.get(direction)
            if s is None:
                continue
            hist = s.amax_history  # (history_len, n)
            newest = hist[0] if (hist.shape[0] == 1 or bool((hist[0] != 0).any())) else hist[-1]
            for i, role in enumerate(roles):
                entry[role] = (float(newest[i]), float(s.scale[i]))
        trace.setdefault(name, []).append((step, entry))


# --------------------------------------------------------------------------- the loop


@dataclass
class RunRecord:
    losses: list[float]
    step_ms: list[float]
    grads_step0: dict[str, torch.Tensor]
    peak_memory_bytes: int | None
    generation: dict


def lr_at(step: int, p: Params) -> float:
    """Linear warmup over the first tenth of the run, then cosine decay to lr/10 (nanoGPT's shape)."""
    warm = max(1, p.steps // 10)
    if step < warm:
        return p.lr * (step + 1) / warm
    done = (step - warm) / max(1, p.steps - warm)
    return p.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done)))


def _outlier_hook(scale: float):
    def hook(module, args):
        x = args[0].clone()
        x[0, 0] = x[0, 0] * scale  # one token's activation row, (C,) or (ffn,)
        return (x,) + tuple(args[1:])

    return hook


def train(
    model: torch.nn.Module,
    prec: Precision,
    p: Params,
    device: str,
    progress: Callable[[float, str], None] = lambda f, m: None,
    collect: bool = True,
) -> RunRecord:
    """The one training loop both runs share; only `prec` differs between them."""
    opt = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(p.seed + 1)  # identical batches for both runs
    target = dict(model.named_modules())[OUTLIER_TARGET]
    cuda = device == "cuda"
    base = 0
    if cuda:
        # Both models' weights are live before either run; count only what this run adds on top
        # (activations, gradients, optimizer state, FP8 copies, workspaces) so the runs compare.
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    losses, step_ms, grads0 = [], [], {}
    report_every = max(1, p.steps // 20)
    model.train()
    for step in range(p.steps):
        x, y = stride_batch(gen, p.batch, p.seq, p.vocab)  # (B, T) each
        x, y = x.to(device), y.to(device)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, p)
        handle = None
        if p.outlier_step == step:
            handle = target.register_forward_pre_hook(_outlier_hook(p.outlier_scale))
        t0 = time.perf_counter()
        with prec.autocast():
            logits = model(x)  # (B, T, vocab)
        loss = F.cross_entropy(logits.float().view(-1, p.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if step == 0 and collect:
            grads0 = {n: m.weight.grad.detach().float().cpu().clone() for n, m in model.gemm_layers()}
        opt.step()
        prec.end_step(model)
        loss_value = loss.item()  # a host sync on GPU, so the timer below sees finished work
        if cuda:
            torch.cuda.synchronize()
        step_ms.append((time.perf_counter() - t0) * 1000)
        if handle is not None:
            handle.remove()
        if collect:
            prec.after_step(model, step)
        losses.append(loss_value)
        if step % report_every == 0:
            progress((step + 1) / p.steps, f"{prec.label}: step {step + 1}/{p.steps}, loss {loss_value:.3f}")
    peak = int(torch.cuda.max_memory_allocated()) - base if cuda else None
    return RunRecord(losses, step_ms, grads0, peak, generation_check(model, prec, p, device))


@torch.no_grad()
def generation_check(model, prec: Precision, p: Params, device: str) -> dict:
    """Greedy continuation of fresh stride prompts: does the model keep the stride going?"""
    model.eval()
    prompt_len = min(PROMPT_LEN, p.seq)
    tokens, _ = stride_batch(torch.Generator().manual_seed(p.seed + 7), N_PROMPTS, prompt_len, p.vocab)
    freeze = fp8_frozen(model) if prec.key == "fp8" else contextlib.nullcontext()
    with freeze, prec.autocast():
        out = model.generate(tokens.to(device), GEN_LEN, pad_to=prec.pad_to).cpu()  # (N, prompt_len + GEN_LEN)
    model.train()
    samples, correct = [], 0
    for row in out.tolist():
        stride = (row[1] - row[0]) % p.vocab
        expected = [(row[prompt_len - 1] + stride * (i + 1)) % p.vocab for i in range(GEN_LEN)]
        got = row[prompt_len:]
        hits = sum(int(a == b) for a, b in zip(got, expected))
        correct += hits
        samples.append({"prompt": row[:prompt_len], "generated": got, "stride": stride, "correct": hits})
    return {
        "prompt_len": prompt_len,
        "generated_len": GEN_LEN,
        "accuracy": correct / (N_PROMPTS * GEN_LEN),
        "follows_stride": correct == N_PROMPTS * GEN_LEN,
        "samples": samples,
    }


# --------------------------------------------------------------------------- evidence


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float | None:
    denom = float(b.norm())
    if denom == 0 or not math.isfinite(denom):
        return None
    val = float((a - b).norm()) / denom
    return val if math.isfinite(val) else None


def _keep(n: int, must: set[int]) -> list[int]:
    """Indices to keep from an n-long history: all of them, or an even spread plus `must`."""
    if n <= MAX_HISTORY_POINTS:
        return list(range(n))
    stride = math.ceil(n / MAX_HISTORY_POINTS)
    return sorted(set(range(0, n, stride)) | {n - 1} | {i for i in must if 0 <= i < n})


def _emulated_quantizers(model, p: Params) -> list[dict]:
    out = []
    for name, q in fp8_quantizers(model).items():
        hist = q.history()
        must = {i for i, h in enumerate(hist) if h.clipped}
        if p.outlier_step is not None:
            must |= {p.outlier_step - 1, p.outlier_step, p.outlier_step + 1}
        keep = _keep(len(hist), must)
        layer, role = name.rsplit(".", 1)
        out.append(
            {
                "name": name,
                "layer": layer,
                "role": role,
                "format": q.fmt,
                "fp8_max": FP8_MAX[q.fmt],
                "source": "emulation",
                "steps": [hist[i].step for i in keep],
                "amax": _finite([hist[i].amax for i in keep]),  # NaN/inf (a diverged run) -> null
                "scale": _finite([hist[i].scale for i in keep]),
                "clipped": [hist[i].clipped for i in keep],
                "underflow": [hist[i].flushed for i in keep],
                "numel": hist[-1].numel if hist else 0,
                "total_clipped": sum(h.clipped for h in hist),
                "total_underflow": sum(h.flushed for h in hist),
            }
        )
    return out


def _te_quantizers(trace: dict, p: Params) -> list[dict]:
    rec = fp8_recipe(p)
    out = []
    for layer, points in trace.items():
        if layer.startswith("__"):
            continue
        for role in ("input", "weight", "grad_output"):
            pts = [(s, e[role]) for s, e in points if role in e]
            if not pts:
                continue
            keep = _keep(len(pts), set())
            out.append(
                {
                    "name": f"{layer}.{role}",
                    "layer": layer,
                    "role": role,
                    "format": rec.format_for(role),
                    "fp8_max": FP8_MAX[rec.format_for(role)],
                    "source": "transformer_engine",
                    "steps": [pts[i][0] for i in keep],
                    "amax": _finite([pts[i][1][0] for i in keep]),
                    "scale": _finite([pts[i][1][1] for i in keep]),
                    "clipped": None,  # TE's kernels do not count saturated values
                    "underflow": None,
                    "numel": None,
                    "total_clipped": None,
                    "total_underflow": None,
                }
            )
    return out


def _per_step_totals(quantizers: list[dict], steps: int, key: str) -> list[int] | None:
    if not quantizers or quantizers[0][key] is None:
        return None
    totals = [0] * steps
    for q in quantizers:
        for s, c in zip(q["steps"], q[key]):
            totals[s] += c
    return totals


def _finite(xs: list[float]) -> list[float | None]:
    return [x if math.isfinite(x) else None for x in xs]


def _timing(rec: RunRecord) -> dict:
    warm = min(3, len(rec.step_ms) // 4)
    measured = rec.step_ms[warm:] or rec.step_ms
    return {"ms_per_step": statistics.median(measured), "warmup_steps_excluded": warm}


def _outlier_report(p: Params, quantizers: list[dict]) -> dict | None:
    if p.outlier_step is None:
        return None
    k = p.outlier_step
    q = next((q for q in quantizers if q["name"] == f"{OUTLIER_TARGET}.input"), None)
    rep: dict = {"step": k, "target": f"{OUTLIER_TARGET}.input", "scale_factor": p.outlier_scale}
    if q is None:
        return rep | {"note": "no per-step record for the target on this backend"}
    at = {s: i for i, s in enumerate(q["steps"])}

    def field_at(key, s):
        i = at.get(s)
        return None if i is None or q[key] is None else q[key][i]

    rep.update(
        amax_before=field_at("amax", k - 1),
        amax_at_spike=field_at("amax", k),
        scale_at_spike=field_at("scale", k),
        clipped_at_spike=field_at("clipped", k),
        scale_after=field_at("scale", k + 1),
        clipped_after=field_at("clipped", k + 1),
    )
    return rep


def _charts(ctx, p: Params, ref: RunRecord, f8: RunRecord, quantizers, clipped_per_step, focus) -> None:
    xs = list(range(p.steps))
    # Delayed scaling clips a few values on many steps while amaxes grow; ring only the worst
    # steps so a spike stands out (every step's count is in results.clipping).
    worst = sorted((c, i) for i, c in enumerate(clipped_per_step or []) if c)[-MAX_LOSS_RINGS:]
    clipped_idx = sorted(i for _, i in worst)
    loss_svg = svgplot.line_chart(
        [
            svgplot.Series("BF16 reference", xs, _finite(ref.losses)),
            svgplot.Series(f"FP8 {p.recipe}", xs, _finite(f8.losses), dashed=True, markers=clipped_idx),
        ],
        title=f"Training loss: BF16 vs FP8 ({p.recipe}, {p.fp8_format})",
        xlabel="step",
        ylabel="cross-entropy loss",
        description=(
            f"Loss per step for both runs; red rings mark the (at most {MAX_LOSS_RINGS}) FP8 steps with the most "
            "clipped values across all FP8 tensors."
        ),
    )
    ctx.write_text("loss.svg", loss_svg)
    ctx.add_artifact("loss_curves", "loss.svg", "image/svg+xml", "Loss curves, BF16 vs FP8")
    if focus is None:
        return
    marks = [i for i, c in enumerate(focus["clipped"] or []) if c]
    scaled = [a * s if a is not None and s is not None else None for a, s in zip(focus["amax"], focus["scale"])]
    hist_svg = svgplot.line_chart(
        [
            svgplot.Series("amax (unscaled)", focus["steps"], focus["amax"], markers=marks),
            svgplot.Series("scale", focus["steps"], focus["scale"]),
            svgplot.Series("amax x scale", focus["steps"], scaled, markers=marks),
            svgplot.Series(
                f"{focus['format'].upper()} max", focus["steps"], [focus["fp8_max"]] * len(focus["steps"]), dashed=True
            ),
        ],
        title=f"amax and scale history: {focus['name']}",
        xlabel="step",
        ylabel="value",
        log_y=True,
        description=(
            "Per-step amax of the tensor, the scale used that step, and their product; where the product "
            "rises above the format's max the tensor clipped (red rings)."
        ),
    )
    ctx.write_text("amax_scale.svg", hist_svg)
    ctx.add_artifact("amax_scale_history", "amax_scale.svg", "image/svg+xml", f"amax/scale history of {focus['name']}")


def _focus_quantizer(p: Params, quantizers: list[dict]) -> dict | None:
    """The tensor worth plotting: the spiked one, else the one that clipped most, else the first."""
    if not quantizers:
        return None
    if p.outlier_step is not None:
        for q in quantizers:
            if q["name"] == f"{OUTLIER_TARGET}.input":
                return q
    worst = max(quantizers, key=lambda q: q["total_clipped"] or 0)
    return worst if (worst["total_clipped"] or 0) > 0 else quantizers[0]


# --------------------------------------------------------------------------- run


def run(params: Params, ctx) -> dict:
    p = params
    backend = ctx.backend
    ctx.progress(0.01, "building the seeded model twice")
    built = build(p, backend)
    ref = train(built.reference, built.ref_precision, p, built.device, lambda f, m: ctx.progress(0.02 + 0.45 * f, m))
    if built.device == "cuda":
        torch.cuda.empty_cache()
    f8 = train(built.fp8, built.fp8_precision, p, built.device, lambda f, m: ctx.progress(0.48 + 0.45 * f, m))
    ctx.progress(0.95, "collecting evidence")

    grad_err = [
        {"layer": name, "rel_error": _rel_err(f8.grads_step0[name], ref.grads_step0[name])} for name in ref.grads_step0
    ]
    if backend == "te":
        quantizers = _te_quantizers(built.te_trace, p)
    else:
        quantizers = _emulated_quantizers(built.fp8, p)
    clipped_per_step = _per_step_totals(quantizers, p.steps, "clipped")
    underflow_per_step = _per_step_totals(quantizers, p.steps, "underflow")
    focus = _focus_quantizer(p, quantizers)
    _charts(ctx, p, ref, f8, quantizers, clipped_per_step, focus)

    cpu = built.device == "cpu"
    timing_kind = "cpu" if cpu else "cuda"
    t_ref, t_f8 = _timing(ref), _timing(f8)
    mem_note = (
        "torch.cuda.max_memory_allocated during each run minus what was allocated when it started "
        "(the weights of both models), i.e. activations, gradients, optimizer state and FP8 copies"
        if not cpu
        else "not measured on CPU: PyTorch keeps no peak-allocation counter for CPU tensors, and the process RSS "
        "would mix both runs and the interpreter"
    )
    outlier = _outlier_report(p, quantizers)
    rec = fp8_recipe(p)
    runs = {}
    for key, prec, r, t in (("reference", built.ref_precision, ref, t_ref), ("fp8", built.fp8_precision, f8, t_f8)):
        runs[key] = {
            "label": prec.label,
            "loss": _finite(r.losses),
            "final_loss": r.losses[-1] if math.isfinite(r.losses[-1]) else None,
            "ms_per_step": t["ms_per_step"],
            "peak_memory_bytes": r.peak_memory_bytes,
            "generation": r.generation,
        }
    ratio = t_f8["ms_per_step"] / t_ref["ms_per_step"] if t_ref["ms_per_step"] > 0 else None
    te_meta = _te_metadata_summary(built) if backend == "te" else None
    total_clipped = sum(clipped_per_step) if clipped_per_step is not None else None
    total_underflow = sum(underflow_per_step) if underflow_per_step is not None else None
    clip_steps = [i for i, c in enumerate(clipped_per_step or []) if c]
    timing_note = (
        "CPU timings: FP8 is emulated in software and BF16 is not native on most CPUs either, so this ratio "
        "says nothing about GPU speed (and other load on the machine moves it); on an FP8 GPU with Transformer "
        "Engine the same ratio is the real speedup"
        if cpu
        else (
            "GPU timings with plain PyTorch: FP8 is emulated, not run on FP8 tensor cores"
            if backend == "torch-cuda"
            else "GPU timings with Transformer Engine FP8 kernels"
        )
    )

    return {
        "summary": _summary(p, runs, ratio, timing_note, total_clipped, total_underflow, clip_steps, outlier, mem_note),
        "tables": _tables(p, runs, grad_err, quantizers, mem_note, timing_kind),
        "backend": backend,
        "emulated": backend != "te",
        "recipe": {
            "kind": rec.kind,
            "fp8_format": rec.fp8_format,
            "margin": rec.margin,
            "amax_history_len": rec.amax_history_len,
            "amax_compute_algo": rec.amax_compute_algo,
            "formats": {r: rec.format_for(r) for r in ("input", "weight", "grad_output")},
            "te_recipe": repr(built.te_recipe) if built.te_recipe is not None else None,
        },
        "model": {
            "vocab": p.vocab,
            "seq": p.seq,
            "d_model": p.d_model,
            "n_layers": p.n_layers,
            "n_heads": p.n_heads,
            "ffn": p.ffn,
            "parameters": sum(x.numel() for x in built.reference.parameters()),
            "fp8_layers": [n for n, _ in built.reference.gemm_layers()],
        },
        "steps": p.steps,
        "runs": runs,
        "grad_rel_error_step0": grad_err,
        "quantizers": quantizers,
        "clipping": {
            "clipped_per_step": clipped_per_step,
            "underflow_per_step": underflow_per_step,
            "total_clipped": total_clipped,
            "total_underflow": total_underflow,
            "steps_with_clipping": clip_steps,
            "note": None
            if clipped_per_step is not None
            else "Transformer Engine does not count clipped values; run the cpu backend for counts",
        },
        "outlier": outlier,
        "timing": {
            "kind": timing_kind,
            "unit": "ms",
            "fp8_over_reference": ratio,
            "note": timing_note,
        },
        "memory": {"unit": "bytes", "measured": not cpu, "note": mem_note},
        "te_metadata": te_meta,
    }


def _te_metadata_summary(built: Built) -> dict:
    """Final FP8 state of each te.Linear, as TE holds it (scales and amax history rows)."""
    layers, reason = {}, built.te_trace.get("__error__")
    if "__error__" in built.te_trace:
        return {"available": False, "reason": reason, "layers": {}}
    for name, mod in built.fp8.gemm_layers():
        meta = getattr(mod, "fp8_meta", None)
        if not meta or "scaling_fwd" not in meta:
            reason = "this recipe keeps no delayed-scaling fp8_meta (TE computes scales per tensor or per block)"
            continue
        entry = {}
        try:
            for direction in ("scaling_fwd", "scaling_bwd"):
                s = meta.get(direction)
                if s is not None:
                    entry[direction] = {
                        "scale": [float(v) for v in s.scale.flatten()[:4]],
                        "amax_history_newest": [float(v) for v in s.amax_history[-1].flatten()[:4]],
                        "amax_history_len": int(s.amax_history.shape[0]),
                    }
        except Exception as exc:  # TE internals differ between versions
            reason = f"could not read TE fp8_meta: {type(exc).__name__}: {exc}"
            continue
        layers[name] = entry
    return {"available": bool(layers), "reason": None if layers else reason, "layers": layers}


def _summary(p, runs, ratio, timing_note, total_clipped, total_underflow, clip_steps, outlier, mem_note) -> list[dict]:
    ref, f8 = runs["reference"], runs["fp8"]
    gap = None if ref["final_loss"] is None or f8["final_loss"] is None else f8["final_loss"] - ref["final_loss"]
    out = [
        {"label": "FP8 recipe", "value": f"{p.recipe} / {p.fp8_format}"},
        {"label": "Final loss, BF16 reference", "value": ref["final_loss"]},
        {"label": "Final loss, FP8", "value": f8["final_loss"]},
        {"label": "Loss gap (FP8 - BF16)", "value": gap},
        {"label": "Step time, BF16", "value": ref["ms_per_step"], "unit": "ms", "note": timing_note},
        {"label": "Step time, FP8", "value": f8["ms_per_step"], "unit": "ms"},
        {"label": "FP8 / BF16 step time", "value": ratio, "unit": "x"},
        {"label": "Clipped values (all FP8 tensors, all steps)", "value": total_clipped},
        {"label": "Values flushed to zero", "value": total_underflow},
        {"label": "Steps with clipping", "value": len(clip_steps) if total_clipped is not None else None},
    ]
    for name, r in (("BF16", ref), ("FP8", f8)):
        g = r["generation"]
        total = len(g["samples"]) * g["generated_len"]
        out.append(
            {
                "label": f"Greedy generation continues the stride, {name}",
                "value": g["accuracy"],
                "unit": "fraction of tokens",
                "note": f"{round(g['accuracy'] * total)} of {total} generated tokens follow the prompt's stride",
            }
        )
    if ref["peak_memory_bytes"] is None:
        out.append({"label": "Peak memory", "value": None, "note": mem_note})
    else:
        out.append({"label": "Peak memory, BF16", "value": ref["peak_memory_bytes"], "unit": "bytes", "note": mem_note})
        out.append({"label": "Peak memory, FP8", "value": f8["peak_memory_bytes"], "unit": "bytes"})
    if outlier and "clipped_at_spike" in outlier:
        out.append(
            {
                "label": f"Spike at step {outlier['step']}: clipped then / next step",
                "value": f"{outlier['clipped_at_spike']} / {outlier['clipped_after']}",
                "note": f"scale {outlier['scale_at_spike']:.4g} at the spike, {outlier['scale_after']:.4g} after"
                if outlier.get("scale_after") is not None
                else "",
            }
        )
    return out


def _tables(p, runs, grad_err, quantizers, mem_note, timing_kind) -> list[dict]:
    every = max(1, p.steps // 20)
    idx = sorted(set(range(0, p.steps, every)) | {p.steps - 1})
    ref_l, f8_l = runs["reference"]["loss"], runs["fp8"]["loss"]
    tables = [
        {
            "title": "Loss per step" if every == 1 else f"Loss every {every} steps",
            "columns": ["step", "BF16", "FP8"],
            "rows": [[i, ref_l[i], f8_l[i]] for i in idx],
        },
        {
            # Delayed scaling has no amax history at step 0, so it quantizes with scale 1 (as TE does):
            # this error is larger than at later steps, and that is the point worth seeing.
            "title": (
                "Weight-gradient relative error vs BF16 at step 0 (delayed scaling starts from scale 1, "
                "before any amax history exists)"
                if p.recipe == "delayed"
                else "Weight-gradient relative error vs BF16 at step 0"
            ),
            "columns": ["layer", "relative error"],
            "rows": [[g["layer"], g["rel_error"]] for g in grad_err],
        },
        {
            "title": "FP8 tensors",
            "columns": ["tensor", "format", "last amax", "last scale", "clipped (all steps)", "flushed to zero"],
            "rows": [
                [
                    q["name"],
                    q["format"],
                    q["amax"][-1] if q["amax"] else None,
                    q["scale"][-1] if q["scale"] else None,
                    q["total_clipped"],
                    q["total_underflow"],
                ]
                for q in quantizers
            ],
        },
        {
            "title": f"Step time ({timing_kind.upper()}) and memory",
            "columns": ["run", "ms/step", "peak memory (bytes)"],
            "rows": [[r["label"], r["ms_per_step"], r["peak_memory_bytes"]] for r in runs.values()],
        },
        {
            "title": "Greedy generation",
            "columns": ["run", "prompt", "generated", "stride", "correct"],
            "rows": [
                [
                    r["label"],
                    " ".join(map(str, s["prompt"])),
                    " ".join(map(str, s["generated"])),
                    s["stride"],
                    f"{s['correct']}/{r['generation']['generated_len']}",
                ]
                for r in runs.values()
                for s in r["generation"]["samples"]
            ],
        },
    ]
    return tables
