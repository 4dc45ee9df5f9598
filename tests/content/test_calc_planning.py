"""Memory, budget, MoE, serving and TP-limit calculations reproduce the numbers worked by hand in the sources.

Each expected value below was computed by hand (seed 003 and the papers it cites) and is written with its
arithmetic, so a changed formula fails here rather than silently moving a lesson's numbers.
"""

import pytest

from app.content import calc

H100 = calc.node_figures("H100-SXM")


def test_node_figures_come_from_the_cost_model():
    from labs.parallel.costmodel import NODES

    assert H100["bf16_flops"] == NODES["H100-SXM"].peak_bf16_flops == 989e12
    assert H100["link_gbs"] == 450 and calc.node_figures("H200")["hbm_tbs"] == 4.8
    with pytest.raises(calc.CalcError, match="node must be one of H100-SXM, H200"):
        calc.node_figures("A100")


def test_tp_threshold_generalises_the_two_way_rule():
    two_way = calc.tp_threshold(989e12, 450e9)["d_min"]
    assert two_way == pytest.approx(2 * 989e12 / 450e9)  # ≈ 4,396, the lesson's D > 2P/W
    assert calc.tp_threshold(node="H100-SXM")["d_min"] == two_way
    eight = calc.tp_threshold(node="H100-SXM", degree=8, mfu=0.5)["d_min"]
    assert eight == pytest.approx(2 * 7 * 989e12 * 0.5 / 450e9)  # ≈ 15,387
    with pytest.raises(calc.CalcError, match="not both"):
        calc.tp_threshold(989e12, 450e9, node="H100-SXM")


def test_tp_mlp_intensity_and_ridge():
    r = calc.tp_mlp_intensity(ffn=14336, degree=8, mfu=1.0, node="H100-SXM")
    assert r["intensity"] == pytest.approx(14336 / 7)  # 2,048 FLOPs per NVLink byte
    assert r["ridge"] == pytest.approx(989e12 / 450e9)  # ≈ 2,198
    assert r["comm_bound"] and not calc.tp_mlp_intensity(14336, 4, node="H100-SXM")["comm_bound"]
    assert calc.tp_mlp_intensity(14336, 8, mfu=0.5, node="H100-SXM")["comm_bound"] is False
    # Llama-3-8B's gated (SwiGLU) MLP: a third matrix, half again the FLOPs for the same all-reduce
    gated = calc.tp_mlp_intensity(14336, 8, node="H100-SXM", gated=True)
    assert gated["intensity"] == pytest.approx(1.5 * 14336 / 7) and not gated["comm_bound"]  # 3,072 > 2,198


def test_tp_layer_collectives():
    plain = calc.tp_layer_collectives(tokens=8192, hidden=4096, degree=8)
    assert (plain["all_reduce_fwd"], plain["all_reduce_bwd"], plain["collectives_per_layer"]) == (2, 2, 4)
    sp = calc.tp_layer_collectives(tokens=8192, hidden=4096, degree=8, sequence_parallel=True)
    assert (sp["all_gather_fwd"], sp["reduce_scatter_fwd"], sp["all_reduce_fwd"]) == (2, 2, 0)
    assert sp["collectives_per_layer"] == 8
    assert sp["bytes_per_gpu_per_layer"] == plain["bytes_per_gpu_per_layer"]  # same bytes, split in two


def test_ring_time_latency_term_grows_with_n():
    r8 = calc.ring_time(1e9, 8, 450e9, 5e-6)
    r1024 = calc.ring_time(1e9, 1024, 450e9, 5e-6)
    assert r8["steps"] == 14 and r8["latency_ms"] == pytest.approx(0.07)
    assert r1024["latency_ms"] == pytest.approx(2046 * 5e-3)  # 10.23 ms of latency alone
    assert r1024["transfer_ms"] / r8["transfer_ms"] == pytest.approx((2046 / 1024) / (14 / 8))  # bytes barely grow


