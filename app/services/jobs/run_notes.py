"""What one of a learner's lab runs did, in the sentences a lesson shows beside its worked example.

    sentences("fp8-step", result)   # ["Your latest run: delayed scaling, ...", "The 50× spike at step 3 ...", ...]

Each lab's sentences read only that run's result.json (labs/<lab>/result.py describes it): its recipe, shape, fit
and counts, never a figure the lesson assumes. Where the run lacks what a lesson section shows (no spike, no
second node, no measured crossover) a sentence says so plainly and names the preset that has it. A lab without
sentences here gets none; own_runs.py then points at the job's page.
"""

from __future__ import annotations

from collections.abc import Callable

from labs.api import byte_size, number, percent


def _pct(x: float | None) -> str:
    return "—" if x is None else percent(x, 0)


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{number(x, 3)} ms"


# ---------------------------------------------------------------- fp8-step

RECIPE_WORDS = {
    "delayed": "delayed scaling (the scale comes from the amax history of earlier steps)",
    "current": "current scaling (the scale comes from the tensor being quantized)",
    "block": "block scaling (each 1×128 or 128×128 block takes its scale from its own values)",
    "mxfp8": "MXFP8 (each 32 values share a power-of-two scale taken from their own values)",
}


def _fp8_spike(recipe: dict, spike: dict) -> str:
    """What the scale did at the spike, in the terms of the recipe that ran."""
    k, factor, kind = spike["step"], number(spike["scale_factor"]), recipe.get("kind")
    clipped, before, after = spike.get("clipped_at_spike"), spike.get("scale_at_spike"), spike.get("scale_after")
    if clipped is None:  # Transformer Engine counts no clipped values
        clip = "went uncounted for clipping (Transformer Engine counts none; the job page's amax × scale says)"
    else:
        clip = "clipped nothing" if clipped == 0 else f"clipped {number(clipped)} values"
    if kind == "delayed":
        said = f"The {factor}× spike at step {k} met a scale set from earlier steps' amaxes and {clip}"
        if before is not None and after is not None and after != before:
            window = recipe.get("amax_history_len")
            said += (
                f"; at step {k + 1} the scale fell {number(before)} → {number(after)}, because the spike's amax had "
                f"entered the amax history"
                + (f" (a window of {window} steps, taking its {recipe.get('amax_compute_algo')})" if window else "")
            )
            if spike.get("clipped_after") is not None:
                said += f", and step {k + 1} clipped {number(spike['clipped_after'])}"
        return said + "."
    if kind == "current":
        said = (
            f"The {factor}× spike at step {k} {clip}: current scaling took the scale from the spiking tensor "
            "itself, so there was no stale scale to clip against"
        )
        if before is not None and after is not None:
            said += f" (its scale was {number(before)} at the spike and {number(after)} the step after)"
        return said + "."
    said = f"The {factor}× spike at step {k} {clip}: each block took its scale from its own values"
    if before is not None and after is not None:
        said += f" (the watched tensor's scale was {number(before)} at the spike and {number(after)} the step after)"
    return said + "."


