"""``fedsweep compare``: chosen runs, grouped by config, as curves (mean ± std over seeds) and a
table of final and best metrics per group.

The caller (``fedsweep/cli/explore.py``) finds the runs and reads their configs; this module
groups nothing itself: it gets ``Group``s (a config, its label, its runs) and the long table
of their metric histories, and draws them with the paper figures' conventions
(``style.draw_curve``, ``style.paper_layout``, ``store.aggregate``): each group has its own
colour and marker symbol (markers staggered, so two identical curves show both), dashed curves
are drawn above solid ones, and curves that coincide say so ("identical to X",
``style.mark_coinciding``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards.style import (
    PALETTE,
    X_TITLE,
    Y_TITLES,
    CurveStyle,
    draw_curve,
    draw_order,
    layered,
    mark_coinciding,
    palette,
    paper_layout,
)
from dashboards.style import SYMBOLS as MARKERS
from fedsweep.judge.runs import aggregate
from fedsweep.judge.store import LONG_COLUMNS

PANEL = "compare"
CYCLE_DASHES = ("solid", "dash", "dot", "dashdot")
#: keys that never tell two configs apart in a label (not in the config hash, or the seed)
LABEL_EXCLUDED = ("name", "seed", "threads", "device", "tracking", "data.root", "data.download")
#: short names of the keys the papers' legends use
SYMBOLS = {
    "bherd.alpha": "α",
    "train.local_epochs": "E",
    "train.batch_size": "B",
    "data.num_clients": "N",
    "train.lr": "η",
    "train.rounds": "T",
}


@dataclass
class Group:
    """One config: its key (hash of the config without the seed), label and runs."""

    key: str
    label: str
    run_ids: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)


def _fmt(value: Any) -> str:
    return str(value)  # floats as Python writes them: 1.0, 0.3, 0.0001


def _applies(key: str, cfg: dict[str, Any]) -> bool:
    """Whether a flattened key matters for this config: a top-level value, a general section,
    or the section of the config's own algorithm/selector (bherd.alpha is moot for FedAvg)."""
    from fedsweep.components.compose import config_sections

    if "." not in key:
        return True
    sections = config_sections(cfg)
    return key.split(".", 1)[0] in sections


def _part(key: str, value: Any, keys: list[str]) -> str:
    if key in SYMBOLS:
        return f"{SYMBOLS[key]}={_fmt(value)}"
    if key == "data.partition" and isinstance(value, str):
        match = re.fullmatch(r"case(\d+)", value)
        return f"Case {match.group(1)}" if match else value
    last = key.rsplit(".", 1)[-1]
    short = last if sum(k.rsplit(".", 1)[-1] == last for k in keys) == 1 else key
    return f"{short}={_fmt(value)}"


def _excluded(key: str) -> bool:
    return any(key == e or key.startswith(e + ".") for e in LABEL_EXCLUDED)


def group_labels(flat: dict[str, dict[str, Any]], names: dict[str, str]) -> dict[str, str]:
    """A label per group from what differs between the groups' flattened configs, e.g.
    ``α=0.3`` vs ``α=0.5``, ``fedavg`` vs ``bherd-fedavg · α=0.3``; a group whose config is
    the only one (or that nothing tells apart) gets its run name without the seed."""
    known = [cfg for cfg in flat.values() if cfg]  # {}: a run whose config could not be read
    keys = sorted({k for cfg in known for k in cfg if not _excluded(k)})
    differ = [k for k in keys if len({repr(cfg.get(k)) for cfg in known if _applies(k, cfg)}) > 1]
    method = "algorithm" in differ or "selector" in differ
    differ = [k for k in differ if k not in ("algorithm", "selector")]
    labels: dict[str, str] = {}
    for gid, cfg in flat.items():
        parts = []
        if method and cfg:
            sel, alg = cfg.get("selector", "none"), cfg.get("algorithm", "?")
            parts.append(alg if sel == "none" else f"{sel}-{alg}")
        parts += [_part(k, cfg.get(k), differ) for k in differ if cfg and _applies(k, cfg)]
        name = names.get(gid, "")  # a trial's name leads with its seed (older ones end with it)
        name = re.sub(r"^seed\s*=?\s*\d+[\s·|,]*|[\s·|,]*seed\s*=?\s*\d+$", "", name).strip()
        labels[gid] = " · ".join(parts) or name or gid[:8]
    seen: dict[str, int] = {}
    for label in labels.values():
        seen[label] = seen.get(label, 0) + 1
    return {g: (f"{lab} [{g[:6]}]" if seen[lab] > 1 else lab) for g, lab in labels.items()}


