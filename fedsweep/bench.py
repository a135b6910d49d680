"""``make bench``: the cost of a local step and of a round, next to the machine's limits.

Workload (issue 2): 5 clients x 120 local steps of B=100 on MNIST-shaped data (60,000 x 1x28x28
training images split IID, 10,000 test images), then a test-set evaluation. Engine rounds
evaluate the test set only (``eval.train_metrics = false``).

Rows per model (``--models``, default svm and cnn), each the median of ``--repeats``
interleaved measurements; an engine row's "÷ FedAvg" is the median ratio of adjacent pairs of
rounds (as many pairs as fit in 8 s, at least ``--repeats``, at most 60: :func:`paired_ratio`):

* **limit proxy**: the same 600 steps and evaluation without the engine. SVM: a minimal hand
  loop of the closed-form step (index_select, two matrix-vector products, clamp; no hooks, no
  loss). CNN: the raw ``nn.Module`` + ``torch.optim.SGD`` + ``backward()`` loop.
* **FedAvg** (for the SVM also with the fused trajectory off, ``FEDSWEEP_FUSED=0``: the
  per-step path), **BHerd-FedAvg**, **GraB-FedAvg** and **FedVeca** (FedNova + the FedVeca step
  policy, fixed τ = 120 so the work is the same), with µs per local step and the ratio to
  FedAvg.

Then one ResNet-18 CIFAR-10 local step (B=32, engine vs raw loop), and the sweep overhead: a
smoke sweep through Ray Tune into a fresh MLflow store, its wall time against the sum of its
runs' own round times, and seconds per trial start, next to Ray Tune's floor for the same trials
(:func:`bench_tune_floor`) (``--no-sweep`` skips it).

DivFL (issue 32): the peak memory and time of building DivFL's distance table ``Dst``, kept as
its packed upper triangle (``samplers.divfl.packed_distance_table``) for ``--divfl-clients``
clients (default 5,000; ``0`` skips) with 785 features (the SVM's gradient on MNIST), in a fresh
interpreter with the engine's allocator setting: the peak RSS above the RSS before the build
(gradients already in memory), next to the table's own ``4 N (N − 1)`` bytes and the bound on
the rest (:func:`bench_divfl`).

``--from-store URI`` only prints the overhead of every sweep already in an MLflow store (its
wall time against its runs' own round times; :func:`sweep_overheads`), and what other schedules
of the same trials would have taken, replayed from their runs' durations
(:func:`schedule_what_if`).

``--json`` prints one JSON object as the last line (``svm_us_per_step``, ``bherd_over_fedavg``,
... ) so a bench run can be compared with an earlier one.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch

from fedsweep.config.load import build_config
from fedsweep.data.datasets import TensorDataset
from fedsweep.engine.device import keep_freed_memory, set_threads
from fedsweep.engine.run import FLRun, all_finite
from fedsweep.models import svm_kernel
from fedsweep.models.registry import build_model

STEPS_PER_CLIENT = 120
CLIENTS = 5
BATCH = 100
STEPS = CLIENTS * STEPS_PER_CLIENT


def synthetic_mnist(seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(
        name="mnist-shaped",
        x_train=torch.rand(60000, 1, 28, 28, generator=g),
        y_train=torch.randint(0, 10, (60000,), generator=g),
        x_test=torch.rand(10000, 1, 28, 28, generator=g),
        y_test=torch.randint(0, 10, (10000,), generator=g),
        num_classes=10,
        source="synthetic (bench)",
    )


def fingerprint(d: TensorDataset) -> list[float]:
    """A cheap checksum of a data set: two processes (``make bench-peers``: fedsweep and
    Flower in its own venv) check they train on the same data."""
    return [
        round(float(d.x_train.double().sum()), 3),
        float(d.y_train.sum()),
        round(float(d.x_test.double().sum()), 3),
        float(d.y_test.sum()),
    ]


#: engine variants: label -> config overrides (FedVeca at fixed τ: the same 600 steps)
VARIANTS = {
    "fedavg": {},
    "bherd": {"selector": "bherd"},
    "grab": {"selector": "grab"},
    "fedveca": {
        "algorithm": "fednova",
        "step_policy": "fedveca",
        "fedveca": {"tau_rule": "fixed", "tau_init": STEPS_PER_CLIENT, "tau_max": STEPS_PER_CLIENT},
    },
}


def engine_run(model: str, data: TensorDataset, **overrides) -> FLRun:
    tree = {
        "algorithm": "fedavg",
        "device": "cpu",
        "data": {"dataset": "mnist", "partition": "case1", "num_clients": CLIENTS},
        "model": {"name": model},
        "train": {"rounds": 10**6, "batch_size": BATCH, "lr": 1e-4, "order": "fixed"},
        "eval": {"train_metrics": False},
        "tracking": {"enabled": False},
    }
    tree.update(overrides)
    return FLRun(build_config(tree), dataset=data)


def time_engine_round(run: FLRun, fused: bool = True) -> float:
    previous = os.environ.get(svm_kernel.ENV)
    os.environ[svm_kernel.ENV] = "1" if fused else "0"
    try:
        start = time.perf_counter()
        run.step()
        all_finite(run.w)  # the engine's once-per-round check
        return time.perf_counter() - start
    finally:
        if previous is None:
            os.environ.pop(svm_kernel.ENV)
        else:
            os.environ[svm_kernel.ENV] = previous


def time_svm_hand_loop(data: TensorDataset, batches: torch.Tensor, lam: float = 0.1) -> float:
    """The limit proxy of the SVM: the closed-form step with nothing around it."""
    x = data.x_train.reshape(len(data.x_train), -1)
    ypm = 1.0 - 2.0 * torch.remainder(data.y_train, 2).float()
    lr = 1e-4
    start = time.perf_counter()
    for client in range(CLIENTS):
        w = torch.zeros(x.shape[1])
        for step in range(STEPS_PER_CLIENT):
            idx = batches[client, step]
            xb, yb = x.index_select(0, idx), ypm.index_select(0, idx)
            hinge = torch.clamp(1.0 - yb * (xb @ w), min=0.0)
            grad = lam * w - (xb.T @ (yb * hinge)) / BATCH
            w.sub_(grad, alpha=lr)
    xt = data.x_test.reshape(len(data.x_test), -1)
    yt = 1.0 - 2.0 * torch.remainder(data.y_test, 2).float()
    float(((xt @ w) * yt > 0).sum())
    return time.perf_counter() - start


def time_raw_round(model_name: str, data: TensorDataset, batches: torch.Tensor) -> float:
    """600 steps: fresh nn.Module per client (like a broadcast), torch.optim.SGD, backward."""
    base = build_model(model_name, data.input_shape, data.num_classes)
    state = {k: v.clone() for k, v in base.state_dict().items()}
    x, y = data.x_train, data.y_train
    start = time.perf_counter()
    for client in range(CLIENTS):
        model = base
        model.load_state_dict(state)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        for step in range(STEPS_PER_CLIENT):
            idx = batches[client, step]
            opt.zero_grad()
            out = model(x.index_select(0, idx))
            loss = model.criterion(out, y.index_select(0, idx))
            penalty = model.penalty(dict(model.named_parameters()))
            if penalty is not None:
                loss = loss + penalty
            loss.backward()
            opt.step()
    with torch.no_grad():
        correct = 0
        for s in range(0, len(data.x_test), 5000):
            out = model(data.x_test[s : s + 5000])
            correct += model.correct(out, data.y_test[s : s + 5000])
        float(correct)
    return time.perf_counter() - start


#: seconds of paired rounds per engine row for its "÷ FedAvg" (at least ``--repeats`` pairs)
PAIR_SECONDS = 8.0
#: at most this many pairs per row
MAX_PAIRS = 60


def paired_ratio(base, other, pairs: int) -> float:
    """Median of ``other() / base()`` over ``pairs`` adjacent pairs of rounds, run in turn as
    (base, other) and (other, base): each ratio compares two rounds run milliseconds apart, so
    this VM's drift from one second to the next cancels, and the alternation cancels what the
    first of a pair pays for the second (caches, the allocator)."""
    ratios = []
    for i in range(pairs):
        if i % 2 == 0:
            a = base()
            b = other()
        else:
            b = other()
            a = base()
        ratios.append(b / a)
    return statistics.median(ratios)


def bench_model(
    model: str,
    data,
    batches,
    repeats: int,
    variants: list[str],
    pair_seconds: float = PAIR_SECONDS,
) -> tuple[dict, dict]:
    """Median seconds per round of the limit proxy and each engine variant, and each row's
    ratio to FedAvg. An engine row's ratio is :func:`paired_ratio` over ``repeats`` pairs, or
    as many as fit in ``pair_seconds`` (up to ``MAX_PAIRS``: about 60 for the SVM, where one
    round is 20 ms and a ratio of single rounds moves by ±5%; a CNN round is 30 s). The proxy
    and floor rows' ratios are the median of the per-repeat ratios (each repeat times every
    row one after the other)."""
    runs = {name: engine_run(model, data, **VARIANTS[name]) for name in variants}
    proxy = (lambda: time_svm_hand_loop(data, batches)) if model == "svm" else None
    proxy = proxy or (lambda: time_raw_round(model, data, batches))
    timers = {"proxy": proxy}
    if model == "svm" and svm_kernel.kernel() is not None:
        # the memory floor: every batch's rows read once, as the fused kernel reads them under
        # the fixed order: each client's rows in sequence (its copy in batch order, 5 x 12,000
        # rows), 8 side by side
        seq = torch.arange(STEPS * BATCH).reshape(-1, BATCH)
        timers["floor"] = lambda: svm_kernel.memory_floor(data.x_train, seq)
    for name, run in runs.items():
        timers[name] = lambda run=run: time_engine_round(run)
    if model == "svm":
        timers["fedavg_per_step"] = lambda: time_engine_round(runs["fedavg"], fused=False)
    for timer in timers.values():
        timer()  # warm-up: allocations, first calls, the kernel's compilation
    times: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(repeats):
        for name, timer in timers.items():
            times[name].append(timer())
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratios = {
        k: statistics.median(a / b for a, b in zip(v, times["fedavg"], strict=True))
        for k, v in times.items()
    }
    engine_rows = [k for k in timers if k in runs or k == "fedavg_per_step"]
    for name in (k for k in engine_rows if k != "fedavg"):
        pairs = int(pair_seconds / (medians[name] + medians["fedavg"]))
        pairs = max(repeats, min(MAX_PAIRS, pairs))
        ratios[name] = paired_ratio(timers["fedavg"], timers[name], pairs)
    return medians, ratios


def bench_resnet_step(repeats: int, steps: int = 5) -> dict:
    """Seconds per ResNet-18 local step on CIFAR-shaped data (B=32): engine vs raw loop."""
    g = torch.Generator().manual_seed(0)
    n = 32 * steps * 2
    data = TensorDataset(
        "cifar-shaped",
        torch.rand(n, 3, 32, 32, generator=g),
        torch.randint(0, 10, (n,), generator=g),
        torch.rand(64, 3, 32, 32, generator=g),
        torch.randint(0, 10, (64,), generator=g),
        10,
        "synthetic (bench)",
    )
    cfg = build_config(
        {
            "algorithm": "fedavg",
            "device": "cpu",
            "data": {"dataset": "cifar10", "partition": "iid", "num_clients": 1},
            "model": {"name": "resnet18"},
            "train": {"rounds": 10**6, "batch_size": 32, "lr": 1e-3, "order": "fixed"},
            "step_policy": "fixed",
            "fixed_steps": {"steps": steps},
            "eval": {"train_metrics": False, "every": 10**6},  # steps only, no evaluation
            "tracking": {"enabled": False},
        }
    )
    run = FLRun(cfg, dataset=data)
    model = build_model("resnet18", data.input_shape, 10)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def raw() -> float:
        start = time.perf_counter()
        for s in range(steps):
            xb, yb = data.x_train[s * 32 : (s + 1) * 32], data.y_train[s * 32 : (s + 1) * 32]
            opt.zero_grad()
            model.criterion(model(xb), yb).backward()
            opt.step()
        return (time.perf_counter() - start) / steps

    def engine() -> float:
        return time_engine_round(run) / steps

    raw(), engine()
    return {
        "raw": statistics.median(raw() for _ in range(repeats)),
        "engine": statistics.median(engine() for _ in range(repeats)),
    }


#: the features of DivFL's bench: the SVM's gradient on MNIST (784 weights and the bias)
DIVFL_FEATURES = 785


def _proc_status_bytes(field: str) -> int | None:
    """``VmRSS``, ``VmHWM``, ... of this process in bytes (Linux ``/proc``); None elsewhere."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset this process's peak RSS (``VmHWM``) to its current RSS (Linux 4.0+)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def divfl_child(clients: int, features: int, threads: int | None = None) -> dict:
    """In this (fresh) process: build DivFL's packed distance table of ``clients`` random float32
    gradients of ``features`` on ``threads`` threads (default: every CPU), with freed memory
    kept as in a run. ``build_bytes``: the peak RSS during the build above the RSS just before
    it (the peak is reset first; where it cannot be, above the process's peak before it)."""
    import resource
    import sys

    from fedsweep.samplers.divfl import build_scratch_elements, packed_distance_table, packed_size

    kept = keep_freed_memory()
    threads = set_threads(threads)
    u = torch.randn(clients, features, generator=torch.Generator().manual_seed(0))
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else KiB

    def peak_since_start() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale

    before = _proc_status_bytes("VmRSS") or peak_since_start()
    reset = _reset_peak_rss()
    if not reset:  # the peak cannot be reset: count only what the build adds to it
        before = max(before, peak_since_start())
    start = time.perf_counter()
    table = packed_distance_table(u)
    seconds = time.perf_counter() - start
    peak = (_proc_status_bytes("VmHWM") if reset else None) or peak_since_start()
    assert table.shape == (packed_size(clients),)
    return {
        "clients": clients,
        "features": features,
        "threads": threads,
        "freed_memory_kept": kept,
        "seconds": seconds,
        "rss_before_bytes": before,
        "peak_rss_bytes": peak,
        "build_bytes": peak - before,
        "table_bytes": table.numel() * table.element_size(),
        "scratch_bound_bytes": build_scratch_elements(clients, features) * 8,
    }


