"""zero-fsdp's page: the answer, what each rank held and moved per strategy against lesson 08's anatomy, the
loss parity, and a timeline per strategy. Nothing here measures; it lays out what run.py measured."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labs.result_common import SummaryItem, Table, table_number
from labs.trace.chrome import chrome_trace_json
from labs.trace.svgplot import svg_timeline
from labs.trace.timeline import Span
from labs.words import byte_size, number, percent
from labs.zero_fsdp.params import LOSS_TOLERANCE, Params

if TYPE_CHECKING:
    from labs.runtime import LabContext

NAMES = {
    "ddp": "DDP",
    "zero1": "ZeRO-1",
    "fsdp2": "FSDP2",
    "fsdp2-no-reshard": "FSDP2, no reshard",
}


# What each strategy's predicted traffic is, in the ZeRO paper's terms (Ψ: the weights' bytes; labs/zero_fsdp/anatomy.py).
TRAFFIC = {
    "ddp": "one all-reduce of the gradients, 2Ψ(N−1)/N",
    "zero1": "torch's ZeRO-1 adds a broadcast of every updated weight to DDP's all-reduce",
    "fsdp2": "all-gather in forward and in backward, reduce-scatter: 3Ψ(N−1)/N",
    "fsdp2-no-reshard": "weights kept from forward to backward: one all-gather fewer, 2Ψ(N−1)/N",
}


def strategy_artifacts(ctx: LabContext, params: Params, strategy: str, spans: list[Span], device: str) -> dict:
    """The timeline SVG of one timed step (CPU: the last; GPU: all of them) and the Chrome trace of all."""
    svg, trace = f"timeline_{strategy}.svg", f"trace_{strategy}.json"
    last = max((s.args.get("step", 0) for s in spans), default=0)
    drawn = [s for s in spans if s.args.get("step", 0) == last]
    lo = min((s.start_ms for s in drawn), default=0.0)
    drawn = [Span(s.rank, s.lane, s.name, s.start_ms - lo, s.end_ms - lo, s.args) for s in drawn]
    ctx.write_text(
        svg,
        svg_timeline(
            drawn,
            title=f"{NAMES[strategy]}: one training step per rank"
            + (f" (last of {params.steps})" if device == "cpu" else " (profiler kernels, all timed steps)"),
            subtitle="CPU wall-clock spans on gloo: ops on each rank's thread, collectives from launch to completion"
            if device == "cpu"
            else "GPU kernels from torch.profiler on NCCL",
            description=f"Compute, communication and wait lanes for {params.ranks} ranks under {NAMES[strategy]}.",
        ),
    )
    ctx.write_text(
        trace, chrome_trace_json(spans, metadata={"lab": "zero-fsdp", "strategy": strategy, "backend": ctx.backend})
    )
    ctx.add_artifact(f"timeline_{strategy}", svg, "image/svg+xml", f"Timeline: {NAMES[strategy]} (measured)")
    ctx.add_artifact(
        f"trace_{strategy}", trace, "application/json", f"Chrome trace: {NAMES[strategy]} (JSON for Perfetto UI)"
    )
    return {"timeline": svg, "trace": trace}


def parity(strategies: dict) -> dict:
    """Each strategy's losses against the first strategy's, step by step."""
    names = list(strategies)
    ref = strategies[names[0]]["losses"]
    diffs = {n: max(abs(a - b) for a, b in zip(s["losses"], ref)) for n, s in strategies.items()}
    worst = max(diffs.values())
    return {
        "reference": names[0],
        "max_abs_loss_diff": diffs,
        "worst": worst,
        "tolerance": LOSS_TOLERANCE,
        "within_tolerance": worst <= LOSS_TOLERANCE,
    }


def invariants(params: Params, strategies: dict) -> dict:
    """The lesson's claims about what each rank holds, measured: ZeRO-1 holds 1/N of DDP's optimizer state,
    FSDP2 1/N of the weights (each up to how the strategy splits: whole parameters, padded rows)."""
    n = params.ranks
    out: dict = {}
    ddp, zero1 = strategies.get("ddp"), strategies.get("zero1")
    if zero1 is not None:
        full = 8 * zero1["params"]  # Adam's two FP32 moments of every parameter
        per_rank = [r["optim_bytes"] for r in zero1["ranks"]]
        # Whole parameters go to ranks, so a rank can be off 1/N by at most the largest parameter's moments.
        slack = 8 * zero1["largest_param_numel"]
        out["zero1_optim"] = {
            "fraction_of_full": [b / full for b in per_rank],
            "sum_over_ranks_bytes": sum(per_rank),
            "full_bytes": full,
            "ddp_bytes": ddp["ranks"][0]["optim_bytes"] if ddp else None,
            "allowed_imbalance_bytes": slack,
            "holds": sum(per_rank) == full and all(abs(b - full / n) <= slack for b in per_rank),
        }
    for name in ("fsdp2", "fsdp2-no-reshard"):
        s = strategies.get(name)
        if s is None:
            continue
        full = 4 * s["params"]
        per_rank = [r["param_bytes"] for r in s["ranks"]]
        padded = 4 * s["padded_shard_numel"]  # ceil(rows / N) rows of every parameter: a rank's most
        out[name + "_params"] = {
            "fraction_of_full": [b / full for b in per_rank],
            "sum_over_ranks_bytes": sum(per_rank),
            "full_bytes": full,
            "padded_shard_bytes": padded,
            "holds": sum(per_rank) == full and all(b <= padded for b in per_rank),
        }
    return out


def answer(params: Params, strategies: dict, par: dict, device: str) -> str:
    """The lab's question answered in one sentence (at most ~25 words) from this run's numbers: the most sharded
    strategy that ran against the least, in state held per rank and bytes sent per step."""
    where = "On this CPU" if device == "cpu" else "On these GPUs"

    def held(s: dict) -> float:
        r = s["ranks"][0]
        return r["param_bytes"] + r["grad_bytes"] + r["optim_bytes"]

    loss = "losses matched" if par["within_tolerance"] else f"losses DIFFERED by {number(par['worst'], 2)}"
    most = max(strategies, key=lambda n: held(strategies[n]))
    least = min(strategies, key=lambda n: held(strategies[n]))
    a, b = strategies[least], strategies[most]
    if least == most:
        return f"{where}, {NAMES[most]} held {byte_size(held(b))} per rank and sent {byte_size(b['bus_bytes_per_step'])} per step; {loss}."
    sent = a["bus_bytes_per_step"] / b["bus_bytes_per_step"] if b["bus_bytes_per_step"] else None
    cost = f"sent {number(sent, 2)}× its bytes per step" if sent is not None else "sent bytes where it sent none"
    return (
        f"{where}, {NAMES[least]} held {byte_size(held(a))} per rank against {NAMES[most]}'s {byte_size(held(b))} "
        f"and {cost}; {loss}."
    )


def results(params: Params, ctx: LabContext, strategies: dict, device: str) -> dict:
    cpu = device == "cpu"
    par = parity(strategies)
    inv = invariants(params, strategies)
    first = next(iter(strategies.values()))
    note = (
        "CPU wall clock: the step from steps timed alone; the timeline from as many recorded steps after them, "
        "where timing every op adds about 17 µs each (1.4× the default step: bench/zero_fsdp_recorder.py); gloo "
        "runs collectives on its own thread and the ranks share cores"
        if cpu
        else "the step from CUDA events around steps run alone, no recorder or profiler on; the timeline from "
        "torch.profiler's kernels over as many steps after them (unverified until a GPU runs scripts/gpu-check.sh)"
    )
    peak_note = (
        "process resident set high-water mark (VmHWM) of the timed steps, over the process before the model was "
        "built: the allocator's slack included, so only differences of megabytes mean something"
        if cpu
        else "CUDA caching allocator: torch.cuda.max_memory_allocated over what was allocated before the model"
    )
    summary: list[SummaryItem] = [
        SummaryItem(label="Backend", value=ctx.backend, note=ctx.environment["label"]),
        SummaryItem(
            label="Model parameters",
            value=first["params"],
            note=f"{params.layers} blocks of width {params.hidden}, vocabulary {params.vocab}",
        ),
        SummaryItem(
            label="Losses equal across strategies",
            value=par["within_tolerance"],
            note=f"largest difference {number(par['worst'], 3)} against {NAMES[par['reference']]}; tolerance {number(LOSS_TOLERANCE)}",
        ),
    ]
    if "zero1_optim" in inv:
        z = inv["zero1_optim"]
        summary.append(
            SummaryItem(
                label="ZeRO-1 optimizer state per rank (fraction of DDP's)",
                value=", ".join(percent(f, 1) for f in z["fraction_of_full"]),
                note=f"1/N = {percent(1 / params.ranks, 1)}; whole parameters go to ranks, so each may be off by up to "
                f"{byte_size(z['allowed_imbalance_bytes'])}",
            )
        )
    for name in ("fsdp2", "fsdp2-no-reshard"):
        if name + "_params" in inv:
            f = inv[name + "_params"]
            summary.append(
                SummaryItem(
                    label=f"{NAMES[name]} weights per rank (fraction of the model)",
                    value=", ".join(percent(x, 1) for x in f["fraction_of_full"]),
                    note=f"1/N = {percent(1 / params.ranks, 1)}; rows padded to a multiple of N",
                )
            )
    for name, s in strategies.items():
        summary.append(
            SummaryItem(
                label=f"{NAMES[name]}: sent per rank per step (ring)",
                value=round(s["bus_bytes_per_step"]),
                unit="bytes",
                note=f"predicted {byte_size(s['predicted_bus_bytes_per_step'])}: {TRAFFIC[name]}",
            )
        )
    held_rows = []
    for name, s in strategies.items():
        pred = s["predicted"]
        for r in s["ranks"]:
            held_rows.append(
                [
                    NAMES[name],
                    r["rank"],
                    byte_size(r["param_bytes"]),
                    byte_size(r["param_bytes_after_forward"]),
                    byte_size(r["grad_bytes"]),
                    byte_size(r["optim_bytes"]),
                    byte_size(pred["param_bytes"] + pred["grad_bytes"] + pred["optim_bytes"]),
                    byte_size(r["param_bytes"] + r["grad_bytes"] + r["optim_bytes"]),
                    byte_size(r["peak_growth_bytes"]),
                    table_number(r["step_ms"]),
                ]
            )
    comm_rows = []
    for name, s in strategies.items():
        for c in s["collectives"]:
            comm_rows.append(
                [
                    NAMES[name],
                    c["kind"],
                    c["count"],
                    byte_size(c["bytes"]),
                    byte_size(c["predicted_bytes"]),
                    byte_size(c["bus_bytes"]),
                ]
            )
    overlap_rows = []
    for name, s in strategies.items():
        for r in s["ranks"]:
            overlap_rows.append(
                [
                    NAMES[name],
                    r["rank"],
                    table_number(r["compute_ms"]),
                    table_number(r["communication_ms"]),
                    table_number(r["overlap_ratio"]),
                    table_number(r["exposed_communication_ms"]),
                    table_number(r["wait_ms"]),
                ]
            )
    loss_rows = [[NAMES[n], *[table_number(v, 6) for v in s["losses"]]] for n, s in strategies.items()]
    tables: list[Table] = [
        Table(
            title="What each rank holds (counted from its tensors) against lesson 08's anatomy (FP32 + AdamW: 4 + 4 + 8 bytes per parameter)",
            columns=[
                "strategy",
                "rank",
                "weights at rest",
                "weights after forward",
                "gradients",
                "Adam moments",
                "predicted total",
                "measured total",
                "peak over bare process",
                "step (ms)",
            ],
            rows=held_rows,
        ),
        Table(
            title="Collectives per training step (rank 0): buffer bytes, as predicted, and what each rank sends on a ring",
            columns=["strategy", "collective", "calls", "bytes", "predicted bytes", "sent per rank"],
            rows=comm_rows,
        ),
        Table(
            title="Overlap per rank (the median timed step, ms): |compute ∩ communication| / |communication|",
            columns=["strategy", "rank", "compute", "communication", "overlap ratio", "exposed comm", "wait"],
            rows=overlap_rows,
        ),
        Table(
            title="Loss per step (mean over ranks): the warm-up steps, the timed steps, then one last step in "
            "which the lab counts every tensor and collective",
            columns=["strategy", *[f"step {i}" for i in range(len(first["losses"]))]],
            rows=loss_rows,
        ),
    ]
    return {
        "answer": answer(params, strategies, par, device),
        "summary": summary,
        "tables": tables,
        "timing": {"kind": "cpu-wall-clock" if cpu else "cuda-events", "unit": "ms", "note": note},
        "peak_memory": {"kind": first["peak_kind"], "note": peak_note},
        "ranks": params.ranks,
        "params": first["params"],
        "parity": par,
        "invariants": inv,
        "strategies": strategies,
    }