def test_memory_anatomy_matches_the_seed():
    # 7B on 4 GPUs: DDP 112 GB, ZeRO-1 49, ZeRO-2 38.5, ZeRO-3 28 (2 + 2 + 12 bytes per parameter).
    assert [calc.model_state(7e9, dp=4, zero=z)["state_gb"] for z in range(4)] == pytest.approx([112, 49, 38.5, 28])
    # 70B on 64 GPUs: 1.12 TB of state; 140 GB each on 8, 17.5 GB on 64; TP=8 + ZeRO-1 over 8 nodes ≈ 48 GB.
    assert calc.model_state(70e9, dp=8, zero=3)["state_gb"] == pytest.approx(140)
    assert calc.model_state(70e9, dp=64, zero=3)["state_gb"] == pytest.approx(17.5)
    tp8 = calc.model_state(70e9, dp=8, tp=8, zero=1)
    assert tp8["shard_params"] == 8.75e9 and tp8["state_gb"] == pytest.approx(8.75 * 5.5)


def test_activations_follow_korthikanti():
    # GPT-style layer, s=2048, b=1, h=4096, a=32: 34·sbh + 5·a·s²·b bytes per layer.
    sbh = 2048 * 4096
    full = calc.activations(1, 4096, 32, 2048)
    assert full["per_layer_bytes"] == pytest.approx(sbh * (34 + 5 * 32 * 2048 / 4096))
    assert calc.activations(1, 4096, 32, 2048, recompute="selective")["per_layer_bytes"] == 34 * sbh
    assert calc.activations(1, 4096, 32, 2048, recompute="full")["per_layer_bytes"] == 2 * sbh
    tp = calc.activations(1, 4096, 32, 2048, tp=8)["per_layer_bytes"]
    assert tp == pytest.approx(sbh * (10 + 24 / 8 + 5 * 32 * 2048 / (4096 * 8)))
    sp = calc.activations(1, 4096, 32, 2048, tp=8, sequence_parallel=True, recompute="selective")
    assert sp["per_layer_bytes"] == pytest.approx(34 * sbh / 8)
    # 1F1B: the first stage keeps p microbatches of L/p layers = L layers' worth, whatever p is.
    assert calc.activations(32, 4096, 32, 2048, pp=4)["bytes"] == calc.activations(32, 4096, 32, 2048)["bytes"]


def test_compute_optimal_budget():
    one_b = calc.train_budget(1e9, flops=989e12, mfu=0.4)
    assert one_b["tokens"] == 20e9 and one_b["flop"] == pytest.approx(1.2e20)
    assert one_b["gpu_hours"] == pytest.approx(84.3, rel=1e-3)  # "about 84 GPU-hours"
    llama = calc.train_budget(8e9, tokens=15e12)
    assert llama["tokens_per_param"] == 1875 and llama["over_optimal"] == pytest.approx(93.75)


def test_fsdp_in_a_node_and_across_nodes():
    gather = calc.collective_time(14e9, 8, 450e9)
    assert gather["ms"] == pytest.approx(27.2, rel=1e-2) and 3 * gather["ms"] == pytest.approx(81.7, rel=1e-2)
    compute = calc.train_compute(7e9, 16384, 989e12, 0.4)["seconds"]
    assert compute == pytest.approx(1.74, rel=1e-2)
    step = calc.fsdp_step(7e9, 8, 450e9, 16384, 989e12, 0.4)
    assert step["comm_ms"] == pytest.approx(3 * gather["ms"]) and step["share"] == pytest.approx(4.7, rel=1e-2)
    hsdp = calc.collective_time(14e9 / 8, 64, 50e9, "all-reduce")["seconds"]
    assert hsdp == pytest.approx(0.07, rel=2e-2)


