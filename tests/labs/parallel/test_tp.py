"""Tensor-parallel mappings and linears on two real gloo ranks.

Each mapping's docstring claims "forward: X; backward: Y". The test reads that claim and checks it,
so a docstring that drifts from the code fails here instead of misleading a reader.
"""

import re

import pytest
import torch

from labs.parallel import dist as labdist
from labs.parallel import tp

MAPPINGS = ["copy_to_tp_region", "reduce_from_tp_region", "scatter_to_tp_region", "gather_from_tp_region"]
CLAIM = re.compile(r"forward: ([\w -]+?)(?: \(last dim\))?; backward: ([\w -]+?)(?: \(last dim\))?$", re.M)
# Same math, summed in a different order across ranks: fp32 agrees to a few ulps of the largest term.
PARITY_RTOL = 1e-5


def claims(name):
    doc = getattr(tp, name).__doc__
    m = CLAIM.search(doc)
    assert m, f"{name}: docstring has no 'forward: X; backward: Y' line"
    return m.group(1).strip(), m.group(2).strip()


def _tensor(shape, rank, salt):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randn(shape, generator=g)


def _expected(op, per_rank, rank):
    """What `op` should produce on `rank`, given every rank's input."""
    if op == "identity":
        return per_rank[rank]
    if op == "all-reduce":
        return sum(per_rank)
    if op == "all-gather":
        return torch.cat(per_rank, dim=-1)
    if op == "split":
        return per_rank[rank].chunk(len(per_rank), dim=-1)[rank]
    raise AssertionError(f"unknown claim {op!r}")


def _check_claims(rank, world_size, claimed):
    out = {}
    for name, (fwd, bwd) in claimed.items():
        fn = getattr(tp, name)
        xs = [_tensor((3, 4), r, 1) for r in range(world_size)]
        x = xs[rank].clone().requires_grad_(True)
        y = fn(x)
        gs = [_tensor(tuple(y.shape), r, 2) for r in range(world_size)]
        y.backward(gs[rank])
        out[name] = {
            "forward_ok": torch.allclose(y.detach(), _expected(fwd, xs, rank)),
            "backward_ok": torch.allclose(x.grad, _expected(bwd, gs, rank)),
        }
    return out


def test_docstring_claims_hold_on_two_gloo_ranks():
    claimed = {name: claims(name) for name in MAPPINGS}
    # The conjugate pairs read as mirror images.
    assert claimed["copy_to_tp_region"] == tuple(reversed(claimed["reduce_from_tp_region"]))
    assert claimed["scatter_to_tp_region"] == tuple(reversed(claimed["gather_from_tp_region"]))
    per_rank = labdist.launch(_check_claims, 2, args=(claimed,), timeout_s=90)
    for rank, results in enumerate(per_rank):
        for name, ok in results.items():
            assert ok["forward_ok"], f"rank {rank}: {name} forward is not {claimed[name][0]}"
            assert ok["backward_ok"], f"rank {rank}: {name} backward is not {claimed[name][1]}"


def _mlp_parity(rank, world_size):
    torch.manual_seed(0)
    w1, w2 = torch.randn(32, 8) / 8**0.5, torch.randn(8, 32) / 32**0.5  # fc1 (ffn, hidden), fc2 (hidden, ffn)
    x = torch.randn(5, 8)
    # Unsharded reference on every rank (cheap at this size).
    x_ref = x.clone().requires_grad_(True)
    w1_ref, w2_ref = w1.clone().requires_grad_(True), w2.clone().requires_grad_(True)
    y_ref = torch.nn.functional.gelu(x_ref @ w1_ref.t()) @ w2_ref.t()
    y_ref.square().sum().backward()

    fc1 = tp.ColumnParallelLinear(w1, None, name="fc1")
    fc2 = tp.RowParallelLinear(w2, None, name="fc2")
    x_tp = x.clone().requires_grad_(True)
    y = fc2(tp.gelu(fc1(x_tp)))
    y.square().sum().backward()
    r0, r1 = fc1.row_range
    c0, c1 = fc2.col_range
    return {
        "y": (y - y_ref).abs().max().item() / y_ref.abs().max().item(),
        "dx": (x_tp.grad - x_ref.grad).abs().max().item() / x_ref.grad.abs().max().item(),
        "dw1": (fc1.weight_parallel.grad - w1_ref.grad[r0:r1]).abs().max().item() / w1_ref.grad.abs().max().item(),
        "dw2": (fc2.weight_parallel.grad - w2_ref.grad[:, c0:c1]).abs().max().item() / w2_ref.grad.abs().max().item(),
        "mapping": (fc1.mapping(), fc2.mapping()),
    }


