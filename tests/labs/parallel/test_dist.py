"""The launcher on real gloo ranks: results come back, and a crash or a hang ends the job cleanly."""

import os
import time

import pytest

from labs.parallel import dist as labdist


def _sum_of_ranks(rank, world_size, offset):
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(rank + offset)])
    dist.all_reduce(t)
    return {"rank": rank, "sum": t.item(), "threads": torch.get_num_threads(), "pid": os.getpid()}


def _rank1_raises(rank, world_size):
    import torch.distributed as dist

    if rank == 1:
        raise ValueError("deliberate failure on rank 1")
    dist.barrier()  # rank 0 would wait here forever without the launcher stepping in
    return rank


def _rank1_hangs(rank, world_size):
    import torch.distributed as dist

    if rank == 1:
        time.sleep(3600)
    dist.barrier()
    return rank


def _rank0_dies(rank, world_size):
    if rank == 0:
        os._exit(7)
    time.sleep(3600)


def _rank0_dies_and_rank1_reports_the_fallout(rank, world_size):
    """Rank 0 dies without a word; rank 1 sees it gone and reports what a peer's death looks like (gloo's
    "Connection closed by peer"), as a rank still connecting to a dead one does."""
    import torch.distributed as dist

    pids = [None] * world_size
    dist.all_gather_object(pids, os.getpid())
    if rank == 0:
        os._exit(7)
    while not _gone(pids[0]):
        time.sleep(0.001)
    raise RuntimeError("Gloo connectFullMesh failed: Connection closed by peer")


def _rank0_signalled(rank, world_size, sig):
    import signal as signals

    if rank == 0:
        os.kill(os.getpid(), getattr(signals, sig))
    time.sleep(3600)


def _rank0_killed_and_rank1_reports_the_fallout(rank, world_size):
    """As above, but rank 0 is SIGKILLed (the machine's OOM killer, an operator) instead of exiting."""
    import signal as signals

    import torch.distributed as dist

    pids = [None] * world_size
    dist.all_gather_object(pids, os.getpid())
    if rank == 0:
        os.kill(os.getpid(), signals.SIGKILL)
    while not _gone(pids[0]):
        time.sleep(0.001)
    raise RuntimeError("Gloo connectFullMesh failed: Connection closed by peer")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0); the launcher joins (reaps) its children, so it must not be ours.
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] == "Z"


def _children_of_this_process() -> set[int]:
    me = os.getpid()
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read()
            # multiprocessing's resource tracker lives as long as this interpreter by design; not a rank.
            if b"resource_tracker" not in cmd:
                out.add(int(entry))
    return out


def test_results_come_back_in_rank_order_with_one_thread_each():
    before = _children_of_this_process()
    out = labdist.launch(_sum_of_ranks, 2, args=(10,), timeout_s=60)
    assert [o["rank"] for o in out] == [0, 1]
    assert all(o["sum"] == 21.0 for o in out)  # (0+10) + (1+10)
    assert all(o["threads"] == 1 for o in out)
    assert all(_gone(o["pid"]) for o in out)
    assert _children_of_this_process() - before == set()


def test_a_rank_that_raises_fails_the_job_with_its_error():
    before = _children_of_this_process()
    t0 = time.monotonic()
    with pytest.raises(labdist.RankFailed, match="rank 1 failed: ValueError: deliberate failure on rank 1"):
        labdist.launch(_rank1_raises, 2, timeout_s=60)
    assert time.monotonic() - t0 < 30  # did not wait for the 60 s limit
    assert _children_of_this_process() - before == set()


def test_a_rank_that_hangs_is_stopped_at_the_time_limit():
    before = _children_of_this_process()
    t0 = time.monotonic()
    with pytest.raises(labdist.RankTimeout, match=r"ranks \[0, 1\] did not finish within 4 s") as info:
        labdist.launch(_rank1_hangs, 2, timeout_s=4)
    assert info.value.missing == [0, 1]
    assert time.monotonic() - t0 < 4 + 10  # limit plus terminate/join grace
    assert _children_of_this_process() - before == set()


def test_a_rank_that_dies_silently_is_reported_with_its_exit_code():
    with pytest.raises(labdist.RankFailed, match="rank 0 failed: process exited with code 7"):
        labdist.launch(_rank0_dies, 2, timeout_s=60)


def test_a_silent_death_is_named_over_the_peer_error_it_caused():
    """The peer's report reaches the launcher first; the dead rank is still the one named (CI saw the
    launcher name rank 1's "connection closed" when rank 0 died during the rendezvous)."""
    before = _children_of_this_process()
    with pytest.raises(labdist.RankFailed, match="rank 0 failed: process exited with code 7"):
        labdist.launch(_rank0_dies_and_rank1_reports_the_fallout, 2, timeout_s=60)
    assert _children_of_this_process() - before == set()


def test_a_rank_stopped_from_outside_is_told_apart_from_one_that_crashed():
    """labs/exits.py: SIGKILL or SIGTERM is the machine's doing (RankStopped, the course requeues it); SIGSEGV
    is a crash (RankFailed, the run's result)."""
    with pytest.raises(labdist.RankStopped, match=r"rank 0's process was stopped from outside the run \(SIGKILL\)"):
        labdist.launch(_rank0_signalled, 2, args=("SIGKILL",), timeout_s=60)
    with pytest.raises(labdist.RankStopped, match=r"\(SIGTERM\)"):
        labdist.launch(_rank0_signalled, 2, args=("SIGTERM",), timeout_s=60)
    with pytest.raises(labdist.RankFailed, match=r"rank 0 failed: process crashed \(SIGSEGV\)") as crash:
        labdist.launch(_rank0_signalled, 2, args=("SIGSEGV",), timeout_s=60)
    assert not isinstance(crash.value, labdist.RankStopped)


def test_a_rank_stopped_from_outside_is_named_over_the_peer_error_it_caused():
    before = _children_of_this_process()
    with pytest.raises(labdist.RankStopped, match=r"rank 0's process was stopped from outside the run \(SIGKILL\)"):
        labdist.launch(_rank0_killed_and_rank1_reports_the_fallout, 2, timeout_s=60)
    assert _children_of_this_process() - before == set()


def test_world_size_beyond_slots_is_refused_with_the_arithmetic():
    n = labdist.cpu_slots()
    assert n == max(4, os.cpu_count())
    msg = labdist.check_world_size(n + 1, "cpu")
    cores = os.cpu_count()
    assert f"{n} CPU rank slots: one per core and at least 4, on {cores} core{'s' * (cores != 1)} here" in msg
    assert f"use degree <= {n}" in msg
    assert labdist.check_world_size(n, "cpu") is None
    with pytest.raises(ValueError, match="world_size"):
        labdist.launch(_sum_of_ranks, n + 1, args=(0,))


def test_cuda_ranks_bind_their_device_at_init_so_nccl_connects_before_any_timed_step():
    import torch

    assert labdist.init_options(3, "cuda") == {"backend": "nccl", "device_id": torch.device("cuda", 3)}
    assert labdist.init_options(3, "cpu") == {"backend": "gloo"}
