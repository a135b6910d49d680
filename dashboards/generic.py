"""The generic figure of any sweep spec: panels x metrics, one curve per spec curve, mean ± band.

This is the default builder (``fedsweep figures --spec my-study.yaml``) and the base every paper
builder adds its own touches to (``dashboards.papers``: BHerd's Fig. 2, 3, 4d, 4e, ...).

Layout, from the spec's panel axes:

* no panel axis (one panel): the metrics side by side, one cell each;
* one axis, or three and more: panels as columns, metrics as rows (test loss, test accuracy by
  default: the spec's ``metrics``);
* two axes (e.g. ``setting`` x ``data.partition``): one figure per metric, the first axis as
  rows and the second as columns (``<id>-loss``, ``<id>-acc``), readable at page width.

Every cell title carries a panel letter, "(a) Case 1"; a cell without runs says "no runs".
Curves are the seed mean with a ±1 std band by default (``FigureOptions.band``: std, sem,
none), clipped to the metric's range; each curve has its own marker symbol, and dashed/dotted
curves are drawn above solid ones so that coinciding curves stay visible; curves identical
within plotting resolution say so in the legend and hover text ("identical to X",
:func:`dashboards.style.mark_coinciding`).
"""

from __future__ import annotations

import re
import string

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards.figdata import (
    NO_RUNS,
    FigureData,
    diff_from,
    figure_subtitle,
    make_result,
    prepare,
)
from dashboards.model import BuildContext, FigureResult
from dashboards.style import (
    PALETTE,
    SYMBOLS,
    X_TITLE,
    Y_TITLES,
    CurveStyle,
    draw_curve,
    draw_order,
    layered,
    mark_coinciding,
    metric_bounds,
    palette,
    paper_layout,
    round_ticks,
    seed_label,
)
from fedsweep.judge.panels import Panel
from fedsweep.specs.load import CurveSpec, SweepSpec

CELL_WIDTH = 400  # px per column of a metric grid
GRID_CELL = (440, 300)  # px per cell of a two-axis grid (width, height)
LEGEND_WIDTH = 300
SHORT = {
    "test_loss": "loss",
    "test_acc": "acc",
    "train_loss": "train-loss",
    "train_acc": "train-acc",
}


def letter(i: int) -> str:
    """Panel letter of cell ``i`` (0-based): (a) … (z), (aa) …"""
    letters = string.ascii_lowercase
    return f"({letters[i]})" if i < 26 else f"({letters[i // 26 - 1]}{letters[i % 26]})"


def metric_title(metric: str, baseline: str | None = None) -> str:
    title = Y_TITLES.get(metric, metric)
    return f"{title} − {baseline}" if baseline else title


def metric_suffix(metric: str) -> str:
    """File suffix of a metric's figure: ``test_loss`` -> ``loss``."""
    return SHORT.get(metric) or re.sub(r"[^A-Za-z0-9_.-]+", "-", metric).strip("-")


def value_order(curves: list[CurveSpec]) -> list[CurveSpec]:
    """``curves`` with each group of curves that set the same one numeric key (α=0.1, 0.3, …)
    in value order, as one block where its first member stands, in the direction the group
    already runs (ascending unless its first two are descending): curves a study adds (``sweep
    --grid bherd.alpha=0.2,0.4``, ``add_curves``) take their place among the figure's own. A
    group already in order, and every other curve, stay where they are."""
    groups: dict[str, list[CurveSpec]] = {}
    for c in curves:
        if len(c.set) == 1 and not c.flat:
            ((key, value),) = c.set.items()
            if isinstance(value, int | float) and not isinstance(value, bool):
                groups.setdefault(key, []).append(c)
    out: list[CurveSpec] = []
    placed: set[str] = set()
    for c in curves:
        if c.label in placed:
            continue
        group = next((g for g in groups.values() if len(g) > 2 and c in g), None)
        if group is None:
            out.append(c)
            placed.add(c.label)
            continue
        values = [next(iter(g.set.values())) for g in group]
        descending = values[0] > values[1]
        out += sorted(group, key=lambda g: next(iter(g.set.values())), reverse=descending)
        placed |= {g.label for g in group}
    return out


