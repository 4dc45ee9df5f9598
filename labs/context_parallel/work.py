"""Torch-free arithmetic of context parallelism: which chunks each rank holds, which (query, key) chunk pairs a
causal mask leaves to compute, and the bytes the ring and the all-to-all move. run.py measures; this predicts,
and the tests and checks hold the one against the other."""

from __future__ import annotations

from labs.parallel import comm

SPLITS = ("zigzag", "contiguous")


def chunks(split: str, rank: int, world: int) -> list[int]:
    """The two of the sequence's 2N equal chunks that `rank` holds: zig-zag (i, 2N-1-i) or contiguous (2i, 2i+1)."""
    if split == "zigzag":
        return [rank, 2 * world - 1 - rank]
    if split == "contiguous":
        return [2 * rank, 2 * rank + 1]
    raise ValueError(f"split: {split!r} is not one of {', '.join(SPLITS)}")


def pair_work(a: int, b: int, causal: bool) -> tuple[float, float]:
    """(computed, needed) for query chunk a against key chunk b, in chunk pairs: a pair above the causal diagonal is
    skipped (0, 0); the diagonal pair is computed whole with a mask but only half of it is needed (1, 0.5)."""
    if not causal:
        return 1.0, 1.0
    if a < b:
        return 0.0, 0.0
    return (1.0, 0.5) if a == b else (1.0, 1.0)


def rank_work(split: str, rank: int, world: int, causal: bool) -> dict:
    """Chunk pairs a rank computes and needs over the whole ring (its 2 query chunks against all 2N key chunks)."""
    mine = chunks(split, rank, world)
    computed = needed = 0.0
    for a in mine:
        for b in range(2 * world):
            c, n = pair_work(a, b, causal)
            computed += c
            needed += n
    return {"computed": computed, "needed": needed}


def ulysses_work(world: int, causal: bool) -> dict:
    """Chunk pairs (of all heads) a rank's share of heads amounts to: the whole sequence's pairs over N."""
    n2 = 2 * world
    if causal:
        return {"computed": (n2 * (n2 + 1) / 2) / world, "needed": (n2 * n2 / 2) / world}
    return {"computed": n2 * n2 / world, "needed": n2 * n2 / world}


def imbalance(values: list[float]) -> float | None:
    """max / min over ranks; None when some rank did nothing (the ratio is unbounded)."""
    lo = min(values)
    return max(values) / lo if lo > 0 else None


def ring_bytes_per_rank(world: int, seq_len: int, heads: int, head_dim: int, elem: int = 4) -> int:
    """Bytes one rank sends around the ring per pass: one K/V block of 2 x (S/N) x H x d elements per hop, N-1
    hops, as a ring all-gather of K and V would send."""
    return comm.hops("all-gather", world) * 2 * (seq_len // world) * heads * head_dim * elem


def ulysses_bytes_per_rank(world: int, seq_len: int, heads: int, head_dim: int, elem: int = 4) -> int:
    """Bytes one rank sends to other ranks per pass: Q, K, V in (3 tensors) and the output back (1), each of
    (S/N) x H x d elements, through all-to-alls of which (N-1)/N leaves the rank."""
    per_tensor = (seq_len // world) * heads * head_dim * elem
    return comm.whole_bus_bytes("all-to-all", world, 4 * per_tensor)