def common_note(flat: dict[str, dict[str, Any]]) -> str:
    """What every group shares, e.g. "bherd-fedavg · svm · mnist-5k · Case 3 · N=5 · T=100"."""
    known = [cfg for cfg in flat.values() if cfg]
    if not known:
        return ""

    def same(key: str):
        values = {repr(cfg.get(key)) for cfg in known}
        return known[0].get(key) if len(values) == 1 else None

    parts = []
    sel, alg = same("selector"), same("algorithm")
    if sel is not None and alg is not None:
        parts.append(alg if sel == "none" else f"{sel}-{alg}")
    for key in ("model.name", "data.dataset"):
        if same(key) is not None:
            parts.append(str(same(key)))
    keys = ["data.partition", "data.num_clients", "train.rounds"]
    if sel == "bherd":
        keys.append("bherd.alpha")
    for key in keys:
        value = same(key)
        if value is not None:
            parts.append(_part(key, value, [key]))
    return " · ".join(parts)


def long_frame(rows: list[tuple]) -> pd.DataFrame:
    """(group key, seed, run_id, round, metric, value) rows -> the dashboards' long table."""
    data = [("compare", PANEL, g, seed, rid, step, m, v) for g, seed, rid, step, m, v in rows]
    frame = pd.DataFrame(data, columns=LONG_COLUMNS)
    return frame.sort_values(["curve", "seed", "metric", "round"], ignore_index=True)


def _mean_std(values: list[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return math.nan, math.nan
    return float(arr.mean()), (float(arr.std(ddof=1)) if arr.size > 1 else 0.0)


def higher_is_better(metric: str) -> bool:
    return "acc" in metric.rsplit("/", 1)[-1]


def summary_table(long: pd.DataFrame, groups: list[Group], metrics: list[str]) -> pd.DataFrame:
    """Per group: n runs, and per metric the final value (each run's last logged round) as mean
    and std over the runs, and the best round of the seed-mean curve (max for accuracies, min
    otherwise) with its round; ``rounds`` = the last round logged."""
    agg = aggregate(long)
    out = []
    for g in groups:
        row: dict[str, Any] = {"group": g.key, "label": g.label, "n": len(g.run_ids)}
        mine = long[long["curve"] == g.key]
        for m in metrics:
            hist = mine[mine["metric"] == m]
            finals = [
                float(h.sort_values("round")["value"].iloc[-1]) for _, h in hist.groupby("run_id")
            ]
            row[f"final_{m}_mean"], row[f"final_{m}_std"] = _mean_std(finals)
            curve = agg[(agg["curve"] == g.key) & (agg["metric"] == m)]
            if curve.empty:
                row[f"best_{m}"], row[f"best_{m}_round"] = math.nan, -1
            else:
                i = curve["mean"].idxmax() if higher_is_better(m) else curve["mean"].idxmin()
                row[f"best_{m}"] = float(curve.loc[i, "mean"])
                row[f"best_{m}_round"] = int(curve.loc[i, "round"])
        rounds = mine.groupby("run_id")["round"].max() if not mine.empty else pd.Series([0])
        row["rounds_min"], row["rounds_max"] = int(rounds.min()), int(rounds.max())
        row["diverged"] = sum(s == "diverged" for s in g.statuses)
        row["run_ids"] = " ".join(g.run_ids)
        out.append(row)
    return pd.DataFrame(out)


def compare_figure(
    long: pd.DataFrame, groups: list[Group], metrics: list[str], title: str, subtitle: str
) -> go.Figure:
    """One panel per metric (side by side), one curve per group: seed mean, ±1 std band."""
    agg = aggregate(long)
    cols = len(metrics)
    fig = make_subplots(
        rows=1,
        cols=cols,
        subplot_titles=[Y_TITLES.get(m, m) for m in metrics],
        horizontal_spacing=0.08 if cols > 1 else 0.0,
    )
    styles = []
    for i, g in enumerate(groups):
        dash = CYCLE_DASHES[(i // len(PALETTE)) % len(CYCLE_DASHES)]  # past 10 colours
        styles.append(
            CurveStyle(
                key=g.key,
                name=f"{g.label} (n={len(g.run_ids)})",
                color=palette(i),
                dash=dash,
                symbol=MARKERS[i % len(MARKERS)],
                index=i,
                of=len(groups),
            )
        )
    for style in draw_order(layered(styles)):
        shown = False
        for c, m in enumerate(metrics, start=1):
            table = agg[(agg["curve"] == style.key) & (agg["metric"] == m)]
            drew = draw_curve(fig, table, style, row=1, col=c, show_legend=not shown)
            shown |= drew
    for c, m in enumerate(metrics, start=1):
        fig.update_xaxes(title_text=X_TITLE, row=1, col=c)
        fig.update_yaxes(title_text=Y_TITLES.get(m, m), row=1, col=c)
    last = int(long["round"].max()) if not long.empty else None
    if last is not None and last <= 12:
        fig.update_xaxes(dtick=1, tick0=1)
    else:
        fig.update_xaxes(tickformat="d")
    paper_layout(fig, title, subtitle, width=560 * cols + 320, height=520)
    mark_coinciding(fig)
    return fig