def curve_styles(curves: list[CurveSpec], data: FigureData) -> list[CurveStyle]:
    """Spec colours/dashes, one marker symbol per curve; legend names carry the seed count and
    any divergence. A curve without a colour of its own takes the next palette colour no curve
    of the figure has (a study's added curve never gets the reference's grey)."""
    styles = []
    taken = {c.color.lower() for c in curves if c.color}
    free = iter([p for p in PALETTE if p.lower() not in taken] + list(PALETTE) * 2)
    for i, c in enumerate(curves):
        name = seed_label(
            c.label,
            data.counts(c.label),
            data.diverged_rounds(c.label),
            data.blowup_count(c.label),
        )
        color = c.color or ("#000000" if c.flat else (next(free) if taken else palette(i)))
        symbol = None if c.flat else SYMBOLS[i % len(SYMBOLS)]
        styles.append(
            CurveStyle(c.label, name, color, c.dash or "solid", c.flat, "", symbol, i, len(curves))
        )
    return layered(styles)


def layout_width(spec: SweepSpec, panels: int, metrics: list[str]) -> int:
    """The figure width (px) of the generic layout: one cell per metric for a single panel, a
    grid column per value of the second axis for two axes, else one column per panel."""
    if panels == 1:
        return 560 * len(metrics) + LEGEND_WIDTH
    if two_axes(spec) is not None:
        return GRID_CELL[0] * len(next(iter(spec.panels.values()))) + 300
    return CELL_WIDTH * panels + LEGEND_WIDTH


def two_axes(spec: SweepSpec) -> tuple[str, str] | None:
    """(row axis, column axis) when the spec has exactly two panel axes."""
    keys = list(spec.panels)
    return (keys[0], keys[1]) if len(keys) == 2 else None


def draw_cell(
    fig: go.Figure,
    data: FigureData,
    panel: Panel,
    metric: str,
    styles: list[CurveStyle],
    shown: set[str],
    row: int,
    col: int,
    band: str,
) -> None:
    """One cell: every style's curve of ``metric`` in ``panel`` (``shown``: the styles already
    in the legend), or "no runs"."""
    if not data.has_runs(panel.panel_id):
        mark_empty(fig, row, col, data.empty_text(panel.panel_id))
        return
    x_end = last_round(data, panel.panel_id, metric)
    bounds = (None, None) if data.baseline else metric_bounds(metric)
    for style in draw_order(styles):
        table = data.table(panel.panel_id, style.key, metric)
        if draw_curve(
            fig,
            table,
            style,
            row=row,
            col=col,
            show_legend=style.key not in shown,
            x_end=x_end,
            band=band,
            bounds=bounds,
        ):
            shown.add(style.key)


def metric_grid(
    data: FigureData,
    panels: list[Panel],
    styles: list[CurveStyle],
    metrics: tuple[str, ...] | list[str] = ("test_loss", "test_acc"),
    y_titles: dict[str, str] | None = None,
    *,
    band: str = "std",
    side_by_side: bool = False,
) -> go.Figure:
    """Rows = metrics, columns = panels (``side_by_side``: one row, one column per metric of the
    single panel); each style drawn in every cell where it has data; cells lettered (a), (b), …
    row by row."""
    metrics = list(metrics)
    y_titles = {m: metric_title(m, data.baseline) for m in metrics} | (y_titles or {})
    if side_by_side:
        cells = [(1, c, panels[0], m) for c, m in enumerate(metrics, start=1)]
        rows, cols = 1, len(metrics)
        titles = [f"{letter(i)} {y_titles[m]}" for i, (_, _, _, m) in enumerate(cells)]
        fig = make_subplots(
            rows=rows,
            cols=cols,
            subplot_titles=titles,
            horizontal_spacing=0.08,
            vertical_spacing=0.12,
        )
    else:
        cells = [
            (r, c, p, m)
            for r, m in enumerate(metrics, start=1)
            for c, p in enumerate(panels, start=1)
        ]
        rows = len(metrics)
        fig = metric_panel_subplots(metrics, panels, shared_xaxes=True)
    shown: set[str] = set()
    for r, c, panel, metric in cells:
        draw_cell(fig, data, panel, metric, styles, shown, r, c, band)
        if c == 1 or side_by_side:
            fig.update_yaxes(title_text=y_titles[metric], row=r, col=c)
    fig.update_xaxes(title_text=X_TITLE, row=rows)
    rounds = data.agg["round"]
    return round_ticks(fig, int(rounds.max()) if len(rounds) else None)


