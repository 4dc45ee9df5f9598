"""The pipeline lab's arithmetic (torch-free, unit-tested): the bubble formulas and what the measured
per-stage actions say about idle time, micro-batches in flight and activation bytes.

Two bubble definitions, both for p ranks, m micro-batches and v stages per rank, stages of equal cost:

    idle share of the step   (p - 1) / (v m + p - 1)   the fraction of a step each rank waits; the GPipe paper's
                                                      (Huang et al. 2019) O((K-1)/(M+K-1)), and the course's
                                                      pipeline_bubble calculator (v = 1)
    bubble over ideal time   (p - 1) / (v m)          t_bubble / t_ideal, Narayanan et al. 2021 (Megatron-LM,
                                                      interleaved 1F1B divides it by v) and the Ultra-Scale
                                                      Playbook's r_bubble

They describe the same idle time: with f = idle/step and r = idle/busy, r = f / (1 - f). The lab measures both
from real spans, so each can be set against its own formula.

Activations: a micro-batch's saved tensors live on a stage from its forward until its last backward action
(the full backward B, or the weight-gradient W where the schedule splits backward into I and W). GPipe runs
every forward first, so m micro-batches are in flight at its peak; 1F1B starts backwards after p - rank
forwards, so at most p - rank are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from labs.trace import timeline as tl

KINDS = ("F", "B", "I", "W")  # forward, full backward, backward for inputs, backward for weights


@dataclass(frozen=True)
class Action:
    """One compute action a rank ran: stage index, kind (F/B/I/W), micro-batch, its span (ms), the bytes its
    forward saved for backward (F only), and the CPU time its thread spent in it (ms; None where not measured)."""

    stage: int
    kind: str
    microbatch: int
    start_ms: float
    end_ms: float
    saved_bytes: int = 0
    cpu_ms: float | None = None

    def label(self) -> str:
        """The pipelining module's own notation: 2F0 = stage 2, forward, micro-batch 0."""
        return f"{self.stage}{self.kind}{self.microbatch}"


def bubble_step_fraction(p: int, m: int, v: int = 1) -> float:
    """(p - 1) / (v m + p - 1): the share of a step each rank idles (uniform stages, free communication)."""
    return (p - 1) / (v * m + p - 1)


def bubble_over_ideal(p: int, m: int, v: int = 1) -> float:
    """(p - 1) / (v m): bubble time over the ideal (busy) time, Narayanan et al. 2021's definition."""
    return (p - 1) / (v * m)


def idle(actions: Iterable[Action], step: tl.Interval) -> dict:
    """Busy and idle time of one rank in one step; idle = step - |union of compute spans|."""
    busy = tl.total(tl.clip([(a.start_ms, a.end_ms) for a in actions], step))
    t_step = step[1] - step[0]
    gap = max(0.0, t_step - busy)
    return {
        "step_ms": t_step,
        "busy_ms": busy,
        "idle_ms": gap,
        "idle_fraction": gap / t_step if t_step > 0 else 0.0,
        "idle_over_busy": gap / busy if busy > 0 else None,
    }


def gaps(actions: Iterable[Action], step: tl.Interval) -> list[tl.Interval]:
    """The idle intervals of a step: where no compute span covers it (drawn as the wait lane)."""
    out, cursor = [], step[0]
    for s, e in tl.union(tl.clip([(a.start_ms, a.end_ms) for a in actions], step)):
        if s > cursor:
            out.append((cursor, s))
        cursor = max(cursor, e)
    if step[1] > cursor:
        out.append((cursor, step[1]))
    return out


def in_flight(actions: list[Action]) -> dict:
    """Peak micro-batches whose activations a rank holds at once (summed over its stages), and the peak of
    their saved bytes. A micro-batch enters at the end of its forward and leaves at the end of its last
    backward action on that stage (W if the stage split backward, else B)."""
    saved = {(a.stage, a.microbatch): a.saved_bytes for a in actions if a.kind == "F"}
    split = {a.stage for a in actions if a.kind == "W"}
    events = []
    for a in actions:
        key = (a.stage, a.microbatch)
        if a.kind == "F":
            events.append((a.end_ms, 1, saved[key]))
        elif (a.kind == "W") or (a.kind == "B" and a.stage not in split):
            events.append((a.end_ms, -1, -saved.get(key, 0)))
    count = held = peak_count = peak_bytes = 0
    for _, dc, db in sorted(events, key=lambda e: (e[0], e[1])):  # a release at the same instant goes first
        count += dc
        held += db
        peak_count, peak_bytes = max(peak_count, count), max(peak_bytes, held)
    return {"peak_microbatches": peak_count, "peak_bytes": peak_bytes}