def test_column_then_row_parallel_mlp_matches_unsharded_reference():
    out = labdist.launch(_mlp_parity, 2, timeout_s=90)
    for rank, res in enumerate(out):
        for key in ("y", "dx", "dw1", "dw2"):
            assert res[key] <= PARITY_RTOL, f"rank {rank} {key}: relative diff {res[key]:.2e}"
    assert out[1]["mapping"][0]["slice"] == "rows 16:32" and out[1]["mapping"][0]["local_shape"] == [16, 8]
    assert out[1]["mapping"][1]["slice"] == "cols 16:32" and out[1]["mapping"][1]["local_shape"] == [8, 16]


def test_degree_errors_show_the_arithmetic():
    with pytest.raises(ValueError, match=r"ffn\(100\) % degree\(3\) = 1, must be 0"):
        tp.TPDims(degree=3, hidden=64, ffn=100).check()
    assert tp.TPDims(degree=4, hidden=64, ffn=256).check().ffn_parallel == 64


def test_tp1_has_no_collectives_and_tracer_sees_every_gemm():
    tracer = tp.Tracer(0, torch.device("cpu"))
    fc1 = tp.ColumnParallelLinear(torch.randn(16, 4))
    fc2 = tp.RowParallelLinear(torch.randn(4, 16))
    with tp.tracing(tracer):
        tracer.start()
        fc2(tp.gelu(fc1(torch.randn(2, 4, requires_grad=True)))).sum().backward()
    names = [s.name for s in tracer.spans()]
    assert sorted(n for n in names if "GEMM" in n) == sorted(
        f"{layer} {k} GEMM" for layer in ("fc1", "fc2") for k in ("fwd", "dX", "dW")
    )
    assert not any(s.lane == "communication" for s in tracer.spans())


def _fp8_scales(rank, world_size):
    import torch.distributed as dist

    solo = [dist.new_group([r]) for r in range(world_size)][rank]  # a one-rank group: TP=1 on this rank
    g = torch.Generator().manual_seed(3)
    w1, w2 = torch.randn(64, 16, generator=g) / 4, torch.randn(16, 64, generator=g) / 8  # (ffn, hidden), (hidden, ffn)
    w1[0] *= 9.0  # rank 0's shard holds fc1's largest weight; rank 1's own amax is a third of it
    w1[33] *= 3.0
    x = torch.randn(8, 16, generator=g)  # (tokens, hidden)
    out = {}
    for name, group in (("tp1", solo), ("tp2", None)):
        fc1 = tp.ColumnParallelLinear(w1, group, name="fc1", fp8=True)
        fc2 = tp.RowParallelLinear(w2, group, name="fc2", fp8=True)
        x_in = x.clone().requires_grad_(True)
        with tp.recording_scales() as scales:
            y = fc2(tp.gelu(fc1(x_in)))  # (tokens, hidden)
            y.square().sum().backward()
        out[name] = {"scales": list(scales), "y": y.detach(), "dx": x_in.grad}
    return out


def test_emulated_fp8_shards_use_the_scale_tp1_would():
    # Each shard's own amax would give each rank its own scale; TE reduces amax over the TP group, and so does
    # the emulation: every cast at TP=2 uses exactly TP=1's scale, and the outputs differ by sum order only.
    out = labdist.launch(_fp8_scales, 2, timeout_s=90)
    for rank, res in enumerate(out):
        assert [n for n, _ in res["tp2"]["scales"]] == [n for n, _ in res["tp1"]["scales"]]
        assert len(res["tp1"]["scales"]) == 6  # fc1 and fc2: input, weight, grad_output
        # fc2's incoming gradient is 2y, itself a sum in another order: its amax agrees to fp32 reorder, not bits.
        tp1 = [v for _, v in res["tp1"]["scales"]]
        assert [v for _, v in res["tp2"]["scales"]] == pytest.approx(tp1, rel=PARITY_RTOL), f"rank {rank}"
        for key in ("y", "dx"):
            diff = (res["tp2"][key] - res["tp1"][key]).abs().max() / res["tp1"][key].abs().max()
            assert diff <= PARITY_RTOL, f"rank {rank} {key}: relative diff {diff:.2e}"
    assert out[0]["tp2"]["scales"] == out[1]["tp2"]["scales"]  # one reduced amax: bit-equal on both ranks