def metric_panel_subplots(metrics, panels, *, shared_xaxes: bool = False) -> go.Figure:
    """An empty grid of rows = ``metrics``, columns = ``panels``, each cell titled with its
    letter and panel label in reading order ("(a) Case 1", "(b) Case 2", ...)."""
    titles = [
        f"{letter(i)} {p.label}".rstrip()
        for i, p in enumerate([p for _ in metrics for p in panels])
    ]
    return make_subplots(
        rows=len(metrics),
        cols=len(panels),
        subplot_titles=titles,
        horizontal_spacing=0.08,
        vertical_spacing=0.12,
        shared_xaxes=shared_xaxes,
    )


def axis_grid(
    data: FigureData,
    spec: SweepSpec,
    styles: list[CurveStyle],
    metric: str,
    *,
    band: str = "std",
    y_title: str | None = None,
) -> go.Figure:
    """One metric of a two-axis spec: rows = the first panel axis, columns = the second."""
    row_axis, col_axis = two_axes(spec) or ("", "")
    n_rows, n_cols = len(spec.panels[row_axis]), len(spec.panels[col_axis])
    panels = data.panels  # product order: the first axis outer, the second inner
    fig = make_subplots(
        rows=n_rows,
        cols=n_cols,
        subplot_titles=[f"{letter(i)} {p.label}" for i, p in enumerate(panels)],
        horizontal_spacing=0.07,
        vertical_spacing=0.11,
        shared_xaxes=True,
    )
    shown: set[str] = set()
    title = y_title or metric_title(metric, data.baseline)
    for i, panel in enumerate(panels):
        r, c = divmod(i, n_cols)
        draw_cell(fig, data, panel, metric, styles, shown, r + 1, c + 1, band)
        if c == 0:
            fig.update_yaxes(title_text=title, row=r + 1, col=1)
    fig.update_xaxes(title_text=X_TITLE, row=n_rows)
    rounds = data.agg["round"]
    return round_ticks(fig, int(rounds.max()) if len(rounds) else None)


def last_round(data: FigureData, panel_id: str, metric: str) -> int | None:
    a = data.agg
    rounds = a[(a["panel_id"] == panel_id) & (a["metric"] == metric)]["round"]
    return int(rounds.max()) if len(rounds) else None


def mark_empty(fig: go.Figure, row: int, col: int, text: str = NO_RUNS) -> None:
    """Keep the cell's axes box (an invisible trace) and write ``text`` ("no runs", or "not
    run at this profile": :meth:`FigureData.empty_text`) in its middle."""
    fig.add_trace(
        go.Scatter(x=[None], y=[None], showlegend=False, hoverinfo="skip"), row=row, col=col
    )
    fig.update_xaxes(showticklabels=False, showgrid=False, row=row, col=col)
    fig.update_yaxes(showticklabels=False, showgrid=False, row=row, col=col)
    cell = fig.get_subplot(row, col)
    xref = cell.xaxis.plotly_name.replace("axis", "")
    yref = cell.yaxis.plotly_name.replace("axis", "")
    fig.add_annotation(
        text=text,
        showarrow=False,
        xref=f"{xref} domain",
        yref=f"{yref} domain",
        x=0.5,
        y=0.5,
        font={"size": 14, "color": "#999"},
    )


