"""Time on the wire and on the timeline: overlap, collectives, pipeline bubbles, the TP limit.

Hardware numbers come from labs/parallel/costmodel.py's node table and every bus factor, hop count and node
egress from labs/parallel/comm.py (both torch-free, through labs.api), so the lesson, the interactive tools and
the labs' predictions quote one H100/H200 figure and one communication model.
"""

from __future__ import annotations

from labs.api import NODES, comm

from ._base import CalcError, at_least, fraction, positive, whole


def node_figures(node: str = "H100-SXM") -> dict:
    """The datasheet figures of one node in labs/parallel/costmodel.py, per GPU, in the units the lesson quotes."""
    spec = NODES.get(node)
    if spec is None:
        raise CalcError(f"node must be one of {', '.join(NODES)}, got {node!r}")
    return {
        "gpus": spec.gpus,
        "bf16_flops": spec.peak_bf16_flops,
        "fp8_flops": spec.peak_fp8_flops,
        "bf16_tflops": spec.peak_bf16_flops / 1e12,
        "fp8_tflops": spec.peak_fp8_flops / 1e12,
        "hbm_bytes_per_s": spec.hbm_bytes_per_s,
        "hbm_tbs": spec.hbm_bytes_per_s / 1e12,
        "link_bytes_per_s": spec.link_bytes_per_s,
        "link_gbs": spec.link_bytes_per_s / 1e9,
        "alpha_us": spec.collective_latency_s * 1e6,
        "hbm_over_link": spec.hbm_bytes_per_s / spec.link_bytes_per_s,
    }


def _peak(node: str | None, flops: float | None, bandwidth: float | None, precision: str) -> tuple[float, float]:
    """(FLOP/s, link bytes/s): given explicitly, or read from a node of labs/parallel/costmodel.py."""
    if node is not None:
        if flops is not None or bandwidth is not None:
            raise CalcError("give either node or flops and bandwidth, not both")
        if precision not in ("bf16", "fp8"):
            raise CalcError(f"precision must be bf16 or fp8, got {precision!r}")
        fig = node_figures(node)
        return fig[f"{precision}_flops"], fig["link_bytes_per_s"]
    if flops is None or bandwidth is None:
        raise CalcError("give node, or both flops and bandwidth")
    return positive("flops", flops), positive("bandwidth", bandwidth)


def step_time(compute: float, comm: float, overlap: float) -> dict:
    """Step time when `overlap` of the communication hides under compute: compute + comm − overlap."""
    for name, v in (("compute", compute), ("comm", comm), ("overlap", overlap)):
        if not isinstance(v, (int, float)) or v < 0:
            raise CalcError(f"{name} must be a number >= 0, got {v!r}")
    if overlap > min(compute, comm):
        raise CalcError(f"overlap ({overlap}) cannot exceed min(compute, comm) = {min(compute, comm)}")
    exposed = comm - overlap
    total = compute + exposed
    return {
        "compute": compute,
        "comm": comm,
        "total": total,
        "exposed": exposed,
        "hidden": overlap,
        "overlap_ratio": overlap / comm if comm else 1.0,
        "serial": compute + comm,
    }


def _ring_kind(kind: str) -> str:
    if kind not in comm.RING_COLLECTIVES:
        raise CalcError(f"kind must be one of {sorted(comm.RING_COLLECTIVES)}, got {kind!r}")
    return kind


def ring_allreduce(size: float, gpus: int) -> dict:
    """Bytes each GPU sends in a ring all-reduce of `size`: reduce-scatter + all-gather = 2(N−1)/N · size."""
    size = positive("size", size)
    gpus = whole("gpus", gpus, least=2)
    return {
        "factor": comm.bus_factor("all-reduce", gpus),
        "per_gpu": comm.bus_bytes("all-reduce", gpus, size),
        "half": comm.bus_bytes("reduce-scatter", gpus, size),  # one of its two phases
        "gpus": gpus,
    }


