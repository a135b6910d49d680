"""The sweep overhead: a sweep through Ray Tune into a fresh MLflow store, its wall time against
the sum of its runs' own round times (:func:`measure_sweep`, in a fresh interpreter), next to
Ray Tune's floor for the same trials (:func:`bench_tune_floor`, trials of
:mod:`fedsweep.bench.floor_trial`), with the machine's busy CPU time while it starts
(:class:`CpuBusy`); :func:`bench_sweep` measures sweep and floor alternately, in pairs, and
gives their medians (one run of either moves by a second on a busy machine).

``python -m fedsweep.bench.sweep_main '{"spec": null, "profile": "smoke"}'`` measures one sweep
and prints it as JSON (:func:`sweep_child`).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path

from fedsweep.bench.child import child_json
from fedsweep.bench.store_overheads import sweep_overheads

#: times ``make bench`` measures the sweep and its floor, alternately (``--sweep-pairs``)
SWEEP_PAIRS = 3


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
    spec_path: str | Path | None = None,
    profile: str = "smoke",
    floor: bool = True,
    pairs: int = 1,
) -> dict:
    """A sweep through Ray Tune into a fresh store (default: :func:`smoke_sweep_spec`; or the
    spec file ``spec_path`` at ``profile``), measured in a fresh interpreter
    (:func:`measure_sweep`), ``pairs`` times: its wall time against the runs' own round times
    spread over the CPUs (the overhead), the seconds before the first trial's run opens, with
    the CPU work the machine did until then, and the seconds each trial spends outside its
    rounds.

    With ``floor``, each sweep is followed by Ray Tune's own cost for the same trials
    (:func:`bench_tune_floor`: trials that only keep a CPU busy for that sweep's rounds' time,
    without and with the import of torch, which every FL trial needs), and what fedsweep adds above the
    second, as a share of the ideal wall time (``fedsweep_overhead``): one value per pair (a
    sweep and the floor of its own trials, measured one after the other), their median, range
    and list (``fedsweep_overhead_min``/``_max``/``_each``). Every other number is the median
    over the pairs; ``wall_s_each`` and ``tune_floor_imports_wall_s_each`` list them."""
    rows = []
    for _ in range(max(1, pairs)):
        row = sweep_child(spec_path, profile)
        if row["trials"] and floor:
            row.update(floors_of(row))
        rows.append(row)
    return median_row(rows)


def floors_of(row: dict) -> dict:
    """Ray Tune's floors for a measured sweep ``row``'s trials (each trial only keeping a CPU
    busy for its rounds' time; then with each actor importing torch), and what
    fedsweep adds above the second, as a share of the ideal wall time."""
    ideal = row["ideal_wall_s"]
    floors = {}
    for name, imports in (("tune_floor", False), ("tune_floor_imports", True)):
        floor_wall = bench_tune_floor(row["runs_own_each_s"], imports, row["threads"])
        floors[f"{name}_wall_s"] = floor_wall
        floors[f"{name}_overhead"] = floor_wall / ideal - 1.0 if ideal > 0 else float("nan")
    floors["fedsweep_overhead"] = (
        (row["wall_s"] - floors["tune_floor_imports_wall_s"]) / ideal if ideal > 0 else math.nan
    )
    return floors


#: per-pair lists kept beside the medians
EACH = ("wall_s", "tune_floor_imports_wall_s", "fedsweep_overhead")


def median_row(rows: list[dict]) -> dict:
    """One row of measured sweeps ``rows``: every number their median (each pair's
    ``fedsweep_overhead`` first, then the median of those), with ``pairs``, the range of
    ``fedsweep_overhead`` and the per-pair values of :data:`EACH`."""
    import statistics

    out = {k: v for k, v in rows[0].items() if k not in ("runs_own_each_s", "threads")}
    for key, value in out.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in rows)
    out["pairs"] = len(rows)
    if "fedsweep_overhead" in rows[0]:
        each = [r["fedsweep_overhead"] for r in rows]
        out["fedsweep_overhead_min"], out["fedsweep_overhead_max"] = min(each), max(each)
    for key in EACH:
        if key in rows[0]:
            out[f"{key}_each"] = [r[key] for r in rows]
    return out


def sweep_child(spec_path: str | Path | None, profile: str) -> dict:
    """:func:`measure_sweep` in a fresh interpreter (:mod:`fedsweep.bench.sweep_main`), so that
    every sweep of a row starts as the first did: nothing of Ray, Tune or MLflow imported yet."""
    spec = None if spec_path is None else str(Path(spec_path).resolve())
    args = json.dumps({"spec": spec, "profile": profile})
    return child_json(["fedsweep.bench.sweep_main", args], "the sweep overhead")


def measure_sweep(spec_path: str | Path | None = None, profile: str = "smoke") -> dict:
    """One sweep through Ray Tune into a fresh store, in this process (which must not have
    imported Ray, Tune or MLflow yet, as ``make bench``'s had not): its wall time from
    ``run_sweep``'s call to Ray's shutdown, the overhead against the runs' own round times
    spread over the CPUs, the seconds before the first trial's run opens (imports, spec checks,
    the store, Ray's start, the first actor) with the CPU work the machine did until then
    (:class:`CpuBusy`: every process, Ray's included), and the seconds each trial spends
    outside its rounds (opening its run, data and model, checkpoints, logging). Also the
    trials' own round times and threads, for the floor (:func:`floors_of`)."""
    import yaml

    from fedsweep.sweep.ray_backend import shutdown_ray
    from fedsweep.sweep.ray_output import ray_output_to
    from fedsweep.sweep.runner import run_sweep

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
    if spec_path is None or not Path(spec_path).resolve().is_relative_to(tmp):
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)  # the store and Ray's folder: read, not kept
    row = rows[0] if rows else {}
    trials = row.get("trials", 0)
    ideal = row.get("ideal_wall_s", 0.0)
    first = row["first_run_start"] - opened if trials else float("nan")
    # how busy the machine's CPUs were until then (start-up bound by CPU work, or waiting?)
    busy_s, cpu_s = cpu.between(opened, row["first_run_start"]) if trials else (math.nan,) * 2
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
        "runs_own_each_s": row.get("runs_own_each_s", []),
        "threads": row.get("threads", 1),
    }


def bench_tune_floor(seconds: list[float], imports: bool, cpu: float = 1.0) -> float:
    """Ray Tune's own cost for a sweep whose trials' rounds take ``seconds``: the wall time
    (Ray's import and start to the last trial's end, as :func:`bench_sweep` times a sweep) of a
    fresh local Ray and one Tune experiment whose trials only keep a CPU busy that long (CPU
    time) (``fedsweep.bench.floor_trial``), ``cpu`` CPUs each, actors reused as in a sweep.
    With ``imports`` every trial actor also imports torch. Runs in a
    fresh interpreter, which has to import Ray as the sweep's driver had."""
    args = json.dumps({"seconds": list(seconds), "imports": imports, "cpu": cpu})
    result = child_json(["fedsweep.bench.floor_trial", args], "the Ray Tune floor")
    return float(result["wall_s"])
