"""The introduction-to-FL figures drawn as curves: ``intro-fedavg`` (with McMahan's Table 2),
``intro-epochs`` and ``intro-cohort`` (rounds to the target against E or M; the catastrophic
training failures per M), ``intro-sampling`` and ``intro-selection`` (the generic layout)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotly.graph_objects as go

from dashboards import generic
from dashboards.figdata import FigureData, figure_subtitle, make_result, prepare
from dashboards.model import BuildContext, FigureResult
from dashboards.papers.intro.common import (
    TABLE_ROW_PX,
    curve_values,
    draw_curves,
    finish,
    grid_figure,
    make_table,
    reach_of,
    rounds_against,
    target_of,
    with_target,
)
from dashboards.style import round_ticks, wrap_subtitle
from fedsweep.config.schema import RunConfig
from fedsweep.judge.panels import Panel
from fedsweep.judge.papers.intro import training_failures
from fedsweep.judge.targets import speedup, target_text
from fedsweep.specs.load import CurveSpec


# ------------------------------------------------------------------------------ intro-fedavg
def build_fedavg(ctx: BuildContext) -> FigureResult:
    """Test accuracy per partition (panels as columns) and McMahan's Table 2 below: rounds to
    the target per curve and panel, and the speed-up over FedSGD (``train.batch_size: full``)."""
    spec, band = ctx.spec, ctx.options.band
    metrics = ctx.metrics(["test_acc"])
    data = generic.with_view(ctx, prepare(ctx, sorted({*metrics, "test_acc"})))
    curves = spec.profile_curves(ctx.profile)
    styles = generic.curve_styles(curves, data)
    target = target_of(ctx)
    panels = data.panels
    sub = with_target(figure_subtitle(ctx, data), target)
    n_rows = len(metrics) + (1 if target is not None else 0)
    titles = [
        f"{generic.letter(i)} {p.label}".rstrip() for i, p in enumerate(panels * len(metrics))
    ]
    specs = [[{} for _ in panels] for _ in metrics]
    heights = [1.0] * len(metrics)
    table_rows = 0
    if target is not None:
        titles.append(
            f"{generic.letter(len(titles))} Rounds to reach {target_text(target)} test accuracy "
            "(seed mean) and speed-up over FedSGD"
        )
        specs.append([{"type": "table", "colspan": len(panels)}] + [None] * (len(panels) - 1))
        table_rows = len(curves) + 1
        heights.append(0.2 + 0.09 * table_rows)
    fig = grid_figure(n_rows, len(panels), titles, specs, heights)
    shown: set[str] = set()
    for r, metric in enumerate(metrics, start=1):
        for c, panel in enumerate(panels, start=1):
            draw_curves(fig, data, panel, metric, styles, shown, r, c, band, target)
    round_ticks(fig, int(data.agg["round"].max()) if len(data.agg) else None)
    notes = [f"{p.label}: no runs" for p in panels if not data.has_runs(p.panel_id)]
    if target is not None:
        table, table_notes = rounds_table(data, panels, curves, target)
        fig.add_trace(table, row=n_rows, col=1)
        notes += table_notes
    width = generic.CELL_WIDTH * len(panels) + generic.LEGEND_WIDTH + 80
    height = 360 * len(metrics) + (TABLE_ROW_PX * table_rows + 120 if table_rows else 0) + 60
    return finish(ctx, data, fig, sub, width, height, curves, target, notes)


def rounds_table(
    data: FigureData, panels: list[Panel], curves: list[CurveSpec], target: float
) -> tuple[go.Table, list[str]]:
    """McMahan's Table 2: per curve, rounds to ``target`` and speed-up over FedSGD per panel."""
    base = next((c.label for c in curves if data.config(c).train.batch_size == "full"), None)
    header = ["Curve"]
    for p in panels:
        header += [f"{p.label}: rounds", f"{p.label}: speed-up"]
    columns: list[list[str]] = [[c.label for c in curves]]
    notes = []
    for p in panels:
        rounds, ups = [], []
        b = reach_of(data, p.panel_id, base, target) if base else None
        parts = []
        for c in curves:
            r = reach_of(data, p.panel_id, c.label, target)
            if r is None:
                rounds.append("no runs")
                ups.append("")
                continue
            rounds.append(r.text)
            up = "(baseline)" if c.label == base else (speedup(b, r).text if b else "")
            ups.append(up)
            shown = up if up.startswith("(") else f"({up})"
            parts.append(f"{c.label} {r.short}" + (f" {shown}" if up else ""))
        columns += [rounds, ups]
        if parts:
            notes.append(
                f"{p.label}: rounds to {target_text(target)} (speed-up over FedSGD): "
                + ", ".join(parts)
            )
    table = make_table(header, columns)
    return table, notes


# ------------------------------------------------------------------------------ intro-epochs
def build_epochs(ctx: BuildContext) -> FigureResult:
    """(a) test accuracy over rounds, (b) rounds to the target against E (slides' Fig. 11)."""
    return _curves_and_rounds(
        ctx, lambda config: config.train.local_epochs, "Local epochs E (log scale)"
    )


