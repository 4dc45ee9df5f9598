"""env-check: the capability report as a lab job (the lab's first evidence item).

python -m labs run env-check --params '{}' --out /tmp/env-check
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from labs import env as env_mod
from labs.env_check.params import Params

if TYPE_CHECKING:
    from labs.runtime import LabContext


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
    mig = f" This GPU is a MIG instance: {env_mod.MIG_LIMITS}." if env_mod.is_mig(dev.get("name")) else ""
    return f"Labs run {where}, with {libs}; {fp8}{smoke}.{mig}"


def recipe_rows(env: dict) -> list[list[str]]:
    """The FP8 recipes table: whether each runs, and why not or how (block scaling on Blackwell is emulated)."""
    cc_text = env["device"].get("compute_capability")
    major, _, minor = (cc_text or "").partition(".")
    cc = (int(major), int(minor or 0)) if major.isdigit() else None
    note = env_mod.block_scaling_note(cc, env["versions"].get("transformer_engine"))
    rows = []
    for k, v in env["fp8_recipes"].items():
        how = v["reason"] or (note if k == "block" and v["supported"] and note else "")
        rows.append([k, "yes" if v["supported"] else "no", how or ""])
    return rows


def process_table(torch_threads: int) -> dict:
    """What this job's process was given by the executor that started it (app/executors/labproc.py lab_env): its
    CPU threads and the GPUs it may see. A cpu job on a GPU host shows CUDA_VISIBLE_DEVICES empty (no GPU visible)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    return {
        "title": "This job's process",
        "columns": ["setting", "value"],
        "rows": [
            ["torch CPU threads", str(torch_threads)],
            ["OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "not set")],
            ["CUDA_VISIBLE_DEVICES", "not set" if cvd is None else (cvd or "empty: no GPU visible")],
        ],
    }


def run(params: Params, ctx: LabContext) -> dict:
    ctx.progress(0.2, "detecting device and libraries")
    import torch

    # A tiny real matmul proves the chosen device works, not only that it is listed.
    device = ctx.device
    a = torch.randn(64, 64, device=device)
    ok = bool(torch.isfinite(a @ a).all())
    ctx.progress(0.8, "smoke-tested a matmul on " + device)
    env = ctx.environment
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
            process_table(torch.get_num_threads()),
            {
                "title": "FP8 recipes",
                "columns": ["recipe", "supported", "why not, or how"],
                "rows": recipe_rows(env),
            },
        ],
        "smoke_test": {"device": device, "matmul_ok": ok},
        "available_backends": ctx.available_backends,
    }
