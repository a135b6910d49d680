"""The metrics of a swept figure, for the table at the end of ``fedsweep sweep``: per panel and
curve, the final and the best test accuracy and the final training loss (the test loss where
the runs log no training loss) of the figure's runs in the store under a profile, each as the
mean ± std over seeds, and the number of seeds.

Runs are found as the sweep and the figures find them: by each trial's config hash (or legacy
hash), so the runs the figure reuses from other sweeps and those its trials share count too; a
trial without a run under its configured data set is looked up again under the profile's
``data_fallback`` data set; derived trials are resolved from their sources' runs first.

Reading is batched, never one request per run: the done runs by hash (one query), the runs with
their last metric values (one search per 100 runs), and the history of the metric whose best
value is shown (``test_acc``): one query on a database store
(``SqlAlchemyStore.get_metric_history_bulk``), one request per 100 runs on a tracking server
(its ``get-history-bulk-interval`` endpoint, all rounds up to 2,500 per run); only another
store (a file store) reads run by run. Means and stds are over the finite values: a diverged
seed's NaN is left out (:attr:`CurveStats.diverged` counts them).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fedsweep.specs.figure import FigurePlan, figure_plan
from fedsweep.specs.load import Trial, load_spec
from fedsweep.sweep.store_index import trial_runs
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.uri import resolve_tracking_uri, store_missing

#: the metric whose best value over the rounds is shown
BEST_KEY = "test_acc"
#: runs per history request to a tracking server (its limit) and per database query
SERVER_CHUNK = 100
SQL_CHUNK = 500
#: rounds per run a tracking server returns at most in one history request
SERVER_MAX_ROUNDS = 2500


@dataclass(frozen=True)
class Stat:
    """The mean and sample std (0 for one value) of a metric over seeds, and how many."""

    mean: float
    std: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Stat | None:
        finite = [v for v in values if v is not None and math.isfinite(v)]
        if not finite:
            return None
        std = statistics.stdev(finite) if len(finite) > 1 else 0.0
        return cls(statistics.fmean(finite), std, len(finite))


@dataclass
class CurveStats:
    """One row: a curve of a panel, its number of seeds and their metrics, keyed
    ``"{final|best}_{metric}"`` (``final_test_acc``), None where no run logged one."""

    panel: str
    curve: str
    seeds: int
    stats: dict[str, Stat | None] = field(default_factory=dict)
    diverged: int = 0


@dataclass
class FigureSummary:
    """A figure's metrics under a profile: one :class:`CurveStats` per (panel, curve)."""

    figure: str
    profile: str
    trials: int
    #: the columns, in order: (column title, metric key, "final" or "best")
    columns: list[tuple[str, str, str]] = field(default_factory=list)
    rows: list[CurveStats] = field(default_factory=list)
    #: trials with a done run (a config shared by several trials counts for each)
    found: int = 0


def figure_summary(
    spec_path: str | Path,
    profile: str,
    *,
    tracking_uri: str | None = None,
    extra: dict | None = None,
    client=None,
    seeds: list[int] | None = None,
) -> FigureSummary:
    """The metrics of the figure of ``spec_path`` under ``profile`` (see the module docstring).
    ``extra``: what the sweep expanded with (``data.root``, ``--set``), so a sweep with
    ``--set`` is summarized from its own runs; ``seeds``: its ``--seeds``."""
    spec = load_spec(spec_path)
    figure = figure_plan(spec, profile, extra=extra, seeds=seeds)
    summary = FigureSummary(spec.figure, profile, len(figure.trials))
    if client is None:
        uri = resolve_tracking_uri(tracking_uri)
        if store_missing(uri):
            return summary
        client = get_client(uri, create=False)
    trials = _resolved(figure, client)
    alt = _resolved(figure.fallback, client) if figure.fallback is not None else None
    runs = trial_runs(client, [*trials, *(alt or [])])
    matched: list[tuple[Trial, object]] = []
    for i, trial in enumerate(trials):
        run = runs.get(trial.config_hash)
        if run is None and alt is not None:
            run = runs.get(alt[i].config_hash)
        if run is not None:
            matched.append((trial, run))
    summary.found = len(matched)
    logged = {k for _, run in matched for k in run.data.metrics}
    loss = "train_loss" if "train_loss" in logged or "test_loss" not in logged else "test_loss"
    columns = [
        ("final test acc", "test_acc", "final"),
        ("best test acc", BEST_KEY, "best"),
        (f"final {loss.replace('_', ' ')}", loss, "final"),
    ]
    summary.columns = [c for c in columns if c[1] in logged]
    ids = sorted({run.info.run_id for _, run in matched})
    best = best_values(client, ids, BEST_KEY) if BEST_KEY in logged else {}
    groups: dict[tuple[str, str], list[tuple[Trial, object]]] = {}
    for trial, run in matched:
        panel = trial.panel_label or ("" if trial.panel_id == "all" else trial.panel_id)
        groups.setdefault((panel, trial.curve), []).append((trial, run))
    for (panel, curve), members in groups.items():
        row = CurveStats(panel, curve, len({t.seed for t, _ in members}))
        row.diverged = sum(r.data.tags.get("fedsweep.status") == "diverged" for _, r in members)
        for _, key, how in summary.columns:
            if how == "best":
                values = [best.get(r.info.run_id) for _, r in members]
            else:
                values = [r.data.metrics.get(key) for _, r in members]
            row.stats[f"{how}_{key}"] = Stat.of(values)
        summary.rows.append(row)
    return summary