def with_view(ctx: BuildContext, data: FigureData) -> FigureData:
    """Apply ``--diff-from``: draw every curve minus the baseline's seed mean. A figure without
    a curve of that label (one of several figures drawn at once) is drawn as it is."""
    baseline = ctx.options.diff_from
    if not baseline:
        return data
    own = {c.label for c in ctx.spec.curve_list()}
    if baseline not in own and (data.agg.empty or baseline not in set(data.agg["curve"])):
        return data
    data.view = diff_from(data.agg, baseline)
    data.baseline = baseline
    return data


def draw(
    ctx: BuildContext,
    data: FigureData,
    styles: list[CurveStyle],
    metrics: list[str],
    *,
    y_titles: dict[str, str] | None = None,
    sub: str | None = None,
) -> tuple[go.Figure | None, dict[str, go.Figure]]:
    """The generic layout of ``ctx.spec`` (see the module docstring): ``(figure, parts)``, where
    ``parts`` holds one figure per metric for a two-axis spec (``figure`` = the first)."""
    spec, band = ctx.spec, ctx.options.band
    sub = figure_subtitle(ctx, data) if sub is None else sub
    lines = sub.count("<br>") + 1
    top = 90 + 20 * lines
    y_titles = y_titles or {}
    if two_axes(spec) is not None and len(data.panels) > 1:
        parts = {}
        _, col_axis = two_axes(spec)
        n_rows = len(data.panels) // len(spec.panels[col_axis])
        n_cols = len(spec.panels[col_axis])
        width = GRID_CELL[0] * n_cols + LEGEND_WIDTH
        height = GRID_CELL[1] * n_rows + top + 70
        for metric in metrics:
            fig = axis_grid(data, spec, styles, metric, band=band, y_title=y_titles.get(metric))
            title = f"{spec.title} — {metric_title(metric, data.baseline)}"
            paper_layout(fig, title, sub, width=width, height=height, top=top)
            mark_coinciding(fig)
            parts[metric_suffix(metric)] = fig
        first = next(iter(parts.values()), None)
        return first, parts
    single = len(data.panels) == 1
    fig = metric_grid(data, data.panels, styles, metrics, y_titles, band=band, side_by_side=single)
    if single:
        width, height = 560 * len(metrics) + LEGEND_WIDTH, 520 + top - 110
    else:
        width = CELL_WIDTH * len(data.panels) + LEGEND_WIDTH
        height = 330 * len(metrics) + top + 80
    paper_layout(fig, spec.title, sub, width=width, height=height, top=top)
    mark_coinciding(fig)
    return fig, {}


def expand_patterns(metrics: list[str], data: FigureData) -> list[str]:
    """A per-client pattern (``client/{i}/dist``) becomes one row per logged client key."""
    logged = set(data.long["metric"]) if not data.long.empty else set()
    out: list[str] = []
    for m in metrics:
        if "{i}" not in m:
            out.append(m)
            continue
        rx = re.compile("^" + re.escape(m).replace(r"\{i\}", r"(\d+)") + "$")
        hits = [(int(x.group(1)), k) for k in logged if (x := rx.match(k))]
        out.extend([k for _, k in sorted(hits)] or [m])
    return out


def build(ctx: BuildContext) -> FigureResult:
    """The default builder: the generic layout of any spec, its claims checked if known."""
    return build_with_data(ctx)[0]


def build_with_data(ctx: BuildContext) -> tuple[FigureResult, FigureData]:
    """:func:`build`, and the figure's data (for a builder that adds a table to its result)."""
    data = with_view(ctx, prepare(ctx, ctx.metrics()))
    metrics = expand_patterns(ctx.metrics(), data)
    curves = value_order(ctx.spec.curve_list())
    fig, parts = draw(ctx, data, curve_styles(curves, data), metrics)
    notes = [
        f"{p.label}: {data.empty_text(p.panel_id)}"
        for p in data.panels
        if not data.has_runs(p.panel_id)
    ]
    notes = notes if len(data.panels) > 1 else []
    return make_result(ctx, data, fig, notes=notes, parts=parts), data
