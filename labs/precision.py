"""FP32 pinned to IEEE before any lab computes, and what ran written into result.json's environment.

    from labs import precision
    state = precision.pin()          # the launcher (labs/cli.py) and every rank (labs/parallel/dist.py)
    ctx.environment["precision"] = state | {"checked_in": "launcher"}

Why: NVIDIA's PyTorch containers set TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1, and PyTorch reads it once, as the
initial FP32 matmul precision (aten/src/ATen/Context.h: `float32_matmul_precision =
check_env("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE") == true ? HIGH : HIGHEST`, read at pytorch commit d0eaa6b7). There an
FP32 reference runs its GEMMs in TF32 (10 mantissa bits, about 1e-3 relative), and a parity held to 1e-4 reads
OUTSIDE. `torch.set_float32_matmul_precision("highest")` sets the legacy flag and the new per-backend one
(`torch.backends.cuda.matmul.fp32_precision`) together; setting only the new one leaves them mixed, and torch
2.13.0 then raises on reading `allow_tf32` ("mix of the legacy and new APIs"). Both behaviours are run on CPU by
tests/labs/test_precision.py: the flags are host-side state, the same with or without a GPU. cuDNN's TF32
(convolutions) goes off too. NVIDIA_TF32_OVERRIDE is read by cuBLAS and cuDNN themselves and can only turn TF32
off ("0"), so it is recorded, never set.

Labs that want BF16 or FP8 ask for it explicitly (autocast, .to(bfloat16), Transformer Engine); pinning touches
only what runs in FP32.
"""

from __future__ import annotations

import os

ENV_VARS = ("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "NVIDIA_TF32_OVERRIDE")


def state() -> dict:
    """How FP32 matmuls and convolutions run in this process now, and the environment variables that steer it."""
    import torch

    return {
        "fp32_matmul": "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee",
        "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch_allow_tf32_cublas_override": os.environ.get(ENV_VARS[0]),
        "nvidia_tf32_override": os.environ.get(ENV_VARS[1]),
    }


def pin() -> dict:
    """FP32 matmuls in IEEE FP32 (no TF32, no BF16 on CPU's oneDNN) and cuDNN without TF32; returns `state()`."""
    import torch

    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    return state()


def words(environment: dict) -> str:
    """How the run's FP32 matmuls ran, for a parity note: "FP32 matmuls in IEEE FP32 (TF32 off)" or "... in TF32"."""
    rec = environment.get("precision") or {}
    if rec.get("fp32_matmul") == "ieee":
        return "FP32 matmuls in IEEE FP32 (TF32 off)"
    if rec.get("fp32_matmul") == "tf32":
        return "FP32 matmuls in TF32 (10 mantissa bits)"
    return "FP32 matmul precision not recorded"


__all__ = ["ENV_VARS", "pin", "state", "words"]
