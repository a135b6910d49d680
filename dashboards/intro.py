"""The introduction-to-FL figures (docs/figures.md, "Introduction-to-FL slides").

``intro-sampling`` and ``intro-selection`` are the generic layout (curves over rounds). The
other four add what McMahan's and Charles et al.'s tables and the slides' Fig. 11 show, from
the same seed-mean curves the claims read (``dashboards.targets``: rounds to the profile's
``target_acc``, "> T" when not reached within T):

* ``intro-fedavg``: test accuracy over rounds per partition, with the target as a dotted line,
  and below a table of rounds to the target and speed-up over FedSGD (McMahan's Table 2 form);
* ``intro-epochs``: test accuracy over rounds, and rounds to the target against E;
* ``intro-cohort``: test and training accuracy over rounds, rounds to the target against M,
  and the catastrophic training failures per M (a run's training accuracy falling to at most
  half of the previous round's, counted per run);
* ``intro-fedopt``: the curves are a learning-rate grid; per method only the grid point with
  the best seed-mean final test accuracy is drawn (grid points with a diverged or blown-up seed
  excluded: ``claims.best_of_grid``), and a table gives the whole grid.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards import generic
from dashboards.claims import FEDOPT_METHODS, best_of_grid, training_failures
from dashboards.figdata import FigureData, figure_subtitle, make_result, prepare
from dashboards.model import BuildContext, FigureResult, Panel
from dashboards.style import X_TITLE, paper_layout, round_ticks, subtitle
from dashboards.targets import Reach, rounds_to_target, speedup, target_text
from fedsweep.sweep.spec import CurveSpec

TARGET_LINE = {"color": "#555", "width": 1.2, "dash": "dot"}
TABLE_ROW_PX = 30


# --------------------------------------------------------------------------------- helpers
def target_of(ctx: BuildContext) -> float | None:
    return ctx.spec.profiles[ctx.profile].target_acc


def reach_of(data: FigureData, pid: str, curve: str, target: float) -> Reach | None:
    """Rounds to ``target`` of the seed-mean test accuracy (the claims' reading)."""
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
    generic._draw_cell(fig, data, panel, metric, styles, shown, row, col, band)  # noqa: SLF001
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


def curve_values(curves: list[CurveSpec], key: str) -> list[tuple[float, CurveSpec]]:
    out = [(float(c.set[key]), c) for c in curves if isinstance(c.set.get(key), int | float)]
    return sorted(out, key=lambda p: p[0])


def wrap_subtitle(sub: str, width: int) -> str:
    """One line per subtitle part, each wrapped to the figure's width (about 7.5 px a
    character at the subtitle's 14 px)."""
    chars = max(60, int((width - 120) / 7.5))
    lines = []
    for part in sub.replace("<br>", " · ").split(" · "):
        lines += textwrap.wrap(part, chars) or [""]
    return "<br>".join(lines)


def finish(ctx, data, fig, sub, width, height, curves, target, notes):
    """Layout (``height``: the plot area without the title block) and bookkeeping."""
    sub = wrap_subtitle(sub, width)
    top = _top(sub)
    paper_layout(fig, ctx.spec.title, sub, width=width, height=height + top, top=top)
    fig.update_annotations(font={"size": 16})
    return make_result(ctx, data, fig, data.claim_data(curves, target), notes=notes)


def _top(sub: str) -> int:
    return 90 + 20 * (sub.count("<br>") + 1)


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
    base = next((c.label for c in curves if c.set.get("train.batch_size") == "full"), None)
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
    table = _table(header, columns)
    return table, notes


# ------------------------------------------------------------------------------ intro-epochs
def build_epochs(ctx: BuildContext) -> FigureResult:
    """(a) test accuracy over rounds, (b) rounds to the target against E (slides' Fig. 11)."""
    return _curves_and_rounds(ctx, "train.local_epochs", "Local epochs E (log scale)")


def _curves_and_rounds(ctx: BuildContext, key: str, x_title: str, failures: bool = False):
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
    values = curve_values(curves, key)
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
    return _curves_and_rounds(ctx, "cohort.size", "Cohort size M (log scale)", failures=True)


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


# ------------------------------------------------------------------------------ intro-fedopt
def build_fedopt(ctx: BuildContext) -> FigureResult:
    """Per method the best grid point's curves (test accuracy, training loss), and the grid's
    final test accuracies as a table (★ = drawn)."""
    spec, band = ctx.spec, ctx.options.band
    metrics = ctx.metrics()
    data = generic.with_view(ctx, prepare(ctx, sorted({*metrics, "test_acc"})))
    curves = spec.profile_curves(ctx.profile)
    panel = data.panels[0]
    claim = data.claim_data(curves)
    chosen = {o: best_of_grid(claim, panel.panel_id, o) for o in FEDOPT_METHODS}
    drawn = [c for c in curves if c.label in {label for label, _ in chosen.values()}]
    styles = generic.curve_styles(drawn, data)
    sub = figure_subtitle(ctx, data)
    if "best" not in spec.profiles[ctx.profile].note:  # the quick/paper notes say it
        sub = subtitle(
            sub,
            "per method the (η_l, η_s) of the best seed-mean final test accuracy "
            "(grid points with a diverged seed excluded)",
        )
    titles = [f"{generic.letter(i)} {generic.metric_title(m)}" for i, m in enumerate(metrics)]
    titles.append(f"{generic.letter(len(titles))} Final test accuracy (seed mean) over the grid")
    rows_tab = grid_rows(curves)
    specs = [
        [{} for _ in metrics],
        [{"type": "table", "colspan": len(metrics)}] + [None] * (len(metrics) - 1),
    ]
    heights = [1.0, 0.25 + 0.08 * (len(rows_tab) + 1)]
    fig = grid_figure(2, len(metrics), titles, specs, heights)
    shown: set[str] = set()
    for c, metric in enumerate(metrics, start=1):
        draw_curves(fig, data, panel, metric, styles, shown, 1, c, band)
    round_ticks(fig, int(data.agg["round"].max()) if len(data.agg) else None)
    table, notes = grid_table(data, panel, curves, chosen, rows_tab)
    fig.add_trace(table, row=2, col=1)
    width = 560 * len(metrics) + generic.LEGEND_WIDTH + 100
    height = 430 + TABLE_ROW_PX * (len(rows_tab) + 1) + 110
    return finish(ctx, data, fig, sub, width, height, curves, None, notes)


def _rates(c: CurveSpec) -> tuple[str, float, float] | None:
    opt = c.set.get("server_optimizer")
    eta_s = c.set.get("server_sgd.lr" if opt == "sgd" else "fedopt.lr")
    eta_l = c.set.get("train.lr")
    if opt not in FEDOPT_METHODS or eta_s is None or eta_l is None:
        return None
    return opt, float(eta_l), float(eta_s)


def grid_rows(curves: list[CurveSpec]) -> list[tuple[str, float]]:
    """(optimizer, η_l) rows of the grid table, in method then rate order."""
    keys = {(r[0], r[1]) for c in curves if (r := _rates(c))}
    order = list(FEDOPT_METHODS)
    return sorted(keys, key=lambda k: (order.index(k[0]), k[1]))


def _exp(x: float) -> str:
    e = math.log10(x)
    return f"1e{round(e)}" if math.isclose(e, round(e)) else f"{x:g}"


def grid_table(data: FigureData, panel: Panel, curves, chosen, rows):
    """Rows = method × η_l, columns = η_s; cells = final seed-mean test accuracy, "diverged" for
    a grid point with a diverged/blown-up seed, ★ for the point drawn."""
    cols = sorted({r[2] for c in curves if (r := _rates(c))})
    cell: dict[tuple[str, float, float], str] = {}
    picked = {label for label, _ in chosen.values()}
    for c in curves:
        r = _rates(c)
        if r is None:
            continue
        key = (panel.panel_id, c.label)
        if key in data.diverged or key in data.blowups:
            cell[r] = "diverged"
            continue
        a = data.agg
        s = a[
            (a["panel_id"] == panel.panel_id)
            & (a["curve"] == c.label)
            & (a["metric"] == "test_acc")
        ].sort_values("round")
        s = s[np.isfinite(s["mean"].astype(float))]
        if len(s):
            cell[r] = f"{float(s['mean'].iloc[-1]):.4f}" + (" ★" if c.label in picked else "")
    values: list[list[str]] = [
        [FEDOPT_METHODS[o] for o, _ in rows],
        [_exp(lr) for _, lr in rows],
    ]
    for eta_s in cols:
        values.append([cell.get((o, lr, eta_s), "") for o, lr in rows])
    header = ["Method", "η_l"] + [f"η_s={_exp(v)}" for v in cols]
    table = _table(header, values)
    notes = [
        f"{FEDOPT_METHODS[o]}: best grid point {label} (final test acc {acc:.4f})"
        if label
        else f"{FEDOPT_METHODS[o]}: no grid point with data"
        for o, (label, acc) in chosen.items()
    ]
    return table, notes


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
    return make_result(ctx, data, fig, data.claim_data(curves), notes=notes, parts=parts)


def _table(header: list[str], columns: list[list[str]]) -> go.Table:
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
