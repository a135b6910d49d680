"""The trainable of the bench's Ray Tune floor (``fedsweep.bench.bench_tune_floor``): a trial
that only keeps one CPU busy for as long as a real trial's rounds took (CPU time, so that it
competes for the CPUs as the rounds did), so a sweep of these costs what Ray Tune itself costs
on the machine (Ray's start, Tune's, the trial actors), and nothing of fedsweep.

With ``imports`` the trial first imports what every FL trial imports: torch (its training is
torch), so that floor also holds the actors' unavoidable import. A tracker's own cost is not in
the floor: fedsweep's trials on a SQLite store write their runs without importing MLflow
(``fedsweep.tracking.lite``), and what they do import and write is fedsweep's overhead. This module
imports nothing beyond the standard library at its top, and ``fedsweep.bench``'s ``__init__``
imports its modules only when a name of theirs is asked for: a worker that runs it loads only
Ray and Tune.

``python -m fedsweep.bench.floor_trial '{"seconds": [...], "imports": false, "cpu": 1}'`` runs
such a sweep in a fresh interpreter (:func:`run_floor`) and prints its wall time as JSON.
"""

from __future__ import annotations

import json
import sys
import time


def busy_trial(params: dict) -> None:
    from ray import tune

    if params.get("imports"):
        import torch  # noqa: F401
    busy(float(params["seconds"]))
    tune.report({"busy_s": float(params["seconds"])})


def busy(seconds: float) -> None:
    """Keep this thread on a CPU for ``seconds`` of its own CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def run_floor(seconds: list[float], imports: bool, cpu: float = 1.0) -> float:
    """The wall time of a fresh local Ray and one Tune experiment of :func:`busy_trial` trials
    (one per entry of ``seconds``, ``cpu`` CPUs each, actors reused as in a sweep), from before
    Ray's import to the last trial's end, as ``fedsweep.bench.bench_sweep`` times a sweep
    (whose driver imports Ray when its first stage starts). Run it in a fresh interpreter (the
    ``__main__`` below): in one that has Ray imported already the floor errs low."""
    import shutil
    import tempfile
    from pathlib import Path

    from fedsweep.sweep.ray_backend import plain_trial_workers
    from fedsweep.sweep.ray_output import ray_output_to
    from fedsweep.sweep.runner import init_ray, shutdown_ray

    tmp = Path(tempfile.mkdtemp(prefix="fedsweep-bench-floor-"))
    # Ray as fedsweep starts it (``init_ray``) and its trial actors as fedsweep's
    # (``plain_trial_workers``: no runtime_env, so they take Ray's pre-started workers): the
    # least Ray Tune costs
    try:
        with ray_output_to(tmp / "ray.log"):
            start = time.perf_counter()
            from ray import tune

            init_ray(None)
            tuner = tune.Tuner(
                tune.with_resources(busy_trial, {"cpu": cpu}),
                param_space={"seconds": tune.grid_search(list(seconds)), "imports": imports},
                tune_config=tune.TuneConfig(reuse_actors=True),
                run_config=tune.RunConfig(name="floor", storage_path=str(tmp / "ray"), verbose=0),
            )
            with plain_trial_workers():
                results = tuner.fit()
            wall = time.perf_counter() - start
            shutdown_ray()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if results.errors:
        raise RuntimeError(f"the Ray Tune floor's trials failed: {results.errors[0]}")
    return wall


if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    wall = run_floor(args["seconds"], bool(args.get("imports")), float(args.get("cpu", 1.0)))
    print(json.dumps({"wall_s": wall}))
