"""``bherd-diagnosis`` (ours, issue 35): how far BHerd's server step is from FedAvg's on the same
local trajectories (``bherd_dev``, docs/algorithms.md §3.6a), across α (curves) and η (panels).

The figure is the generic layout (rows ``bherd_dev`` and test accuracy). The BHerd report gets
a table of the numbers behind it: per η and α the deviation averaged over a run's rounds (its
seed mean with a 95% interval over seeds) and the final test accuracy minus FedAvg's (paired by
seed), and one sentence per η in plain words.
"""

from __future__ import annotations

import math

import pandas as pd

from dashboards import generic
from dashboards.figdata import FigureData
from dashboards.model import BuildContext, FigureResult
from fedsweep.judge.stats import interval

#: the accuracy reference curve of the spec (it logs no deviation)
REFERENCE = "FedAvg (RR)"
DEV = "bherd_dev"


def _num(x: float) -> str:
    return "–" if not math.isfinite(x) else f"{x:.3g}"


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"


def _ci(values: list[float], seeds: list[int]) -> str:
    ev = interval(values, seeds)
    if not values:
        return "–"
    if not (math.isfinite(ev.ci_low) and math.isfinite(ev.ci_high)):
        return f"{_num(ev.mean)} (n={len(values)})"
    return f"{_num(ev.mean)} [{_num(ev.ci_low)}, {_num(ev.ci_high)}]"


def summary(data: FigureData) -> pd.DataFrame:
    """Per (panel, curve, seed): the run's mean ``bherd_dev`` over its rounds and its final test
    accuracy minus the reference's of the same seed (NaN where either is missing)."""
    long = data.long
    if long.empty:
        return pd.DataFrame(columns=["panel_id", "curve", "seed", "dev", "acc_gap"])
    dev = (
        long[long["metric"] == DEV]
        .groupby(["panel_id", "curve", "seed"])["value"]
        .mean()
        .rename("dev")
    )
    acc = long[long["metric"] == "test_acc"].sort_values("round")
    final = acc.groupby(["panel_id", "curve", "seed"])["value"].last().rename("acc")
    table = pd.concat([dev, final], axis=1).reset_index()
    ref = table[table["curve"] == REFERENCE][["panel_id", "seed", "acc"]].rename(
        columns={"acc": "ref"}
    )
    table = table.merge(ref, on=["panel_id", "seed"], how="left")
    table["acc_gap"] = table["acc"] - table["ref"]
    table = table[table["curve"] != REFERENCE]
    return table[["panel_id", "curve", "seed", "dev", "acc_gap"]].reset_index(drop=True)


def report_table(data: FigureData, profile: str) -> str:
    """Markdown for the BHerd report (see the module docstring)."""
    table = summary(data)
    if table.empty:
        return ""
    curves = [c for c in dict.fromkeys(table["curve"]) if c != REFERENCE]
    lines = [
        f"### How far the BHerd update is from FedAvg's ({profile} profile)",
        "",
        "Each cell: the relative deviation of BHerd's server step from FedAvg's on the same "
        "local trajectories, ‖Δ_BHerd − Δ_all‖/‖Δ_all‖, averaged over a run's rounds (seed mean "
        "[95% interval]); below it the final test accuracy minus FedAvg (RR)'s, paired by seed.",
        "",
        "| η | " + " | ".join(curves) + " |",
        "|---|" + "---|" * len(curves),
    ]
    sentences = []
    for panel in data.panels:
        here = table[table["panel_id"] == panel.panel_id]
        if here.empty:
            continue
        cells, devs, gaps = [], {}, {}
        for curve in curves:
            rows = here[here["curve"] == curve]
            d = rows.dropna(subset=["dev"])
            g = rows.dropna(subset=["acc_gap"])
            devs[curve] = interval(d["dev"].tolist(), d["seed"].tolist())
            gaps[curve] = interval(g["acc_gap"].tolist(), g["seed"].tolist())
            cells.append(
                f"{_ci(d['dev'].tolist(), d['seed'].tolist())}<br>"
                f"Δacc {_ci(g['acc_gap'].tolist(), g['seed'].tolist())}"
            )
        lines.append(f"| {panel.label} | " + " | ".join(cells) + " |")
        finite = {c: e.mean for c, e in devs.items() if math.isfinite(e.mean)}
        if finite:
            lo, hi = min(finite.values()), max(finite.values())
            moved = [
                c
                for c, e in gaps.items()
                if math.isfinite(e.ci_low) and (e.ci_low > 0.01 or e.ci_high < -0.01)
            ]
            sentences.append(
                f"At {panel.label} BHerd's server step deviates from FedAvg's by {_pct(lo)}–"
                f"{_pct(hi)} of FedAvg's step (mean over rounds and seeds) across α; "
                + (
                    f"its final accuracy differs from FedAvg's by more than 0.01 (interval "
                    f"clear of ±0.01) for {', '.join(moved)}."
                    if moved
                    else "no α's final accuracy differs from FedAvg's by more than 0.01 with an "
                    "interval that says so."
                )
            )
    return "\n".join([*lines, "", *[f"- {s}" for s in sentences]])


def build(ctx: BuildContext) -> FigureResult:
    result, data = generic.build_with_data(ctx)
    text = report_table(data, ctx.profile) if result.runs else ""
    if text:
        result.report_tables.append(text)
    return result
