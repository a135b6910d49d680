"""BHerd Fig. 2a / 2b: nine column panels (SVM+MNIST, CNN+MNIST, CNN+CIFAR-10 x Case 1–3),
test loss on top, test accuracy below, the methods as curves (the spec decides which).

A panel without runs (e.g. CIFAR-10 could not be found, so the sweep skipped it) is drawn
empty with a "no runs" note in the cell, never filled with another data set's numbers.
"""

from __future__ import annotations

import plotly.graph_objects as go

from dashboards import store
from dashboards.bherd_fig3 import METRICS, curve_styles, metric_grid
from dashboards.figdata import figure_subtitle, make_result, prepare
from dashboards.model import BuildContext, FigureResult
from dashboards.style import paper_layout

PANEL_WIDTH = 265
NO_RUNS = "no runs"


def build(ctx: BuildContext) -> FigureResult:
    spec = ctx.spec
    data = prepare(ctx, list(METRICS))
    curves = spec.curve_list()
    fig = metric_grid(data, data.panels, curve_styles(curves, data))
    empty = [i for i, p in enumerate(data.panels, start=1) if not data.has_runs(p.panel_id)]
    for col in empty:
        for row in range(1, len(METRICS) + 1):
            _mark_empty(fig, row, col)
    # the subtitle is long (profile scaling + data notes): one line per part
    sub = figure_subtitle(ctx, data).replace(" · ", "<br>")
    lines = sub.count("<br>") + 1
    width = PANEL_WIDTH * len(data.panels) + 330
    paper_layout(fig, spec.title, sub, width=width, height=720 + 18 * lines, top=90 + 18 * lines)
    fig.update_annotations(selector={"text": NO_RUNS}, font={"size": 14, "color": "#999"})
    notes = [f"{p.label}: no runs" for i, p in enumerate(data.panels, start=1) if i in empty]
    notes += grab_stalls(ctx, data)
    return make_result(ctx, data, fig, data.claim_data(curves), notes=notes)


def grab_stalls(ctx: BuildContext, data) -> list[str]:
    """Per panel, the rounds in which GraB-FedAvg selected no gradient on any client
    (``alpha_t = 0``: the update is skipped, ALGORITHMS.md §4), summed over seeds."""
    runs = [tr for tr in data.resolution.found if tr.trial.config.selector == "grab"]
    if not runs or ctx.client is None:
        return []
    long = store.load_metrics(ctx.client, runs, ["client/{i}/alpha"])
    if long.empty:
        return []
    per_round = long.groupby(["panel_id", "curve", "run_id", "round"])["value"].max()
    stalled = (per_round == 0).groupby(level=["panel_id", "curve"]).agg(["sum", "count"])
    return [
        f"{curve} [{p.label}]: no client selected a gradient (alpha_t = 0, update skipped) "
        f"in {int(row['sum'])} of {int(row['count'])} rounds (all seeds)"
        for p in data.panels
        for (pid, curve), row in stalled.iterrows()
        if pid == p.panel_id and row["sum"] > 0
    ]


def _mark_empty(fig: go.Figure, row: int, col: int) -> None:
    """Keep the cell's axes box (an invisible trace) and write "no runs" in its middle."""
    fig.add_trace(
        go.Scatter(x=[None], y=[None], showlegend=False, hoverinfo="skip"), row=row, col=col
    )
    fig.update_xaxes(showticklabels=False, showgrid=False, row=row, col=col)
    fig.update_yaxes(showticklabels=False, showgrid=False, row=row, col=col)
    cell = fig.get_subplot(row, col)
    xref = cell.xaxis.plotly_name.replace("axis", "")
    yref = cell.yaxis.plotly_name.replace("axis", "")
    fig.add_annotation(
        text=NO_RUNS,
        showarrow=False,
        xref=f"{xref} domain",
        yref=f"{yref} domain",
        x=0.5,
        y=0.5,
    )