def test_cross_node_collectives_use_every_nic_of_a_node():
    # 64 nodes, NCCL's flat ring over 512 GPUs: 511/512 × 14 GB leaves each node through 8 × 50 GB/s = 400 GB/s
    one = calc.network_collective(14e9, nodes=64, gpus_per_node=8, nic_bandwidth=50e9, nvlink_bandwidth=450e9)
    assert one["egress_gbs"] == 400 and one["node_out_gb"] == pytest.approx(13.97, rel=1e-3)
    assert one["ms"] == pytest.approx(34.93, rel=1e-3) and one["ms"] == one["network_ms"] > one["nvlink_ms"]
    # the hierarchical floor beside it: 63/64 × 14 GB, 34.45 ms
    assert one["hier_node_out_gb"] == pytest.approx(13.78, rel=1e-3) and one["hier_ms"] == pytest.approx(
        34.45, rel=1e-3
    )
    assert one["per_gpu_nic_ms"] == pytest.approx(279.5, rel=1e-3)  # 511/512 × 14 GB ÷ 50 GB/s: 8× too high
    wide = calc.fsdp_step(7e9, 512, 450e9, 16384, 989e12, 0.4, nic_bandwidth=50e9)
    assert wide["comm_ms"] == pytest.approx(104.8, rel=1e-3) and wide["share"] == pytest.approx(6.02, rel=1e-2)
    # 7B on 64 GPUs (8 nodes): 3 × 63/64 × 14 GB ÷ 400 GB/s = 103 ms on NCCL's ring; 91.9 ms is the hierarchical
    # floor (3 × 7/8), 827 ms the price through one NIC per GPU
    eight = calc.fsdp_step(7e9, 64, 450e9, 16384, 989e12, 0.4)
    assert eight["comm_ms"] == pytest.approx(103.4, rel=1e-3) and eight["hier_comm_ms"] == pytest.approx(91.9, rel=1e-3)
    assert eight["per_gpu_nic_ms"] == pytest.approx(827, rel=1e-3)
    # 2 nodes of 8: the flat ring sends 15/16 × 14 GB through 400 GB/s, more than NVLink's 15/16 × 14 ÷ 450, and
    # the hierarchical floor, 1/2 × 14 GB, is about half the ring's
    two = calc.network_collective(14e9, nodes=2)
    assert two["ms"] == two["network_ms"] == pytest.approx(32.81, rel=1e-3) and two["nvlink_ms"] == pytest.approx(
        29.17, rel=1e-3
    )
    assert two["hier_network_ms"] == pytest.approx(17.5) and 0.5 < two["hier_network_ms"] / two["network_ms"] < 0.55
    with pytest.raises(calc.CalcError, match="whole number of nodes"):
        calc.fsdp_step(7e9, 12, 450e9, 4096, 989e12, 0.4)
    with pytest.raises(calc.CalcError, match="algorithm must be one of flat-ring, hierarchical"):
        calc.network_collective(14e9, nodes=2, algorithm="tree")


def test_a_4_node_all_gather_on_nccls_ring_is_network_bound():
    """12 GB over 4 nodes of 8: NCCL's flat ring sends 31/32 × 12 GB per node, 29.1 ms at 400 GB/s, against NVLink's
    25.8 ms for the in-node hops; the hierarchical (k−1)/k = 3/4 would be 22.5 ms (How to Scale Your Model, GPU
    chapter; nccl-tests issue 169)."""
    r = calc.network_collective(12e9, 4, 8, 50e9, 450e9, "all-gather")
    assert r["node_out_gb"] == pytest.approx(11.625) and r["network_ms"] == pytest.approx(29.06, rel=1e-3)
    assert r["nvlink_ms"] == pytest.approx(25.83, rel=1e-3) and r["network_bound"] and r["ms"] == r["network_ms"]
    assert r["hier_node_out_gb"] == pytest.approx(9) and r["hier_network_ms"] == pytest.approx(22.5)


def test_hsdp_sends_fewer_bytes_across_nodes_than_fsdp():
    one = calc.hsdp_step(7e9, 8, 64, 50e9)
    # per node and step: FSDP's flat rings 3 × 511/512 × 14 GB = 41.9 GB, HSDP's all-reduce 2 × 63/64 × 14 GB = 27.6 GB
    assert one["fsdp_node_out_gb"] == pytest.approx(41.92, rel=1e-3) and one["node_out_gb"] == pytest.approx(
        27.56, rel=1e-3
    )
    assert one["fsdp_over_hsdp"] == pytest.approx(1.521, rel=1e-3)
    assert one["fsdp_hier_node_out_gb"] == pytest.approx(41.34, rel=1e-3) and one["fsdp_hier_over_hsdp"] == 1.5
    # four micro-batches: FSDP repeats its three collectives per pass, HSDP all-reduces once
    assert calc.hsdp_step(7e9, 8, 64, 50e9, microbatches=4)["fsdp_hier_over_hsdp"] == 6
    assert calc.hsdp_step(7e9, 8, 64, 50e9, microbatches=4)["fsdp_over_hsdp"] == pytest.approx(6.083, rel=1e-3)


