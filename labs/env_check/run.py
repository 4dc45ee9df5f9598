"""env-check: the capability report as a lab job (the lab's first evidence item).

python -m labs run env-check --params '{}' --out /tmp/env-check
"""

from __future__ import annotations

from labs.env_check.params import Params


def answer(backend: str, env: dict, matmul_ok: bool) -> str:
    """The lab's question ("Which backend, FP8 recipes and library versions will my labs run with here?")
    answered in one sentence."""
    v, dev = env["versions"], env["device"]
    libs = f"torch {v['torch']}" + (
        f", Transformer Engine {v['transformer_engine']}" if v["transformer_engine"] else ""
    )
    libs += f", NCCL {v['nccl']}" if v["nccl"] else ""
    if dev["type"] == "cpu":
        where = "on cpu: no CUDA GPU here, so FP8 is emulated in software and collectives run on gloo"
    else:
        where = f"on {backend} on {dev['name']} (compute capability {dev['compute_capability']})"
    ok = [r for r, s in env["fp8_recipes"].items() if s["supported"]]
    no = {r: s["reason"] for r, s in env["fp8_recipes"].items() if not s["supported"]}
    if dev["type"] == "cpu":
        fp8 = "no FP8 recipe runs on Transformer Engine here (every recipe is emulated)"
    elif ok:
        fp8 = f"Transformer Engine runs {', '.join(ok)} FP8" + (
            "; " + "; ".join(f"{r} not: {why}" for r, why in no.items()) if no else ""
        )
    else:
        fp8 = f"no FP8 recipe runs on Transformer Engine here ({next(iter(no.values()), 'unknown')})"
    smoke = "" if matmul_ok else " (but a test matmul on the device returned non-finite values)"
    return f"Labs run {where}, with {libs}; {fp8}{smoke}."


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
        "answer": answer(ctx.backend, env, ok),
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
