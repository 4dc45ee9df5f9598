"""The "your own run" box reads the learner's actual run, for runs of each kind: a delayed, a current and a block
FP8 recipe at a spike and a run without one; a TP sweep predicted at its own shape and at another; collectives on
emulated nodes and on one; each lab of lesson 09. Without a run it says plainly that there is none.

Every expected sentence is built from the run's own result.json here, so a box that fell back on the worked
example's figures (a delayed-scaling story for a current-scaling run) fails."""

from __future__ import annotations

import html
import json
import re

import pytest

from app.core.models import User
from app.services.jobs import lifecycle as jobs
from labs.api import byte_size, number, percent
from tests.app import labruns
from tests.app.reporting import LOCAL

DEEP = "/lessons/transformer-scaling/deep-dives"
L09 = "/lessons/parallelism-measured"
FP8 = {**labruns.TINY["fp8-step"], "steps": 6, "outlier_step": 3, "outlier_scale": 50.0}


def run(lab: str, params: dict) -> dict:
    """A real CPU run of `lab` (cached per parameters for the session)."""
    return json.loads((labruns.run(lab, json.dumps(params)) / "result.json").read_text())


def job_with(db, owner, lab: str, result: dict):
    """A succeeded job holding `result`, finished as the worker finishes one."""
    job = jobs.create_job(db, owner=owner, lab=lab, params=result["params"], backend="cpu", host=LOCAL)
    assert jobs.claim_next(db, worker_id="test", lease_s=60).id == job.id
    jobs.finish(db, job_id=job.id, worker_id="test", ok=True, result=result, bundle_dir=None)
    db.refresh(job)
    return job


def aside(page: str, lab: str) -> str:
    m = re.search(rf'<aside class="your-run[^"]*" id="your-run-{lab}".*?</aside>', page, re.S)
    assert m, lab
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"\s+", " ", m.group(0)))).replace("  ", " ")


@pytest.fixture
def ann(client, db):
    client.register("ann@example.org")
    return db.query(User).filter_by(email="ann@example.org").one()


# ---------------------------------------------------------------- fp8-step: the recipe that ran tells the story


def test_a_delayed_spike_is_told_as_the_history_catching_up(client, db, ann):
    r = run("fp8-step", {**FP8, "recipe": "delayed"})
    job_with(db, ann, "fp8-step", r)
    box = aside(client.get(DEEP).text, "fp8-step")
    spike = r["results"]["outlier"]
    assert "Your latest run: delayed scaling" in box and "6 steps" in box
    assert f"The 50× spike at step 3 met a scale set from earlier steps' amaxes and clipped {number(spike['clipped_at_spike'])} values" in box  # fmt: skip
    assert f"the scale fell {number(spike['scale_at_spike'])} → {number(spike['scale_after'])}" in box
    assert "entered the amax history (a window of 16 steps, taking its max)" in box


@pytest.mark.parametrize("recipe", ["current", "block"])
def test_a_spike_under_another_recipe_is_not_explained_by_a_history(client, db, ann, recipe):
    r = run("fp8-step", {**FP8, "recipe": recipe})
    job_with(db, ann, "fp8-step", r)
    box = aside(client.get(DEEP).text, "fp8-step")
    spike = r["results"]["outlier"]
    assert f"Your latest run: {recipe} scaling" in box
    assert "history" not in box and "the spike's amax" not in box
    words = "took the scale from the spiking tensor itself" if recipe == "current" else "took its scale from its own"
    assert words in box
    assert f"{number(spike['scale_at_spike'])} at the spike and {number(spike['scale_after'])} the step after" in box
    if spike["clipped_at_spike"] == 0:
        assert "clipped nothing" in box


def test_a_run_without_a_spike_says_it_has_none(client, db, ann):
    r = labruns.result("fp8-step")  # the golden run: delayed, no outlier step
    job_with(db, ann, "fp8-step", r)
    box = aside(client.get(DEEP).text, "fp8-step")
    clip = r["results"]["clipping"]
    assert f"It clipped {number(clip['total_clipped'])} values in {len(clip['steps_with_clipping'])} of 4 steps" in box
    assert "It had no spike" in box and "Spike at step 20" in box
    widest = max(layer["k"] for layer in r["results"]["accumulation"]["layers"])
    assert f"widest forward GEMM (K = {widest})" in box and "no promotion happens" in box


# ---------------------------------------------------------------- tp-sweep: the prediction names its shape


def test_a_sweep_predicted_at_its_own_shape_says_so(client, db, ann):
    r = labruns.result("tp-sweep")
    job_with(db, ann, "tp-sweep", r)
    box = aside(client.get(DEEP).text, "tp-sweep")
    rows = r["results"]["degrees"]
    assert "Your sweep of a 16 tokens × 32 wide × ffn 64 block" in box
    assert f"TP 2 {number(rows[1]['step_ms'], 3)} ms" in box
    assert "for your run's own shape" in box and "not your run's shape" not in box


