"""The fused SVM trajectory (issue 13, item 2): a client's τ local steps in one compiled call
give the per-step path's numbers (float64: to 1e-12) for every composition it applies to, and
the engine falls back to the per-step path wherever it does not apply."""

from __future__ import annotations

import pytest
import torch

from fedsweep.engine.run import FLRun
from fedsweep.models import svm_kernel
from tests.helpers import tiny_config, tiny_dataset

pytestmark = pytest.mark.skipif(svm_kernel.kernel() is None, reason="numba is not available")

DATA = tiny_dataset(n_train=600, side=8)


class Counting:
    """Counts the calls of the SVM's fused trajectory."""

    def __init__(self, monkeypatch):
        self.calls = 0
        original = svm_kernel.SVMTrajectory.__call__

        def counted(traj, *args, **kw):
            self.calls += 1
            return original(traj, *args, **kw)

        monkeypatch.setattr(svm_kernel.SVMTrajectory, "__call__", counted)


def run(monkeypatch, fused: bool, rounds: int = 3, **overrides):
    monkeypatch.setenv(svm_kernel.ENV, "1" if fused else "0")
    cfg = tiny_config(train__rounds=rounds, train__lr=0.05, **overrides)
    flrun = FLRun(cfg, dataset=DATA)
    metrics = [flrun.step() for _ in range(rounds)]
    return flrun, metrics


COMPOSITIONS = [
    {},
    {"algorithm": "fedprox", "fedprox__mu": 0.5},
    {"algorithm": "scaffold"},
    {"algorithm": "fednova"},
    {"algorithm": "fednova", "fednova__mu": 0.2},
    {"algorithm": "centralized"},
    {"selector": "bherd", "bherd__alpha": 0.5},
    {"selector": "bherd", "algorithm": "scaffold"},
    {"selector": "bherd", "algorithm": "fednova"},
]


