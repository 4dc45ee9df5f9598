"""fp8-step's Transformer Engine reading, on CPU: the recorder against a TE-shaped state updated by the same
rules as TE's fused kernel (labs.numerics.delayed), and against the emulated path's own records.

Transformer Engine cannot be installed without CUDA, so `TeShapedManager` stands in for
FP8GlobalStateManager: it holds each module's fp8_meta exactly as TE lays it out (DelayedScalingRecipeState:
scale (n,), amax_history (L, n); forward indices input 0, weight 1; backward grad_output 0) and updates it
column by column with kernel_bulk's rules. The test that runs real TE is marked gpu.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from labs.fp8_step.te import TeScaleRecorder, te_quantizers
from labs.numerics.delayed import DelayedScaling
from labs.numerics.fp8 import Fp8Recipe
from labs.numerics.fp8_linear import TensorQuantizer

ROOT = Path(__file__).resolve().parents[2]


class TeShapedLinear:
    """fp8_meta as TE keeps it for one te.Linear under delayed scaling."""

    def __init__(self, history_len: int):
        def state(n):
            return SimpleNamespace(amax_history=torch.zeros(history_len, n), scale=torch.ones(n))

        self.fp8_meta = {"scaling_fwd": state(3), "scaling_bwd": state(2)}


def te_shaped_manager(layers: list[TeShapedLinear], history_len: int, fmt_fwd: str, fmt_bwd: str):
    """A class with TE's reduce_and_update_fp8_tensors(cls, forward) classmethod, doing kernel_bulk per column."""

    def update(cls, forward: bool = True):
        key, fmt = ("scaling_fwd", fmt_fwd) if forward else ("scaling_bwd", fmt_bwd)
        for layer in layers:
            st = layer.fp8_meta[key]
            for i in range(st.scale.numel()):
                ds = DelayedScaling(fmt, history_len)
                ds.amax_history, ds.scale = st.amax_history[:, i].clone(), st.scale[i].clone()
                ds.update()
                st.amax_history[:, i], st.scale[i] = ds.amax_history, ds.scale

    return type("TeShapedManager", (), {"reduce_and_update_fp8_tensors": classmethod(update)})


# A rise, a spike at step 3, a step whose gradient amax is 0, then calm.
INPUT_AMAX = [10.0, 20.0, 40.0, 400.0, 40.0, 30.0]
GRAD_AMAX = [1.0, 2.0, 2.0, 8.0, 0.0, 1.0]


@pytest.mark.parametrize("history_len", [1, 2, 16])
def test_recorder_reads_the_steps_amax_and_the_scale_in_force_for_every_history_length(history_len):
    layer = TeShapedLinear(history_len)
    manager = te_shaped_manager([layer], history_len, "e4m3", "e5m2")
    recorder = TeScaleRecorder([("blocks.0.mlp.fc_in", layer)])
    after_update = []  # what reading fp8_meta after the step (the old way) would have seen
    with recorder.attached(manager):
        for step, (a, g) in enumerate(zip(INPUT_AMAX, GRAD_AMAX)):
            recorder.step = step
            fwd, bwd = layer.fp8_meta["scaling_fwd"], layer.fp8_meta["scaling_bwd"]
            fwd.amax_history[0, 0] = torch.fmax(fwd.amax_history[0, 0], torch.tensor(a))  # the cast kernels
            fwd.amax_history[0, 1] = 1.0  # the weight
            manager.reduce_and_update_fp8_tensors(forward=True)  # te.autocast exit
            bwd.amax_history[0, 0] = torch.fmax(bwd.amax_history[0, 0], torch.tensor(g))
            manager.reduce_and_update_fp8_tensors(forward=False)  # end of the first module's backward
            after_update.append((float(fwd.amax_history[0, 0]), float(fwd.scale[0])))
        recorder.step = None
        manager.reduce_and_update_fp8_tensors(forward=True)  # outside training: nothing recorded

    rec = Fp8Recipe(kind="delayed", amax_history_len=history_len)
    by_name = {q["name"]: q for q in te_quantizers(recorder, rec, ["blocks.0.mlp.fc_in"])}
    # The emulated path fed the same amaxes records the same numbers: one convention for every backend.
    for role, amaxes in (("input", INPUT_AMAX), ("grad_output", GRAD_AMAX)):
        emulated = TensorQuantizer(role, role, rec)
        for a in amaxes:
            emulated.quantize(torch.tensor([a, 0.0]))
            emulated.end_step()
        q = by_name[f"blocks.0.mlp.fc_in.{role}"]
        assert q["steps"] == list(range(len(amaxes)))
        assert q["amax"] == [h.amax for h in emulated.history()], role
        assert q["scale"] == pytest.approx([h.scale for h in emulated.history()]), role
    q = by_name["blocks.0.mlp.fc_in.input"]
    assert q["scale"][0] == 1.0  # step 0 runs on TE's initial scale
    assert q["amax"][3] * q["scale"][3] > 448  # the spike met the scale set before it: it saturated
    assert q["amax"][4] * q["scale"][4] <= 448  # and the scale had caught up one step later
    # Read after TE's update instead, the amax is gone from row 0 and the scale is already the next step's:
    assert all(row0 == 0.0 for row0, _ in after_update)
    assert after_update[3][1] == pytest.approx(q["scale"][4])