def test_a_sweep_predicted_at_a_gpu_shape_names_that_shape(client, db, ann):
    params = {
        **labruns.TINY["tp-sweep"],
        "predict_tokens": 4096,
        "predict_hidden": 4096,
        "predict_ffn": 14336,
        "predict_node": "H100-SXM",
        "predict_precision": "fp8",
    }
    r = run("tp-sweep", params)
    job_with(db, ann, "tp-sweep", r)
    box = aside(client.get(DEEP).text, "tp-sweep")
    assert "for a 4,096 tokens × 4,096 wide × ffn 14,336 block, not your run's shape" in box
    assert "predicts over-sharding from TP 8 on H100-SXM in FP8" in box
    # the lab's own cards say the same
    labels = [c["label"] for c in r["results"]["summary"]]
    assert any("not this run's shape" in label for label in labels) and not any("same shape" in x for x in labels)
    assert "prediction at 4096x4096x14336 (not this run's shape): TP=8." in r["results"]["answer"]
    assert len(r["results"]["answer"].split()) <= 25


def test_the_measured_crossover_or_its_absence_is_the_runs_own(client, db, ann):
    r = labruns.result("tp-sweep")
    rows = sorted(r["results"]["degrees"], key=lambda d: d["degree"])
    for below in (False, True):  # the same run with its collectives over and then under its GEMMs
        for d in rows[1:]:
            d["collective_ms"] = d["local_gemm_ms"] * (0.5 if below else 2)
        job_with(db, ann, "tp-sweep", r)
        box = aside(client.get(DEEP).text, "tp-sweep")
        if below:
            assert "no measured crossover yet" in box and "A narrow MLP" in box
        else:
            assert "From TP 2 its all-reduces" in box and "a measured crossover" in box


# ---------------------------------------------------------------- lesson 09's labs


def test_collectives_on_emulated_nodes_reads_the_fit_and_the_egress(client, db, ann):
    r = labruns.result("collectives")
    job_with(db, ann, "collectives", r)
    for part in ("collectives-lab", "network-topology"):
        box = aside(client.get(f"{L09}/{part}").text, "collectives")
        fit = r["results"]["sweeps"][0]["collectives"][0]["fit"]
        assert f"all-reduce α = {number(fit['alpha_us'], 3)} µs, B = {number(fit['bandwidth_gbs'], 2)} GB/s" in box
        e = r["results"]["hierarchy"]["egress"]
        assert "Its 2 emulated nodes (2 ranks each, 20 Mbit/s links)" in box
        assert f"each node sent {byte_size(e['measured_hierarchical_bytes'])}" in box


def test_collectives_on_one_node_says_it_has_no_cross_node_numbers(client, db, ann):
    r = labruns.result("collectives")
    r["results"]["topology"] = {**r["results"]["topology"], "mode": "flat", "note": "network namespaces are not permitted here"}  # fmt: skip
    job_with(db, ann, "collectives", r)
    box = aside(client.get(f"{L09}/network-topology").text, "collectives")
    assert "ran as one node (network namespaces are not permitted here)" in box and "no cross-node numbers yet" in box


def test_zero_fsdp_pipeline_and_context_parallel_read_their_runs(client, db, ann):
    z, p, c = (labruns.result(lab) for lab in ("zero-fsdp", "pipeline", "context-parallel"))
    for lab, r in (("zero-fsdp", z), ("pipeline", p), ("context-parallel", c)):
        job_with(db, ann, lab, r)
    box = aside(client.get(f"{L09}/zero-fsdp-lab").text, "zero-fsdp")
    ddp = z["results"]["strategies"]["ddp"]
    assert f"DDP {byte_size(sum(ddp['ranks'][0][k] for k in ('param_bytes', 'grad_bytes', 'optim_bytes')))}" in box
    assert "DDP all-reduced its gradients in 1 call per step" in box and "FSDP2 issued 4 all-gathers per step" in box
    assert "DDP all-reduced" in aside(client.get(f"{L09}/overlap-in-practice").text, "zero-fsdp")
    box = aside(client.get(f"{L09}/pipeline-lab").text, "pipeline")
    g = p["results"]["schedules"]["gpipe"]
    assert f"GPipe {percent(g['bubble_fraction'], 0)} (formula {percent(g['formula_step_fraction'], 0)})" in box
    box = aside(client.get(f"{L09}/context-parallel-lab").text, "context-parallel")
    assert "Your run split 32 tokens over 2 ranks with a causal mask" in box
    assert "contiguous 3×" in box and "zigzag 1×" in box


def test_without_a_run_the_box_says_there_is_none(client, ann):
    for page, lab in (
        (DEEP, "fp8-step"),
        (f"{L09}/collectives-lab", "collectives"),
        (f"{L09}/pipeline-lab", "pipeline"),
    ):
        box = aside(client.get(page).text, lab)
        assert "You have no finished run of the" in box and "nothing here is your own" in box