@pytest.mark.parametrize(
    "overrides", COMPOSITIONS, ids=lambda o: "-".join(map(str, o.values())) or "fedavg"
)
def test_fused_trajectory_equals_the_per_step_path_in_float64(monkeypatch, overrides):
    overrides = {"train__dtype": "float64", **overrides}
    step_run, step_metrics = run(monkeypatch, False, **overrides)
    counter = Counting(monkeypatch)
    fused_run, fused_metrics = run(monkeypatch, True, **overrides)
    assert counter.calls > 0  # the fused path ran
    torch.testing.assert_close(fused_run.w, step_run.w, rtol=1e-12, atol=1e-12)
    for a, b in zip(step_metrics, fused_metrics, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if key == "round_time" or "time" in key:
                continue
            torch.testing.assert_close(b[key], a[key], rtol=1e-12, atol=1e-12, msg=key)
    if "selector" in overrides:  # BHerd picked the same steps from the same gradients
        for key, value in step_run.record_arrays().items():
            assert (fused_run.record_arrays()[key] == value).all(), key
    if overrides.get("algorithm") == "scaffold":
        torch.testing.assert_close(fused_run.method.c, step_run.method.c, rtol=1e-12, atol=1e-12)


def test_float32_agrees_to_rounding(monkeypatch):
    step_run, _ = run(monkeypatch, False, rounds=3)
    fused_run, _ = run(monkeypatch, True, rounds=3)
    assert fused_run.w.dtype == torch.float32
    torch.testing.assert_close(fused_run.w, step_run.w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "overrides",
    [
        {"selector": "grab"},  # GraB balances step by step: no buffer to fill
        {"algorithm": "fednova", "fednova__momentum": 0.9},  # momentum: no closed form
        {"model__name": "mlp"},  # no fused trajectory
        {"algorithm": "fednova", "step_policy": "fedveca"},  # its observer watches each step
    ],
    ids=["grab", "fednova-momentum", "mlp", "fedveca"],
)
def test_the_per_step_path_runs_where_fusing_does_not_apply(monkeypatch, overrides):
    counter = Counting(monkeypatch)
    run(monkeypatch, True, rounds=1, **overrides)
    assert counter.calls == 0


def test_environment_switch_turns_it_off(monkeypatch):
    counter = Counting(monkeypatch)
    run(monkeypatch, False, rounds=1)
    assert counter.calls == 0
    run(monkeypatch, True, rounds=1)
    assert counter.calls > 0


def test_bench_json_summary_is_the_last_line(capsys):
    """``make bench BENCH_ARGS=--json``: the last line is one JSON object with the keys a later
    run is compared on."""
    import json

    from fedsweep import bench

    bench.main(
        [
            "--models",
            "svm",
            "--variants",
            "fedavg,bherd",
            "--repeats",
            "1",
            "--pair-seconds",
            "0",
            "--no-resnet",
            "--no-sweep",
            "--divfl-clients",
            "0",  # the DivFL row has its own test (tests/test_i32_divfl.py)
            "--json",
        ]
    )
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert summary["svm_us_per_step"] > 0 and summary["bherd_over_fedavg"] > 0
    assert summary["svm_memory_floor_us_per_step"] > 0 and summary["fused_kernel"] is True
    assert any(line.startswith("| svm | FedAvg, per-step path |") for line in lines)


@pytest.mark.parametrize("batch_size", [1, 3, 8, 13, 47])
@pytest.mark.parametrize("threads", [1, 2])
def test_row_groups_and_blocks_equal_the_per_step_path_for_any_batch_size(
    monkeypatch, batch_size, threads
):
    """The kernel reads 8 rows side by side in 2 row blocks; a block's last group repeats its
    last row with weight 0. Batch sizes that leave every remainder (and B = 1, an empty
    second block) give the per-step path's numbers, on 1 and 2 threads (float64, BHerd on)."""
    overrides = {
        "train__dtype": "float64",
        "train__batch_size": batch_size,
        "selector": "bherd",
        "threads": threads,
    }
    step_run, step_metrics = run(monkeypatch, False, rounds=2, **overrides)
    fused_run, fused_metrics = run(monkeypatch, True, rounds=2, **overrides)
    torch.testing.assert_close(fused_run.w, step_run.w, rtol=1e-12, atol=1e-12)
    for a, b in zip(step_metrics, fused_metrics, strict=True):
        torch.testing.assert_close(b["test_loss"], a["test_loss"], rtol=1e-12, atol=1e-12)
    for key, value in step_run.record_arrays().items():
        assert (fused_run.record_arrays()[key] == value).all(), key


def test_the_numbers_do_not_depend_on_threads_or_the_fixed_order_layout(monkeypatch):
    """float32: the row blocks add in a fixed order (1 or 2 threads), and under the fixed
    order a client's rows copied in batch order (``FEDSWEEP_LAYOUT``) are the same rows in
    the same order: the same bits. The rr order (no layout) runs fused as well."""
    from fedsweep.engine import local

    results = []
    for threads, layout in [(1, "1"), (2, "1"), (2, "0")]:
        monkeypatch.setenv(local.LAYOUT_ENV, layout)
        flrun, _ = run(monkeypatch, True, rounds=3, threads=threads, selector="bherd")
        results.append(flrun.w)
        if layout == "1":
            assert flrun.trainer._layouts  # the layout was used
    assert all(torch.equal(results[0], w) for w in results[1:])
    counter = Counting(monkeypatch)
    step_run, _ = run(monkeypatch, False, rounds=2, train__order="rr")
    fused_run, _ = run(monkeypatch, True, rounds=2, train__order="rr")
    assert counter.calls > 0
    torch.testing.assert_close(fused_run.w, step_run.w, rtol=1e-4, atol=1e-6)


def test_a_fused_run_keeps_the_threads_it_was_given():
    """numba's first parallel call starts its OpenMP pool, which set the calling thread's
    OpenMP count (torch shares it) to all CPUs: the first run of every sweep worker then ran
    torch on 2 threads on its 1 CPU. In a fresh process (the pool not yet started), a run with
    ``threads: 1`` still has torch on 1 thread after its fused rounds (and BHerd's herding)."""
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from fedsweep.engine.run import FLRun\n"
        "from tests.helpers import tiny_config, tiny_dataset\n"
        "run = FLRun(tiny_config(threads=1, selector='bherd'), dataset=tiny_dataset(n_train=600, side=8))\n"
        "run.step(); run.step()\n"
        "print(torch.get_num_threads())\n"
    )
    env = {**__import__("os").environ, "NUMBA_NUM_THREADS": "2", svm_kernel.ENV: "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "1", out.stdout + out.stderr


def test_warmup_builds_the_kernels_and_the_schema_template(tmp_path, monkeypatch, capsys):
    """``make install`` runs ``python -m fedsweep.warmup``: it compiles the kernels (numba's
    disk cache) and builds the MLflow schema template, one line each; with the fused kernel
    switched off it says the runs keep the per-step path, and it never raises."""
    from fedsweep import warmup
    from fedsweep.tracking import store as store_mod

    monkeypatch.setenv(store_mod.SCHEMA_CACHE_ENV, str(tmp_path / "cache"))
    warmup.main()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("warm-up: kernels: fused SVM trajectory and compiled herding")
    assert out[1].startswith(f"warm-up: MLflow schema template: {tmp_path / 'cache'}")
    assert list((tmp_path / "cache").glob("mlflow-*.db"))
    monkeypatch.setenv("FEDSWEEP_FUSED", "0")
    warmup.main()
    assert "unavailable" in capsys.readouterr().out.splitlines()[0]
