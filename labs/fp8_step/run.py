"""fp8-step: one seeded GPT trained twice, BF16 reference vs an FP8 recipe, with the evidence.

    python -m labs run fp8-step --params '{}' --out /tmp/fp8-step                          # CPU, ~40 s idle
    python -m labs run fp8-step --params '{"outlier_step": 60}' --out /tmp/fp8-spike       # scale lag
    python -m labs run fp8-step --params '{"recipe": "current", "outlier_step": 60}' --out /tmp/fp8-cur
    python -m labs run fp8-step --backend te --params '{"d_model": 768, "n_heads": 12, "ffn": 3072,
        "n_layers": 4, "seq": 256, "batch": 32, "vocab": 96, "steps": 200}' --out /tmp/fp8-h100

Read top to bottom: parameters -> the precisions being compared -> one training loop -> run.
Both runs start from the same weights and see the same batches (arithmetic-stride sequences), so
any difference in loss, gradients or generation comes from the FP8 recipe. On the `cpu` and
`torch-cuda` backends FP8 is emulated by labs.numerics (TE's rules, FP32 products); on `te` the same
model uses te.Linear under te.autocast and the scales are read back from TE's own metadata.

The package around this file: model.py (the GPT and its data), te.py (Transformer Engine glue),
evidence.py (records -> result numbers), report.py (summary, tables and charts for the page).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from labs.fp8_step import evidence, report
from labs.fp8_step.model import GPT, GPTConfig, fp8_linear_factory, stride_batch, torch_linear
from labs.fp8_step.params import TIMED_STEPS, Params, te_alignment
from labs.numerics.accumulate import AccumulatorModel
from labs.numerics.fp8 import Fp8Recipe
from labs.numerics.fp8_linear import fp8_end_step, fp8_frozen, set_fp8_collect
from labs.parallel import timing

if TYPE_CHECKING:
    from labs.runtime import LabContext

# Where the outlier goes: the first MLP's input, a GEMM input after a LayerNorm, like the
# activation outliers seen in real LLMs. One token's whole activation row is multiplied.
OUTLIER_TARGET = "blocks.0.mlp.fc_in"
PROMPT_LEN, GEN_LEN, N_PROMPTS = 8, 16, 4


def model_config(p: Params) -> GPTConfig:
    return GPTConfig(vocab=p.vocab, seq=p.seq, d_model=p.d_model, n_layers=p.n_layers, n_heads=p.n_heads, ffn=p.ffn)


def fp8_recipe(p: Params) -> Fp8Recipe:
    return Fp8Recipe(
        kind=p.recipe,
        fp8_format=p.fp8_format,
        margin=p.margin,
        amax_history_len=p.amax_history_len,
        amax_compute_algo=p.amax_compute_algo,
        delayed_update=p.delayed_update,
    )


def accumulator(p: Params) -> AccumulatorModel | None:
    """The modelled forward accumulator of the emulated run, or None for exact FP32 products."""
    return AccumulatorModel() if p.fprop_accumulation == "fast-model" else None


# --------------------------------------------------------------------------- precisions


@dataclass
class Precision:
    """How one run executes: the same model class and loop, a different numeric policy."""

    key: str  # "reference" | "fp8"
    label: str  # shown on the page
    autocast: Callable[[], Any]  # context manager entered around every forward
    end_step: Callable[[torch.nn.Module], None] = lambda m: None  # after optimizer.step()
    before_step: Callable[[int | None], None] = lambda s: None  # evidence from TE: which step TE's updates belong to
    session: Callable[[], Any] = contextlib.nullcontext  # entered around the whole training run
    pad_to: int = 1  # generation pads windows to this multiple (TE's FP8 GEMM shape rules)
    # Read right after the last training step, before the generation check: TE's forward under te.autocast
    # updates delayed scaling again, so state read later would describe generation, not training.
    snapshot: Callable[[torch.nn.Module], Any] = lambda m: None


def _bf16_autocast(device: str) -> Callable[[], Any]:
    return lambda: torch.autocast(device_type=device, dtype=torch.bfloat16)


@dataclass
class Built:
    reference: GPT
    fp8: GPT
    ref_precision: Precision
    fp8_precision: Precision
    device: str
    te_recipe: Any = None
    te_recorder: Any = None  # labs.fp8_step.te.TeScaleRecorder (te backend, delayed scaling)


def initial_state(cfg: GPTConfig, seed: int) -> dict[str, torch.Tensor]:
    """The starting weights every backend trains from: drawn once, on CPU, from `seed` with plain torch layers.

    Each backend then loads them into its own layers. te.Linear initialises on CUDA from the CUDA generator
    (transformer_engine/pytorch/module/linear.py @ d0067d0 2.20.0.dev0: `device="cuda"` by default, weights
    drawn by `reset_parameters` on that device), so building the model from the seed alone would give the te
    backend other weights, and other embeddings too, than the emulated backends.
    """
    torch.manual_seed(seed)
    return {k: v.detach().clone() for k, v in GPT(cfg, torch_linear).state_dict().items()}


def seeded_models(cfg: GPTConfig, seed: int, make_reference, make_fp8, device: str) -> tuple[GPT, GPT]:
    """The reference and FP8 models, each built with its own layers and loaded with `initial_state`."""
    state = initial_state(cfg, seed)
    models = []
    for make in (make_reference, make_fp8):
        model = GPT(cfg, make).to(device)
        _load_weights(model, state)
        models.append(model)
    return models[0], models[1]


def build(p: Params, backend: str, collect: bool = True) -> Built:
    """Both models from one seeded initialisation, and the precision each runs under."""
    device = "cpu" if backend == "cpu" else "cuda"
    cfg = model_config(p)
    bf16 = _bf16_autocast(device)
    if backend == "te":
        from labs.fp8_step import te

        make = te.te_linear_factory(torch.float32)
        reference, fp8 = seeded_models(cfg, p.seed, make, make, device)
        rec = te.te_recipe_for(p)
        built = Built(
            reference,
            fp8,
            Precision("reference", "BF16 (te.Linear, FP8 off)", bf16),
            Precision("fp8", f"FP8 {p.recipe} (Transformer Engine)", te.fp8_context(rec, bf16), pad_to=te_alignment(p)),
            device,
            te_recipe=rec,
        )
        if p.recipe == "delayed":
            # Only delayed scaling keeps an amax history/scale per module in fp8_meta; the other
            # recipes compute scales inside TE's quantizers, per tensor or per block.
            recorder = te.TeScaleRecorder(fp8.gemm_layers())
            built.te_recorder = recorder
            built.fp8_precision.before_step = lambda s: setattr(recorder, "step", s)
            built.fp8_precision.session = lambda: te.delayed_session(recorder, p.delayed_update)
        built.fp8_precision.snapshot = lambda m: te.te_metadata_summary(m, built.te_recorder, p.recipe)
        return built
    make_fp8 = fp8_linear_factory(fp8_recipe(p), collect=collect, accumulator=accumulator(p))
    reference, fp8 = seeded_models(cfg, p.seed, torch_linear, make_fp8, device)
    where = "CPU" if device == "cpu" else "GPU, no FP8 kernels"
    return Built(
        reference,
        fp8,
        Precision("reference", "BF16 (torch.autocast)", bf16),
        Precision("fp8", f"FP8 {p.recipe}, emulated ({where})", bf16, end_step=fp8_end_step),
        device,
    )


def _load_weights(dst: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    # TE modules carry an `_extra_state` entry (their FP8 metadata); weights must match exactly.
    missing, unexpected = dst.load_state_dict(state, strict=False)
    bad = [k for k in missing + unexpected if not k.endswith("_extra_state")]
    if bad:
        raise RuntimeError(f"models differ in parameters: {bad[:5]}")


# --------------------------------------------------------------------------- the loop


@dataclass
class RunRecord:
    losses: list[float]
    step_ms: list[float]
    grads_step0: dict[str, torch.Tensor]
    peak_memory_bytes: int | None
    generation: dict
    snapshot: Any = None  # what Precision.snapshot read after training (TE's FP8 metadata on the te backend)


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
    model: GPT,
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
    losses: list[float] = []
    grads0: dict[str, torch.Tensor] = {}
    report_every = max(1, p.steps // 20)
    model.train()
    with prec.session():
        for step in range(p.steps):
            prec.before_step(step)
            loss_value = one_step(model, prec, p, step, opt, gen, target, device)
            if step == 0 and collect:
                grads0 = _weight_grads(model)
            losses.append(loss_value)
            if step % report_every == 0:
                progress((step + 1) / p.steps, f"{prec.label}: step {step + 1}/{p.steps}, loss {loss_value:.3f}")
        prec.before_step(None)  # nothing after the last step belongs to training
    peak = int(torch.cuda.max_memory_allocated()) - base if cuda else None
    snapshot = prec.snapshot(model)
    generation = generation_check(model, prec, p, device)
    step_ms = timed_steps(model, prec, p, device, opt, gen)
    return RunRecord(losses, step_ms, grads0, peak, generation, snapshot)


def timed_steps(model, prec: Precision, p: Params, device: str, opt, gen) -> list[float]:
    """The step time: `TIMED_STEPS` more steps of the trained model after its evidence is read, each alone between
    two events, with nothing recorded. Training records evidence inside its steps (the emulation counts clipped and
    flushed values; on te the delayed-scaling recorder clones TE's amax and scale tensors at every update, which a
    BF16 step never pays), so its steps are not the ones timed. The batch is drawn and moved before each step's
    first event; the loss is not read back."""
    set_fp8_collect(model, False)
    batch: list = []

    def before() -> None:
        x, y = stride_batch(gen, p.batch, p.seq, p.vocab)  # (B, T) each
        batch[:] = [x.to(device), y.to(device)]

    def step() -> None:
        x, y = batch
        with prec.autocast():
            logits = model(x)  # (B, T, vocab)
        loss = F.cross_entropy(logits.float().view(-1, p.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        prec.end_step(model)

    kind = "cuda" if device == "cuda" else "cpu"
    return timing.time_steps(
        step, steps=TIMED_STEPS, align=before, sync=timing.sync_for(kind), new_event=timing.events_for(kind)
    )


def one_step(model, prec: Precision, p: Params, step: int, opt, gen, target, device: str) -> float:
    """Forward, backward, optimizer step and FP8 scale update; returns the loss (a host sync on GPU)."""
    x, y = stride_batch(gen, p.batch, p.seq, p.vocab)  # (B, T) each
    x, y = x.to(device), y.to(device)
    for group in opt.param_groups:
        group["lr"] = lr_at(step, p)
    handle = None
    if p.outlier_step == step:
        handle = target.register_forward_pre_hook(_outlier_hook(p.outlier_scale))
    with prec.autocast():
        logits = model(x)  # (B, T, vocab)
    loss = F.cross_entropy(logits.float().view(-1, p.vocab), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()  # AdamW leaves .grad as it is: the caller copies step 0's gradients afterwards
    prec.end_step(model)
    loss_value = loss.item()
    if handle is not None:
        handle.remove()
    return loss_value


def _weight_grads(model: GPT) -> dict[str, torch.Tensor]:
    """A CPU copy of every FP8-eligible layer's weight gradient, kept to compare the two runs."""
    out = {}
    for name, layer in model.gemm_layers():
        grad = layer.get_parameter("weight").grad
        if grad is None:
            raise RuntimeError(f"{name}: no weight gradient after the backward")
        out[name] = grad.detach().float().cpu().clone()
    return out


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