def _resolved(figure: FigurePlan, client) -> list[Trial]:
    """The figure's trials with the derived ones resolved from their sources' done runs (as
    the sweep's second stage does); those whose source has none stay unresolved (they match no
    run)."""
    trials = list(figure.trials)
    if not any(t.derive is not None for t in trials):
        return trials

    runs = trial_runs(client, [t for t in trials if t.derive is None])

    def run_of(config_hash: str) -> str | None:
        run = runs.get(config_hash)
        return run.info.run_id if run is not None else None

    return figure.resolve(run_of, client).trials


# ------------------------------------------------------------------------------ histories
def best_values(client, run_ids: list[str], key: str) -> dict[str, float]:
    """The largest finite value of ``key`` each run logged (runs without one are left out):
    batched queries (see the module docstring)."""
    from fedsweep.tracking.direct import sql_store

    values: dict[str, list[float]] = {}
    store = sql_store(client)
    if store is not None:
        for i in range(0, len(run_ids), SQL_CHUNK):
            chunk = run_ids[i : i + SQL_CHUNK]
            for m in store.get_metric_history_bulk(chunk, key, max_results=2**31 - 1):
                values.setdefault(m.run_id, []).append(m.value)
    elif (server := _rest_store(client)) is not None:
        for i in range(0, len(run_ids), SERVER_CHUNK):
            for run_id, value in _server_history(server, run_ids[i : i + SERVER_CHUNK], key):
                values.setdefault(run_id, []).append(value)
    else:
        for run_id in run_ids:
            values[run_id] = [m.value for m in client.get_metric_history(run_id, key)]
    out = {}
    for run_id, logged in values.items():
        finite = [v for v in logged if v is not None and math.isfinite(v)]
        if finite:
            out[run_id] = max(finite)
    return out


def _rest_store(client):
    from mlflow.store.tracking.rest_store import RestStore

    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    return store if isinstance(store, RestStore) else None


def _server_history(store, run_ids: list[str], key: str) -> list[tuple[str, float]]:
    """``[(run_id, value), ...]`` of ``key`` for up to 100 runs in one request to a tracking
    server (the endpoint MLflow's UI draws its charts from)."""
    from mlflow.utils.rest_utils import http_request, verify_rest_response

    endpoint = "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval"
    params = {"run_ids": run_ids, "metric_key": key, "max_results": SERVER_MAX_ROUNDS}
    response = http_request(store.get_host_creds(), endpoint, "GET", params=params)
    response = verify_rest_response(response, endpoint)
    out = []
    for metric in response.json().get("metrics", []):
        value = metric.get("value")
        if isinstance(value, str):  # NaN and infinities come as strings
            value = float(value)
        if value is not None:
            out.append((metric["run_id"], float(value)))
    return out


# ------------------------------------------------------------------------------ the table
def value_text(stat: Stat | None) -> str:
    """``0.8520 ± 0.0123``; the mean alone for one seed; ``-`` for none."""
    if stat is None:
        return "-"
    mean = _number(stat.mean)
    return mean if stat.n < 2 else f"{mean} ± {_number(stat.std)}"


def _number(value: float) -> str:
    return f"{value:.4f}" if abs(value) < 1000 else f"{value:.4g}"