def _curves_and_rounds(
    ctx: BuildContext,
    value: Callable[[RunConfig], Any],
    x_title: str,
    failures: bool = False,
):
    """Curves over rounds, rounds to the target against ``value`` (E, M) of the curves' run
    configs and (``failures``) the catastrophic training failures per curve."""
    spec, band = ctx.spec, ctx.options.band
    metrics = ctx.metrics()
    data = generic.with_view(ctx, prepare(ctx, sorted({*metrics, "test_acc"})))
    curves = spec.profile_curves(ctx.profile)
    styles = generic.curve_styles(curves, data)
    target = target_of(ctx)
    panel = data.panels[0]
    sub = with_target(figure_subtitle(ctx, data), target)
    titles = [generic.metric_title(m) for m in metrics]
    if target is not None:
        symbol = x_title.split(" (")[0].split()[-1]
        titles.append(f"Rounds to {target_text(target)} test accuracy vs {symbol}")
    if failures:
        titles.append("Catastrophic training failures (train acc ≤ ½ previous round)")
    titles = [f"{generic.letter(i)} {t}" for i, t in enumerate(titles)]
    fig = grid_figure(1, len(titles), titles)
    shown: set[str] = set()
    for c, metric in enumerate(metrics, start=1):
        draw_curves(fig, data, panel, metric, styles, shown, 1, c, band, target)
    round_ticks(fig, int(data.agg["round"].max()) if len(data.agg) else None)
    notes: list[str] = []
    col = len(metrics) + 1
    values = curve_values(data, curves, value)
    if target is not None and data.has_runs(panel.panel_id):
        notes.append(
            f"rounds to {target_text(target)} (seed mean): "
            + ", ".join(rounds_against(fig, data, panel, values, target, 1, col, x_title))
        )
        col += 1
    if failures and data.has_runs(panel.panel_id):
        notes.append(failure_bars(fig, data, panel, values, 1, col, x_title))
    width = 470 * len(titles) + generic.LEGEND_WIDTH
    return finish(ctx, data, fig, sub, width, 430, curves, target, notes)


# ------------------------------------------------------------------------------ intro-cohort
def build_cohort(ctx: BuildContext) -> FigureResult:
    """(a) test accuracy, (b) training accuracy, (c) rounds to the target against M, (d) the
    catastrophic training failures per M."""
    return _curves_and_rounds(
        ctx, lambda config: config.cohort.size, "Cohort size M (log scale)", failures=True
    )


def failure_bars(fig, data: FigureData, panel: Panel, values, row: int, col: int, x_title: str):
    """Bars: catastrophic training failures per M, summed over the runs (diverged runs
    excluded), labelled "k in j/n runs"."""
    fails = training_failures(data.long)
    xs, ys, texts, parts = [], [], [], []
    for value, c in values:
        n = data.seeds_of(panel.panel_id, c.label)
        bad = {s for s, _ in data.diverged.get((panel.panel_id, c.label), [])}
        bad |= {s for s, _ in data.blowups.get((panel.panel_id, c.label), [])}
        f = fails[(fails["panel_id"] == panel.panel_id) & (fails["curve"] == c.label)]
        f = f[~f["seed"].isin(bad)]
        xs.append(f"{value:g}")
        ys.append(len(f))
        texts.append(f"{len(f)} ({f['seed'].nunique()} of {n - len(bad)} runs)")
        where = ", ".join(f"seed {s} t={r}" for s, r in zip(f["seed"], f["round"], strict=True))
        parts.append(f"{c.label}: {len(f)}" + (f" ({where})" if where else ""))
    fig.add_trace(
        go.Bar(
            x=xs,
            y=ys,
            text=texts,
            textposition="outside",
            marker_color="#8c564b",
            name="training failures",
            showlegend=False,
        ),
        row=row,
        col=col,
    )
    fig.update_xaxes(
        type="category", title_text=x_title.replace(" (log scale)", ""), row=row, col=col
    )
    top = max(ys) if ys else 0
    fig.update_yaxes(
        title_text="Failures (all runs)", range=[0, max(1, top) * 1.3], row=row, col=col
    )
    return "catastrophic training failures per curve (runs without divergence): " + "; ".join(parts)


# ------------------------------------------------------------- intro-sampling, intro-selection
def build_generic(ctx: BuildContext) -> FigureResult:
    """The generic layout (:func:`dashboards.generic.build`) with the long profile note
    wrapped to the figure's width, one line per subtitle part."""
    metrics = ctx.metrics()
    data = generic.with_view(ctx, prepare(ctx, metrics))
    curves = ctx.spec.profile_curves(ctx.profile)
    width = generic.layout_width(ctx.spec, len(data.panels), metrics)
    sub = wrap_subtitle(figure_subtitle(ctx, data), width)
    styles = generic.curve_styles(curves, data)
    fig, parts = generic.draw(ctx, data, styles, metrics, sub=sub)
    notes = [f"{p.label}: no runs" for p in data.panels if not data.has_runs(p.panel_id)]
    notes = notes if len(data.panels) > 1 else []
    return make_result(ctx, data, fig, notes=notes, parts=parts)
