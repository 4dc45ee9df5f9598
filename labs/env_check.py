"""env-check: the capability report as a lab job (the lab's first evidence item).

    python -m labs run env-check --params '{}' --out /tmp/env-check
"""

from __future__ import annotations

from labs.params import LabParams

TITLE = "Check my lab environment"
BACKENDS = ("te", "torch-cuda", "cpu")


class Params(LabParams):
    pass


def run(params: Params, ctx) -> dict:
    ctx.progress(0.2, "detecting device and libraries")
    import torch

    # A tiny real matmul proves the chosen device works, not only that it is listed.
    device = "cuda" if ctx.backend in ("te", "torch-cuda") else "cpu"
    a = torch.randn(64, 64, device=device)
    ok = bool(torch.isfinite(a @ a).all())
    ctx.progress(0.8, "smoke-tested a matmul on " + device)
    return {"smoke_test": {"device": device, "matmul_ok": ok}, "available_backends": ctx.available_backends}