def _fp8_step(results: dict, params: dict) -> list[str]:
    recipe = results.get("recipe") or {}
    kind = str(recipe.get("kind") or params.get("recipe"))
    model = results.get("model") or {}
    out = [
        f"Your latest run: {RECIPE_WORDS.get(kind, kind)}, {recipe.get('fp8_format', 'hybrid')} formats, "
        f"{results['steps']} steps of a {model.get('n_layers', '?')}-layer model {model.get('d_model', '?')} wide."
    ]
    spike = results.get("outlier")
    if spike and "scale_at_spike" in spike:
        out.append(_fp8_spike(recipe, spike))
    else:
        clip = results.get("clipping") or {}
        total, steps = clip.get("total_clipped"), clip.get("steps_with_clipping") or []
        if total:
            out.append(
                f"It clipped {number(total)} values in {len(steps)} of {results['steps']} steps (first at step "
                f"{steps[0]})"
                + (
                    ", each time a tensor's amax outgrew the scale set from earlier steps."
                    if kind == "delayed"
                    else "."
                )  # fmt: skip
            )
        elif total == 0:
            out.append(f"It clipped nothing in {results['steps']} steps.")
        out.append(
            "It had no spike, so it has no counterpart yet to a spike meeting a scale: set an outlier step, as "
            "the Spike at step 20 preset does."
        )
    ref, fp8 = results["runs"]["reference"]["final_loss"], results["runs"]["fp8"]["final_loss"]
    if ref is not None and fp8 is not None:
        out.append(f"Final loss {number(fp8)} with FP8 against {number(ref)} for the higher-precision reference.")
    elif fp8 is None:
        out.append("The FP8 run diverged (its loss became NaN or infinite); the job page shows at which step.")
    acc = results.get("accumulation") or {}
    layers = [layer for layer in acc.get("layers") or [] if layer.get("fast_model_rel_error") is not None]
    if layers:
        widest = max(layers, key=lambda layer: layer["k"])
        said = (
            f"The accumulator model on its widest forward GEMM (K = {widest['k']}): a relative error of "
            f"{number(widest['fast_model_rel_error'], 2)} without promotion, "
            f"{number(widest['promote_128_rel_error'], 2)} promoting every 128 (a model, not a GPU measurement)"
        )
        if widest["k"] <= 128:
            said += f"; at K = {widest['k']} no promotion happens, so the two agree"
        out.append(said + ".")
    return out


# ---------------------------------------------------------------- overlap-trace


def _overlap_trace(results: dict, params: dict) -> list[str]:
    s = results["schedules"]
    out: list[str] = []
    if "windowed" in s:
        w = s["windowed"]
        said = f"Your windowed schedule hid {_pct(w['overlap_ratio'])} of the all-gather under independent compute, leaving {_ms(w['exposed_comm_ms'])} exposed per step"  # fmt: skip
        if "immediate" in s:
            said += f"; waiting at once hid {_pct(s['immediate']['overlap_ratio'])} ({_ms(s['immediate']['exposed_comm_ms'])} exposed)"  # fmt: skip
        out.append(said + ".")
    elif "immediate" in s:
        out.append(
            f"Your run waited at once: it hid {_pct(s['immediate']['overlap_ratio'])} of the all-gather. It ran no "
            "windowed schedule, so it has no overlap to compare yet."
        )
    if "dependent" in s:
        out.append("The dependent schedule reads the gathered tensor, so it had to wait: nothing of it can overlap.")
    return out


# ---------------------------------------------------------------- tp-sweep


def _shape(d: dict) -> str:
    return f"{number(d['tokens'])} tokens × {number(d['hidden'])} wide × ffn {number(d['ffn'])}"


def _tp_sweep(results: dict, params: dict) -> list[str]:
    rows = sorted(results["degrees"], key=lambda d: d["degree"])
    mine = {"tokens": params["tokens"], "hidden": params["hidden"], "ffn": params["ffn"]}
    out = [
        f"Your sweep of a {_shape(mine)} block, step per degree: "
        + ", ".join(f"TP {d['degree']} {_ms(d['step_ms'])}" for d in rows)
        + "."
    ]
    slower = next((b for a, b in zip(rows, rows[1:]) if b["step_ms"] >= a["step_ms"]), None)
    if slower is not None:
        out.append(f"It stopped getting faster at TP {slower['degree']}.")
    elif len(rows) > 1:
        out.append(f"It got faster at every degree up to TP {rows[-1]['degree']}.")
    split = [d for d in rows if d["degree"] > 1]
    comm = next((d for d in split if d["collective_ms"] >= d["local_gemm_ms"]), None)
    if comm is not None:
        out.append(
            f"From TP {comm['degree']} its all-reduces ({_ms(comm['collective_ms'])}) outweighed its local GEMMs "
            f"({_ms(comm['local_gemm_ms'])}): a measured crossover."
        )
    elif split:
        top = split[-1]
        out.append(
            f"Its all-reduces stayed below its local GEMMs at every degree (TP {top['degree']}: "
            f"{_ms(top['collective_ms'])} against {_ms(top['local_gemm_ms'])}): no measured crossover yet. The "
            "A narrow MLP preset gives each rank little GEMM work per byte it all-reduces."
        )
    p = results.get("predicted") or {}
    if p:
        shape = p.get("shape") or mine
        same = all(shape.get(k) == v for k, v in mine.items())
        at = "for your run's own shape" if same else f"for a {_shape(shape)} block, not your run's shape"
        where = (
            f"from TP {p['oversharding_from']}" if p.get("oversharding_from") else "nowhere up to the largest degree"
        )
        out.append(
            f"The cost model predicts over-sharding {where} on {p['node']} in {str(p.get('precision', '')).upper()} "
            f"{at} (a prediction, not a measurement)."
        )
    if not all(d["parity"]["within_tolerance"] for d in rows):
        out.append("Some degree did not match TP 1 within tolerance: see the job's parity table.")
    return out