def bench_divfl(clients: int, features: int = DIVFL_FEATURES, threads: int | None = None) -> dict:
    """:func:`divfl_child` in a fresh interpreter (its peak RSS is this build's alone)."""
    args = ["fedsweep.bench", "--divfl-child", f"{clients},{features},{threads or 0}"]
    return child_json(args, "the DivFL bench")


def child_json(args: list[str], what: str) -> dict:
    """``python -m ARGS`` in a fresh interpreter; the JSON object on its last line of output,
    else a RuntimeError naming ``what``, its exit code and the end of its output."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout).strip()[-2000:]
        raise RuntimeError(f"{what} failed (exit {out.returncode}): {tail}")
    return json.loads(lines[-1])


def smoke_sweep_spec(trials_seeds: int = 4) -> dict:
    """The default sweep row: SVM, mnist-5k, BHerd-FedAvg, 2 curves x ``trials_seeds`` seeds,
    20 rounds (short trials: the fixed costs dominate)."""
    return {
        "figure": "bench-sweep",
        "title": "bench: sweep overhead",
        "base": {
            "algorithm": "fedavg",
            "selector": "bherd",
            "threads": 1,
            "data": {"dataset": "mnist-5k", "partition": "case1", "num_clients": 5},
            "model": {"name": "svm"},
            "train": {"rounds": 20, "batch_size": 20, "lr": 1e-3},
        },
        "curves": {"key": "bherd.alpha", "values": [0.5, 1.0]},
        "seeds": list(range(trials_seeds)),
        "metrics": ["test_acc"],
        "profiles": {"paper": {}, "quick": {}, "smoke": {}},
    }


class CpuBusy:
    """The machine's busy CPU time while a ``with`` block runs: every CPU, every process (Linux
    ``/proc/stat``; elsewhere nothing is sampled and :meth:`between` gives NaN), sampled by a
    thread every ``every`` seconds. Says whether a sweep's start-up waits on something or is
    bound by the CPU work of Ray's processes, the imports and the stores."""

    STAT = "/proc/stat"

    def __init__(self, every: float = 0.05) -> None:
        import threading

        self.every = every
        #: (wall time, busy ticks, all ticks) of all CPUs together
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="cpu-busy", daemon=True)

    @classmethod
    def read(cls) -> tuple[int, int] | None:
        """(busy, all) ticks of all CPUs since boot: user, nice, system, irq and softirq are
        busy, idle and iowait are not; guest time is in user already, and a virtual machine's
        steal (its host ran something else) counts as neither."""
        try:
            with open(cls.STAT) as f:
                fields = [int(v) for v in f.readline().split()[1:8]]
        except (OSError, ValueError):
            return None
        if len(fields) < 7:
            return None
        return sum(fields) - fields[3] - fields[4], sum(fields)

    def _sample(self) -> None:
        while True:
            ticks = self.read()
            if ticks is None:
                return
            self.samples.append((time.time(), *ticks))
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> CpuBusy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> tuple[float, float]:
        """(busy CPU-seconds, CPU-seconds there were) from the last sample at or before
        ``start`` to the first at or after ``end`` (wall times, ``time.time()``)."""
        before = [s for s in self.samples if s[0] <= start] or self.samples[:1]
        after = [s for s in self.samples if s[0] >= end] or self.samples[-1:]
        if not before or not after or after[0][0] <= before[-1][0]:
            return float("nan"), float("nan")
        tick = os.sysconf("SC_CLK_TCK")
        a, b = before[-1], after[0]
        return (b[1] - a[1]) / tick, (b[2] - a[2]) / tick


