"""The bench's sweep-overhead reader on a real MLflow store whose runs have known times."""

from __future__ import annotations

import json
import math
import os
import statistics

import pytest

from fedsweep import bench
from fedsweep.bench import main as bench_main
from fedsweep.bench import sweep_overheads
from fedsweep.tracking.connect import get_client


@pytest.fixture
def timed_store(tmp_path):
    """One quick sweep of three 1-thread trials: parent 100 s (t=1000..1100 s); the trials'
    round times sum to 30, 40 and 50 s and each run lasts 2 s more than its rounds."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = get_client(uri)
    exp = client.create_experiment("bench-fig")
    parent = client.create_run(
        exp,
        start_time=1_000_000,
        tags={
            "fedsweep.kind": "sweep",
            "fedsweep.figure": "bench-fig",
            "fedsweep.profile": "quick",
        },
    )
    start = 1_001_000
    for rounds in (30, 40, 50):
        child = client.create_run(
            exp,
            start_time=start,
            tags={"mlflow.parentRunId": parent.info.run_id, "fedsweep.threads": "1"},
        )
        for t in range(1, 11):  # ten rounds of rounds/10 s each
            client.log_metric(child.info.run_id, "round_time", rounds / 10, step=t)
        client.set_terminated(child.info.run_id, "FINISHED", end_time=start + (rounds + 2) * 1000)
        start += 1000
    client.set_terminated(parent.info.run_id, "FINISHED", end_time=1_100_000)
    other = client.create_run(exp, tags={"fedsweep.kind": "sweep", "fedsweep.profile": "smoke"})
    client.set_terminated(other.info.run_id, "FINISHED")
    return uri


@pytest.mark.slow
def test_sweep_overheads_reads_wall_own_rounds_and_outside_time(timed_store):
    (row,) = sweep_overheads(timed_store, profile="quick", cpus=2)
    assert row["figure"] == "bench-fig" and row["trials"] == 3
    assert row["wall_s"] == pytest.approx(100.0)
    assert row["runs_own_s"] == pytest.approx(120.0)
    # each trial's own rounds, in the order the trials started (the Ray Tune floor's trials)
    assert row["runs_own_each_s"] == pytest.approx([30.0, 40.0, 50.0])
    assert row["threads"] == 1
    assert row["ideal_wall_s"] == pytest.approx(60.0)  # 120 s over 2 workers
    assert row["overhead"] == pytest.approx(100 / 60 - 1)
    assert row["s_per_trial_outside_rounds"] == pytest.approx(2.0)
    assert row["s_before_first_trial"] == pytest.approx(1.0)  # the first trial opens at 1001 s
    assert row["s_after_last_trial"] == pytest.approx(45.0)  # the last ends at 1003 + 52 s
    assert not row["running"] and not row["resumed"]
    # one CPU: one worker, the ideal is the whole sum
    (one,) = sweep_overheads(timed_store, profile="quick", cpus=1)
    assert one["ideal_wall_s"] == pytest.approx(120.0)
    # both profiles: the smoke sweep without trials is listed too
    assert {r["profile"] for r in sweep_overheads(timed_store, cpus=2)} == {"quick", "smoke"}


def test_list_schedule_gives_each_job_to_the_worker_free_first():
    assert bench.list_schedule([], 2) == 0.0
    assert bench.list_schedule([5.0], 2) == 5.0
    assert bench.list_schedule([3.0, 3.0, 2.0, 2.0, 2.0], 2) == 7.0  # 3+2+2 | 3+2
    assert bench.list_schedule([1.0, 1.0, 4.0], 2) == 5.0  # the long one last waits: 1+4 | 1
    assert bench.list_schedule([4.0, 1.0, 1.0], 2) == 4.0  # longest first: 4 | 1+1
    assert bench.list_schedule([1.0, 2.0, 3.0], 1) == 6.0


def test_schedule_what_if_replays_the_trials_runs(timed_store):
    """The three runs last 32, 42 and 52 s (their rounds and 2 s), on 2 workers: in order
    32+52 | 42 = 84 s, longest first 52 | 42+32 = 74 s; one sweep, so one experiment is the
    same as in order; its 100 s of wall time leave 16 s outside the replay."""
    rows = sweep_overheads(timed_store, profile="quick", cpus=2)
    assert rows[0]["runs_each_s"] == pytest.approx([32.0, 42.0, 52.0])
    assert rows[0]["workers"] == 2
    what = bench.schedule_what_if(rows)
    assert what["sweeps"] == 1
    assert what["in_order_s"] == pytest.approx(84.0)
    assert what["longest_first_s"] == pytest.approx(74.0)
    assert what["one_experiment_s"] == pytest.approx(84.0)
    assert what["outside_runs_s"] == pytest.approx(16.0)
    assert what["before_first_trials_s"] == pytest.approx(1.0)
    # two copies of the sweep as one experiment: 32, 42, 52, 32, 42, 52 on 2 workers is
    # 32+52+52 | 42+32+42 = 136 | 116, against 2 x 84 one sweep after the other
    twice = bench.schedule_what_if(rows + rows)
    assert twice["in_order_s"] == pytest.approx(168.0)
    assert twice["one_experiment_s"] == pytest.approx(136.0)


def test_bench_from_store_prints_the_table_and_json(timed_store, capsys):
    bench_main(["--from-store", timed_store, "--profile", "quick", "--json"])
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("| bench-fig [quick] | 3 | 100.0 s |") for line in out)
    summary = json.loads(out[-1])
    assert summary["total"]["trials"] == 3
    assert summary["total"]["overhead"] == pytest.approx(100 / 60 - 1)
    assert summary["what_if"]["longest_first_s"] == pytest.approx(74.0)
    assert any("each sweep's longest first 74.0 s" in line for line in out)


@pytest.mark.slow
def test_bench_model_ratios_are_per_repeat():
    """Every timed row has a "÷ FedAvg" (engine rows from paired rounds, the others from the
    repeats); FedAvg's own is exactly 1, whatever the rounds' times were."""
    import torch

    data = bench.synthetic_mnist()
    g = torch.Generator().manual_seed(1)
    batches = torch.stack(
        [
            torch.randperm(60000, generator=g)[: bench.STEPS_PER_CLIENT * bench.BATCH].view(
                bench.STEPS_PER_CLIENT, bench.BATCH
            )
            for _ in range(bench.CLIENTS)
        ]
    )
    medians, ratios = bench.bench_model("svm", data, batches, 3, ["fedavg", "bherd"], 0.0)
    assert set(ratios) == set(medians) >= {"proxy", "fedavg", "bherd"}
    assert ratios["fedavg"] == 1.0
    assert all(r > 0 for r in ratios.values())


def test_paired_ratio_alternates_the_order_and_takes_the_median():
    """:func:`bench.paired_ratio` runs the pairs as (base, other), (other, base), ...; its
    result is the median of the pairs' ratios (here the first of each pair is timed slower,
    which the alternation cancels)."""
    calls: list[str] = []

    def timer(name, fast, slow):
        def run():
            first = not calls or calls[-1] == "|"
            calls.append(name)
            if len(calls) % 3 == 2:
                calls.append("|")
            return slow if first else fast

        return run

    ratio = bench.paired_ratio(timer("a", 1.0, 1.2), timer("b", 1.1, 1.32), 4)
    assert "".join(calls) == "ab|ba|ab|ba|"
    assert ratio == pytest.approx(statistics.median([1.1 / 1.2, 1.32 / 1.0] * 2))


def test_floor_trial_keeps_its_thread_busy_for_the_cpu_time_asked():
    import time

    from fedsweep.bench.floor_trial import busy

    cpu, wall = time.thread_time(), time.perf_counter()
    busy(0.05)
    assert time.thread_time() - cpu >= 0.05  # CPU time, not a sleep
    assert time.perf_counter() - wall >= 0.05


def test_floor_trial_module_imports_neither_torch_nor_mlflow():
    """The floor without imports measures Ray and Tune alone: the trainable's module must not
    pull in torch or MLflow when a Ray worker unpickles it (checked in a fresh interpreter)."""
    import subprocess
    import sys

    code = (
        "import sys, fedsweep.bench.floor_trial; "
        "print(sorted(m for m in ('torch', 'mlflow', 'numba') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cpu_busy_between_takes_the_samples_around_the_interval(monkeypatch):
    tick = os.sysconf("SC_CLK_TCK")
    cpu = bench.CpuBusy()
    cpu.samples = [(0.0, 0, 0), (1.0, 100, 200), (2.0, 150, 400), (3.0, 350, 600)]
    # from the last sample at or before the start to the first at or after the end
    assert cpu.between(0.5, 2.5) == (350 / tick, 600 / tick)
    assert cpu.between(1.0, 2.0) == (50 / tick, 200 / tick)
    # outside the samples: the nearest ones
    assert cpu.between(-5.0, 9.0) == (350 / tick, 600 / tick)
    # no interval to speak of, or nothing sampled (no /proc/stat): NaN, never a made-up share
    assert all(math.isnan(v) for v in cpu.between(3.5, 4.0))
    monkeypatch.setattr(bench.CpuBusy, "STAT", "/nonexistent/stat")
    assert bench.CpuBusy.read() is None
    with bench.CpuBusy(every=0.01) as empty:
        pass
    assert empty.samples == [] and all(math.isnan(v) for v in empty.between(0.0, 1.0))


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc/stat only")
def test_cpu_busy_sees_a_busy_thread():
    """A thread kept busy for 0.3 s of CPU time shows as at least most of that much busy CPU
    time in the machine's counters (other processes can only add to it)."""
    import time

    from fedsweep.bench.floor_trial import busy

    with bench.CpuBusy(every=0.02) as cpu:
        start = time.time()
        busy(0.3)
        end = time.time()
        time.sleep(0.05)
    busy_s, all_s = cpu.between(start, end)
    assert 0.2 <= busy_s <= all_s