# --------------------------------------------------------------------------- run


def run(params: Params, ctx: LabContext) -> dict:
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
        {"layer": name, "rel_error": evidence.rel_err(f8.grads_step0[name], ref.grads_step0[name])}
        for name in ref.grads_step0
    ]
    rec = fp8_recipe(p)
    te_meta = None
    if backend == "te":
        from labs.fp8_step import te

        layers = [n for n, _ in built.fp8.gemm_layers()]
        quantizers = (
            te.te_quantizers(built.te_recorder, rec, layers, p.outlier_step) if built.te_recorder is not None else []
        )
        te_meta = f8.snapshot  # read after training, before the generation check ran TE's forward again
    else:
        quantizers = evidence.emulated_quantizers(built.fp8, p)
    accumulation = None
    if backend != "te":  # on te the hardware's own accumulator ran; the model is for the emulation
        x, _ = stride_batch(torch.Generator().manual_seed(p.seed + 11), p.batch, p.seq, p.vocab)  # (B, T)
        accumulation = evidence.accumulation_evidence(
            built.fp8, x.to(built.device), p.fprop_accumulation, built.fp8_precision.autocast
        )
    clipped_per_step = evidence.per_step_totals(quantizers, p.steps, "clipped")
    underflow_per_step = evidence.per_step_totals(quantizers, p.steps, "underflow")
    focus = evidence.focus_quantizer(p, quantizers, OUTLIER_TARGET)
    report.charts(ctx, p, ref.losses, f8.losses, clipped_per_step, focus)

    cpu = built.device == "cpu"
    timing_kind = "cpu" if cpu else "cuda"
    t_ref, t_f8 = evidence.timing(ref.step_ms), evidence.timing(f8.step_ms)
    mem_note = report.memory_note(cpu)
    outlier = evidence.outlier_report(p, quantizers, OUTLIER_TARGET)
    runs = {}
    for key, prec, r, t in (("reference", built.ref_precision, ref, t_ref), ("fp8", built.fp8_precision, f8, t_f8)):
        runs[key] = {
            "label": prec.label,
            "loss": evidence.finite(r.losses),
            "final_loss": r.losses[-1] if math.isfinite(r.losses[-1]) else None,
            "ms_per_step": t["ms_per_step"],
            "peak_memory_bytes": r.peak_memory_bytes,
            "generation": r.generation,
        }
    ratio = t_f8["ms_per_step"] / t_ref["ms_per_step"] if t_ref["ms_per_step"] > 0 else None
    total_clipped = sum(clipped_per_step) if clipped_per_step is not None else None
    total_underflow = sum(underflow_per_step) if underflow_per_step is not None else None
    clip_steps = [i for i, c in enumerate(clipped_per_step or []) if c]
    timing_note = report.timing_note(backend, p)

    return {
        "answer": report.answer(p, backend, runs, outlier, total_clipped, clip_steps, quantizers),
        "summary": report.summary(
            p, runs, ratio, timing_note, total_clipped, total_underflow, clip_steps, outlier, mem_note
        ),
        "tables": report.tables(p, runs, grad_err, quantizers, timing_kind, accumulation),
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
            "delayed_update": p.delayed_update,
            "fprop_accumulation": p.fprop_accumulation,
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
        "accumulation": accumulation,
    }