def test_moe_problems():
    m = calc.moe_params(layers=24, hidden=2048, ffn=1024, routed=64, shared=2, top_k=6, ep=8)
    assert m["expert"] == 3 * 2048 * 1024 and m["attention"] == 4 * 2048**2
    assert m["total"] == pytest.approx(10.37e9, rel=1e-3) and m["active"] == pytest.approx(1.61e9, rel=1e-2)
    assert m["per_gpu"] == pytest.approx(1.91e9, rel=1e-2) and m["per_gpu_gb"] == pytest.approx(3.83, rel=1e-2)
    a2a = calc.moe_all_to_all(tokens=8192, top_k=6, hidden=2048, gpus=8, bandwidth=450e9)
    assert a2a["dispatch_bytes"] == pytest.approx(201e6, rel=1e-2) and a2a["remote_bytes"] == pytest.approx(
        352e6, rel=1e-2
    )
    assert a2a["ms"] == pytest.approx(0.78, rel=1e-2)
    assert calc.moe_all_to_all(8192, 6, 2048, 8, 50e9)["ms"] == pytest.approx(7.0, rel=1e-2)
    compute = calc.forward_time(m["active_layer"], 8192, 989e12, 0.5)["ms"]
    assert compute == pytest.approx(2.2, rel=2e-2)


def test_inference_numbers():
    kv = calc.kv_cache(layers=32, kv_heads=8, head_dim=128, tokens=2000)
    assert kv["per_token_bytes"] == 131072 and kv["mb"] == pytest.approx(262, rel=1e-2)
    prefill = calc.forward_time(7.5e9, 2000, 989e12, 0.5, layers=32, hidden=4096)
    assert prefill["flop"] == pytest.approx(3.1e13, rel=1e-2) and prefill["ms"] == pytest.approx(63, rel=1e-2)
    cache = calc.kv_cache(32, 8, 128, tokens=2250, batch=32)["bytes"]
    step = calc.decode_step(8.03e9, cache, 3.35e12)
    assert step["ms"] == pytest.approx(7.6, rel=1e-2) and step["weights_ms"] == pytest.approx(4.79, rel=1e-2)
    chunk = calc.forward_time(7.5e9, 32 + 256, 989e12)["ms"]
    assert chunk == pytest.approx(4.4, rel=1e-2) and chunk < step["weights_ms"]
    long = calc.kv_cache(32, 8, 128, tokens=8192, batch=32)["bytes"]
    one, two = calc.decode_step(8.03e9, long, 3.35e12), calc.decode_step(8.03e9, long, 3.35e12, 2, 32, 10e-6)
    assert one["ms"] == pytest.approx(15.1, rel=1e-2) and two["read_ms"] == pytest.approx(7.5, rel=1e-2)
    assert two["comm_ms"] == pytest.approx(0.64)
    pools = calc.serving_pools(prefill["ms"], step["ms"], batch=32, output_tokens=500)
    assert pools["prefill_rps"] == pytest.approx(16, rel=2e-2) and pools["decode_rps"] == pytest.approx(8.4, rel=1e-2)
    assert pools["decode_per_prefill"] == pytest.approx(1.9, rel=2e-2)


def test_the_decode_question_counts_its_gpus_in_words():
    """'on 1 GPU', 'on 8 GPUs': never the hedge 'GPU(s)' in a learner's variant."""
    from app.content.loader import load_lesson_dir
    from app.content.practice import make_variant

    from .conftest import LESSONS

    lesson = load_lesson_dir(LESSONS / "planning-at-scale")[0]
    question = lesson.questions["decode-step-time"]
    seen = set()
    for seed in range(40):
        v = make_variant(question, seed)
        assert "GPU(s)" not in v.prompt + v.explanation
        gpus = v.params["gpus"]
        seen.add(gpus)
        assert (f"on {gpus} GPU " if gpus == 1 else f"on {gpus} GPUs ") in v.prompt
    assert seen == {1, 2, 8}