def bench_sweep(
    spec_path: str | Path | None = None, profile: str = "smoke", floor: bool = True
) -> dict:
    """A sweep through Ray Tune into a fresh store (default: :func:`smoke_sweep_spec`; or the
    spec file ``spec_path`` at ``profile``): its wall time against the runs' own round times
    spread over the CPUs (the overhead), the seconds before the first trial's run opens
    (imports, spec checks, the store, Ray's start, the first actor), with the CPU work the
    machine did until then (:class:`CpuBusy`: every process, Ray's included), and the seconds
    each trial spends outside its rounds (opening its run, data and model, checkpoints,
    logging).

    With ``floor``, also Ray Tune's own cost for the same trials (:func:`bench_tune_floor`:
    trials that only keep a CPU busy for their rounds' time, without and with the imports of a
    tracked torch trial) and what fedsweep adds above the second, as a share of the ideal wall
    time (``fedsweep_overhead``)."""
    import yaml

    from fedsweep.cli.sweep_console import ray_output_to
    from fedsweep.sweep.runner import run_sweep, shutdown_ray

    tmp = Path(tempfile.mkdtemp(prefix="fedsweep-bench-"))
    if spec_path is None:
        path = tmp / "bench-sweep.yaml"
        path.write_text(yaml.safe_dump(smoke_sweep_spec()))
    else:
        path = Path(spec_path).resolve()
    uri = f"sqlite:///{tmp / 'store' / 'mlflow.db'}"
    start = time.perf_counter()
    opened = time.time()
    # Ray's own tables and worker lines go to a file
    with CpuBusy() as cpu, ray_output_to(tmp / "ray.log"):
        report = run_sweep(
            path,
            profile,
            tracking_uri=uri,
            storage_dir=tmp / "ray",
            verbose=0,
            echo=lambda *a: None,
        )
        wall = time.perf_counter() - start
        shutdown_ray()
    rows = sweep_overheads(uri)
    row = rows[0] if rows else {}
    trials = row.get("trials", 0)
    ideal = row.get("ideal_wall_s", 0.0)
    first = row["first_run_start"] - opened if trials else float("nan")
    # how busy the machine's CPUs were until then (start-up bound by CPU work, or waiting?)
    busy_s, cpu_s = cpu.between(opened, row["first_run_start"]) if trials else (math.nan,) * 2
    floors = {}
    if trials and floor:
        # the same trials through Ray Tune doing nothing but keep a CPU busy for their rounds'
        # time (and, in the second, importing what a tracked torch trial imports): Ray Tune's
        # own share
        for name, imports in (("tune_floor", False), ("tune_floor_imports", True)):
            floor_wall = bench_tune_floor(row["runs_own_each_s"], imports, row["threads"])
            floors[f"{name}_wall_s"] = floor_wall
            floors[f"{name}_overhead"] = floor_wall / ideal - 1.0 if ideal > 0 else float("nan")
        # what fedsweep adds above Ray Tune and the imports, as a share of the ideal wall time
        floors["fedsweep_overhead"] = (
            (wall - floors["tune_floor_imports_wall_s"]) / ideal if ideal > 0 else float("nan")
        )
    return {
        "spec": path.stem if spec_path is not None else "smoke (built in)",
        "profile": profile,
        "trials": trials,
        "finished": report.finished,
        "wall_s": wall,
        "runs_own_s": row.get("runs_own_s", 0.0),
        "ideal_wall_s": ideal,
        "overhead": wall / ideal - 1.0 if ideal > 0 else float("nan"),
        "s_per_trial_start": (wall - ideal) / trials if trials else float("nan"),
        "s_before_first_trial": first,
        "cpu_s_before_first_trial": busy_s,
        "cpu_busy_before_first_trial": busy_s / cpu_s if cpu_s > 0 else math.nan,
        "s_per_trial_outside_rounds": row.get("s_per_trial_outside_rounds", float("nan")),
        **floors,
    }


