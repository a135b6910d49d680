"""The fast paths' own machinery (issue 13, item 2; issue 33): the seam's protocol, the SVM
kernel's row groups and blocks, the fixed-order layout, threads, numba's cache (warm-up) and the
bench. Their numbers against the reference path, composition by composition:
tests/engine/test_fast_equivalence.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedsweep.core.messages import LocalDirection
from fedsweep.engine.batches import BatchSchedule
from fedsweep.engine.fast import Accelerator, FastPath, svm_trajectory
from fedsweep.engine.fast.layout import taken_batch_numbers
from fedsweep.engine.functional import FunctionalModel
from fedsweep.engine.local import Client, StepObserver
from fedsweep.experiment import FLRun
from fedsweep.models.base import FLModel
from fedsweep.models.svm import SquaredSVM
from tests.helpers import tiny_config, tiny_dataset

needs_numba = pytest.mark.skipif(svm_trajectory.kernel() is None, reason="numba is not available")

DATA = tiny_dataset(n_train=600, side=8)


def run(monkeypatch, fused: bool, rounds: int = 3, **overrides):
    monkeypatch.setenv(svm_trajectory.ENV, "1" if fused else "0")
    cfg = tiny_config(train__rounds=rounds, train__lr=0.05, **overrides)
    flrun = FLRun(cfg, dataset=DATA)
    metrics = [flrun.step() for _ in range(rounds)]
    return flrun, metrics


@needs_numba
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
            "0",  # the DivFL row has its own test (tests/components/test_divfl_memory.py)
            "--json",
        ]
    )
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert summary["svm_us_per_step"] > 0 and summary["bherd_over_fedavg"] > 0
    assert summary["svm_memory_floor_us_per_step"] > 0 and summary["fused_kernel"] is True
    assert any(line.startswith("| svm | FedAvg, per-step path |") for line in lines)


@needs_numba
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


@needs_numba
def test_the_numbers_do_not_depend_on_threads_or_the_fixed_order_layout(monkeypatch):
    """float32: the row blocks add in a fixed order (1 or 2 threads), and under the fixed
    order a client's rows copied in batch order (``FEDSWEEP_LAYOUT``) are the same rows in
    the same order: the same bits. The rr order (no layout) runs fused as well."""
    from fedsweep.engine.fast import layout as layout_mod

    results = []
    for threads, layout in [(1, "1"), (2, "1"), (2, "0")]:
        monkeypatch.setenv(layout_mod.LAYOUT_ENV, layout)
        flrun, _ = run(monkeypatch, True, rounds=3, threads=threads, selector="bherd")
        results.append(flrun.w)
        assert bool(flrun.trainer.fast.layout.clients) == (layout == "1")  # used iff on
    assert all(torch.equal(results[0], w) for w in results[1:])
    step_run, _ = run(monkeypatch, False, rounds=2, train__order="rr")
    fused_run, _ = run(monkeypatch, True, rounds=2, train__order="rr")
    assert fused_run.trainer.fast.clients_run > 0 and not fused_run.trainer.fast.layout.clients
    torch.testing.assert_close(fused_run.w, step_run.w, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
@needs_numba
def test_a_fused_run_keeps_the_threads_it_was_given():
    """numba's first parallel call starts its OpenMP pool, which set the calling thread's
    OpenMP count (torch shares it) to all CPUs: the first run of every sweep worker then ran
    torch on 2 threads on its 1 CPU. In a fresh process (the pool not yet started), a run with
    ``threads: 1`` still has torch on 1 thread after its fused rounds (and BHerd's herding)."""
    import subprocess
    import sys

    code = (
        "import torch\n"
        "from fedsweep.experiment import FLRun\n"
        "from tests.helpers import tiny_config, tiny_dataset\n"
        "run = FLRun(tiny_config(threads=1, selector='bherd'), dataset=tiny_dataset(n_train=600, side=8))\n"
        "run.step(); run.step()\n"
        "print(torch.get_num_threads())\n"
    )
    env = {**__import__("os").environ, "NUMBA_NUM_THREADS": "2", svm_trajectory.ENV: "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "1", out.stdout + out.stderr


@pytest.mark.slow
@needs_numba
def test_warmup_builds_the_kernels_and_the_schema_template(tmp_path, monkeypatch, capsys):
    """``make install`` runs ``python -m fedsweep.warmup``: it compiles the kernels (numba's
    disk cache) and builds the MLflow schema template, one line each; with the fused kernel
    switched off it says the runs keep the per-step path, and it never raises."""
    from fedsweep import warmup
    from fedsweep.tracking import schema

    monkeypatch.setenv(schema.SCHEMA_CACHE_ENV, str(tmp_path / "cache"))
    warmup.main()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("warm-up: kernels: fused SVM trajectory and compiled herding")
    assert out[1].startswith(f"warm-up: MLflow schema template: {tmp_path / 'cache'}")
    assert list((tmp_path / "cache").glob("mlflow-*.db"))
    monkeypatch.setenv("FEDSWEEP_FUSED", "0")  # the switch's name, unchanged
    warmup.main()
    assert "unavailable" in capsys.readouterr().out.splitlines()[0]


class Always(Accelerator):
    """Applies to everything; counts its runs."""

    name = "always"

    def __init__(self) -> None:
        self.runs = 0

    def applies(self, fm, x, w, direction) -> bool:
        return True

    def run(self, fm, steps) -> torch.Tensor:
        self.runs += 1
        return torch.zeros((), dtype=steps.y.dtype)


class Method:
    def __init__(self, direction) -> None:
        self.direction = direction

    def fused_direction(self, client):
        return self.direction


class Selector:
    def __init__(self, buffers) -> None:
        self.buffers, self.asked = buffers, 0

    def fused_buffers(self, direction):
        self.asked += 1
        return self.buffers


class Observer(StepObserver):
    """Reads what it names of the recorded trajectory (None: single steps)."""

    def __init__(self, wants) -> None:
        self.wants, self.seen = wants, None

    def fused_record(self, direction):
        return self.wants

    def on_trajectory(self, steps) -> None:
        self.seen = steps


class WithBatchNorm(FLModel):
    def __init__(self) -> None:
        super().__init__()
        self.linear, self.norm = nn.Linear(4, 1), nn.BatchNorm1d(1)

    def forward(self, x):
        return self.norm(self.linear(x)).squeeze(-1)


@pytest.mark.parametrize(
    ("case", "declines"),
    [
        ("applies", False),
        ("observer", True),  # a step observer watches single steps
        ("observer of single steps", True),  # fused_record is None (FedWalk's L_k)
        ("observer of the trajectory", False),  # fused_record names y, g, v (FedVeca)
        ("batchnorm", True),  # buffers change during training
        ("no closed form", True),  # momentum: fused_direction is None
        ("no buffers", True),  # a selector that sees every step: fused_buffers is None
        ("no accelerator", True),  # nothing applies to this model here
    ],
)
def test_the_seam_follows_its_protocol(case, declines):
    """``FastPath.run`` hands a client's steps to the first accelerator that applies when the
    protocol holds, else returns None and changes nothing; the selector's ``fused_buffers`` is
    asked only once the steps will run fast (it tells BHerd and GraB their buffers are filled in
    one call), and an observer that names what it reads gets it in one ``on_trajectory`` call
    (``v is g`` under plain SGD)."""
    module = WithBatchNorm() if case == "batchnorm" else SquaredSVM(4)
    fm = FunctionalModel(module)
    x, y = torch.rand(40, 4), torch.randint(0, 10, (40,))
    schedule = BatchSchedule(40, 5, "rr", torch.Generator().manual_seed(0))
    client = Client(0, torch.arange(40), 3, schedule)
    rows = schedule.take(3)
    method = Method(None if case == "no closed form" else LocalDirection())
    selector = Selector(None if case == "no buffers" else (None, None))
    observers = {
        "observer": [object()],
        "observer of single steps": [Observer(None)],
        "observer of the trajectory": [Observer(frozenset({"y", "g", "v"}))],
    }.get(case, [])
    accelerators = [] if case == "no accelerator" else [Always]
    fast = FastPath(fm, x, y, method, selector, observers, accelerators)
    w = torch.zeros(fm.dim)
    loss = fast.run(client, 3, rows, w.clone(), w, 0.1)
    assert (loss is None) == declines
    assert fast.clients_run == (0 if declines else 1)
    assert sum(acc.runs for acc in fast.accelerators) == fast.clients_run
    assert selector.asked == (case in ("applies", "no buffers", "observer of the trajectory"))
    if case == "observer of the trajectory":
        steps = observers[0].seen
        assert steps.y.shape == steps.g.shape == (3, fm.dim) and steps.v is steps.g
        assert steps.lr == 0.1 and steps.full_gradient() is None  # Always has no one-call ∇F
    elif case == "observer of single steps":
        assert observers[0].seen is None


@needs_numba
@pytest.mark.parametrize(
    "overrides",
    [
        {"train__local_epochs": 6.0, "train__batch_size": 2},  # FedAvg, τ = 600
        {
            "algorithm": "fednova",
            "step_policy": "fedveca",
            "fedveca__tau_rule": "fixed",
            "fedveca__tau_init": 512,
            "fedveca__tau_max": 512,
        },  # τ a multiple of the report
        {"selector": "grab", "train__local_epochs": 3.0, "train__batch_size": 2},  # τ = 300
    ],
    ids=["fedavg-600", "fedveca-512", "grab-300"],
)
def test_a_fused_client_reports_its_progress_as_the_per_step_loop(monkeypatch, overrides):
    """With a progress listener (``LocalTrainer.on_steps``) the fast path runs a long client's
    steps in parts of ``STEP_REPORT`` and reports after each, as the per-step loop does: the
    same reports, and the same numbers, bit for bit, as one call without a listener."""
    overrides = {"train__dtype": "float64", **overrides}
    seen = {}
    for fused, listen in ((False, True), (True, True), (True, False)):
        monkeypatch.setenv(svm_trajectory.ENV, "1" if fused else "0")
        flrun = FLRun(tiny_config(train__rounds=1, train__lr=0.05, **overrides), dataset=DATA)
        reports = []
        if listen:
            flrun.trainer.on_steps = lambda done, total, reports=reports: reports.append(done)
        metrics = flrun.step()
        assert flrun.trainer.fast.clients_run == (3 if fused else 0)
        seen[fused, listen] = (reports, flrun.w, metrics)
    tau = FLRun(tiny_config(**overrides), dataset=DATA).clients[0].num_steps
    assert tau > 256 and seen[False, True][0] == seen[True, True][0]
    assert len(seen[True, True][0]) == 3 * (tau // 256 + 1)
    _, w, metrics = seen[True, True]
    assert torch.equal(w, seen[True, False][1])
    for key, value in seen[True, False][2].items():
        if "time" not in key:
            assert torch.equal(metrics[key], value), key


def test_taken_batch_numbers_equal_the_numbers_before_take():
    """The layout finds the batches a ``take(τ)`` of the fixed order returned from the cursor
    after it: the numbers ``fixed_batch_numbers(τ)`` gave before it, for any cursor and τ."""
    g = torch.Generator().manual_seed(3)
    for n_samples, batch in ((50, 10), (37, 4), (8, 8), (5, 20)):
        schedule = BatchSchedule(n_samples, batch, "fixed", g)
        for tau in (1, 2, 3, 5, 7, 11, 13, 1, 4):
            before = schedule.fixed_batch_numbers(tau)
            taken = schedule.take(tau)
            after = taken_batch_numbers(schedule, tau)
            assert torch.equal(after, before), (n_samples, batch, tau)
            assert torch.equal(schedule.batches[after], taken)


@pytest.mark.slow
def test_the_models_know_nothing_of_the_fast_paths():
    """The models package imports nothing of the engine, and no model carries a fast path (the
    seam recognises the model, ``engine.fast.svm_trajectory``)."""
    import subprocess
    import sys

    code = (
        "import sys, fedsweep.models\n"
        "print(sorted(m for m in sys.modules if m.startswith('fedsweep.engine')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    assert not hasattr(FLModel, "fused_trajectory")
    assert not hasattr(SquaredSVM(4), "fused_trajectory")
