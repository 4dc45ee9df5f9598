"""env-check: the capability report as a lab job (the lab's first evidence item).

python -m labs run env-check --params '{}' --out /tmp/env-check
"""

from __future__ import annotations

from labs.env_check.params import Params


def run(params: Params, ctx) -> dict:
    ctx.progress(0.2, "detecting device and libraries")
    import torch

    # A tiny real matmul proves the chosen device works, not only that it is listed.
    device = "cuda" if ctx.backend in ("te", "torch-cuda") else "cpu"
    a = torch.randn(64, 64, device=device)
    ok = bool(torch.isfinite(a @ a).all())
    ctx.progress(0.8, "smoke-tested a matmul on " + device)
    env = ctx.environment
    recipes = env["fp8_recipes"]
    return {
        "summary": [
            {"label": "Device", "value": env["device"]["name"]},
            {"label": "Backend a lab would use", "value": ctx.backend},
            {"label": "Compute capability", "value": env["device"].get("compute_capability") or "n/a (no GPU)"},
        ],
        "tables": [
            {
                "title": "Library versions",
                "columns": ["library", "version"],
                "rows": [[k, v or "not present"] for k, v in env["versions"].items()],
            },
            {
                "title": "FP8 recipes",
                "columns": ["recipe", "supported", "why not"],
                "rows": [[k, "yes" if v["supported"] else "no", v["reason"] or ""] for k, v in recipes.items()],
            },
        ],
        "smoke_test": {"device": device, "matmul_ok": ok},
        "available_backends": ctx.available_backends,
    }
