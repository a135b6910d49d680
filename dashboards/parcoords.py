"""A figure's runs as parallel coordinates: one line per run, over what differs between them.

The axes are the config keys whose values differ between the figure's runs (e.g.
``data.partition``, ``bherd.alpha``, ``train.order``; a key a run's components do not read, such
as ``bherd.alpha`` of a FedAvg run, reads "n/a"), the seed, and the runs' final metrics where
logged: final and best test accuracy, final training and test loss. A key with text values is
drawn as integers with the values as tick labels. Lines are coloured by the final test
accuracy. ``dashboards.build`` writes it beside each figure as ``<stem>-parcoords.html`` (with
the table behind it, ``<stem>-runs.csv``) and links both from the index.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboards.style import FONT, title_layout

#: (column, metric key, statistic) of the metric axes, in order
METRICS = (
    ("final test acc", "test_acc", "final"),
    ("best test acc", "test_acc", "best"),
    ("final train loss", "train_loss", "final"),
    ("final test loss", "test_loss", "final"),
)
METRIC_KEYS = tuple(dict.fromkeys(key for _, key, _ in METRICS))
#: config keys that never tell two runs apart (run names, where the data lives, threads)
EXCLUDED = ("name", "seed", "threads", "device", "tracking", "data.root", "data.download")
NOT_USED = "n/a"
COLOR_BY = "final test acc"
#: the first columns of the runs table, before the varied keys
HEAD = ["run_id", "panel", "curve", "seed", "status"]


def _excluded(key: str) -> bool:
    return any(key == e or key.startswith(e + ".") for e in EXCLUDED)


def _value(value: Any) -> Any:
    """A config value as one cell: lists and dicts as their text."""
    return value if isinstance(value, str | int | float | bool) or value is None else str(value)


def varied_keys(flats: list[dict[str, Any]]) -> list[str]:
    """The keys whose values differ between the flattened configs (seed and run bookkeeping
    left out), sorted."""
    keys = sorted({k for flat in flats for k in flat if not _excluded(k)})
    return [k for k in keys if len({repr(flat.get(k, NOT_USED)) for flat in flats}) > 1]


def run_table(found: Iterable[Any], long: pd.DataFrame) -> pd.DataFrame:
    """One row per run of ``found`` (``store.TrialRun``): run id, panel, curve, seed, status,
    the varied config keys (:func:`varied_keys`; "n/a" where the run's components do not read
    the key) and the final metrics of :data:`METRICS` from the histories in ``long`` (the
    last finite value; "best" = the highest accuracy, lowest loss). A metric no run logged is
    left out."""
    from dashboards.compare import _applies
    from fedsweep.config.load import flatten

    found = list(found)
    flats = []
    for tr in found:
        flat = flatten(tr.trial.config.model_dump(mode="json"))
        flats.append({k: (_value(v) if _applies(k, flat) else NOT_USED) for k, v in flat.items()})
    keys = varied_keys(flats)
    finite = long[np.isfinite(long["value"].astype(float))] if not long.empty else long
    by_run = {rid: g for rid, g in finite.groupby("run_id")} if not finite.empty else {}
    rows = []
    for tr, flat in zip(found, flats, strict=True):
        t = tr.trial
        row: dict[str, Any] = {
            "run_id": tr.run.run_id,
            "panel": t.panel_label or t.panel_id,
            "curve": t.curve,
            "seed": t.seed,
            "status": tr.run.status,
        }
        row.update({k: flat.get(k, NOT_USED) for k in keys})
        hist = by_run.get(tr.run.run_id)
        for column, key, stat in METRICS:
            values = (
                hist[hist["metric"] == key].sort_values("round")["value"]
                if hist is not None
                else pd.Series(dtype=float)
            )
            if values.empty:
                row[column] = math.nan
            elif stat == "final":
                row[column] = float(values.iloc[-1])
            else:
                row[column] = float(values.max() if "acc" in key else values.min())
        rows.append(row)
    table = pd.DataFrame(rows, columns=[*HEAD, *keys, *(c for c, _, _ in METRICS)])
    unlogged = [c for c, _, _ in METRICS if table[c].isna().all()]
    return table.drop(columns=unlogged)


def _numeric(values: pd.Series) -> bool:
    return all(
        isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
        for v in values
    )


def dimension(label: str, values: pd.Series) -> dict[str, Any]:
    """One axis: numbers as they are; anything else (text, booleans, a mix with "n/a") as
    integers 0, 1, … in sorted order with the values as tick labels."""
    if _numeric(values):
        arr = values.astype(float).to_numpy()
        dim: dict[str, Any] = {"label": label, "values": arr}
        distinct = np.unique(arr[np.isfinite(arr)])
        if distinct.size and np.all(distinct == np.round(distinct)) and distinct.size <= 12:
            dim["tickvals"] = list(distinct)  # a seed, a count: its own values as ticks
            dim["ticktext"] = [str(int(v)) for v in distinct]
        if distinct.size == 1:  # one value: a tick in the middle of the axis
            v = float(distinct[0])
            pad = max(abs(v) * 0.1, 1.0)
            dim.update(range=[v - pad, v + pad], tickvals=[v], ticktext=[f"{v:g}"])
        return dim
    names = sorted({str(v) for v in values}, key=lambda v: (v == NOT_USED, _sort_key(v)))
    code = {name: i for i, name in enumerate(names)}
    return {
        "label": label,
        "values": [code[str(v)] for v in values],
        "tickvals": list(range(len(names))),
        "ticktext": names,
        "range": [-0.25, len(names) - 0.75] if len(names) > 1 else [-1, 1],
    }


def _sort_key(text: str) -> tuple:
    """Numbers in numeric order, then text."""
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


def parcoords_figure(table: pd.DataFrame, title: str, subtitle: str = "") -> go.Figure:
    """The runs of ``table`` (:func:`run_table`) as ``go.Parcoords``: an axis per curve (when
    there are several), varied key, the seed and each metric; one line per run, coloured by
    the final test accuracy (by the first metric when it was not logged)."""
    metrics = [c for c, _, _ in METRICS if c in table.columns]
    keys = [c for c in table.columns if c not in HEAD and c not in metrics]
    columns = ["curve"] if table["curve"].nunique() > 1 else []
    if table["status"].nunique() > 1:  # a diverged run: say so on its own axis
        columns.append("status")
    columns += [*keys, "seed", *metrics]
    dims = [dimension(c, table[c]) for c in columns]
    color_by = COLOR_BY if COLOR_BY in table.columns else (metrics[0] if metrics else None)
    line: dict[str, Any] = {"color": "#1f77b4"}
    if color_by is not None:
        values = table[color_by].astype(float)
        line = {
            "color": values.fillna(values.min() if values.notna().any() else 0.0).to_numpy(),
            "colorscale": "Viridis",
            "showscale": True,
            "colorbar": {"title": {"text": color_by}},
        }
    fig = go.Figure(
        go.Parcoords(
            dimensions=dims,
            line=line,
            labelangle=-20,
            labelside="top",
            labelfont={"size": 13},
            tickfont={"size": 12},
        )
    )
    fig.update_layout(
        template="plotly_white",
        font=FONT,
        width=max(900, 170 * len(dims) + 200),
        height=620,
        margin={"l": 90, "r": 110, "t": 170, "b": 40},
        title=title_layout(title, subtitle, size=20),
    )
    return fig


def subtitle_text(table: pd.DataFrame) -> str:
    """ "12 runs, one line each; colour: final test acc" (and what the axes hold)."""
    metrics = [c for c, _, _ in METRICS if c in table.columns]
    colour = COLOR_BY if COLOR_BY in metrics else (metrics[0] if metrics else "")
    runs = f"{len(table)} run{'s' if len(table) != 1 else ''}, one line each"
    return " · ".join(
        x
        for x in (
            runs,
            "axes: the config keys that differ between the runs, the seed, final metrics",
            f"colour: {colour}" if colour else "",
            "drag along an axis to select",
        )
        if x
    )