def bench_tune_floor(seconds: list[float], imports: bool, cpu: float = 1.0) -> float:
    """Ray Tune's own cost for a sweep whose trials' rounds take ``seconds``: the wall time
    (Ray's import and start to the last trial's end, as :func:`bench_sweep` times a sweep) of a
    fresh local Ray and one Tune experiment whose trials only keep a CPU busy that long (CPU
    time) (``fedsweep.sweep.floor_trial``), ``cpu`` CPUs each, actors reused as in a sweep.
    With ``imports`` every trial actor also imports torch and MLflow's SQL store. Runs in a
    fresh interpreter, which has to import Ray as the sweep's driver had."""
    args = json.dumps({"seconds": list(seconds), "imports": imports, "cpu": cpu})
    result = child_json(["fedsweep.sweep.floor_trial", args], "the Ray Tune floor")
    return float(result["wall_s"])


def sweep_overheads(tracking_uri: str, profile: str | None = None, cpus: int | None = None):
    """The overhead of every sweep in a store, from what its runs recorded: per sweep (parent
    run, optionally only ``profile``'s), its wall time (the parent run's start to end: from
    the scheduling of its trials, after Ray's start, to the figure's membership tags), the
    trials it ran (its child runs), the sum of their own round times (``round_time``), the
    ideal wall time (that sum spread over ``min(cpus // threads per trial, trials)`` workers;
    ``cpus`` defaults to this machine's) and the overhead ``wall / ideal - 1``; plus the
    seconds a trial spends outside its rounds (its run's duration minus its rounds). A sweep
    run again into the same parent (a resume, new curves) spans both calls: its row says so
    with ``resumed``; a sweep still running has ``running`` and its wall time so far. Rows in
    the order the sweeps started."""
    from mlflow import MlflowClient

    cpus = cpus or max(1, os.cpu_count() or 1)
    client = MlflowClient(tracking_uri=tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    runs = client.search_runs(experiments, max_results=50000)
    children: dict[str, list] = {}
    for r in runs:
        parent = r.data.tags.get("mlflow.parentRunId")
        if parent is not None:
            children.setdefault(parent, []).append(r)
    rows = []
    for p in runs:
        tags = p.data.tags
        if tags.get("fedsweep.kind") != "sweep" or (
            profile and tags.get("fedsweep.profile") != profile
        ):
            continue
        # the sweep's finished trials, in the order they started
        kids = sorted(
            (r for r in children.get(p.info.run_id, []) if r.info.end_time),
            key=lambda r: r.info.start_time,
        )
        outside = 0.0
        workers = threads_max = 0
        each = []  # every trial's own round time
        lasted = []  # every trial's run, opening to end (its rounds and what is around them)
        for r in kids:
            rounds = sum(m.value for m in client.get_metric_history(r.info.run_id, "round_time"))
            each.append(rounds)
            lasted.append((r.info.end_time - r.info.start_time) / 1000)
            outside += lasted[-1] - rounds
            threads = int(r.data.tags.get("fedsweep.threads", "1") or 1)
            threads_max = max(threads_max, threads)
            workers = max(workers, cpus // max(1, threads))
        own = sum(each)
        workers = max(1, min(workers, len(kids)))  # the trials that can run at once
        ideal = own / workers if kids else 0.0
        running = p.info.end_time is None
        end = time.time() * 1000 if running else p.info.end_time
        wall = (end - p.info.start_time) / 1000
        first = kids[0].info.start_time if kids else None  # the first trial's start
        rows.append(
            {
                "figure": tags.get("fedsweep.figure", p.info.run_name),
                "profile": tags.get("fedsweep.profile"),
                "trials": len(kids),
                "wall_s": wall,
                "runs_own_s": own,
                "runs_own_each_s": each,
                "runs_each_s": lasted,
                "workers": workers,
                "threads": threads_max or 1,  # a trial's threads (= its CPUs in a sweep)
                "ideal_wall_s": ideal,
                "overhead": wall / ideal - 1.0 if ideal > 0 else float("nan"),
                "s_per_trial_outside_rounds": outside / len(kids) if kids else float("nan"),
                "first_run_start": (first or 0) / 1000,
                # the sweep's fixed costs: Tune's start, new trial actors and their imports, the
                # first trial's data (before); the figure's membership tags, Tune's end (after)
                "s_before_first_trial": (
                    (first - p.info.start_time) / 1000 if kids else float("nan")
                ),
                "s_after_last_trial": (
                    (end - max(r.info.end_time for r in kids)) / 1000 if kids else float("nan")
                ),
                "start": p.info.start_time / 1000,
                "running": running,
                "resumed": bool(kids) and first < p.info.start_time,
            }
        )
    rows.sort(key=lambda r: r["start"])
    return rows


def list_schedule(durations: list[float], workers: int) -> float:
    """The makespan of jobs of these ``durations`` on ``workers`` identical workers, each job
    in turn going to the worker free first (what Tune does with a grid: trials in order, the
    next one on the first CPU that frees up), all starting at 0."""
    free = [0.0] * max(1, workers)
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def schedule_what_if(rows: list[dict]) -> dict:
    """What other schedules of the same trials would have taken, replayed from the runs' real
    durations (each trial's run, opening to end) with :func:`list_schedule` on each sweep's
    workers: the sweeps' trials in the order they ran (``in_order_s``: the sweeps' wall time
    less what lies outside the trials' runs: the starts, the gaps between trials, the ends);
    each sweep's longest trials first (``longest_first_s``); every sweep's trials as one
    experiment, in order (``one_experiment_s``: no sweep waits for another's last trials).
    ``outside_runs_s``: the sweeps' wall time outside the replayed runs (their starts before
    the first trial, the gaps between trials, the ends after the last)."""
    rows = [r for r in rows if r.get("trials")]
    wall = sum(r["wall_s"] for r in rows)
    in_order = sum(list_schedule(r["runs_each_s"], r["workers"]) for r in rows)
    longest = sum(list_schedule(sorted(r["runs_each_s"], reverse=True), r["workers"]) for r in rows)
    workers = min((r["workers"] for r in rows), default=1)
    together = list_schedule([d for r in rows for d in r["runs_each_s"]], workers)
    return {
        "sweeps": len(rows),
        "wall_s": wall,
        "in_order_s": in_order,
        "longest_first_s": longest,
        "one_experiment_s": together,
        "outside_runs_s": wall - in_order,
        "before_first_trials_s": sum(r["s_before_first_trial"] for r in rows),
    }


def print_store_overheads(uri: str, profile: str | None, as_json: bool) -> None:
    """The table of :func:`sweep_overheads` with a total row (the sum over the sweeps, and the
    span from the first sweep's start to the last one's end, which adds the driver's work
    between sweeps)."""
    rows = [r for r in sweep_overheads(uri, profile) if r["trials"]]
    print(
        f"# sweep overhead from the store {uri}: per sweep, its wall time against its runs' own "
        "round times spread over the CPUs"
    )
    print(
        "| sweep | trials | wall | runs' own rounds (spread) | overhead | s/trial outside rounds "
        "| s before the first trial | s after the last |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        note = " (resumed or re-run: spans two calls)" if r["resumed"] else ""
        note += " (still running: wall so far)" if r["running"] else ""
        print(
            f"| {r['figure']} [{r['profile']}]{note} | {r['trials']} | {r['wall_s']:.1f} s "
            f"| {r['runs_own_s']:.1f} s ({r['ideal_wall_s']:.1f} s) | {r['overhead'] * 100:.0f}% "
            f"| {r['s_per_trial_outside_rounds']:.2f} | {r['s_before_first_trial']:.1f} "
            f"| {r['s_after_last_trial']:.1f} |"
        )
    total = {
        "sweeps": len(rows),
        "trials": sum(r["trials"] for r in rows),
        "wall_s": sum(r["wall_s"] for r in rows),
        "ideal_wall_s": sum(r["ideal_wall_s"] for r in rows),
        "runs_own_s": sum(r["runs_own_s"] for r in rows),
        "span_s": max((r["start"] + r["wall_s"] for r in rows), default=0.0)
        - min((r["start"] for r in rows), default=0.0),
    }
    ideal = total["ideal_wall_s"]
    total["overhead"] = total["wall_s"] / ideal - 1.0 if ideal > 0 else float("nan")
    total["span_overhead"] = total["span_s"] / ideal - 1.0 if ideal > 0 else float("nan")
    print(
        f"| all {total['sweeps']} sweeps | {total['trials']} | {total['wall_s']:.1f} s "
        f"| {total['runs_own_s']:.1f} s ({ideal:.1f} s) | {total['overhead'] * 100:.0f}% | "
        f"| {sum(r['s_before_first_trial'] for r in rows):.1f} "
        f"| {sum(r['s_after_last_trial'] for r in rows):.1f} |"
    )
    print(
        f"# first sweep's start to last sweep's end: {total['span_s']:.1f} s "
        f"(overhead {total['span_overhead'] * 100:.0f}% with the driver's work between sweeps)"
    )
    what = schedule_what_if(rows)
    print(
        f"# the trials' runs replayed on each sweep's workers (list scheduling, their real "
        f"durations): in the order they ran {what['in_order_s']:.1f} s, each sweep's longest "
        f"first {what['longest_first_s']:.1f} s, all {what['sweeps']} sweeps as one experiment "
        f"{what['one_experiment_s']:.1f} s; outside the replayed runs "
        f"{what['outside_runs_s']:.1f} s ({what['before_first_trials_s']:.1f} s of it before "
        "the sweeps' first trials)"
    )
    if as_json:
        print(json.dumps({"sweeps": rows, "total": total, "what_if": what}, sort_keys=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="svm,cnn")
    parser.add_argument("--variants", default="fedavg,bherd,grab,fedveca")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--pair-seconds",
        type=float,
        default=PAIR_SECONDS,
        help="seconds of paired rounds per engine row for its ÷ FedAvg (at least --repeats "
        f"pairs, at most {MAX_PAIRS})",
    )
    parser.add_argument("--no-resnet", action="store_true", help="skip the ResNet-18 step")
    parser.add_argument("--no-sweep", action="store_true", help="skip the sweep overhead")
    parser.add_argument(
        "--divfl-clients",
        type=int,
        default=5000,
        help="clients of the DivFL distance-table row (e.g. 20000: 1.6 GB of table, minutes); "
        "0 skips it",
    )
    parser.add_argument(
        "--divfl-threads", type=int, default=None, help="threads of the DivFL row (default: all)"
    )
    parser.add_argument("--divfl-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--sweep-spec",
        default=None,
        help="measure the sweep overhead on this spec file (default: a built-in smoke sweep)",
    )
    parser.add_argument("--sweep-profile", default="smoke", help="profile of --sweep-spec")
    parser.add_argument(
        "--from-store",
        metavar="URI",
        default=None,
        help="only print the overhead of every sweep already in this MLflow store (e.g. "
        "sqlite:///$PWD/mlruns/mlflow.db after make reproduce-figures); measures nothing",
    )
    parser.add_argument("--profile", default=None, help="with --from-store: only this profile")
    parser.add_argument("--json", action="store_true", help="a JSON summary as the last line")
    args = parser.parse_args(argv)
    if args.divfl_child:  # bench_divfl's fresh interpreter
        clients, features, threads = (int(v) for v in args.divfl_child.split(","))
        print(json.dumps(divfl_child(clients, features, threads or None)))
        return
    if args.from_store:
        print_store_overheads(args.from_store, args.profile, args.json)
        return
    threads = set_threads(None)
    data = synthetic_mnist()
    g = torch.Generator().manual_seed(1)
    batches = torch.stack(
        [
            torch.randperm(60000, generator=g)[: STEPS_PER_CLIENT * BATCH].view(
                STEPS_PER_CLIENT, BATCH
            )
            for _ in range(CLIENTS)
        ]
    )
    variants = [v for v in args.variants.split(",") if v]
    if "fedavg" not in variants:
        variants.insert(0, "fedavg")
    summary: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
        "torch": torch.__version__,
        "threads": threads,
        "fused_kernel": svm_kernel.kernel() is not None,
        "freed_memory_kept": keep_freed_memory(),
    }
    print(
        f"# fedsweep bench  {summary['date']}  {summary['machine']}  torch {torch.__version__}"
        f"  threads={threads}  fused SVM kernel: {'yes' if summary['fused_kernel'] else 'no'}"
        f"  freed memory kept: {'yes' if summary['freed_memory_kept'] else 'no'}"
    )
    print(
        f"# one round = {CLIENTS} clients x {STEPS_PER_CLIENT} steps of B={BATCH} + test eval; "
        f"median of {args.repeats}; ÷ FedAvg: engine rows the median ratio of adjacent pairs "
        f"of rounds (up to {MAX_PAIRS} pairs, {args.pair_seconds:g} s a row), proxy and floor the "
        "median of the per-repeat ratios; "
        f"µs/step = s/round / {STEPS} (evaluation included)"
    )
    print("| model | path | s/round | µs/step | ÷ FedAvg | ÷ limit proxy |")
    print("|---|---|---:|---:|---:|---:|")
    labels = {
        "proxy": "limit proxy (hand loop)",
        "floor": "memory floor (read each batch once, no eval)",
        "fedavg": "FedAvg",
        "fedavg_per_step": "FedAvg, per-step path",
        "bherd": "BHerd-FedAvg",
        "grab": "GraB-FedAvg",
        "fedveca": "FedVeca (fixed τ)",
    }
    for model in args.models.split(","):
        med, ratio = bench_model(model, data, batches, args.repeats, variants, args.pair_seconds)
        if model != "svm":
            labels["proxy"] = "limit proxy (raw nn.Module loop)"
        for key, value in med.items():
            print(
                f"| {model} | {labels[key]} | {value:.4f} | {value / STEPS * 1e6:.1f} "
                f"| {ratio[key]:.3f} | {value / med['proxy']:.3f} |"
            )
        summary[model] = {k: round(v, 6) for k, v in med.items()}
        summary[f"{model}_us_per_step"] = round(med["fedavg"] / STEPS * 1e6, 2)
        summary[f"{model}_proxy_us_per_step"] = round(med["proxy"] / STEPS * 1e6, 2)
        if "floor" in med:
            summary[f"{model}_memory_floor_us_per_step"] = round(med["floor"] / STEPS * 1e6, 2)
        for name in variants[1:]:
            summary[f"{name}_over_fedavg" + ("" if model == "svm" else f"_{model}")] = round(
                ratio[name], 4
            )
        if model == "svm" and "fedavg_per_step" in med:
            summary["svm_per_step_us_per_step"] = round(med["fedavg_per_step"] / STEPS * 1e6, 2)
    if not args.no_resnet:
        res = bench_resnet_step(max(1, args.repeats))
        print(
            f"\n# ResNet-18 on CIFAR-shaped 3x32x32, B=32, one local step: engine "
            f"{res['engine'] * 1e3:.1f} ms, raw loop {res['raw'] * 1e3:.1f} ms "
            f"(engine ÷ raw {res['engine'] / res['raw']:.3f}; {max(1, args.repeats)} rounds of 5 "
            "steps, no evaluation)"
        )
        summary["resnet18_ms_per_step"] = round(res["engine"] * 1e3, 2)
        summary["resnet18_raw_ms_per_step"] = round(res["raw"] * 1e3, 2)
    if args.divfl_clients > 0:
        dv = bench_divfl(args.divfl_clients, threads=args.divfl_threads)
        mib = 1 << 20
        threads = "1 thread" if dv["threads"] == 1 else f"{dv['threads']} threads"
        print(
            f"\n# DivFL distance table, {dv['clients']:,} clients x {dv['features']} features "
            f"(float32 gradients, float64 table, {threads}, fresh process): "
            f"{dv['seconds']:.1f} s; peak RSS {dv['peak_rss_bytes'] / mib:.0f} MiB, "
            f"{dv['build_bytes'] / mib:.0f} MiB above the {dv['rss_before_bytes'] / mib:.0f} MiB "
            f"before the build, of which the table is {dv['table_bytes'] / mib:.0f} MiB "
            f"(4 N(N-1), packed): "
            f"{(dv['build_bytes'] - dv['table_bytes']) / mib:.1f} MiB besides it "
            f"(bound on the scratch: {dv['scratch_bound_bytes'] / mib:.0f} MiB)"
        )
        summary["divfl"] = dv
        summary["divfl_build_s"] = round(dv["seconds"], 3)
        summary["divfl_build_mib"] = round(dv["build_bytes"] / mib, 1)
    if not args.no_sweep:
        sw = bench_sweep(args.sweep_spec, args.sweep_profile)
        print(
            f"\n# sweep overhead: {sw['spec']} at {sw['profile']}, {sw['trials']} trials in "
            f"{sw['wall_s']:.1f} s wall; the runs' own round times sum to {sw['runs_own_s']:.1f} s "
            f"({sw['ideal_wall_s']:.1f} s spread over the CPUs); overhead "
            f"{sw['overhead'] * 100:.0f}%: {sw['s_before_first_trial']:.1f} s before the first "
            f"trial's run opens ({sw['cpu_s_before_first_trial']:.1f} CPU-s of work, the CPUs "
            f"{sw['cpu_busy_before_first_trial'] * 100:.0f}% busy), "
            f"{sw['s_per_trial_outside_rounds']:.2f} s per trial outside its rounds, "
            f"{sw['s_per_trial_start']:.2f} s per trial in all"
        )
        if "tune_floor_wall_s" in sw:
            print(
                "# Ray Tune's floor for the same trials (a fresh Ray, trials that only keep a "
                f"CPU busy for their rounds' time): {sw['tune_floor_wall_s']:.1f} s wall, overhead "
                f"{sw['tune_floor_overhead'] * 100:.0f}%; with each actor importing torch and "
                f"MLflow: {sw['tune_floor_imports_wall_s']:.1f} s, "
                f"{sw['tune_floor_imports_overhead'] * 100:.0f}%; fedsweep above that floor: "
                f"{sw['fedsweep_overhead'] * 100:.0f}% of the ideal wall time"
            )
        summary["sweep"] = {k: round(v, 3) if isinstance(v, float) else v for k, v in sw.items()}
        summary["sweep_overhead"] = round(sw["overhead"], 4)
    if args.json:
        print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