def ring_time(size: float, gpus: int, bandwidth: float, alpha: float) -> dict:
    """Seconds for a ring all-reduce: 2(N−1) steps, each paying latency α and moving size/N bytes.

    t = 2(N−1)·α + 2(N−1)/N · size / bandwidth. The bytes per GPU level off near 2× the array; the
    latency term grows linearly with N, which is why large rings switch to trees or hierarchies.
    """
    size, bandwidth = positive("size", size), positive("bandwidth", bandwidth)
    gpus = whole("gpus", gpus, least=2)
    alpha = at_least("alpha", alpha)
    t = comm.alpha_beta("all-reduce", gpus, size, alpha_s=alpha, bandwidth=bandwidth)
    return {
        "steps": comm.hops("all-reduce", gpus),
        "latency_s": t.latency_s,
        "transfer_s": t.transfer_s,
        "seconds": t.seconds,
        "latency_ms": 1e3 * t.latency_s,
        "transfer_ms": 1e3 * t.transfer_s,
        "ms": 1e3 * t.seconds,
        "latency_share": t.latency_s / t.seconds,
    }


def collective_time(size: float, gpus: int, bandwidth: float, kind: str = "all-gather") -> dict:
    """Seconds for one collective: (N−1)/N · size through each GPU, twice that for an all-reduce."""
    size = positive("size", size)
    bandwidth = positive("bandwidth", bandwidth)
    gpus = whole("gpus", gpus, least=1)
    moved = comm.bus_bytes(_ring_kind(kind), gpus, size)
    return {"moved": moved, "seconds": moved / bandwidth, "ms": 1e3 * moved / bandwidth}


def _node_out(size: float, kind: str, ranks: int, nodes: int) -> dict[str, float]:
    """Bytes one node sends for one collective, under each cross-node algorithm of labs/parallel/comm.py."""
    return {
        "flat-ring": comm.flat_ring_node_egress(size, kind, ranks, nodes),
        "hierarchical": comm.hierarchical_node_egress(size, kind, nodes),
    }


def network_collective(
    size: float,
    nodes: int,
    gpus_per_node: int = 8,
    nic_bandwidth: float = 50e9,
    nvlink_bandwidth: float = 450e9,
    kind: str = "all-gather",
    algorithm: str = "flat-ring",
) -> dict:
    """Seconds for one collective over `nodes` nodes of `gpus_per_node` GPUs, the array sharded over all of them.

    A rail-optimised cluster gives every GPU its own NIC, and NCCL runs one ring per rail (one per NIC index),
    so all of a node's NICs carry the collective at once and the network time is the bytes that leave a node
    over its egress, gpus_per_node × nic_bandwidth (How to Scale Your Model, GPU chapter, cross-node
    collectives: bytes ÷ node egress; NVIDIA/nccl#1250 measures the per-node NICs adding up). How many bytes
    leave a node depends on the algorithm (labs/parallel/comm.py), and both are returned side by side:

        flat-ring      NCCL's ring over all N GPUs, a node's GPUs adjacent: bus_factor(N) of the array
                       leaves every node, (N−1)/N for an all-gather (`flat_*`)
        hierarchical   in-node phase, then one ring per rail across the k nodes: bus_factor(k) of the
                       array, (k−1)/k for an all-gather; the floor an optimal algorithm reaches (`hier_*`)

    `algorithm` names the one `node_out_gb`, `network_ms`, `nvlink_ms` and `ms` price. The NVLink hops inside the
    node run at the same time, carrying bus_factor(N) of the array per GPU in the flat ring and bus_factor(g) in
    the hierarchical in-node phase; the slower of the two paths sets the time. `per_gpu_nic_ms` is the mistaken
    price: each GPU's bus_factor(N) share through its own NIC alone.
    """
    size = positive("size", size)
    nodes = whole("nodes", nodes, least=2)
    per_node = whole("gpus_per_node", gpus_per_node)
    nic, nvlink = positive("nic_bandwidth", nic_bandwidth), positive("nvlink_bandwidth", nvlink_bandwidth)
    if algorithm not in comm.CROSS_NODE:
        raise CalcError(f"algorithm must be one of {', '.join(comm.CROSS_NODE)}, got {algorithm!r}")
    kind, gpus = _ring_kind(kind), nodes * per_node
    egress = comm.node_egress_bandwidth(per_node, nic)
    out = _node_out(size, kind, gpus, nodes)
    per_gpu = comm.bus_bytes(kind, gpus, size)
    # Inside the node: the flat ring's hops carry each GPU's (N−1)/N; the hierarchical in-node phase (g−1)/g.
    in_node = {"flat-ring": per_gpu / nvlink, "hierarchical": comm.bus_bytes(kind, per_node, size) / nvlink}
    network_s, nvlink_s = out[algorithm] / egress, in_node[algorithm]
    seconds = max(network_s, nvlink_s)
    return {
        "node_out_gb": out[algorithm] / 1e9,
        "egress_gbs": egress / 1e9,
        "network_ms": 1e3 * network_s,
        "nvlink_ms": 1e3 * nvlink_s,
        "seconds": seconds,
        "ms": 1e3 * seconds,
        "network_bound": network_s >= nvlink_s,
        "flat_node_out_gb": out["flat-ring"] / 1e9,
        "flat_network_ms": 1e3 * out["flat-ring"] / egress,
        "flat_ms": 1e3 * max(out["flat-ring"] / egress, in_node["flat-ring"]),
        "hier_node_out_gb": out["hierarchical"] / 1e9,
        "hier_network_ms": 1e3 * out["hierarchical"] / egress,
        "hier_ms": 1e3 * max(out["hierarchical"] / egress, in_node["hierarchical"]),
        "per_gpu_nic_ms": 1e3 * per_gpu / nic,
    }


