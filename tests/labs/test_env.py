"""Capability detection and the up-front refusal of an FP8 recipe a GPU cannot run.

Transformer Engine cannot be installed on a CPU machine, so the two generations of its support API are
stood in for by objects with exactly the signatures read in TE's source: TE >= 2.9 exports
`is_fp8_available(return_reason=False)` etc. from transformer_engine.pytorch (quantization.py); TE 2.0-2.8
has `transformer_engine.pytorch.fp8.check_fp8_support()` etc. returning (bool, reason), the block check from 2.3.
"""

from __future__ import annotations

from types import SimpleNamespace

from labs import catalog, cli, env
from labs.resources import Capacity

HOPPER_MX = "Device compute capability 10.0 or higher required for MXFP8 execution."


def _recipes(*names):
    return SimpleNamespace(**{n: object for n in names})


ALL_RECIPES = _recipes("DelayedScaling", "Float8CurrentScaling", "Float8BlockScaling", "MXFP8BlockScaling")


def test_new_api_is_asked_with_return_reason():
    asked = []

    def check(ok, why):
        def fn(return_reason=False):
            asked.append(return_reason)
            return (ok, why) if return_reason else ok

        return fn

    te = SimpleNamespace(
        is_fp8_available=check(True, ""),
        is_fp8_block_scaling_available=check(True, ""),
        is_mxfp8_available=check(False, HOPPER_MX),
        fp8=None,  # 2.9+: fp8.py is a deprecated stub transformer_engine.pytorch no longer imports
    )
    out = env.te_support(te, ALL_RECIPES, "2.9.0")
    assert out["delayed"] == {"supported": True, "reason": None}
    assert out["block"]["supported"] is True
    assert out["mxfp8"] == {"supported": False, "reason": HOPPER_MX}
    assert asked and all(asked)


def test_old_api_is_the_fallback_and_a_missing_recipe_class_is_named():
    legacy = SimpleNamespace(check_fp8_support=lambda: (True, ""), check_mxfp8_support=lambda: (False, HOPPER_MX))
    te = SimpleNamespace(fp8=legacy)  # TE 2.0: no is_* functions, no block check, no block recipe class
    out = env.te_support(te, _recipes("DelayedScaling", "MXFP8BlockScaling"), "2.0.0")
    assert out["delayed"]["supported"] is True
    assert out["mxfp8"] == {"supported": False, "reason": HOPPER_MX}
    assert "Float8BlockScaling" in out["block"]["reason"] and "2.3" in out["block"]["reason"]
    assert "Float8CurrentScaling" in out["current"]["reason"]


def test_without_te_the_reason_names_cuda_for_block_scaling():
    out = env._recipe_support((9, 0), "12.4", None, "Transformer Engine is not importable (ImportError: x)")
    assert out["block"]["reason"].startswith("needs CUDA 12.9+")
    assert out["mxfp8"]["reason"] == "needs compute capability 10.0+, this GPU is 9.0"
    assert not any(v["supported"] for v in out.values())


def test_an_unsupported_recipe_is_refused_naming_the_recipe_the_gpu_and_why():
    report = {
        "device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "count": 1},
        "fp8_recipes": {
            "delayed": {"supported": True, "reason": None},
            "current": {"supported": True, "reason": None},
            "block": {"supported": True, "reason": None},
            "mxfp8": {"supported": False, "reason": HOPPER_MX},
        },
    }
    capacity = cli.local_capacity(report)
    assert capacity.fp8_unsupported == {"mxfp8": HOPPER_MX} and capacity.gpu_name == "NVIDIA H100 80GB HBM3"
    spec = catalog.get("fp8-step")
    params = spec.params.model_validate({"recipe": "mxfp8", "steps": 4, "seq": 32})
    (problem,) = spec.problems(params, "te", capacity)
    assert problem.field == "recipe"
    msg = problem.message
    assert msg.startswith("recipe: mxfp8 cannot run on this GPU (NVIDIA H100 80GB HBM3)")
    assert "compute capability 10.0" in msg and "delayed, current, block" in msg and "\n" not in msg
    # The same recipe emulated on torch-cuda, and a supported one on te, go ahead.
    assert spec.problems(params, "torch-cuda", capacity) == []
    ok = spec.params.model_validate({"recipe": "delayed", "steps": 4})
    assert spec.problems(ok, "te", capacity) == []
    assert env.unsupported_recipes({"device": {"type": "cpu"}, "fp8_recipes": {}}) == {}