def test_recorder_says_why_when_te_has_no_classmethod_to_wrap():
    recorder = TeScaleRecorder([])
    with recorder.attached(type("OldManager", (), {})):
        pass
    assert recorder.error and "reduce_and_update_fp8_tensors" in recorder.error


@pytest.mark.gpu
def test_te_run_records_the_spike_before_the_scale_catches_up(tmp_path):
    pytest.importorskip("transformer_engine.pytorch", reason="needs Transformer Engine on a CUDA GPU")
    params = {"steps": 8, "batch": 4, "seq": 32, "d_model": 64, "n_heads": 4, "ffn": 128, "vocab": 32}
    params |= {"outlier_step": 5, "outlier_scale": 16.0, "amax_history_len": 1}
    cmd = [sys.executable, "-m", "labs", "run", "fp8-step", "--params", json.dumps(params), "--out", str(tmp_path)]
    proc = subprocess.run(cmd + ["--backend", "te"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if proc.returncode == 2:
        pytest.skip(f"this GPU cannot run the delayed recipe with TE: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((tmp_path / "result.json").read_text())["results"]
    target = next(q for q in res["quantizers"] if q["name"] == res["outlier"]["target"])
    k = params["outlier_step"]
    assert target["scale"][0] == 1.0 and all(a > 0 for a in target["amax"])  # history_len 1: amax still read
    assert target["amax"][k] * target["scale"][k] > target["fp8_max"]
    assert target["amax"][k + 1] * target["scale"][k + 1] <= target["fp8_max"] * 1.0001
    assert "Transformer Engine" in res["answer"]


def test_every_backend_starts_from_the_same_weights_whatever_its_layers_draw():
    # te.Linear draws its weights on CUDA, so the CPU generator's sequence (and with it the embeddings) moves.
    # A layer factory that draws extra random numbers stands in for that; the models must still match.
    from labs.fp8_step.model import GPT, GPTConfig, torch_linear
    from labs.fp8_step.run import initial_state, seeded_models

    cfg = GPTConfig(vocab=16, seq=8, d_model=16, n_layers=1, n_heads=2, ffn=32)

    def drawing_linear(in_features: int, out_features: int, bias: bool, name: str) -> torch.nn.Module:
        torch.randn(97)
        return torch.nn.Linear(in_features, out_features, bias=bias)

    state = initial_state(cfg, seed=5)
    torch.manual_seed(5)
    naive = GPT(cfg, drawing_linear).state_dict()
    assert not torch.equal(naive["tok_emb.weight"], state["tok_emb.weight"])  # seeding alone does not do it
    reference, fp8 = seeded_models(cfg, 5, torch_linear, drawing_linear, "cpu")
    for model in (reference, fp8):
        got = model.state_dict()
        assert set(got) == set(state) and all(torch.equal(got[k], state[k]) for k in state)


def test_te_histories_keep_the_outlier_step_and_its_neighbours_when_thinned():
    recorder = TeScaleRecorder([])
    rows = [(s, torch.tensor(1.0 + (s == 601) * 15), torch.tensor(2.0)) for s in range(1200)]  # 1200 steps
    recorder.rows = {("fc", "input"): rows}
    rec = Fp8Recipe(kind="delayed", fp8_format="hybrid")
    kept = te_quantizers(recorder, rec, ["fc"], outlier_step=601)[0]
    assert len(kept["steps"]) < 1200 and {600, 601, 602} <= set(kept["steps"])
    assert kept["amax"][kept["steps"].index(601)] == 16.0
    assert 601 not in te_quantizers(recorder, rec, ["fc"])[0]["steps"]  # the evenly spread points alone miss it


def test_training_state_is_read_before_the_generation_check():
    from labs.fp8_step.params import Params
    from labs.fp8_step.run import build, train

    p = Params.model_validate({"steps": 2, "batch": 2, "seq": 8, "d_model": 16, "n_heads": 2, "ffn": 32, "vocab": 16})
    built = build(p, "cpu", collect=False)
    order: list[str] = []
    generate = built.fp8.generate
    built.fp8.generate = lambda *a, **k: order.append("generation") or generate(*a, **k)
    built.fp8_precision.snapshot = lambda m: order.append("snapshot") or "state after training"
    record = train(built.fp8, built.fp8_precision, p, built.device)
    assert order == ["snapshot", "generation"] and record.snapshot == "state after training"


def test_timing_note_says_where_fp8_pays_from_the_runs_own_gemm_size():
    from labs.fp8_step.params import Params
    from labs.fp8_step.report import timing_note

    small = Params.model_validate({"d_model": 64, "n_heads": 4, "ffn": 256})
    large = Params.model_validate({"d_model": 4096, "n_heads": 32, "ffn": 16384, "seq": 256, "batch": 32})
    for backend in ("cpu", "torch-cuda", "te"):
        assert "no faster, or slower, than BF16 at this size" in timing_note(backend, small)
        assert "should come out ahead at this size" in timing_note(backend, large)
        assert "real speedup" not in timing_note(backend, small)
