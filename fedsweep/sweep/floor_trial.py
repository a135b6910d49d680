"""The trainable of the bench's Ray Tune floor (``fedsweep.bench.bench_tune_floor``): a trial
that only keeps one CPU busy for as long as a real trial's rounds took (CPU time, so that it
competes for the CPUs as the rounds did), so a sweep of these costs what Ray Tune itself costs
on the machine (Ray's start, Tune's, the trial actors), and nothing of fedsweep.

With ``imports`` the trial first imports what every tracked torch trial imports (torch and
MLflow's client with its SQL store), so that floor also holds the actors' imports. This module
imports nothing itself: a worker that runs it loads only Ray and Tune.
"""

from __future__ import annotations

import time


def busy_trial(params: dict) -> None:
    from ray import tune

    if params.get("imports"):
        import mlflow  # noqa: F401
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
        import torch  # noqa: F401
    busy(float(params["seconds"]))
    tune.report({"busy_s": float(params["seconds"])})


def busy(seconds: float) -> None:
    """Keep this thread on a CPU for ``seconds`` of its own CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