# ---------------------------------------------------------------- collectives


def _collectives(results: dict, params: dict) -> list[str]:
    ranks = results.get("ranks") or params.get("ranks")
    out: list[str] = []
    for sweep in results.get("sweeps") or []:
        fits = [
            f"{c['name']} α = {number(c['fit']['alpha_us'], 3)} µs, B = {number(c['fit']['bandwidth_gbs'], 2)} GB/s"
            for c in sweep.get("collectives") or []
            if c.get("fit")
        ]
        if fits:
            out.append(
                f"Your run's fit over {ranks} ranks ({sweep.get('algorithm', 'ring')}): " + "; ".join(fits) + "."
            )
            break
    topo = results.get("topology") or {}
    h = results.get("hierarchy")
    if topo.get("mode") == "netns" and h:
        e = h.get("egress") or {}
        out.append(
            f"Its {topo['nodes']} emulated nodes ({topo['ranks_per_node']} ranks each, {number(topo['link_mbit'] or 0)} "
            f"Mbit/s links) all-reduced {byte_size(h['bytes'])} hierarchically in {_ms(h['hierarchical_ms'])} "
            f"against {_ms(h['flat_ms'])} flat"
            + (
                f"; each node sent {byte_size(e['measured_hierarchical_bytes'])} (predicted "
                f"{byte_size(e['predicted_hierarchical_bytes'])}) against {byte_size(e['measured_flat_bytes'])} flat "
                f"(predicted {byte_size(e['predicted_flat_bytes'])})."
                if e.get("measured_flat_bytes") is not None
                else "."
            )
        )
    else:
        why = topo.get("note") or "the run asked for one node"
        out.append(
            f"It ran as one node ({why}), so it has no cross-node numbers yet: the Two nodes, a slow link preset "
            "splits the ranks into emulated nodes."
        )
    return out


# ---------------------------------------------------------------- zero-fsdp

STRATEGY_WORDS = {"ddp": "DDP", "zero1": "ZeRO-1", "fsdp2": "FSDP2", "fsdp2-no-reshard": "FSDP2 without resharding"}


def _held(s: dict) -> int:
    r = s["ranks"][0]
    return r["param_bytes"] + r["grad_bytes"] + r["optim_bytes"]