def fsdp_step(
    params: float,
    gpus: int,
    bandwidth: float,
    tokens: float,
    flops: float,
    mfu: float,
    collectives: int = 3,
    bytes_per_param: float = 2,
    gpus_per_node: int = 8,
    nic_bandwidth: float = 50e9,
) -> dict:
    """FSDP's communication per pass against its compute, per GPU.

    Each pass all-gathers the 16-bit weights for forward and again for backward and reduce-scatters the
    gradients: `collectives` transfers of (N−1)/N of the weights each. `bandwidth` is NVLink's, per GPU.
    Up to `gpus_per_node` GPUs the collectives stay in one node; beyond it they cross the network, priced
    by network_collective as NCCL's flat ring (bytes ÷ the node's egress, gpus_per_node × nic_bandwidth),
    with the hierarchical floor beside it (`hier_one_ms`, `hier_comm_ms`). Compute is 6·N·tokens per GPU.
    """
    size = positive("params", params) * positive("bytes_per_param", bytes_per_param)
    gpus, per_node = whole("gpus", gpus), whole("gpus_per_node", gpus_per_node)
    count = whole("collectives", collectives)
    if gpus <= per_node:
        one = collective_time(size, gpus, bandwidth)
        ms, node_out, per_gpu_nic = one["ms"], 0.0, one["ms"]
        hier_ms, hier_out = ms, 0.0
    else:
        if gpus % per_node:
            raise CalcError(f"gpus ({gpus}) must be a whole number of nodes of gpus_per_node ({per_node})")
        net = network_collective(size, gpus // per_node, per_node, nic_bandwidth, bandwidth, algorithm="flat-ring")
        ms, node_out, per_gpu_nic = net["ms"], net["node_out_gb"], net["per_gpu_nic_ms"]
        hier_ms, hier_out = net["hier_ms"], net["hier_node_out_gb"]
    comm_s = count * ms / 1e3
    compute = 6 * params * positive("tokens", tokens) / (positive("flops", flops) * fraction("mfu", mfu))
    return {
        "size_gb": size / 1e9,
        "moved_gb": comm.bus_bytes("all-gather", gpus, size) / 1e9,
        "one_ms": ms,
        "comm_ms": 1e3 * comm_s,
        "compute_s": compute,
        "share": 100 * comm_s / compute,
        "cross_node": gpus > per_node,
        "node_out_gb": count * node_out,  # bytes leaving each node per pass, all collectives
        "hier_one_ms": hier_ms,  # the hierarchical floor beside NCCL's flat ring, for comparison
        "hier_comm_ms": count * hier_ms,
        "hier_node_out_gb": count * hier_out,
        "egress_gbs": comm.node_egress_bandwidth(per_node, nic_bandwidth) / 1e9,
        "per_gpu_nic_ms": count * per_gpu_nic,  # the mistaken price, for feedback
    }


def hsdp_step(
    params: float,
    gpus_per_node: int,
    nodes: int,
    bandwidth: float,
    bytes_per_param: float = 2,
    microbatches: int = 1,
) -> dict:
    """Hybrid sharding: state sharded over a node's GPUs, replicated over nodes. Only the gradient
    all-reduce crosses nodes, and each GPU takes part with its own 1/gpus_per_node shard through its own
    NIC (`bandwidth`), in the ring of its rail: 2·(nodes−1)/nodes of the whole gradient leaves each node,
    over all its NICs at once. That replica all-reduce is the hierarchical case by construction.

    Against FSDP over all N = nodes × gpus_per_node GPUs, whose collectives NCCL runs as flat rings: two
    gathers and a reduce-scatter send 3·(N−1)/N of the weights out of every node in every pass
    (`fsdp_node_out_gb` per step of `microbatches` passes; a hierarchical FSDP would send 3·(nodes−1)/nodes,
    `fsdp_hier_node_out_gb`). FSDP frees the gathered weights after each pass and gathers them again, while
    HSDP can hold its cross-node all-reduce for the last pass (FSDP2's set_requires_all_reduce:
    torch/distributed/fsdp/_fully_shard/_fully_shard.py, torch 2.13, reduce-scatter without the all-reduce).
    """
    per_node, nodes = whole("gpus_per_node", gpus_per_node), whole("nodes", nodes, least=2)
    whole_size = positive("params", params) * positive("bytes_per_param", bytes_per_param)
    shard = whole_size / per_node
    r = collective_time(shard, nodes, bandwidth, "all-reduce")
    passes = whole("microbatches", microbatches)
    # HSDP's replica all-reduce is one ring per rail across the nodes: the hierarchical case by construction.
    hsdp_out = comm.hierarchical_node_egress(whole_size, "all-reduce", nodes)
    gather, scatter = (
        _node_out(whole_size, kind, per_node * nodes, nodes) for kind in ("all-gather", "reduce-scatter")
    )
    fsdp = {alg: passes * (2 * gather[alg] + scatter[alg]) for alg in comm.CROSS_NODE}
    fsdp_out = fsdp["flat-ring"]
    return {
        "shard_gb": shard / 1e9,
        "moved_gb": r["moved"] / 1e9,
        "ms": r["ms"],
        "seconds": r["seconds"],
        "node_out_gb": hsdp_out / 1e9,
        "fsdp_node_out_gb": fsdp_out / 1e9,
        "fsdp_over_hsdp": fsdp_out / hsdp_out,
        "fsdp_hier_node_out_gb": fsdp["hierarchical"] / 1e9,
        "fsdp_hier_over_hsdp": fsdp["hierarchical"] / hsdp_out,
    }


def pipeline_bubble(stages: int, microbatches: int) -> dict:
    """Bubble of a GPipe/1F1B pipeline in both of its definitions.

    `fraction`: idle share of the whole step, (p − 1) / (m + p − 1). `overhead`: idle time over the ideal
    compute time, (p − 1) / m, as Narayanan et al. 2021 and the Ultra-Scale Playbook write it.
    """
    stages = whole("stages", stages)
    microbatches = whole("microbatches", microbatches)
    frac = (stages - 1) / (microbatches + stages - 1)
    overhead = (stages - 1) / microbatches
    return {"fraction": frac, "percent": 100 * frac, "overhead": overhead, "overhead_percent": 100 * overhead}


def tp_threshold(
    flops: float | None = None,
    bandwidth: float | None = None,
    degree: int = 2,
    mfu: float = 1.0,
    node: str | None = None,
    precision: str = "bf16",
) -> dict:
    """Inner dimension D above which an N-way row-parallel matmul computes longer than it all-reduces.

    (B×D)·(D×F) split along D over N ranks: each computes 2·B·D·F / N FLOPs at P·MFU, then all-reduces its
    B×F partial sum in 16-bit, sending 2(N−1)/N · 2·B·F bytes at W. B and F cancel:
    D > 2(N−1)·P·MFU / W. For N = 2 at full peak this is the lesson's D > 2P/W.
    """
    p, w = _peak(node, flops, bandwidth, precision)
    degree = whole("degree", degree, least=2)
    mfu = fraction("mfu", mfu)
    ring = float(comm.bus_ratio("all-reduce", degree) * degree)  # N x 2(N−1)/N = 2(N−1), exactly
    return {"d_min": ring * p * mfu / w, "flops": p, "bandwidth": w, "degree": degree, "mfu": mfu}


def tp_mlp_intensity(
    ffn: float,
    degree: int,
    mfu: float = 1.0,
    node: str | None = None,
    precision: str = "bf16",
    flops: float | None = None,
    bandwidth: float | None = None,
    gated: bool = False,
) -> dict:
    """Communication intensity of a tensor-parallel MLP block (column-parallel fc1, row-parallel fc2).

    Per rank and forward pass: fc1 and fc2 compute 4·T·H·F/N FLOPs, and fc2's output (T×H, 16-bit) is
    all-reduced, sending 2(N−1)/N · 2·T·H bytes. Their ratio, F/(N−1) FLOPs per byte on the link, does not
    depend on the tokens T or the width H. The link keeps up while that exceeds the ridge P·MFU/W; below
    it, communication takes longer than the GEMMs it follows (the 2·P/W threshold generalised to N ranks).
    `gated`: a gated MLP (SwiGLU, as in Llama) has a third, gate matrix of fc1's shape: 6·T·H·F/N FLOPs for
    the same all-reduce, 1.5·F/(N−1) FLOPs per byte.
    """
    ffn = positive("ffn", ffn)
    degree = whole("degree", degree, least=2)
    mfu = fraction("mfu", mfu)
    p, w = _peak(node, flops, bandwidth, precision)
    half_ring = float(comm.bus_ratio("all-reduce", degree) * degree / 2)  # N x (N−1)/N = N−1, exactly
    intensity = (1.5 if gated else 1.0) * ffn / half_ring
    ridge = p * mfu / w
    return {
        "intensity": intensity,
        "ridge": ridge,
        "comm_bound": intensity < ridge,
        "comm_over_compute": ridge / intensity,
        "ffn_min": half_ring * ridge,
        "attainable_tflops": min(p * mfu, intensity * w) / 1e12,
        "peak_tflops": p * mfu / 1e12,
    }


def tp_layer_collectives(tokens: float, hidden: float, degree: int, sequence_parallel: bool = False) -> dict:
    """The collectives one tensor-parallel Transformer layer runs (attention block + MLP block).

    Each block pairs a column-parallel linear (input replicated, output sharded: no collective) with a
    row-parallel one (input sharded, output partial sums: one all-reduce). Forward: 2 all-reduces per
    layer; backward: 2 more, at the blocks' inputs. With sequence parallelism each all-reduce becomes a
    reduce-scatter after the block plus an all-gather before the next one: the same bytes, split in two.
    """
    tokens, hidden = positive("tokens", tokens), positive("hidden", hidden)
    degree = whole("degree", degree, least=2)
    size = tokens * hidden * 2  # one (T, H) activation in 16-bit
    per_all_reduce = comm.bus_bytes("all-reduce", degree, size)
    out = {
        "activation_bytes": size,
        "bytes_per_gpu_per_layer": 4 * per_all_reduce,  # 2 forward + 2 backward all-reduce volumes
        "all_reduce_fwd": 0 if sequence_parallel else 2,
        "all_reduce_bwd": 0 if sequence_parallel else 2,
        "all_gather_fwd": 2 if sequence_parallel else 0,
        "reduce_scatter_fwd": 2 if sequence_parallel else 0,
        "all_gather_bwd": 2 if sequence_parallel else 0,
        "reduce_scatter_bwd": 2 if sequence_parallel else 0,
    }
    out["collectives_per_layer"] = sum(v for k, v in out.items() if k.endswith(("_fwd", "_bwd")))
    return out
