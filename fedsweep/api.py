"""fedsweep's Python API: a figure's runs, curves, verdicts and Plotly figure as Python objects
(issue 52, item 1), for analysis beyond the figures fedsweep draws (a notebook, a script).

Every function reads the tracking store only (it never runs or writes anything) and takes the
same names the commands take: a figure id (``bherd-fig3a``: ``sweeps/bherd-fig3a.yaml``) or a
spec file's path, a profile (default: the profile of the store's newest sweep of the figure),
``tracking_uri`` (default: ``$MLFLOW_TRACKING_URI``, else ``./mlruns/mlflow.db``) and
``seeds`` (instead of the profile's, as ``--seeds``). A figure's runs are its trials' runs,
found by config hash exactly as the figures and the report find them: what these functions
return is what ``fedsweep figures`` draws and ``fedsweep report`` judges.

* :func:`runs`: one row per trial (panel, curve, seed), its run id and status, its typed config
  (one column per dotted key) and its final and best metrics; ``where`` filters it.
* :func:`curves`: per panel, curve, metric and round, the mean, std and count over seeds.
* :func:`claims`: the verdict rows of the figure's claims (those of ``claims-<profile>.json``).
* :func:`figure`: the Plotly figure ``fedsweep figures`` draws.

::

    import fedsweep.api as api
    df = api.runs("bherd-fig4e", "smoke")
    df[df["curve"] == "Case 2, RR"][["seed", "final_test_acc"]]
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["runs", "curves", "claims", "figure"]

#: the metrics every run logs, reduced per run in :func:`runs`
RUN_METRICS = ("test_acc", "test_loss", "train_loss")


@dataclass
class _Figure:
    """A figure opened on a store: its spec file, plan, client and the store's run index."""

    path: Path
    spec: Any
    profile: str
    plan: Any
    uri: str
    client: Any
    index: Any


def _locate(
    name: str | Path, profile: str | None, tracking_uri: str | None, sweeps_dir: str | Path
) -> tuple[Path, Any, str, str]:
    """The figure's spec file and spec, its profile (None: the store's newest sweep of it) and
    the resolved tracking URI."""
    from fedsweep.specs.load import PROFILES, find_spec, load_spec
    from fedsweep.sweep.swept import swept_profiles
    from fedsweep.tracking.store import resolve_tracking_uri

    path = find_spec(name, sweeps_dir)
    spec = load_spec(path)
    uri = resolve_tracking_uri(tracking_uri)
    if profile is None:
        found = swept_profiles(uri, [spec.figure])
        profile = found[0].profile if found else "quick"
    if profile not in PROFILES:
        raise ValueError(f"profile: got {profile!r} (allowed: {', '.join(PROFILES)})")
    return path, spec, profile, uri


def _open(
    name: str | Path,
    profile: str | None,
    tracking_uri: str | None,
    sweeps_dir: str | Path,
    seeds: list[int] | None,
    overrides: Mapping[str, Any] | None = None,
) -> _Figure:
    """The figure located (:func:`_locate`), its plan, the store's client and run index."""
    from dashboards.store import RunIndex
    from fedsweep.specs.figure import figure_plan
    from fedsweep.tracking.store import get_client

    path, spec, profile, uri = _locate(name, profile, tracking_uri, sweeps_dir)
    plan = figure_plan(spec, profile, extra=dict(overrides or {}), seeds=seeds)
    client = get_client(uri, create=False)  # a store that does not exist: StoreMissingError
    return _Figure(path, plan.spec, profile, plan, uri, client, RunIndex.load(client))


