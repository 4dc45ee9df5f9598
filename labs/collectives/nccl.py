"""Which NCCL_ALGO each GPU launch of the collectives lab sets, and which algorithm NCCL says it ran (torch-free).

    launches = plan_launches(["auto", "ring", "tree"], ["all-reduce", "all-gather"], nccl=(2, 27, 3))
    for launch in launches:   # one launch of the ranks each: NCCL reads NCCL_ALGO when a communicator is created
        env = launch_env(launch, log_dir)
    chosen = chosen_algorithms(log_text)          # {("AllReduce", 4194304): "NVLS/Simple", ...}

What each collective can run, read in NCCL's src/graph/tuning.cc `ncclTopoTuneModel` @ v2.27.3-1 (the same rules
at v2.21.5-1 and v2.30.7-1): broadcast and reduce run Ring only; all-gather and reduce-scatter run Ring, PAT,
NVLS or CollNetDirect, never Tree; all-reduce runs any algorithm but PAT. An all-to-all is point-to-point
send/receive, which NCCL_ALGO does not touch. A function left with no enabled algorithm fails when launched:
`topoGetAlgoInfo` in src/enqueue.cc warns "No algorithm/protocol available for function ... NCCL_ALGO was set to
..." and returns ncclInvalidUsage. So a Tree launch must restrict Tree to the all-reduce.

NCCL_ALGO's syntax (tuning.cc `parseList`): from NCCL 2.24 an entry may name its functions,
"ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"; so `allreduce:Tree` forces Tree on the
all-reduce alone and leaves every other function NCCL's own choice. Before 2.24 (v2.23.4-1) the value is one list
for every function and an unrecognised token is skipped, so `allreduce:Tree` would enable nothing; there `Tree`
applies to every function and such a launch runs the all-reduce only.

"auto" leaves NCCL_ALGO unset: NCCL picks per call, NVLS on an NVSwitch node such as an H100 HGX for the sizes it
suits, which forcing Ring or Tree never shows. Every GPU launch logs NCCL's choice (NCCL_DEBUG=INFO,
NCCL_DEBUG_SUBSYS=TUNING): rank 0 writes one line per collective it enqueues, "AllReduce: 4194304 Bytes -> Algo NVLS
proto Simple channel{Lo..Hi}={0..15}" (src/enqueue.cc @ v2.25.1-1 to v2.30.7-1), "AllReduce: 4194304 Bytes -> Algo 4
proto 2 time 12.000" with numbers before (v2.23.4-1), without the function before that (v2.21.5-1). The bytes are
the call's count times its element size: the whole buffer for an all-reduce or broadcast, one rank's part (S/N)
for an all-gather or reduce-scatter.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

# ncclAlgoStr and ncclProtoStr (src/init.cc @ v2.27.3-1), in NCCL's own order: the numbers older logs print.
ALGO_NAMES = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTO_NAMES = ("LL", "LL128", "Simple")
# The first NCCL whose NCCL_ALGO takes per-function entries ("allreduce:tree").
PER_FUNCTION_SINCE = (2, 24, 0)
# The lab's collective names as NCCL's functions (ncclFuncStr); an all-to-all is send/receive, no NCCL_ALGO.
FUNCTIONS = {
    "all-reduce": "AllReduce",
    "all-gather": "AllGather",
    "reduce-scatter": "ReduceScatter",
    "broadcast": "Broadcast",
}
# Collectives whose log line counts one rank's part of S.
_PER_RANK_COUNT = ("all-gather", "reduce-scatter")
# What the node comparisons run: a flat all-reduce, and reduce-scatter, all-reduce, all-gather for the hierarchy.
COMPARISON_COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather")


@dataclass(frozen=True)
class Launch:
    """One launch of the ranks on NCCL: its NCCL_ALGO (None: unset), what its sweep times, whether the node
    comparisons run in it, and the sentence the result says about it."""

    algorithm: str  # "auto", "ring" or "tree": the sweep is named nccl-<algorithm>
    nccl_algo: str | None
    collectives: tuple[str, ...]
    comparisons: bool
    note: str


def per_function(nccl: tuple[int, ...] | None) -> bool:
    """Whether this NCCL version takes per-function NCCL_ALGO entries; an unknown version is taken as too old."""
    return nccl is not None and tuple(nccl[:3]) >= PER_FUNCTION_SINCE


def nccl_algo(algorithm: str, nccl: tuple[int, ...] | None) -> str | None:
    """The NCCL_ALGO value for a launch of `algorithm`: unset for auto, Ring for every function, Tree on the
    all-reduce alone where the syntax allows it and on every function otherwise."""
    if algorithm == "auto":
        return None
    if algorithm == "ring":
        return "Ring"
    if algorithm == "tree":
        return "allreduce:Tree" if per_function(nccl) else "Tree"
    raise ValueError(f"algorithm: {algorithm!r}, expected auto, ring or tree")


def runs_all(algorithm: str, nccl: tuple[int, ...] | None) -> bool:
    """Whether every collective can run in a launch of `algorithm` (a Tree on every function leaves only the
    all-reduce)."""
    return algorithm != "tree" or per_function(nccl)


def plan_launches(algorithms: list[str], collectives: list[str], nccl: tuple[int, ...] | None) -> list[Launch]:
    """The launches for `algorithms` (in order): a Tree launch sweeps the all-reduce alone; the node comparisons run
    in the first launch where all their collectives run, or in one more launch of NCCL's own choice."""
    out: list[Launch] = []
    compared = False
    for algorithm in algorithms:
        env = nccl_algo(algorithm, nccl)
        swept = tuple(collectives) if algorithm != "tree" else ("all-reduce",)
        here = not compared and runs_all(algorithm, nccl)
        compared = compared or here
        if algorithm == "auto":
            note = "NCCL_ALGO unset: NCCL chose the algorithm per call (the nccl algorithm column)"
        elif algorithm == "ring":
            note = "NCCL_ALGO=Ring for every collective (an all-to-all is send/receive, which it does not touch)"
        else:
            note = f"NCCL_ALGO={env}: Tree exists for the all-reduce only, so this sweep is the all-reduce's"
        out.append(Launch(algorithm, env, swept, here, note))
    if not compared:
        out.append(
            Launch(
                "auto",
                None,
                (),
                True,
                "the node comparisons need an all-gather and a reduce-scatter, which a Tree on every function cannot "
                "run (NCCL before 2.24 takes no per-function NCCL_ALGO): they ran with NCCL_ALGO unset",
            )
        )
    return out


