"""Per-run reducers of a metric history and their seed statistics (docs/algorithms.md W11).

The FedWalk paper reports "the global model with the highest accuracy": per run the **best**
value over rounds, not the last one. A reducer turns each run's history of one metric into one
number; :func:`seed_stats` then gives the seed mean ± sample std of those numbers per (panel,
curve) (std 0 for one seed, as ``store.aggregate``):

* ``best``: the largest finite value over the rounds (an accuracy; ``round`` = the first round
  that reaches it);
* ``final``: the value of the last round with a finite value (for a diverged run: its last
  finite round, not its real end);
* :func:`value_at_best`: a metric's value at the round where another metric is best (e.g. the
  training accuracy of the model selected on the test accuracy).

Non-finite values (NaN, ±inf) never count; a run without a finite value has no row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

REDUCERS = ("best", "final")
RUN_COLUMNS = ["panel_id", "curve", "seed", "run_id", "round", "value"]
STAT_COLUMNS = ["panel_id", "curve", "mean", "std", "n"]


@dataclass(frozen=True)
class Stat:
    """Seed statistics of one (panel, curve): mean, sample std, runs, and each run's value,
    seed and round (of its value), in seed order."""

    mean: float
    std: float
    n: int
    values: tuple[float, ...] = ()
    seeds: tuple[int, ...] = ()
    rounds: tuple[int, ...] = ()

    def text(self, scale: float = 100.0, digits: int = 2) -> str:
        """ "91.45 ± 0.30" (``scale`` 100: an accuracy in percent); no ± for one run."""
        mean = f"{self.mean * scale:.{digits}f}"
        return mean if self.n < 2 else f"{mean} ± {self.std * scale:.{digits}f}"


def _finite(long: pd.DataFrame, metric: str) -> pd.DataFrame:
    if long is None or long.empty:
        return pd.DataFrame(columns=list(long.columns) if long is not None else RUN_COLUMNS)
    sel = long[long["metric"] == metric]
    return sel[np.isfinite(sel["value"].astype(float))]


def per_run(long: pd.DataFrame, metric: str, how: str = "best") -> pd.DataFrame:
    """One row per run (panel_id, curve, seed, run_id, round, value): ``metric`` reduced by
    ``how`` ("best" = max over rounds, "final" = last finite round) from the long table of
    ``store.load_metrics``."""
    if how not in REDUCERS:
        raise ValueError(f"unknown reducer {how!r}; allowed: {', '.join(REDUCERS)}")
    sel = _finite(long, metric)
    if sel.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    sel = sel.sort_values(["run_id", "round"])
    if how == "best":
        # idxmax: the first round that reaches the maximum
        rows = sel.loc[sel.groupby("run_id")["value"].idxmax()]
    else:
        rows = sel.groupby("run_id", sort=False).tail(1)
    out = rows[RUN_COLUMNS].astype({"value": float, "round": int})
    return out.sort_values(["panel_id", "curve", "seed"], ignore_index=True)


def value_at_best(long: pd.DataFrame, metric: str, by: str = "test_acc") -> pd.DataFrame:
    """Per run the value of ``metric`` at the round where ``by`` is best (its first maximum);
    runs without a finite ``metric`` value at that round have no row."""
    best = per_run(long, by, "best")[["run_id", "round"]]
    sel = _finite(long, metric)
    if best.empty or sel.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    out = sel.merge(best, on=["run_id", "round"], how="inner")
    out = out[RUN_COLUMNS].astype({"value": float, "round": int})
    return out.sort_values(["panel_id", "curve", "seed"], ignore_index=True)


def seed_stats(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std (0 for one run) and run count per (panel_id, curve) of ``per_run``."""
    if runs.empty:
        return pd.DataFrame(columns=STAT_COLUMNS)
    grouped = runs.groupby(["panel_id", "curve"], sort=True)["value"]
    out = grouped.agg(mean="mean", std="std", n="count").reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out[STAT_COLUMNS]


def stat_of(runs: pd.DataFrame, panel_id: str, curve: str) -> Stat | None:
    """The :class:`Stat` of one (panel, curve) of a ``per_run`` table; None without runs."""
    if runs.empty:
        return None
    sel = runs[(runs["panel_id"] == panel_id) & (runs["curve"] == curve)].sort_values("seed")
    if sel.empty:
        return None
    values = [float(v) for v in sel["value"]]
    n = len(values)
    mean = math.fsum(values) / n
    std = float(np.std(values, ddof=1)) if n > 1 else 0.0
    return Stat(
        mean,
        std,
        n,
        tuple(values),
        tuple(int(s) for s in sel["seed"]),
        tuple(int(r) for r in sel["round"]),
    )


def reduce_cell(
    long: pd.DataFrame, panel_id: str, curve: str, metric: str, how: str = "best"
) -> Stat | None:
    """``stat_of(per_run(...))`` for one cell (convenience for a single lookup)."""
    if long is None or long.empty:
        return None
    sel = long[(long["panel_id"] == panel_id) & (long["curve"] == curve)]
    return stat_of(per_run(sel, metric, how), panel_id, curve)