def expected_peak_in_flight(schedule: str, p: int, m: int, rank: int) -> int | None:
    """The peak micro-batches in flight the schedule's shape implies for one-stage-per-rank schedules."""
    if schedule == "gpipe":
        return m
    if schedule == "1f1b":
        return min(m, p - rank)
    return None


def formulas(schedule: str, p: int, m: int, v: int) -> dict:
    """Both bubble definitions for `schedule`, or None where the lab uses no closed form (zero-bubble: its
    bubble depends on the measured F, I and W times; ZB-1P reaches ~0 only when they are equal; interleaved
    1F1B when m is not a multiple of p)."""
    if schedule == "zero-bubble" or (schedule == "interleaved-1f1b" and m % p):
        # Narayanan et al.'s interleaved bubble assumes m a multiple of p; torch runs other m in uneven rounds.
        return {"step_fraction": None, "over_ideal": None}
    vv = v if schedule == "interleaved-1f1b" else 1
    return {"step_fraction": bubble_step_fraction(p, m, vv), "over_ideal": bubble_over_ideal(p, m, vv)}


def _deps(stage: int, kind: str, mb: int, last: int, has: set) -> list[tuple[int, str, int]]:
    """What an action waits for: its input from the previous stage (F), the gradient from the next stage and
    its own forward (B or I), its own input-gradient (W)."""
    if kind == "F":
        return [] if stage == 0 else [(stage - 1, "F", mb)]
    if kind == "W":
        return [(stage, "I", mb)]
    if stage == last:
        return [(stage, "F", mb)]
    nxt = (stage + 1, "I", mb) if (stage + 1, "I", mb) in has else (stage + 1, "B", mb)
    return [(stage, "F", mb), nxt]


def simulate(order: dict[int, list[tuple[int, str, int]]], duration: dict[tuple[int, str], float]) -> dict:
    """Run each rank's actions in `order` with `duration` (ms per stage and kind) and free communication: an
    action starts when its rank is free and what it waits for has finished. Returns the step (the last end on
    any rank) and each rank's busy time, so idle = step - busy as measured. ValueError if the order deadlocks."""
    has = {a for acts in order.values() for a in acts}
    last = max(s for s, _, _ in has)
    end: dict[tuple[int, str, int], float] = {}
    free = dict.fromkeys(order, 0.0)
    busy = dict.fromkeys(order, 0.0)
    pos = dict.fromkeys(order, 0)
    remaining = sum(len(a) for a in order.values())
    while remaining:
        progressed = False
        for rank, acts in order.items():
            while pos[rank] < len(acts):
                a = acts[pos[rank]]
                deps = _deps(*a, last, has)
                if any(d not in end for d in deps):
                    break
                start = max([free[rank], *(end[d] for d in deps)])
                d_ms = duration[(a[0], a[1])]
                end[a] = free[rank] = start + d_ms
                busy[rank] += d_ms
                pos[rank] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {r: acts[pos[r]] for r, acts in order.items() if pos[r] < len(acts)}
            raise ValueError(f"the action order deadlocks; next actions waiting: {stuck}")
    step = max(free.values())
    return {"step_ms": step, "busy_ms": busy, "idle_fraction": {r: 1 - b / step for r, b in busy.items()}}


def mean_durations(actions: Iterable[Action], *, cpu_time: bool = False) -> dict[tuple[int, str], float]:
    """Mean measured time of each (stage, kind), the simulator's input: wall span, or the thread's CPU time."""
    sums: dict[tuple[int, str], list[float]] = {}
    for a in actions:
        t = a.cpu_ms if cpu_time and a.cpu_ms is not None else a.end_ms - a.start_ms
        sums.setdefault((a.stage, a.kind), []).append(t)
    return {k: sum(v) / len(v) for k, v in sums.items()}


# The controlled model: every stage costs the same, F = 1, B = 2 (I = W = 1 where split), as the formulas assume.
UNIFORM = {"F": 1.0, "B": 2.0, "I": 1.0, "W": 1.0}


def uniform_bubble(order: dict[int, list[tuple[int, str, int]]]) -> float:
    """The idle share (mean over ranks) of `order` replayed with uniform stage costs and free p2p: the schedule's
    own bubble, which equals (p-1)/(vm+p-1) for GPipe, 1F1B and interleaved 1F1B and gives zero-bubble a number."""
    stages = {s for acts in order.values() for s, _, _ in acts}
    sim = simulate(order, {(s, k): t for s in stages for k, t in UNIFORM.items()})
    return sum(sim["idle_fraction"].values()) / len(order)


def gpipe_bubble_at_1f1b_memory(p: int) -> float:
    """GPipe holds all m micro-batches at once; held to 1F1B's peak of p it must run m = p per step (and take
    more steps for the same batch): its idle share is then (p-1)/(2p-1), above 1F1B's at any m > p."""
    return bubble_step_fraction(p, p)