def test_paper_cost_counts_a_resumed_run_without_its_pause():
    """benchmarks/paper_cost.py: a run killed at round 3, resumed two hours later, costs its
    working minutes, not the two hours it lay killed (issue 35's cost table)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "paper_cost.py"
    spec = importlib.util.spec_from_file_location("paper_cost", path)
    paper_cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(paper_cost)
    rounds = [10.0, 20.0, 30.0, 7230.0, 7240.0, 7250.0]  # killed after 30 s, back at 7230 s
    segments = paper_cost.active_segments(0.0, 7255.0, rounds)
    assert segments == [(0.0, 30.0), (7230.0, 7255.0)]
    assert paper_cost.busy_seconds(segments) == 55.0
    assert paper_cost.active_segments(0.0, 40.0, [10.0, 20.0, 30.0]) == [(0.0, 40.0)]
    # two runs overlapping in time: the busy wall time is their union
    assert paper_cost.busy_seconds([(0.0, 30.0), (20.0, 50.0), (100.0, 110.0)]) == 60.0


def test_sweep_pairs_give_medians_the_range_and_each_pair():
    """``--sweep-pairs``: every number the median over the pairs; ``fedsweep_overhead`` the
    median of each pair's own value (a sweep against the floor of its own trials), not one
    computed from the medians; its range and the per-pair values beside it."""
    rows = [
        {
            "spec": "smoke (built in)",
            "trials": 8,
            "wall_s": wall,
            "ideal_wall_s": 1.0,
            "tune_floor_imports_wall_s": floor,
            "fedsweep_overhead": wall - floor,
            "runs_own_each_s": [0.5] * 8,
            "threads": 1,
        }
        for wall, floor in ((12.0, 11.0), (14.0, 11.5), (11.0, 10.0))
    ]
    out = bench.median_row(rows)
    assert out["pairs"] == 3 and out["trials"] == 8 and out["spec"] == "smoke (built in)"
    assert out["wall_s"] == 12.0 and out["tune_floor_imports_wall_s"] == 11.0
    assert out["fedsweep_overhead"] == 1.0  # median of 1.0, 2.5, 1.0 (12.0 - 11.0 by chance)
    assert (out["fedsweep_overhead_min"], out["fedsweep_overhead_max"]) == (1.0, 2.5)
    assert out["wall_s_each"] == [12.0, 14.0, 11.0]
    assert out["fedsweep_overhead_each"] == [1.0, 2.5, 1.0]
    assert "runs_own_each_s" not in out and "threads" not in out
