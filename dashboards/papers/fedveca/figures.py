"""The FedVeca figures (docs/figures.md, "FedVeca"; sweeps/fedveca-fig3 … fig8.yaml).

FedVeca's τ-update rule R1 is our reconstruction of equations lost from every copy of the
paper (docs/algorithms.md §5.0, §5.5), so every FedVeca figure says so on its face: a subtitle
line of its own (:data:`R1_NOTE`), besides the profile note, and every verdict's numbers end with
the rule (the judge's label ``fedveca.tau_rule``, :mod:`fedsweep.judge.papers.fedveca`). Runs of our reconstruction's damped variant [U] (``--set
fedveca.tau_damping=bounded``, docs/algorithms.md §5.8) get a note naming it instead, and their
verdicts' numbers name it too.

* ``fedveca-fig3``, ``-fig5``, ``-fig7``, ``-fig8``: the generic layout (test loss and accuracy
  per panel, the centralized curve flat), the subtitle wrapped one part per line, and index
  notes giving the settings the derived baselines took from FedVeca's runs (§5.7);
* ``fedveca-fig4``: Theorem 1's premise η β̂ τ_k per round, one column per setting, seed mean
  ± band, with the bound 1 as a dashed line and β̂ below; the metric starts at round 2, so
  round 1 stays blank (the x axis still starts at 1); a log y axis when a cell's values span
  more than two decades;
* ``fedveca-fig6``: one run (the lowest seed found, seed 0 in the spec), its first
  :data:`FIRST_ROUNDS` rounds: τ_{k,i}, β_{k,i}, δ_{k,i}, A_{k,i} (one line per client), τ_k
  and ||w_k − w_{k−1}||. ``--diff-from`` does not apply to Fig. 4 and Fig. 6 (no baselines).
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards import generic
from dashboards.figdata import FigureData, figure_subtitle, make_result, prepare
from dashboards.model import BuildContext, FigureResult
from dashboards.style import (
    SYMBOLS,
    X_TITLE,
    CurveStyle,
    draw_curve,
    draw_order,
    layered,
    palette,
    paper_layout,
    round_ticks,
    subtitle,
    wrap_subtitle,
)
from fedsweep.components.step_policies.fedveca import PER_CLIENT_METRICS, rule_label
from fedsweep.judge.panels import Panel

R1_NOTE = (
    "<b>τ rule R1: our reconstruction of the paper's lost equations (docs/algorithms.md §5.5)</b>"
)
#: Theorem 1's premise: "we set the value '1' as a lower bound" of η β̂ τ_k (FedVeca, Fig. 4
#: text; docs/algorithms.md §5.3): values below the line are the violations
BOUND = 1.0
BOUND_NAME = "lower bound (η β̂ τ_k = 1)"
BOUND_LINE = {"color": "#444", "width": 1.6, "dash": "dash"}
LOG_SPAN = 100.0  # a cell whose positive values span more than this factor gets a log y axis
FIRST_ROUNDS = 50  # Fig. 6 draws rounds 1..50
PER_CLIENT = PER_CLIENT_METRICS  # logged by the step policy as client/{i}/<name>
Y_TITLES = {
    "premise": "η β̂ τ<sub>k</sub>",
    "beta_hat": "β̂ (running max)",
    "tau": "τ<sub>k,i</sub> (local steps)",
    "beta": "β<sub>k,i</sub>",
    "delta": "δ<sub>k,i</sub>",
    "A": "A<sub>k,i</sub> = η β<sub>k,i</sub>² δ<sub>k,i</sub>",
    "tau_r1": "R1 value before clamping",
    "tau_k": "τ<sub>k</sub> = Σ p<sub>i</sub> τ<sub>k,i</sub>",
    "tau_total": "Σ<sub>i</sub> τ<sub>k,i</sub>",
    "w_change": "‖w<sub>k</sub> − w<sub>k−1</sub>‖",
}


# --------------------------------------------------------------------------------- helpers
def fedveca_subtitle(ctx: BuildContext, data: FigureData, width: int, *extra: str) -> str:
    """The generic subtitle (profile note, data note, …), ``extra`` parts and the R1 note (or
    the damped variant's, :func:`rule_note`), one part per line, wrapped to ``width``; the note
    is short enough never to wrap."""
    return wrap_subtitle(subtitle(figure_subtitle(ctx, data), *extra, rule_note(ctx)), width)


def drawn_rule(ctx: BuildContext) -> str:
    """The τ rule of the runs drawn, by the ``--set`` overrides: "" for R1 as it is, else its
    label (``fedveca.tau_damping: bounded``: our reconstruction's damped variant [U])."""
    damping = str(ctx.overrides.get("fedveca.tau_damping", "none"))
    if damping == "none":
        return ""
    change = float(ctx.overrides.get("fedveca.tau_max_change", 0.5))
    return rule_label("R1", damping, change)


def rule_note(ctx: BuildContext) -> str:
    """:data:`R1_NOTE`, or for runs of the damped variant (``--set fedveca.tau_damping=
    bounded``) the same note naming the variant."""
    label = drawn_rule(ctx)
    if not label:
        return R1_NOTE
    return f"<b>τ rule {label} (docs/algorithms.md §5.8)</b>"


def derived_notes(data: FigureData) -> list[str]:
    """Per (panel, derived curve) the settings its runs took from the FedVeca runs of the same
    seed (docs/algorithms.md §5.7), e.g. "FedAvg [SVM, MNIST]: fixed_steps.steps = mean_tau
    of FedVeca's run: 7 (seed 0), 8 (seed 1)"."""
    cells: dict[tuple[str, str], list] = {}
    for tr in sorted(data.resolution.found, key=lambda tr: tr.trial.seed):
        t = tr.trial
        if t.derive is not None and t.derived_from:
            cells.setdefault((t.panel_label, t.curve), []).append(t)
    notes = []
    for (panel, curve), trials in cells.items():
        first = trials[0]
        parts = []
        for key, how in first.derive.set.items():
            if not isinstance(how, str):
                continue
            values = ", ".join(f"{dict(t.derived_set)[key]} (seed {t.seed})" for t in trials)
            parts.append(f"{key} = {how} of {first.derive.from_}'s run: {values}")
        where = f" [{panel}]" if panel else ""
        notes.append(f"{curve}{where}: " + "; ".join(parts))
    return notes


def log_axis(values: pd.Series | list[float]) -> bool:
    """A log y axis when every value is positive and finite and they span more than two
    decades (a zero, e.g. δ's floor, keeps the axis linear so it stays visible)."""
    v = [float(x) for x in values if math.isfinite(float(x))]
    return bool(v) and min(v) > 0 and max(v) / min(v) > LOG_SPAN


def no_runs(ctx: BuildContext, data: FigureData) -> FigureResult:
    return make_result(ctx, data, None)


# ------------------------------------------------------------- fig3, fig5, fig7, fig8 curves
def build_curves(ctx: BuildContext) -> FigureResult:
    """The generic layout (:func:`dashboards.generic.draw`) with the R1 note and the derived
    baselines' settings in the index notes."""
    metrics = ctx.metrics()
    data = generic.with_view(ctx, prepare(ctx, metrics))
    curves = ctx.spec.profile_curves(ctx.profile)
    width = generic.layout_width(ctx.spec, len(data.panels), metrics)
    sub = fedveca_subtitle(ctx, data, width)
    styles = generic.curve_styles(curves, data)
    fig, parts = generic.draw(ctx, data, styles, metrics, sub=sub)
    notes = [f"{p.label}: no runs" for p in data.panels if not data.has_runs(p.panel_id)]
    notes = (notes if len(data.panels) > 1 else []) + derived_notes(data)
    return make_result(ctx, data, fig, notes=notes, parts=parts)


# ------------------------------------------------------------------------ fig4: the premise
def add_bound(fig: go.Figure, x_end: int, row: int, col: int, show: bool) -> None:
    """The premise's bound 1 as a dashed horizontal line over the whole cell."""
    fig.add_trace(
        go.Scatter(
            x=[0.5, x_end + 0.5],
            y=[BOUND, BOUND],
            mode="lines",
            line=BOUND_LINE,
            name=BOUND_NAME,
            legendgroup="__bound",
            showlegend=show,
            hoverinfo="name",
        ),
        row=row,
        col=col,
    )


def premise_cell(
    fig: go.Figure,
    data: FigureData,
    panel: Panel,
    metric: str,
    styles: list[CurveStyle],
    shown: set[str],
    cell: tuple[int, int],
    band: str,
    x_end: int,
) -> None:
    """One cell of Fig. 4: every curve's seed mean ± band of ``metric`` (rows from round 2 only,
    as logged), plus the bound for the premise; log y axis when the values span > 2 decades."""
    row, col = cell
    tables = {s.key: data.table(panel.panel_id, s.key, metric) for s in styles}
    values = [v for t in tables.values() for v in t["mean"]]
    if metric == "premise":
        values.append(BOUND)
    log = log_axis(values)
    floor = min(values) if log else 0.0  # a log band never reaches below the lowest mean
    for style in draw_order(styles):
        drawn = draw_curve(
            fig,
            tables[style.key],
            style,
            row=row,
            col=col,
            show_legend=style.key not in shown,
            band=band,
            bounds=(floor, None),
        )
        if drawn:
            shown.add(style.key)
    if metric == "premise":
        add_bound(fig, x_end, row, col, "__bound" not in shown)
        shown.add("__bound")
    if log:
        fig.update_yaxes(type="log", row=row, col=col)


def build_premise(ctx: BuildContext) -> FigureResult:
    """Fig. 4: per setting (columns) the premise η β̂ τ_k with its bound, and β̂ (rows)."""
    spec, band = ctx.spec, ctx.options.band
    metrics = ctx.metrics()
    data = prepare(ctx, metrics)
    if not data.resolution.found:
        return no_runs(ctx, data)
    curves = spec.profile_curves(ctx.profile)
    styles = generic.curve_styles(curves, data)
    panels = data.panels
    fig = generic.metric_panel_subplots(metrics, panels)
    shown: set[str] = set()
    t_max = int(data.agg["round"].max()) if len(data.agg) else 2
    for c, panel in enumerate(panels, start=1):  # each setting its own rounds (quick: K differs)
        rows = data.agg[data.agg["panel_id"] == panel.panel_id]["round"]
        last = int(rows.max()) if len(rows) else t_max
        for r, metric in enumerate(metrics, start=1):
            if not data.has_runs(panel.panel_id):
                generic.mark_empty(fig, r, c, data.empty_text(panel.panel_id))
                continue
            premise_cell(fig, data, panel, metric, styles, shown, (r, c), band, last)
            fig.update_xaxes(range=[0.5, last + 0.5], row=r, col=c)
            round_ticks(fig, last, row=r, col=c)
    for r, metric in enumerate(metrics, start=1):
        fig.update_yaxes(title_text=Y_TITLES.get(metric, metric), row=r, col=1)
    fig.update_xaxes(title_text=X_TITLE, row=len(metrics))
    width = generic.CELL_WIDTH * len(panels) + generic.LEGEND_WIDTH
    blank = "round 1 blank: β̂ compares two rounds, so the premise starts at round 2"
    sub = fedveca_subtitle(ctx, data, width, blank)
    top = 90 + 20 * (sub.count("<br>") + 1)
    paper_layout(fig, spec.title, sub, width=width, height=330 * len(metrics) + top + 80, top=top)
    notes = [f"{p.label}: no runs" for p in panels if not data.has_runs(p.panel_id)]
    return make_result(ctx, data, fig, notes=notes)


# ------------------------------------------------------------------- fig6: one run's estimates
def metric_key(name: str) -> str:
    """A spec metric of Fig. 6 -> its MLflow key: ``tau`` -> ``client/{i}/tau``."""
    return f"client/{{i}}/{name}" if name in PER_CLIENT else name


def one_run(data: FigureData) -> pd.DataFrame:
    """The long rows of the run with the lowest seed (the spec's one run), rounds 1..50."""
    long = data.long
    seed = min(tr.trial.seed for tr in data.resolution.found)
    run = next(tr.run.run_id for tr in data.resolution.found if tr.trial.seed == seed)
    return long[(long["run_id"] == run) & (long["round"] <= FIRST_ROUNDS)]


def client_tables(rows: pd.DataFrame, key: str) -> dict[int, pd.DataFrame]:
    """Client index -> (round, mean, std, n) of ``key``'s per-client metric (one run: std 0)."""
    out = {}
    logged = set(rows["metric"])
    i = 0
    while key.format(i=i) in logged:
        out[i] = curve_table(rows, key.format(i=i))
        i += 1
    return out


def curve_table(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One run's history of ``metric`` as a drawable table (round, mean, std 0, n 1)."""
    sel = rows[rows["metric"] == metric].sort_values("round")
    return pd.DataFrame(
        {"round": sel["round"], "mean": sel["value"].astype(float), "std": 0.0, "n": 1}
    )


def client_styles(n: int) -> list[CurveStyle]:
    """Curves "Client 1".."Client n": palette colour, own marker symbol, layered widths."""
    styles = [
        CurveStyle(
            f"Client {i + 1}",
            f"Client {i + 1}",
            palette(i),
            symbol=SYMBOLS[i % len(SYMBOLS)],
            index=i,
            of=n,
        )
        for i in range(n)
    ]
    return layered(styles)


def estimate_cell(fig: go.Figure, rows: pd.DataFrame, key: str, cell: tuple[int, int], shown):
    """One cell of Fig. 6: one line per client (``client/{i}/…``) or the round's global value
    (black); log y axis when the values span more than two decades."""
    row, col = cell
    if "{i}" in key:
        tables = client_tables(rows, key)
        styles = client_styles(len(tables))
        for i, style in enumerate(styles):
            draw_curve(fig, tables[i], style, row=row, col=col, show_legend=style.key not in shown)
            shown.add(style.key)
        values = [v for t in tables.values() for v in t["mean"]]
    else:
        table = curve_table(rows, key)
        style = CurveStyle(key, key, "#222222", symbol=None)
        draw_curve(fig, table, style, row=row, col=col, show_legend=False)
        values = list(table["mean"])
    if log_axis(values):
        fig.update_yaxes(type="log", row=row, col=col)


def build_estimates(ctx: BuildContext) -> FigureResult:
    """Fig. 6: the estimates of one run over its first 50 rounds, 2 × 3 cells."""
    spec = ctx.spec
    keys = [metric_key(m) for m in ctx.metrics()]
    data = prepare(ctx, keys)
    if not data.resolution.found or data.long.empty:
        return no_runs(ctx, data)
    rows = one_run(data)
    cols = 3
    n_rows = math.ceil(len(keys) / cols)
    names = [k.split("/")[-1] for k in keys]
    titles = [f"{generic.letter(i)} {Y_TITLES.get(n, n)}" for i, n in enumerate(names)]
    fig = make_subplots(rows=n_rows, cols=cols, subplot_titles=titles, vertical_spacing=0.16)
    shown: set[str] = set()
    for i, key in enumerate(keys):
        estimate_cell(fig, rows, key, (i // cols + 1, i % cols + 1), shown)
    last = int(rows["round"].max())
    fig.update_xaxes(title_text=X_TITLE, range=[0.5, last + 0.5])
    round_ticks(fig, last)
    seed, run = int(rows["seed"].iloc[0]), str(rows["run_id"].iloc[0])
    t_run = int(data.long[data.long["run_id"] == run]["round"].max())
    width = 420 * cols + 160
    what = f"one run: seed {seed}, rounds 1–{last} of {t_run}"
    sub = fedveca_subtitle(ctx, data, width, what)
    top = 90 + 20 * (sub.count("<br>") + 1)
    paper_layout(fig, spec.title, sub, width=width, height=330 * n_rows + top + 80, top=top)
    notes = [f"drawn from MLflow run {run} (seed {seed})"]
    return make_result(ctx, data, fig, notes=notes)
