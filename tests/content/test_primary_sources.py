"""What the lessons state against the primary sources they cite: NCCL's flat ring against the hierarchical floor
(How to Scale Your Model, GPU chapter; nccl-tests), DeepSeek-V3's accumulator measurement (report §3.3.2),
ring attention's sends, DDP's first iteration, PyTorch's ZeRO-1, and the keys a learner is shown."""

from __future__ import annotations

import re

import pytest

from app.content.practice import grade, make_variant


def _text(s: str) -> str:
    return " ".join(s.split())


def _sections(lesson) -> dict[str, str]:
    return {b.id: _text(b.body) for _, b in lesson.blocks("section")}


def _pauses(lesson) -> dict[str, str]:
    return {p.id: _text(p.prompt + " " + p.answer) for p in lesson.pauses}


@pytest.fixture(scope="module")
def l07(course):
    return course.lesson("precision-by-numbers")


@pytest.fixture(scope="module")
def l08(course):
    return course.lesson("planning-at-scale")


@pytest.fixture(scope="module")
def l09(course):
    return course.lesson("parallelism-measured")


# ---------------------------------------------------------------- NCCL's ring and the hierarchical floor


def test_the_4_node_all_gather_is_priced_as_nccls_ring_beside_the_floor(l09):
    r = l09.values["fab-ag"]
    assert round(r["network_ms"], 1) == 29.1 and round(r["nvlink_ms"], 1) == 25.8 and r["network_bound"]
    assert round(r["hier_network_ms"], 1) == 22.5
    body = _sections(l09)["topo-which-price"]
    assert "29.1 ms at 400 GB/s" in body and "25.8 ms on the in-node hops" in body
    assert "**NCCL's flat ring**" in body and "**hierarchical**" in body and "22.5 ms" in body
    assert "no more than NVLink" not in body and "over ten times" not in body and "8 times too slow" in body


def test_lesson09_says_which_algorithm_each_number_assumes(l09):
    objective = next(o.text for _, b in l09.blocks("objectives") for o in b.items if o.id == "topo-price-ring")
    assert "flat ring" in objective and "hierarchical" in objective
    q = l09.questions["topo-all-gather"]
    for seed in range(6):
        v = make_variant(q, seed)
        assert "(N − 1)/N" in v.hint and "flat ring" in v.explanation and "hierarchical" in v.explanation
        gpus, nodes = v.values["gpus"], v.params["nodes"]
        # NCCL's ring: (N-1)/N of the array through the node's egress
        ms = 1e3 * v.params["size"] * (gpus - 1) / gpus / (v.params["gpus_per_node"] * v.params["nic"])
        assert v.answer == pytest.approx(ms)
        floor = grade(q, v, repr(v.values["hier_ms"]))
        assert floor.status == "incorrect" and "hierarchical" in floor.message, (nodes, floor.message)
    which = l09.questions["topo-which-bound"]
    right = next(o for o in which.body.options if o.correct)
    assert "(N − 1)/N" in right.feedback and "what a node lacks" not in right.feedback


def test_lesson08_prices_fsdp_across_nodes_as_nccls_ring(l08):
    v = l08.values
    assert round(v["gather-wide"]["node_out_gb"], 2) == 13.97 and round(v["fsdp-wide"]["comm_ms"]) == 105
    body = _sections(l08)["fsdp-across-nodes"]
    assert "511/512" in body and "*hierarchical*" in body and "Say which one a number assumes" in body
    # at 2 nodes the hierarchical floor is about half the ring's
    assert "17.5 ms, about half the flat ring's $15/16$, 32.8 ms" in body
    q = l08.questions["fsdp-step-comm"]
    for seed in range(12):
        var = make_variant(q, seed)
        if var.params["gpus"] == 64 and var.params["params"] == 7:
            assert round(var.answer) == 103  # 3 × 63/64 × 14 GB ÷ 400 GB/s, not 91.9 ms
            assert "floor of a hierarchical" in grade(q, var, "91.9").message
            break
    else:
        pytest.fail("no 7B-on-64-GPUs draw in 12 seeds")


# ---------------------------------------------------------------- the accumulator, DeepSeek-V3 and others


def test_deepseeks_measurement_is_described_as_it_was_made(course, l07):
    text = _sections(l07)["narrow-sums"]
    assert "over real tensors" not in text
    assert "GEMM of two random matrices with $K = 4096$" in text and "§3.3.2" in text
    assert "DeepSeek-V3's: its report" in text and "SageAttention2" in text and "22-bit" in text
    deep = _sections(course.lesson("transformer-scaling"))["accumulation-precision"]
    assert "two random matrices" in deep and "SageAttention2" in deep