def runs(
    figure: str | Path,
    profile: str | None = None,
    *,
    where: Mapping[str, Any] | str | None = None,
    tracking_uri: str | None = None,
    sweeps_dir: str | Path = "sweeps",
    seeds: list[int] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """One row per trial of ``figure`` at ``profile``: ``figure``, ``profile``, ``panel``
    (its id), ``panel_label``, ``curve``, ``seed``, ``run_id`` (None: not run yet), ``status``
    (``finished``, ``diverged``, or ``missing``), ``config_hash``, one column per key of the
    trial's typed config (``bherd.alpha``, ``train.lr``, ...) and ``final_<metric>`` /
    ``best_<metric>`` of test accuracy, test loss and training loss (the last finite round; the
    largest accuracy, the smallest loss). ``where``: keep the rows whose columns have these
    values (``{"train.order": "rr"}``), or a :meth:`pandas.DataFrame.query` string.
    ``overrides``: the ``--set`` values the sweep ran with."""
    from dashboards.store import load_metrics, resolve_runs
    from fedsweep.config.load import flatten

    fig = _open(figure, profile, tracking_uri, sweeps_dir, seeds, overrides)
    res = resolve_runs(fig.spec, fig.profile, fig.index, client=fig.client, plan=fig.plan)
    long = load_metrics(fig.client, res.found, RUN_METRICS)
    finals = _per_run(long)
    rows = []
    for trial, run in [(tr.trial, tr.run) for tr in res.found] + [(t, None) for t in res.missing]:
        row = {
            "figure": fig.spec.figure,
            "profile": fig.profile,
            "panel": trial.panel_id,
            "panel_label": trial.panel_label,
            "curve": trial.curve,
            "seed": trial.seed,
            "run_id": run.run_id if run is not None else None,
            "status": (run.status if run is not None else "missing"),
            "config_hash": trial.config_hash,
        }
        row.update(flatten(trial.config.model_dump(mode="json")))
        row.update(finals.get(row["run_id"], {}) if run is not None else {})
        rows.append(row)
    df = pd.DataFrame(rows)
    for metric in RUN_METRICS:
        for how in ("final", "best"):
            if f"{how}_{metric}" not in df:
                df[f"{how}_{metric}"] = float("nan")
    return _where(df, where)


def _per_run(long: pd.DataFrame) -> dict[str, dict[str, float]]:
    """run id -> ``final_<metric>`` (last finite round) and ``best_<metric>`` (max accuracy,
    min loss)."""
    import numpy as np

    out: dict[str, dict[str, float]] = {}
    if long.empty:
        return out
    finite = long[np.isfinite(long["value"].astype(float))].sort_values("round")
    for (run_id, metric), group in finite.groupby(["run_id", "metric"]):
        values = group["value"].astype(float)
        best = values.max() if metric.endswith("acc") else values.min()
        out.setdefault(run_id, {}).update(
            {f"final_{metric}": float(values.iloc[-1]), f"best_{metric}": float(best)}
        )
    return out


def _where(df: pd.DataFrame, where: Mapping[str, Any] | str | None) -> pd.DataFrame:
    if where is None or df.empty:
        return df.reset_index(drop=True)
    if isinstance(where, str):
        return df.query(where).reset_index(drop=True)
    unknown = [k for k in where if k not in df.columns]
    if unknown:
        from fedsweep.core.suggest import did_you_mean

        raise KeyError(
            f"where: unknown column {unknown[0]!r}{did_you_mean(unknown[0], list(df.columns))}"
        )
    keep = pd.Series(True, index=df.index)
    for key, value in where.items():
        keep &= df[key].map(lambda v, value=value: v == value)
    return df[keep].reset_index(drop=True)


def curves(
    figure: str | Path,
    profile: str | None = None,
    *,
    metrics: list[str] | None = None,
    tracking_uri: str | None = None,
    sweeps_dir: str | Path = "sweeps",
    seeds: list[int] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Per ``panel`` (id), ``curve``, ``metric`` and ``round``: ``mean``, ``std`` (sample, 0 for
    one seed) and ``n`` (seeds) over the finite values of the figure's runs; ``metrics``:
    the metric keys (default: the spec's ``metrics``, else test accuracy and loss)."""
    from dashboards.store import aggregate, load_metrics, resolve_runs

    fig = _open(figure, profile, tracking_uri, sweeps_dir, seeds, overrides)
    res = resolve_runs(fig.spec, fig.profile, fig.index, client=fig.client, plan=fig.plan)
    keys = list(metrics or getattr(fig.spec, "metrics", None) or ["test_acc", "test_loss"])
    agg = aggregate(load_metrics(fig.client, res.found, keys))
    agg = agg.rename(columns={"panel_id": "panel"})
    agg.insert(0, "figure", fig.spec.figure)
    return agg.reset_index(drop=True)


def _build(located: tuple, seeds, level: float, **options):
    """The figure built as ``fedsweep figures`` builds it (its own run index and plan), at
    ``level``; ``located``: :func:`_locate`'s answer."""
    from dashboards import build_figures
    from dashboards.build import FigureBuildWarning
    from dashboards.verdicts import confidence

    path, spec, profile, uri = located
    with confidence(level), tempfile.TemporaryDirectory(prefix="fedsweep-api-") as tmp:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FigureBuildWarning)
            (result,) = build_figures(
                uri, profile=profile, out_dir=tmp, spec_files=[path], png=False,
                extras=False, require_store=True, seeds=seeds, **options,
            )  # fmt: skip
        if result.error:
            raise RuntimeError(f"{spec.figure}: {result.error}")
        return result


def claims(
    figure: str | Path,
    profile: str | None = None,
    *,
    tracking_uri: str | None = None,
    sweeps_dir: str | Path = "sweeps",
    seeds: list[int] | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """The figure's claims judged from the store, one row per claim (and regime), as
    ``fedsweep report --json`` gives them: ``id``, ``claim``, ``verdict``, ``why``,
    ``effect``, ``ci_low``, ``ci_high``, ``margin``, ``seeds``, ``seeds_needed``, ``regime``,
    ``numbers``, ``panels`` (each part's evidence) and the rest; ``level``: the intervals'."""
    from dashboards.report import claim_rows
    from dashboards.verdicts import confidence

    result = _build(_locate(figure, profile, tracking_uri, sweeps_dir), seeds, level)
    with confidence(level):
        return pd.DataFrame(claim_rows([result]))


def figure(
    figure: str | Path,
    profile: str | None = None,
    *,
    part: str | None = None,
    band: str = "std",
    tracking_uri: str | None = None,
    sweeps_dir: str | Path = "sweeps",
    seeds: list[int] | None = None,
):
    """The Plotly figure ``fedsweep figures`` draws for ``figure`` (a ``go.Figure``; ``part``:
    one part of a figure drawn in several, e.g. Fig. 2a's ``loss``). None without runs."""
    from dashboards import FigureOptions

    located = _locate(figure, profile, tracking_uri, sweeps_dir)
    result = _build(located, seeds, 0.95, options=FigureOptions(band=band))
    if part is None:
        return result.figure
    if part not in result.parts:
        raise KeyError(f"part: got {part!r} (allowed: {', '.join(result.parts) or 'none'})")
    return result.parts[part]
