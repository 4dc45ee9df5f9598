"""Transformer Engine's own delayed-scaling update against the course's emulation (labs.numerics.delayed), on a GPU:
a zero step (nothing rolls, the scale is kept), a spike (the window max holds it for the history's length) and a
margin (the scale halves per unit). The CPU tests check the emulation against TE's kernel as read in its source
(tests/labs/test_fp8_step_te.py, tests/labs/test_numerics*.py); this one runs the kernel itself. Part of
`scripts/gpu-check.sh --quick`; it skips on a machine without CUDA or Transformer Engine.

TE calls used, checked in transformer_engine/pytorch @ v2.9 and main 2.20.0.dev0: `te.Linear(in, out, bias=,
params_dtype=, device=)` (module/linear.py); `te.autocast(enabled=, recipe=)` from 2.9, `te.fp8_autocast(enabled=,
fp8_recipe=)` before (quantization.py); the forward update runs at the outermost autocast's exit
(FP8GlobalStateManager.autocast_exit -> reduce_and_update_fp8_tensors(forward=True)); fp8_meta["scaling_fwd"] holds
`scale` (n,) with input at index 0 and weight at 1 (pytorch/csrc/common.h GEMM1_INPUT, GEMM1_WEIGHT);
DelayedScaling(fp8_format=, amax_history_len=, amax_compute_algo=, margin=) in common/recipe/__init__.py.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

HISTORY = 4
# Per case, the input's size each step (0: an all-zero input, whose amax is 0) and the margin.
CASES = {
    "zero step": ([1.0, 0.0, 1.0, 1.0], 0),
    "spike": ([1.0, 1.0, 64.0, 1.0, 1.0, 1.0, 1.0, 1.0], 0),  # held for HISTORY steps, then released
    "margin": ([1.0, 2.0, 1.0], 1),
}


def _autocast(te, recipe):
    if hasattr(te, "autocast"):
        return te.autocast(enabled=True, recipe=recipe)
    return te.fp8_autocast(enabled=True, fp8_recipe=recipe)


@pytest.mark.parametrize("case", sorted(CASES))
def test_te_fused_update_matches_the_emulation(case):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: Transformer Engine's fused amax-and-scale kernel")
    te = pytest.importorskip("transformer_engine.pytorch", reason="needs Transformer Engine on a CUDA GPU")
    from transformer_engine.common import recipe as te_recipe

    from labs import env
    from labs.numerics.delayed import DelayedScaling

    delayed = env.probe()["fp8_recipes"]["delayed"]
    if not delayed["supported"]:
        pytest.skip(f"this GPU cannot run the delayed recipe with Transformer Engine: {delayed['reason']}")
    sizes, margin = CASES[case]
    recipe = te_recipe.DelayedScaling(
        fp8_format=te_recipe.Format.HYBRID, amax_history_len=HISTORY, amax_compute_algo="max", margin=margin
    )
    torch.manual_seed(0)
    lin = te.Linear(64, 64, bias=False, params_dtype=torch.float32, device="cuda")
    # HYBRID: forward tensors (input, weight) in E4M3; the emulation follows the fused kernel (TE's default)
    emulated = {i: DelayedScaling("e4m3", HISTORY, "max", margin, update="fused") for i in (0, 1)}
    seen = []
    for step, size in enumerate(sizes):
        x = torch.randn(32, 64, device="cuda") * size
        with _autocast(te, recipe):
            lin(x)
        emulated[0].record(x.abs().max().float().cpu())
        emulated[1].record(lin.weight.detach().abs().max().float().cpu())
        for em in emulated.values():
            em.update()
        scale = lin.fp8_meta["scaling_fwd"].scale.float().cpu()
        for i, em in emulated.items():
            got, want = float(scale[i]), float(em.scale)
            seen.append((step, i, got, want))
            assert got == pytest.approx(want, rel=1e-6), f"{case}: step {step}, tensor {i}: {seen}"
    if case == "zero step":
        assert seen[2][2] == seen[0][2]  # the zero step kept the input's scale
    if case == "spike":
        input_scales = [got for step, i, got, _ in seen if i == 0]
        assert input_scales[2] < input_scales[1] / 16  # the spike's scale
        assert input_scales[2 + HISTORY - 1] == input_scales[2]  # held while the spike is in the window
        assert input_scales[2 + HISTORY] > input_scales[2] * 16  # released once it left