def launch_env(launch: Launch, log_dir: str) -> dict[str, str | None]:
    """The environment a launch sets (None: unset): its NCCL_ALGO, and NCCL's tuning log, one file per process."""
    return {
        "NCCL_ALGO": launch.nccl_algo,
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "TUNING",
        "NCCL_DEBUG_FILE": f"{log_dir}/nccl-{launch.algorithm}.%h.%p.log",
    }


_LINE = re.compile(
    r"NCCL INFO (?:(?P<func>[A-Za-z]+): )?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)"
)


def _name(token: str, names: tuple[str, ...]) -> str:
    return names[int(token)] if token.isdigit() and int(token) < len(names) else token


def chosen_algorithms(log_text: str) -> dict[tuple[str | None, int], str]:
    """{(NCCL function or None where the line names none, bytes): "Algo/proto"} from NCCL's tuning log, the choice
    made most often for that call."""
    seen: dict[tuple[str | None, int], Counter] = {}
    for m in _LINE.finditer(log_text):
        key = (m["func"], int(m["bytes"]))
        seen.setdefault(key, Counter())[f"{_name(m['algo'], ALGO_NAMES)}/{_name(m['proto'], PROTO_NAMES)}"] += 1
    return {key: counts.most_common(1)[0][0] for key, counts in seen.items()}


def algorithm_for(chosen: dict[tuple[str | None, int], str], collective: str, nbytes: int, ranks: int) -> str | None:
    """What NCCL logged for `collective` on a buffer of `nbytes` (nccl-tests' S) over `ranks`, or None (an
    all-to-all, or no line for it)."""
    func = FUNCTIONS.get(collective)
    if func is None:
        return None
    logged = nbytes // ranks if collective in _PER_RANK_COUNT else nbytes
    return chosen.get((func, logged)) or chosen.get((None, logged))


__all__ = [
    "ALGO_NAMES",
    "COMPARISON_COLLECTIVES",
    "Launch",
    "algorithm_for",
    "chosen_algorithms",
    "launch_env",
    "nccl_algo",
    "per_function",
    "plan_launches",
    "runs_all",
]