def test_the_exact_accumulator_key_is_shown_exactly(l07):
    """The key is graded with tolerance 0, so every place that shows it must show all of its digits."""
    q = l07.questions["narrow-accumulator"]
    seen = set()
    for seed in range(30):
        v = make_variant(q, seed)
        key = f"{v.answer:,.12g}"
        assert f"cut down to {key}:" in v.explanation, v.explanation
        assert f"exact {v.values['exact_text']} is cut" in v.explanation
        fb = grade(q, v, "1")
        assert fb.expected_text == key and grade(q, v, fb.expected_text).correct
        seen.add(v.answer)
    assert 1500.625 in seen or any(not float(a).is_integer() for a in seen)


def test_block_scaled_bits_tell_the_scales_apart(l09):
    """DeepSeek's 128×128 weight block is 8 + 32/16,384 = 8.00195 bits; leaving out the scale (8) is a mistake."""
    q = l09.questions["lp-bits-per-element"]
    for seed in range(20):
        v = make_variant(q, seed)
        if v.params["recipe"] == "deepseek-weight":
            assert v.answer == pytest.approx(8.001953125)
            fb = grade(q, v, "8")
            assert fb.status == "incorrect" and "leaves out the scales" in fb.message
            assert grade(q, v, "8.00195").correct
            break
    else:
        pytest.fail("no deepseek-weight draw")


# ---------------------------------------------------------------- context parallelism


def test_ulysses_ratio_with_grouped_query_attention(l09):
    """Ring: N − 1 K/V blocks of h_kv heads; all-to-all: (N − 1)/N of Q, K, V and the output. Ratio
    N·h_kv/(h_q + h_kv): 3.2 for 32 query and 8 K/V heads on 16 ranks, N/2 only with equal heads."""
    n, hq, hkv = 16, 32, 8
    ring = (n - 1) * 2 * hkv
    a2a = (n - 1) / n * 2 * (hq + hkv)
    assert ring / a2a == pytest.approx(n * hkv / (hq + hkv)) == pytest.approx(3.2)
    q = l09.questions["cp-ulysses-limit"]
    b = _text(next(o.feedback for o in q.body.options if o.id == "B"))
    assert "3.2 times" in b and "N/2 only when" in b and "8 times" not in b
    cp = _sections(l09)["cp-ulysses"]
    assert "$N h_{kv} / (h_q + h_{kv})$" in cp


def test_ring_attention_posts_n_minus_1_sends(l09):
    body = _sections(l09)["cp-ring"]
    assert "In each of N steps it posts" not in body and "N − 1 sends later" in body


# ---------------------------------------------------------------- nits the sources settle


def test_network_nits(l09):
    s = _sections(l09)
    assert "within a *scalable unit*" in s["topo-domain"] and "spine" in s["topo-domain"]
    assert "other $k - 1$ nodes" in s["coll-nodes"] and "other $k$ nodes" not in s["coll-nodes"]


def test_ddps_first_iteration_and_the_cores_the_lab_wants(l09):
    body = _sections(l09)["ov-ddp-buckets"]
    assert "first iteration puts every gradient in one bucket" in body
    answer = _pauses(l09)["ov-predict-buckets"]
    assert "the two cores" not in answer and "four cores for the two ranks" in answer


def test_zero1_communication_names_the_implementation(l07, l08):
    pause = _pauses(l07)["zero1-free"]
    assert "as the ZeRO paper builds it" in pause and "ZeroRedundancyOptimizer" in pause and "broadcast" in pause
    plan = l08.questions["tp8-zero1-70b"]
    step = next(st for st in plan.body.steps if st.id == "third-option")
    assert "no extra cost" not in step.explanation and "ZeRO paper's form" in step.explanation


def test_lesson06_cites_megatron_and_the_scaling_guides(course):
    titles = " | ".join(r.title for r in course.lesson("transformer-scaling").header.references)
    for needle in ("Shoeybi et al., Megatron-LM", "Narayanan et al.", "Korthikanti et al.", "Ultra-Scale Playbook",
                   "How to Scale Your Model"):  # fmt: skip
        assert needle in titles


def test_no_issue_numbers_in_lesson_files():
    from tests.content.conftest import LESSONS

    found = [str(p.relative_to(LESSONS)) for p in LESSONS.rglob("*.yaml") if re.search(r"\(issue \d+\)", p.read_text())]
    assert found == []
