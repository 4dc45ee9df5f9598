"""zero-fsdp's runs in the lesson's words (torch-free): what each of a learner's ranks held and sent under each
strategy the run compared, and how DDP and FSDP2 issued their collectives. The app shows these through the
catalog (LabSpec.words)."""

from __future__ import annotations

from labs.spec import RunWords
from labs.words import byte_size, number

STRATEGY_WORDS = {"ddp": "DDP", "zero1": "ZeRO-1", "fsdp2": "FSDP2", "fsdp2-no-reshard": "FSDP2 without resharding"}


def _held(s: dict) -> int:
    r = s["ranks"][0]
    return r["param_bytes"] + r["grad_bytes"] + r["optim_bytes"]


def sentences(results: dict, params: dict) -> list[str]:
    """A finished run's `results` told beside the lesson's worked example."""
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


WORDS = RunWords(
    nudge="to count what each of your ranks holds and sends under DDP, ZeRO-1 and FSDP2",
    sentences=sentences,
)
