"""FedWalk's named measures (registered in :mod:`dashboards.measures`), for what is specific to
the paper: its claims themselves are declared in ``sweeps/fedwalk-*.yaml``.

* Fig. 2's windows: the paper's "early guiding process (i.e., before 100 communication rounds)"
  of 300 is the first third of the rounds, "a later stage" the last third (:func:`windows`);
  ``fedwalk.early_train_loss`` / ``fedwalk.late_train_loss`` are a run's mean training loss
  over them (lower is better, compared relatively: ``(X − X+FedWalk) / X``);
* Fig. 3's HH trend: ``fedwalk.tau_slope``, per seed the least-squares slope of the best test
  accuracy against τ over the τ curves with runs (at least ``MIN_TAUS``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from dashboards.claims import ClaimData, rounds_of
from dashboards.measures import measure
from dashboards.papers.fedwalk.methods import MIN_TAUS

#: the share of the rounds that makes the early and the late window
WINDOW_SHARE = 1 / 3


def windows(t: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The early and the late window of a run of ``t`` rounds: rounds 1..k and t−k+1..t with
    k = max(1, ⌊t · WINDOW_SHARE⌋) (t = 300: 1–100, the paper's "before 100 communication
    rounds", and 201–300; t = 30: 1–10 and 21–30)."""
    k = max(1, math.floor(t * WINDOW_SHARE + 1e-9))
    return (1, k), (max(1, t - k + 1), t)


def window_mean(first: int, last: int) -> Callable[[pd.Series], float]:
    """Per run the mean of a history (indexed by round) over rounds ``first``..``last``; NaN
    when the run has no finite value there."""

    def mean(s: pd.Series) -> float:
        w = s[(s.index >= first) & (s.index <= last)]
        return float(w.mean()) if len(w) else math.nan

    return mean


def _window_loss(late: bool):
    def fn(data: ClaimData, panel: str, label: str, after: int = 0, mark: bool = True):
        first, last = windows(rounds_of(data))[1 if late else 0]
        return data.per_seed(panel, label, "train_loss", window_mean(first, last), mark=mark)

    return fn


measure(
    "fedwalk.early_train_loss",
    "mean training loss over the first third of the rounds (Fig. 2's early window)",
    lower_is_better=True,
    relative=True,
)(_window_loss(late=False))
measure(
    "fedwalk.late_train_loss",
    "mean training loss over the last third of the rounds (Fig. 2's late window)",
    lower_is_better=True,
    end_of_run=True,
    relative=True,
)(_window_loss(late=True))


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` against ``xs`` (at least two distinct xs)."""
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    return math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


@measure(
    "fedwalk.tau_slope",
    "least-squares slope of the best-over-rounds test accuracy against τ (fraction per unit "
    "τ), over the τ curves with runs",
    lower_is_better=False,
    end_of_run=True,
    scope="panel",
)
def tau_slope(data: ClaimData, panel: str, after: int = 0) -> dict[int, float]:
    """Per seed (the seeds every τ curve with runs has) the slope of the best test accuracy
    against ``fedwalk.tau``; {} with fewer than ``MIN_TAUS`` τ with runs."""
    runs = [
        (float(tau), label)
        for tau, label in data.curves_with("fedwalk.tau")
        if data.per_seed(panel, label, "test_acc", "best", mark=False)
    ]
    if len(runs) < MIN_TAUS:
        return {}
    runs.sort(key=lambda r: r[0])
    taus = [t for t, _ in runs]
    values = [data.per_seed(panel, label, "test_acc", "best") for _, label in runs]
    seeds = sorted(set.intersection(*(set(v) for v in values)))
    return {s: slope(taus, [v[s] for v in values]) for s in seeds}


__all__ = ["WINDOW_SHARE", "slope", "tau_slope", "window_mean", "windows"]
