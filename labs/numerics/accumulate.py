"""A MODEL of limited-precision accumulation in FP8 GEMMs (not a bit-exact description of any GPU).

Why it exists: Transformer Engine runs the forward GEMM of the delayed and current recipes with
Hopper's fast FP8 accumulation (`use_split_accumulator=False`: `_2X_ACC_FPROP = False` in
transformer_engine/pytorch/module/base.py and `fp8_gemm_fprop = MMParams(use_split_accumulator=False)`
for Float8CurrentScaling in transformer_engine/common/recipe/__init__.py, v2.9 and main), while its
backward GEMMs and the block recipe use the split accumulator, which promotes partial sums to FP32.
DeepSeek-V3 measured the fast path's accumulator at about 14 significant bits and promoted partial
sums to FP32 every 128 elements of K to fix it. The emulated linear otherwise sums products exactly
in FP32; this module lets it (and the lesson) see what the narrower accumulator does.

The model, per output element, walking along the reduction dimension K:
- products of `group` consecutive K elements are summed exactly (one MMA step; Hopper's FP8 WGMMA
  takes K = 32 per instruction);
- that group sum is added to a running partial sum that keeps only `mantissa_bits` explicit mantissa
  bits, cut off toward zero by default: Fasi, Higham, Mikaitis and Pranesh ("Numerical behavior of
  NVIDIA tensor cores", PeerJ CS 2021) found tensor cores align addends to the largest and truncate;
  NVIDIA documents no rounding for this accumulator, so `rounding="nearest"` is offered beside it;
- every `promote_every` elements the partial sum is added into an FP32 total and restarted
  (None: never, i.e. fast accumulation over the whole K).
Everything it reports is labelled as modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from labs.numerics.fp8 import round_to_format


@dataclass(frozen=True)
class AccumulatorModel:
    """Settings of the model; the defaults describe TE's fast-accumulation forward GEMM on Hopper."""

    mantissa_bits: int = 13  # 13 explicit + 1 implicit = the ~14 significant bits DeepSeek-V3 reports
    group: int = 32  # K elements per MMA step, summed exactly before they join the partial sum
    promote_every: int | None = None  # None: fast accumulation; 128: DeepSeek-V3's promotion interval
    rounding: str = "truncate"  # "truncate" (toward zero, as measured on tensor cores) or "nearest"

    def __post_init__(self):
        if not 1 <= self.mantissa_bits <= 23:
            raise ValueError(f"mantissa_bits: got {self.mantissa_bits}, expected 1..23 (FP32 keeps 23)")
        if self.group < 1:
            raise ValueError(f"group: got {self.group}, expected >= 1")
        if self.promote_every is not None and (self.promote_every < self.group or self.promote_every % self.group):
            raise ValueError(
                f"promote_every: got {self.promote_every}, expected a multiple of group={self.group} (or None)"
            )
        if self.rounding not in ("truncate", "nearest"):
            raise ValueError(f"rounding: got {self.rounding!r}, expected truncate or nearest")

    def describe(self) -> str:
        every = "never (fast accumulation)" if self.promote_every is None else f"every {self.promote_every} of K"
        return (
            f"MODEL: partial sums keep {self.mantissa_bits + 1} significant bits ({self.rounding}), "
            f"{self.group} products per step summed exactly, promoted to FP32 {every}"
        )


def round_mantissa(x: torch.Tensor, bits: int, rounding: str = "nearest") -> torch.Tensor:
    """FP32 values cut to `bits` explicit mantissa bits: nearest (ties to even) or toward zero; 0, inf, NaN pass."""
    m, e = torch.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1: m carries bits + 1 significant bits after rounding
    scaled = torch.ldexp(m, torch.full_like(e, bits + 1))
    cut = torch.trunc(scaled) if rounding == "truncate" else torch.round(scaled)
    out = torch.ldexp(cut, e - (bits + 1))
    return torch.where(torch.isfinite(x), out, x)


def matmul_limited(a: torch.Tensor, b: torch.Tensor, model: AccumulatorModel) -> torch.Tensor:
    """(M, K) @ (K, N) with the modelled accumulator; inputs are FP32 values (already on the FP8 grid).

    Autocast is switched off inside: the group sums must be FP32, whatever the caller runs under.
    """
    with torch.autocast(device_type=a.device.type, enabled=False):
        return _matmul_limited(a, b, model)


def _matmul_limited(a: torch.Tensor, b: torch.Tensor, model: AccumulatorModel) -> torch.Tensor:
    k = a.shape[-1]
    total = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)  # (M, N) FP32
    partial = torch.zeros_like(total)  # (M, N) the narrow accumulator
    for k0 in range(0, k, model.group):
        step = a[:, k0 : k0 + model.group].float() @ b[k0 : k0 + model.group].float()  # (M, N) one MMA step
        partial = round_mantissa(partial + step, model.mantissa_bits, model.rounding)
        done = k0 + model.group
        if model.promote_every is not None and done % model.promote_every == 0:
            total = total + partial
            partial = torch.zeros_like(partial)
    return total + partial


def rel_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """||x - ref|| / ||ref|| in float64 (0 when ref is all zero)."""
    denom = float(ref.double().norm())
    return float((x.double() - ref.double()).norm()) / denom if denom else 0.0


def demo(ks: tuple[int, ...] = (256, 4096, 16384), m: int = 16, n: int = 16, seed: int = 0) -> list[dict]:
    """Where the accumulator starts to matter: one (m, K) @ (K, n) product of E4M3 values per K.

    Inputs are positive (post-GELU activations times positive weights make the running sum grow
    steadily, the case the lesson's "100 threes" example shows), rounded to E4M3. Each K is summed
    three ways and compared with float64: FP32 (what the emulated linear does), fast accumulation
    (no promotion) and promotion every 128 elements.
    """
    g = torch.Generator().manual_seed(seed)
    fast, promoted = AccumulatorModel(), AccumulatorModel(promote_every=128)
    rows = []
    for k in ks:
        a = round_to_format(torch.rand(m, k, generator=g), "e4m3")  # (m, K) on the E4M3 grid
        b = round_to_format(torch.rand(k, n, generator=g), "e4m3")  # (K, n)
        ref = a.double() @ b.double()  # (m, n) the exact sum
        rows.append(
            {
                "k": k,
                "fp32": rel_error(a @ b, ref),
                "fast": rel_error(matmul_limited(a, b, fast), ref),
                "promote_128": rel_error(matmul_limited(a, b, promoted), ref),
            }
        )
    return rows


__all__ = ["AccumulatorModel", "demo", "matmul_limited", "rel_error", "round_mantissa"]
