"""overlap-trace through the real command line on 2 and 4 gloo ranks."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from labs.runtime import validate_result

SMALL = {"tokens": 128, "hidden": 128, "ffn": 512, "window_out": 512, "steps": 3, "warmup": 1, "rank_timeout_s": 120}


def run_cli(params, out, backend="cpu"):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "labs",
            "run",
            "overlap-trace",
            "--params",
            json.dumps(params),
            "--out",
            str(out),
            "--backend",
            backend,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("ranks", [2, 4])
def test_all_three_schedules_validate_and_obey_their_definitions(tmp_path, ranks):
    proc = run_cli({**SMALL, "ranks": ranks}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    assert validate_result(result) == []
    res = result["results"]
    assert list(res["schedules"]) == ["immediate", "windowed", "dependent"]
    for sched in res["schedules"].values():
        assert [r["rank"] for r in sched["ranks"]] == list(range(ranks))
        for r in sched["ranks"]:
            assert r["communication_ms"] > 0
            assert 0 <= r["overlap_ratio"] <= 1
            # exposed = comm - overlap, and the identity's residual is the step's idle time (never negative)
            assert r["exposed_communication_ms"] == pytest.approx(r["communication_ms"] - r["overlap_ms"], abs=1e-9)
            assert r["identity_residual_ms"] >= -1e-6
        for kind in ("timeline", "trace"):
            assert (tmp_path / sched["artifacts"][kind]).is_file()
        ET.fromstring((tmp_path / sched["artifacts"]["timeline"]).read_text())
    # Waiting at once, or for work that needs the data, leaves nothing in the window: by construction
    # no compute span can lie inside the collective's span (no timing assumption here).
    for name in ("immediate", "dependent"):
        assert all(r["overlap_ratio"] == 0 for r in res["schedules"][name]["ranks"]), name
    dep = res["schedules"]["dependent"]
    assert dep["safe_to_overlap"] is False and dep["must_wait"] is True and "UNSAFE" in dep["explanation"]
    assert res["schedules"]["windowed"]["safe_to_overlap"] is True
    assert len(res["comparison"]["windowed_overlap_gt_immediate_per_rank"]) == ranks
    trace = json.loads((tmp_path / "trace_windowed.json").read_text())
    lanes = {(e["pid"], e["args"]["name"]) for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert (ranks - 1, "wait") in lanes
    # the all-gather's span carries the bytes it gathered (the viewer's readout and Perfetto show them): every
    # rank ends up with all `ranks` shards of (tokens, ffn/ranks) fp32, i.e. tokens x ffn x 4 bytes
    gathers = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "communication"]
    assert gathers and {e["args"]["bytes"] for e in gathers} == {SMALL["tokens"] * SMALL["ffn"] * 4}
    assert {e["args"]["kind"] for e in gathers} == {"all-gather"}
    assert res["gathered_bytes"] == SMALL["tokens"] * SMALL["ffn"] * 4
    assert all("bytes" not in e["args"] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "communication")


def test_single_schedule_and_bad_rank_count(tmp_path):
    proc = run_cli({**SMALL, "schedules": ["windowed"], "ranks": 2}, tmp_path / "one")
    assert proc.returncode == 0, proc.stderr
    res = json.loads((tmp_path / "one" / "result.json").read_text())["results"]
    assert list(res["schedules"]) == ["windowed"] and res["comparison"] is None
    bad = run_cli({**SMALL, "ranks": 9}, tmp_path / "bad")
    assert bad.returncode == 2 and "ranks: got 9, expected <= 8" in bad.stderr
    odd = run_cli({**SMALL, "ranks": 3, "ffn": 512}, tmp_path / "odd")
    assert odd.returncode == 2 and "ffn(512) % ranks(3) = 2, must be 0" in odd.stderr


@pytest.mark.gpu
def test_overlap_trace_on_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs: NCCL all-gather between two devices")
    proc = run_cli({**SMALL, "ranks": 2}, tmp_path, backend="torch-cuda")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "result.json").read_text())["results"]["timing"]["kind"] == "cuda-events"
    from labs.trace.kernels import kernel_intervals, profiler_steps

    for schedule in ("immediate", "windowed", "dependent"):
        for rank in (0, 1):
            trace = json.loads((tmp_path / f"profile_{schedule}_rank{rank}.json").read_text())
            assert [n for n, _, _ in profiler_steps(trace)] == list(range(SMALL["steps"]))
            # one all-gather kernel per step and nothing else: the per-step rendezvous left no NCCL barrier
            assert len(kernel_intervals(trace)["communication"]) == SMALL["steps"], (schedule, rank)


def test_the_dependent_schedules_why_reads_its_count_and_fits_one_table_cell():
    from app.web.views.result_excerpt import MAX_TEXT
    from labs.overlap_trace.report import safety

    biggest = 16384 * 65536  # tokens × ffn at their upper bounds: every element of the gathered tensor
    why = safety("dependent", [{"unwritten_at_read": 1048576}, {"unwritten_at_read": biggest}], "cpu")["explanation"]
    assert "up to 1,073,741,824 of its elements" in why
    assert len(why) <= MAX_TEXT  # the page cuts a longer cell mid-sentence


@pytest.mark.parametrize(("ratio", "said"), [(0.0039, "under 1%"), (0.0, "0%"), (0.31, "31%"), (0.997, "over 99%")])
def test_the_answer_never_rounds_a_small_overlap_to_nothing(ratio, said):
    """The headline and the table beside it (which shows 0.4%) agree: a windowed overlap of 0.39% is "under 1%"."""
    from labs.overlap_trace.report import answer

    windowed = {"overlap_ratio": ratio, "exposed_comm_ms": 4.72}
    headline = answer({"windowed": windowed, "immediate": {"overlap_ratio": 0.0, "exposed_comm_ms": 4.57}}, "cpu")
    assert f"Independent work in the window hid {said} of the all-gather on this CPU" in headline
