"""What the introduction-to-FL figures share: rounds to the profile's target on the seed-mean
curves (what the figures draw, ``fedsweep.judge.targets``; the claims count them per run), the
rounds-against-a-value cell, the
curve cells with the target line, the tables and the layout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards import generic
from dashboards.figdata import FigureData, make_result
from dashboards.model import BuildContext
from dashboards.style import X_TITLE, paper_layout, subtitle, wrap_subtitle
from fedsweep.config.schema import RunConfig
from fedsweep.judge.panels import Panel
from fedsweep.judge.targets import Reach, rounds_to_target, target_text
from fedsweep.specs.load import CurveSpec

TARGET_LINE = {"color": "#555", "width": 1.2, "dash": "dot"}
TABLE_ROW_PX = 30


# --------------------------------------------------------------------------------- helpers
def target_of(ctx: BuildContext) -> float | None:
    return ctx.spec.profiles[ctx.profile].target_acc


def reach_of(data: FigureData, pid: str, curve: str, target: float) -> Reach | None:
    """Rounds to ``target`` of the seed-mean test accuracy (drawn; the claims count per run)."""
    a = data.agg
    sel = a[(a["panel_id"] == pid) & (a["curve"] == curve) & (a["metric"] == "test_acc")]
    return rounds_to_target(sel.set_index("round")["mean"].astype(float), target)


def seed_reaches(data: FigureData, pid: str, curve: str, target: float) -> list[Reach]:
    """Rounds to ``target`` of each run's own test accuracy (the spread behind the mean)."""
    lg = data.long
    sel = lg[(lg["panel_id"] == pid) & (lg["curve"] == curve) & (lg["metric"] == "test_acc")]
    out = []
    for _, g in sel.groupby("run_id"):
        r = rounds_to_target(g.set_index("round")["value"].astype(float), target)
        if r is not None:
            out.append(r)
    return out


def with_target(sub: str, target: float | None, what: str = "") -> str:
    if target is None:
        return sub
    part = "rounds to the target counted on the seed-mean test accuracy"
    if f"target {target_text(target)}" not in sub:
        part = f"target {target_text(target)} test accuracy (rounds counted on the seed mean)"
    return subtitle(sub, part, what)


def grid_figure(rows: int, cols: int, titles: list[str], specs=None, row_heights=None) -> go.Figure:
    return make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=titles,
        specs=specs,
        row_heights=row_heights,
        horizontal_spacing=0.08,
        vertical_spacing=0.14,
    )


def draw_curves(fig, data, panel, metric, styles, shown, row, col, band, target=None):
    """One curve cell (generic), with the target as a dotted line on an accuracy cell."""
    generic.draw_cell(fig, data, panel, metric, styles, shown, row, col, band)
    fig.update_yaxes(title_text=generic.metric_title(metric), row=row, col=col)
    fig.update_xaxes(title_text=X_TITLE, row=row, col=col)
    if target is not None and metric == "test_acc" and data.has_runs(panel.panel_id):
        fig.add_hline(y=target, line=TARGET_LINE, row=row, col=col)


def rounds_against(
    fig: go.Figure,
    data: FigureData,
    panel: Panel,
    curves: list[tuple[float, CurveSpec]],
    target: float,
    row: int,
    col: int,
    x_title: str,
) -> list[str]:
    """Rounds to ``target`` against a curve value (E, M): the seed mean's as a line with filled
    markers, "not reached within T" as an open marker at T + 1 labelled "> T", each run's own
    rounds as small grey dots. Returns one note per curve."""
    xs, ys, texts, open_x, open_y, notes = [], [], [], [], [], []
    seed_x, seed_y = [], []
    for value, c in curves:
        r = reach_of(data, panel.panel_id, c.label, target)
        if r is None:
            continue
        notes.append(f"{c.label}: {r.text}")
        if r.reached:
            xs.append(value)
            ys.append(r.rounds)
            texts.append(str(r.rounds))
        else:
            open_x.append(value)
            open_y.append(r.horizon + 1)
        for s in seed_reaches(data, panel.panel_id, c.label, target):
            seed_x.append(value)
            seed_y.append(s.low)
    fig.add_trace(
        go.Scatter(
            x=seed_x,
            y=seed_y,
            mode="markers",
            marker={"size": 6, "color": "rgba(120,120,120,0.55)", "symbol": "circle"},
            name="single run (not reached: T+1)",
            showlegend=bool(seed_x),
            legendgroup="__runs",
        ),
        row=row,
        col=col,
    )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines+markers+text",
            text=texts,
            textposition="top center",
            marker={"size": 11, "color": "#222"},
            line={"color": "#222", "width": 2},
            name=f"seed mean, rounds to {target_text(target)}",
            legendgroup="__mean",
        ),
        row=row,
        col=col,
    )
    if open_x:
        fig.add_trace(
            go.Scatter(
                x=open_x,
                y=open_y,
                mode="markers+text",
                text=[f"> {y - 1}" for y in open_y],
                textposition="top center",
                marker={"size": 12, "color": "#222", "symbol": "circle-open", "line": {"width": 2}},
                name="not reached within T",
                legendgroup="__open",
            ),
            row=row,
            col=col,
        )
    values = [v for v, _ in curves]
    fig.update_xaxes(
        type="log",
        tickvals=values,
        ticktext=[f"{v:g}" for v in values],
        title_text=x_title,
        row=row,
        col=col,
    )
    fig.update_yaxes(
        title_text=f"Rounds to {target_text(target)}", rangemode="tozero", row=row, col=col
    )
    return notes


def curve_values(
    data: FigureData, curves: list[CurveSpec], value: Callable[[RunConfig], Any]
) -> list[tuple[float, CurveSpec]]:
    """(``value`` of the curve's run config, curve) of every curve where it is a number, sorted
    by it (e.g. ``lambda config: config.train.local_epochs``)."""
    out = [(float(v), c) for c in curves if isinstance(v := value(data.config(c)), int | float)]
    return sorted(out, key=lambda p: p[0])


def finish(ctx, data, fig, sub, width, height, curves, target, notes):
    """Layout (``height``: the plot area without the title block) and bookkeeping."""
    sub = wrap_subtitle(sub, width)
    top = _top(sub)
    paper_layout(fig, ctx.spec.title, sub, width=width, height=height + top, top=top)
    fig.update_annotations(font={"size": 16})
    return make_result(ctx, data, fig, notes=notes)


def _top(sub: str) -> int:
    return 90 + 20 * (sub.count("<br>") + 1)


def make_table(header: list[str], columns: list[list[str]]) -> go.Table:
    """A figure's table cell: bold header row, one list of strings per column."""
    return go.Table(
        header={
            "values": [f"<b>{h}</b>" for h in header],
            "fill_color": "#eee",
            "align": "left",
            "font": {"size": 14},
            "height": TABLE_ROW_PX,
        },
        cells={"values": columns, "align": "left", "font": {"size": 14}, "height": TABLE_ROW_PX},
    )