def test_capacity_round_trips_through_json_like_the_app_hands_it_down():
    import json
    from dataclasses import asdict

    cap = Capacity.local(gpus=1, gpu_name="H100", fp8_unsupported={"mxfp8": HOPPER_MX})
    assert Capacity(**json.loads(json.dumps(asdict(cap)))) == cap


def test_labels_say_what_ran():
    assert "FP8 numerics are emulated" in env.honesty_label("torch-cuda", "H100", collectives=False)
    assert "NCCL" not in env.honesty_label("te", "H100", collectives=False)
    assert env.honesty_label("te", "H100").endswith("Transformer Engine FP8 kernels and NCCL.")
    assert "gloo" not in env.honesty_label("cpu", None, collectives=False)
    e = env.environment_for("torch-cuda", env.probe())
    assert e["emulated"] is False and e["fp8_numerics"] == "emulated"
    assert env.environment_for("cpu", env.probe())["emulated"] is True


def test_env_check_answers_in_one_sentence_for_a_gpu_host():
    from labs.env_check.run import answer

    env = {
        "device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0"},
        "versions": {
            "torch": "2.11.0",
            "transformer_engine": "2.9.0",
            "nccl": "2.27.3",
            "python": "3.12",
            "cuda": "13.0",
        },
        "fp8_recipes": {
            "delayed": {"supported": True, "reason": None},
            "current": {"supported": True, "reason": None},
            "block": {"supported": True, "reason": None},
            "mxfp8": {"supported": False, "reason": HOPPER_MX},
        },
    }
    assert answer("te", env, True) == (
        "Labs run on te on NVIDIA H100 80GB HBM3 (compute capability 9.0), with torch 2.11.0, Transformer Engine "
        "2.9.0, NCCL 2.27.3; Transformer Engine runs delayed, current, block FP8; mxfp8 not: " + HOPPER_MX + "."
    )


def test_block_scaling_is_worded_by_te_version_on_blackwell():
    assert env.block_scaling_note((9, 0), "2.8.0") is None  # Hopper: block scaling runs natively
    assert env.block_scaling_note(None, "2.9.0") is None
    old = env.block_scaling_note((10, 0), "2.8.0+cu129")
    assert "Hopper only (2.3-2.8)" in old and "from 2.9" in old
    assert "emulated through MXFP8" in env.block_scaling_note((10, 0), "2.9.0")
    assert "emulated through MXFP8" in env.block_scaling_note((10, 0), "2.20.0.dev0+d0067d0")
    # without TE, a Blackwell GPU's block reason says what TE would do there
    out = env._recipe_support((10, 0), "12.9", None, "Transformer Engine is not importable (ImportError: x)")
    assert (
        out["block"]["reason"].startswith("Transformer Engine is not importable") and "MXFP8" in out["block"]["reason"]
    )


def test_te_2_8s_hopper_only_refusal_on_blackwell_names_2_9():
    hopper_only = "FP8 block scaled GEMM requires Hopper and CUDA >= 12.9."  # fp8.py @ v2.8
    legacy = SimpleNamespace(
        check_fp8_support=lambda: (True, ""),
        check_mxfp8_support=lambda: (True, ""),
        check_fp8_block_scaling_support=lambda: (False, hopper_only),
    )
    out = env._recipe_support((10, 0), "12.9", SimpleNamespace(fp8=legacy), None, "2.8.0")
    assert out["block"]["reason"].startswith(hopper_only) and "from 2.9" in out["block"]["reason"]
    assert out["mxfp8"]["supported"] is True


def test_a_mig_instance_is_named_with_what_it_lacks():
    from labs.env_check.run import answer, recipe_rows

    name = "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    assert env.is_mig(name) and not env.is_mig("NVIDIA H100 80GB HBM3") and not env.is_mig(None)
    assert "CUPTI" in env.empty_profile_reason(name) and "whole GPU" in env.empty_profile_reason(name)
    assert "MIG" not in env.empty_profile_reason("NVIDIA H200")
    report = {
        "device": {"type": "cuda", "name": name, "compute_capability": "9.0"},
        "versions": {"torch": "2.13.0", "transformer_engine": "2.9.0", "nccl": "2.27.3"},
        "fp8_recipes": {"delayed": {"supported": True, "reason": None}},
    }
    said = answer("te", report, True)
    assert "MIG instance" in said and "NVLink or CUDA IPC" in said and "CUPTI" in said
    blackwell = {**report, "device": {"type": "cuda", "name": "NVIDIA B200", "compute_capability": "10.0"}}
    blackwell["fp8_recipes"] = {"block": {"supported": True, "reason": None}}
    assert "emulated through MXFP8" in recipe_rows(blackwell)[0][2]