def _zero_fsdp(results: dict, params: dict) -> list[str]:
    strategies = results.get("strategies") or {}
    if not strategies:
        return []
    ranks = results.get("ranks") or params.get("ranks")
    held = ", ".join(f"{STRATEGY_WORDS.get(n, n)} {byte_size(_held(s))}" for n, s in strategies.items())
    sent = ", ".join(f"{STRATEGY_WORDS.get(n, n)} {byte_size(s['bus_bytes_per_step'])}" for n, s in strategies.items())
    out = [
        f"Your run trained {number(results.get('params') or 0)} parameters on {ranks} ranks. Training state rank 0 "
        f"held: {held}. Sent per rank per step: {sent}."
    ]
    ddp = strategies.get("ddp")
    if ddp:
        calls = sum(c["count"] for c in ddp["collectives"] if c["kind"] == "all-reduce")
        out.append(
            f"DDP all-reduced its gradients in {calls} call{'s' if calls != 1 else ''} per step, one per bucket of at "
            f"most {number(params.get('ddp_bucket_mb', 0))} MiB."
        )
    fsdp = strategies.get("fsdp2")
    if fsdp:
        gathers = sum(c["count"] for c in fsdp["collectives"] if c["kind"] == "all-gather")
        out.append(f"FSDP2 issued {gathers} all-gathers per step.")
    if not ddp and not fsdp:
        out.append("It ran neither DDP nor FSDP2, so this section's buckets and gathers have no counterpart in it yet.")
    return out


# ---------------------------------------------------------------- pipeline

SCHEDULE_WORDS = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved-1f1b": "interleaved 1F1B",
    "zero-bubble": "zero-bubble",
}


def _pipeline(results: dict, params: dict) -> list[str]:
    schedules = results.get("schedules") or {}
    if not schedules:
        return []
    p, m = results.get("ranks") or params.get("ranks"), results.get("microbatches") or params.get("microbatches")
    idle = []
    for name, s in schedules.items():
        model = s.get("formula_step_fraction")
        idle.append(
            f"{SCHEDULE_WORDS.get(name, name)} {_pct(s['bubble_fraction'])}"
            + (f" (formula {_pct(model)})" if model is not None else "")
        )
    out = [f"Your run, p = {p} stages and m = {m} micro-batches, idled: " + ", ".join(idle) + " of its step."]
    peaks = ", ".join(f"{SCHEDULE_WORDS.get(n, n)} {s['peak_microbatches_in_flight']}" for n, s in schedules.items())
    out.append(f"Micro-batches held at the peak: {peaks}.")
    return out


# ---------------------------------------------------------------- context-parallel


def _context_parallel(results: dict, params: dict) -> list[str]:
    variants = results.get("variants") or {}
    if not variants:
        return []
    n = results.get("ranks") or params.get("ranks")
    mask = "causal" if results.get("causal") else "full (no mask)"
    out = [f"Your run split {number(results.get('seq_len') or 0)} tokens over {n} ranks with a {mask} mask."]
    work = [
        f"{v['split']} {number(v['work_imbalance'], 3)}×"
        for name, v in variants.items()
        if v.get("method") == "ring" and v.get("overlapped") and v.get("work_imbalance") is not None
    ]
    if work:
        out.append("Work max/min over ranks: " + ", ".join(work) + ".")
    sent = [
        f"{name} {byte_size(v['send_bytes_per_rank'])}"
        for name, v in variants.items()
        if v.get("send_bytes_per_rank") is not None and name in ("ring-zigzag", "ring-contiguous", "ulysses")
    ]
    if sent:
        out.append("Sent per rank per pass: " + ", ".join(sent) + ".")
    worst = max((v["max_abs_err"] for v in variants.values() if v.get("max_abs_err") is not None), default=None)
    if worst is not None:
        out.append(f"The largest difference from full attention was {number(worst, 2)}.")
    return out


SENTENCES: dict[str, Callable[[dict, dict], list[str]]] = {
    "fp8-step": _fp8_step,
    "overlap-trace": _overlap_trace,
    "tp-sweep": _tp_sweep,
    "collectives": _collectives,
    "zero-fsdp": _zero_fsdp,
    "pipeline": _pipeline,
    "context-parallel": _context_parallel,
}


def sentences(lab: str, result: dict) -> list[str]:
    """The sentences for one run of `lab` from its result.json; [] for a lab this module does not read."""
    fn = SENTENCES.get(lab)
    if fn is None:
        return []
    return fn(result.get("results") or {}, result.get("params") or {})
