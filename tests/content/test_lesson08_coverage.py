"""Content audit for lesson 08: the seed 003 material lessons 06 and 07 left out is here, worked with the
numbers the seed gives, and the three multi-step plans check those numbers step by step."""

import pytest

from app.content import calc
from app.content.practice import grade_step

SECTIONS = {
    "six-n-d": ["6 \\cdot N \\cdot D", "tokens per parameter", "GPU-hours"],
    "model-state": ["ZeRO", "stage 1", "stage 2", "stage 3"],
    "activation-memory": ["selective", "full recomputation", "1F1B", "34"],
    "seventy-b": ["TP = 8", "ZeRO-1"],
    "fsdp-in-a-node": ["all-gather", "reduce-scatter"],
    "fsdp-across-nodes": ["HSDP", "*replicates*", "*rail*", "bytes ÷ the node's egress"],
    "why-hsdp-wins": [
        "Fewer cross-node bytes per pass",
        "re-gathers for every micro-batch",
        "Smaller groups",
        "all-to-all",
    ],
    "context-parallel": ["*Context parallelism*", "Ring attention"],
    "moe-params": ["active", "Expert parallelism"],
    "moe-all-to-all": ["all-to-all", "three times longer"],
    "kv-cache": ["KiB per token"],
    "from-a-budget": ["\\sqrt{C/120}", "GPU-hours"],
    "prefill-decode": ["*Chunked prefill*", "*Disaggregated serving*", "Batching"],
    "sharding-decode": ["tensor parallelism", "64 small all-reduces", "*batch*"],
}


@pytest.fixture(scope="module")
def l08(course):
    lesson = course.lesson("planning-at-scale")
    assert lesson is not None, [str(e) for e in course.errors]
    return lesson


def test_shape(l08):
    assert l08.number == 8 and [p.id for p in l08.parts] == [
        "compute-budget",
        "memory-anatomy",
        "communication",
        "moe",
        "inference",
        "plan",
    ]
    assert 50 <= l08.read_time_minutes <= 100


def test_sections_carry_the_seed_material(l08):
    sections = {b.id: " ".join(b.body.split()) for _, b in l08.blocks("section")}
    for sid, phrases in SECTIONS.items():
        for phrase in phrases:
            assert phrase in sections[sid], (sid, phrase)


def test_seed_numbers(l08):
    v = l08.values
    assert v["budget-1b"]["tokens"] == 20e9 and round(v["budget-1b"]["gpu_hours"]) == 84
    assert round(v["llama3-8b"]["tokens_per_param"]) == 1875
    assert [v[k]["state_gb"] for k in ("ddp-7b", "zero3-7b")] == pytest.approx([112, 14])
    assert v["state-70b"]["state_gb"] == pytest.approx(1120) and v["tp8z1-70b"]["state_gb"] == pytest.approx(48.125)
    assert round(v["fsdp-node"]["comm_ms"]) == 82
    # across 64 nodes a collective costs bytes ÷ the node's 8 × 50 GB/s, not ÷ one NIC; NCCL's flat ring sends
    # 511/512 of the weights out of each node, the hierarchical floor 63/64
    assert v["gather-wide"]["ms"] == pytest.approx(34.93, rel=1e-3) and round(v["fsdp-wide"]["comm_ms"]) == 105
    assert v["gather-wide"]["hier_ms"] == pytest.approx(34.45, rel=1e-3)
    assert round(v["gather-wide"]["per_gpu_nic_ms"]) == 279  # the mistaken price the text names
    assert round(v["fsdp-wide"]["share"]) == 6 and round(v["fsdp-wide-mb"]["share"]) == 24
    # across 2 nodes the hierarchical floor (1/2 of the weights) is about half the flat ring's 15/16
    assert v["gather-2"]["network_ms"] == pytest.approx(32.81, rel=1e-3) and v["gather-2"]["hier_network_ms"] == 17.5
    assert round(v["hsdp"]["ms"]) == 69 and round(v["hsdp"]["fsdp_over_hsdp"], 2) == 1.52
    assert v["hsdp"]["fsdp_hier_over_hsdp"] == 1.5 and round(v["hsdp-4mb"]["fsdp_over_hsdp"], 2) == 6.08
    assert v["moe"]["total"] == pytest.approx(10.37e9, rel=1e-3) and v["moe"]["per_gpu_gb"] == pytest.approx(
        3.83, rel=1e-2
    )
    assert round(v["a2a-node"]["ms"], 1) == 0.8 and round(v["a2a-net"]["ms"]) == 7
    assert round(v["kv-prompt"]["mb"]) == 262 and round(v["prefill"]["ms"]) == 63
    assert round(v["decode"]["ms"], 1) == 7.6 and round(v["pools"]["decode_per_prefill"]) == 2
    assert v["chunk"]["ms"] < v["decode"]["weights_ms"]


def test_three_multi_step_plans(l08):
    plans = {qid: q for qid, q in l08.questions.items() if q.kind == "multi_step"}
    assert set(plans) == {"plan-7b", "fsdp-64-nodes", "tp8-zero1-70b"}
    for qid, q in plans.items():
        kinds = {s.kind for s in q.body.steps}
        assert kinds == {"numeric", "single_choice"}, qid  # numbers and the choice they justify
        assert q.body.summary and "{{" not in q.body.summary
    # Each step's key is calc's number for the seed's scenario.
    assert grade_step(plans["plan-7b"], "ddp-state", "112 GB").correct
    assert grade_step(plans["plan-7b"], "hours-8", f"{calc.train_budget(7e9, gpus=8)['days']:.2f} days").correct
    assert grade_step(plans["fsdp-64-nodes"], "comm-wide", "104.8 ms").correct
    wrong = grade_step(plans["fsdp-64-nodes"], "comm-wide", "838 ms")  # each GPU through its own NIC alone
    assert wrong.status == "incorrect" and "one ring per rail" in wrong.message
    assert grade_step(plans["fsdp-64-nodes"], "share-wide", "5.9%").correct
    assert grade_step(plans["fsdp-64-nodes"], "share-wide-mb", "24%").correct
    assert grade_step(plans["fsdp-64-nodes"], "hsdp-comm", "0.069 s").correct
    assert grade_step(plans["tp8-zero1-70b"], "tp8-zero1", "48.1").correct
    assert grade_step(plans["tp8-zero1-70b"], "third-option", "A").correct


def test_free_responses_have_self_checks(course):
    for lesson in course.lessons.values():
        for qid, q in lesson.questions.items():
            if q.kind == "free_response":
                assert len(q.body.self_check) >= 3, (lesson.id, qid)


def test_what_the_counts_leave_out_and_a_budget_in_dollars(l08):
    """The numbers behind the additions, worked by hand."""
    v = l08.values
    # C = 1e23 = 120·N² → N = √(1e23/120) = 28.87B, D = 577B; 1e23 ÷ (989e12 × 0.4) s = 70,217 GPU-hours, $140k
    assert v["budget-1e23"]["params"] == pytest.approx(28.87e9, rel=1e-3)
    assert v["budget-1e23"]["tokens"] == pytest.approx(20 * v["budget-1e23"]["params"])
    assert (
        v["budget-1e23"]["gpu_hours"] == pytest.approx(70_217, rel=1e-4) and round(v["budget-1e23"]["usd"]) == 140_434
    )
    # attention: 12 × 32 × 4096 × 4096 = 6.44e9 FLOPs per token against 6 × 7e9 = 4.2e10: +15%, causal +7.7%
    assert v["attn-7b"]["full_pct"] == pytest.approx(15.34, rel=1e-3) and v["attn-7b"]["causal_pct"] == pytest.approx(
        7.67, rel=1e-3
    )
    # logits: 4096 × 128,256 values, 2 + 4 bytes each = 3.15 GB (≈ 3.2 GB)
    assert v["logits-128k"]["gb"] == pytest.approx(3.152, rel=1e-3)
    # decode without the 1.05 GB embedding table: (16.06 − 1.05 + 9.44) GB ÷ 3.35 TB/s = 7.30 ms
    assert v["decode-no-emb"]["ms"] == pytest.approx(7.298, rel=1e-3) and v["decode-no-emb"]["ms"] < v["decode"]["ms"]
    # 8 KV heads on 16 GPUs: 16 KiB per token × 8,192 × 32 sequences = 4.29 GB for one head, against all
    # 8 heads (128 KiB per token) for 2 sequences: 2.15 GB
    assert v["kv-tp16"]["gb"] == pytest.approx(2 * v["kv-batch16"]["gb"]) == pytest.approx(4.295, rel=1e-3)
