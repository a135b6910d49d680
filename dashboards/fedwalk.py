"""The FedWalk figures (docs/figures.md, "FedWalk"; sweeps/fedwalk-*.yaml).

Every number is the paper's "global model with the highest accuracy" (W11): per run the best
value over rounds (``dashboards.reducers``), then the seed mean ± std (``--band sem``: ± the
standard error; ``none``: no error bars). The final-round value is shown beside it (table
cells, CSV, hover text). Accuracies are in percent, as in the paper.

* ``fedwalk-table2``: a table, rows the eight methods, per setting the best training and test
  accuracy and the chosen η_0; leashed rows carry their difference to the base method
  (FedWalk − FedAvg, SCAFFOLD+FedWalk − SCAFFOLD, ...) in points. The same table is written
  as ``fedwalk-table2.csv`` (one row per method × setting, final values included) and
  ``fedwalk-table2.tex`` (booktabs) beside the figure. The η_0 of each method and setting is
  the grid point with the best seed-mean best test accuracy; grid points with a diverged or
  blown-up seed are no candidates (W4; ``claims.choose_lr``);
* ``fedwalk-fig2``: the training loss over rounds per setting, each method at the η_0 the
  table chose there (seed mean ± band), the leashed methods dashed;
* ``fedwalk-fig3``: best test accuracy against τ, one colour per leash task (points with
  error bars, a quadratic least-squares trend line through the seed means);
* ``fedwalk-fig4``: grouped bars per setting, FedWalk (red) vs pre-training (blue) per leash
  task, FedAvg without a leash as a dashed reference line;
* ``fedwalk-fig5``: FedAvg and FedWalk against the Dirichlet a (log axis), and below the gain
  FedWalk − FedAvg.

``--diff-from`` does not apply (a learning-rate choice or a summary per run, not curves of
one label).
"""

from __future__ import annotations

import csv
import io
import math
import textwrap
from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards import generic, store
from dashboards.claims import (
    LEASH_TASKS,
    WALK_BASE_OF,
    WALK_METHODS,
    ClaimData,
    LrChoice,
    choose_lr,
    eta_text,
    fig5_curves,
    hooks_of,
    leash_curves,
    lr_grid,
    tau_points,
    walk_gains,
    walk_method,
)
from dashboards.figdata import FigureData, figure_subtitle, make_result, prepare
from dashboards.model import BuildContext, FigureResult, Panel
from dashboards.reducers import Stat, stat_of, value_at_best
from dashboards.style import (
    SYMBOLS,
    X_TITLE,
    CurveStyle,
    band_width,
    draw_curve,
    draw_order,
    layered,
    paper_layout,
    round_ticks,
    seed_label,
    subtitle,
)

PCT = 100.0
BEST_NOTE = "best = max over rounds per run (W11), then seed mean ± {band}"
BAND_TEXT = {"std": "1 std", "sem": "1 standard error", "none": "(no error bars)"}
TASK_COLORS = {"LH": "#d62728", "MH": "#ff7f0e", "HH": "#8c564b"}
WALK_RED, PRE_BLUE, AVG_GREY = "#d62728", "#1f77b4", "#7f7f7f"
REF_LINE = {"color": AVG_GREY, "width": 2, "dash": "dash"}
NOT_RUN = "not run"
UP, DOWN = "#1f5fbf", "#c0392b"  # the paper's blue (increase) and red (decrease)
TABLE_COLS = {"method": 190, "train": 150, "test": 150, "eta": 92}
ROW_PX, HEADER_PX = 46, 30


# --------------------------------------------------------------------------------- helpers
def walk_data(ctx: BuildContext, keys: list[str]) -> FigureData:
    """``prepare`` plus, for a spec that extends another (Fig. 2 extends Table 2: the same
    runs), the skipped-data note of the extended figure's sweep when its own has none."""
    data = prepare(ctx, keys)
    if data.resolution.missing and not data.skipped_note and ctx.spec.extends:
        data.skipped_note = store.skipped_data_note(ctx.client, ctx.spec.extends, ctx.profile)
    return data


def best_note(ctx: BuildContext) -> str:
    return BEST_NOTE.format(band=BAND_TEXT[ctx.options.band])


def walk_subtitle(ctx: BuildContext, data: FigureData, width: int, *extra: str) -> str:
    """The generic subtitle (profile note, data note, missing runs) and ``extra`` parts, one
    part per line, wrapped to ``width`` (about 7.5 px a character at 14 px; as
    ``intro.wrap_subtitle``, but never inside a word: "mnist-5k" stays whole)."""
    chars = max(60, int((width - 120) / 7.5))
    lines = []
    for part in subtitle(figure_subtitle(ctx, data), *extra).replace("<br>", " · ").split(" · "):
        lines += textwrap.wrap(part, chars, break_on_hyphens=False) or [""]
    return "<br>".join(lines)


def finish_layout(fig: go.Figure, ctx: BuildContext, sub: str, width: int, plot_height: int):
    top = 90 + 20 * (sub.count("<br>") + 1)
    paper_layout(fig, ctx.spec.title, sub, width=width, height=plot_height + top, top=top)
    fig.update_annotations(font={"size": 16})
    return fig


def spread(stat: Stat | None, band: str) -> float:
    """Half-width of an error bar: std, standard error or 0 (``FigureOptions.band``)."""
    if stat is None:
        return 0.0
    return float(band_width([stat.std], [stat.n], band)[0])


def stat_hover(stat: Stat, final: Stat | None, what: str = "best test acc") -> str:
    """ "best test acc 91.45 ± 0.30 % (n=3), at rounds 120, 98, 130<br>final 90.10 ± 0.40 %"."""
    rounds = ", ".join(str(r) for r in stat.rounds)
    text = f"{what} {stat.text()} % (n={stat.n}), at round{'s' * (stat.n > 1)} {rounds}"
    if final is not None:
        text += f"<br>final-round {what.replace('best ', '')} {final.text()} %"
    return text


def no_run_notes(data: FigureData) -> list[str]:
    notes = [f"{p.label}: no runs" for p in data.panels if not data.has_runs(p.panel_id)]
    return notes if len(data.panels) > 1 else []


def skipped_reason(data: FigureData, panel: Panel) -> str:
    """Why a panel's data set was not run ("cifar100 panels not run: ..." of the sweep), ""."""
    dataset = str(panel.values.get("data.dataset", ""))
    for part in (data.skipped_note or "").split("; "):
        name, sep, why = part.partition(" panels not run: ")
        if sep and name == dataset:
            return why
    return ""


# ------------------------------------------------------------------------------ Table 2
@dataclass
class TableCell:
    """One method in one setting: the chosen η_0 and its accuracies (fractions)."""

    panel: Panel
    method: str
    choice: LrChoice
    test: Stat | None = None
    train: Stat | None = None
    test_final: Stat | None = None
    train_final: Stat | None = None
    train_at_best: Stat | None = None
    base: str | None = None
    d_test: float | None = None
    d_train: float | None = None
    status: str = ""  # "", "no runs", "not run", "every η diverged", ...


def table_cells(data: FigureData, claim: ClaimData) -> list[TableCell]:
    """Every method of :data:`WALK_METHODS` that the spec has × every panel, in row order."""
    at_best = value_at_best(data.long, "train_acc", by="test_acc")
    methods = [m for m in WALK_METHODS if lr_grid(claim.curves, m)]
    cells: dict[tuple[str, str], TableCell] = {}
    for p in data.panels:
        for m in methods:
            ch = choose_lr(claim, p.panel_id, m)
            cell = TableCell(p, m, ch)
            if ch.label is None:
                reason = skipped_reason(data, p)
                cell.status = f"{NOT_RUN}: {reason}" if reason else ch.why_none
            else:
                pid, lab = p.panel_id, ch.label
                cell.test = ch.stat
                cell.train = claim.run_stat(pid, lab, "train_acc")
                cell.test_final = claim.run_stat(pid, lab, "test_acc", "final")
                cell.train_final = claim.run_stat(pid, lab, "train_acc", "final")
                cell.train_at_best = stat_of(at_best, pid, lab)
            cells[(p.panel_id, m)] = cell
    for (pid, m), cell in cells.items():
        base = WALK_BASE_OF.get(m)
        other = cells.get((pid, base)) if base else None
        if other is None:
            continue
        cell.base = base
        if cell.test and other.test:
            cell.d_test = cell.test.mean - other.test.mean
        if cell.train and other.train:
            cell.d_train = cell.train.mean - other.train.mean
    return [cells[(p.panel_id, m)] for m in methods for p in data.panels]


def delta_text(d: float | None, html: bool = True) -> str:
    """ "(+3.39)" in points, blue for an increase and red for a decrease (the paper's colours);
    "(±0.00)" for an exact zero."""
    if d is None:
        return ""
    value = PCT * d
    text = "(±0.00)" if d == 0 else f"({value:+.2f})"
    if not html or d == 0:
        return text
    return f'<span style="color:{UP if d > 0 else DOWN}">{text}</span>'


def _n_text(stat: Stat, seeds: int) -> str:
    return f" (n={stat.n})" if stat.n < seeds else ""


def acc_cell(stat: Stat | None, final: Stat | None, d: float | None, seeds: int) -> str:
    """Two lines: "91.45 ± 0.30 (+3.39)" and, small and grey, "final 90.10 ± 0.40"."""
    if stat is None:
        return ""
    text = f"{stat.text()}{_n_text(stat, seeds)}"
    if d is not None:
        text += f" {delta_text(d)}"
    if final is not None:
        text += f'<br><span style="font-size:12px;color:#777">final {final.text()}</span>'
    return text


def eta_cell(cell: TableCell) -> str:
    ch = cell.choice
    if ch.label is None:
        return ""
    text = eta_text(ch.lr) + ("*" if ch.tied else "")
    out = [f"{eta_text(lr)} {why}" for lr, _, _, why in ch.grid if why not in ("", "no runs")]
    if out:
        text += f'<br><span style="font-size:11px;color:#777">{", ".join(out)}</span>'
    return text


def build_table2(ctx: BuildContext) -> FigureResult:
    """Table 2 as a figure (rows = methods, per setting train / test / η_0), its CSV and LaTeX
    forms (``FigureResult.texts``), and index notes on every η choice."""
    spec = ctx.spec
    data = walk_data(ctx, ["test_acc", "train_acc"])
    claim = data.claim_data(spec.curve_list())  # every method, also those the profile skips
    cells = table_cells(data, claim)
    panels = data.panels
    seeds = len({t.seed for t in data.resolution.trials}) or 1
    methods = list(dict.fromkeys(c.method for c in cells))
    by = {(c.panel.panel_id, c.method): c for c in cells}
    header_top, header_sub, columns = [""], ["Method"], [[_row_name(m) for m in methods]]
    for p in panels:
        label = p.label
        header_top += [f"<b>{label}</b>", "", ""]
        header_sub += ["train (%)", "test (%)", "η<sub>0</sub>"]
        trains, tests, etas = [], [], []
        for m in methods:
            c = by[(p.panel_id, m)]
            if c.choice.label is None:
                not_run = c.status.startswith(NOT_RUN)
                trains.append("not run (no data set)" if not_run else c.status)
                tests.append("")
                etas.append("")
                continue
            trains.append(acc_cell(c.train, c.train_final, c.d_train, seeds))
            tests.append(acc_cell(c.test, c.test_final, c.d_test, seeds))
            etas.append(eta_cell(c))
        columns += [trains, tests, etas]
    widths = [TABLE_COLS["method"]] + [
        TABLE_COLS[k] for _ in panels for k in ("train", "test", "eta")
    ]
    fills = [["#f7f7f7" if m in WALK_BASE_OF else "white" for m in methods]] * len(columns)
    table = go.Table(
        columnwidth=widths,
        header={
            "values": [[a, b] for a, b in zip(header_top, header_sub, strict=True)],
            "fill_color": "#eee",
            "align": "left",
            "font": {"size": 14},
            "height": HEADER_PX,
        },
        cells={
            "values": columns,
            "align": "left",
            "font": {"size": 14},
            "height": ROW_PX,
            "fill_color": fills,
        },
    )
    fig = go.Figure(table)
    width = max(980, sum(widths) + 120)
    legend = (
        "cells: best accuracy (%), seed mean ± std, and below the final-round value; "
        "(+x)/(−x): difference to the base method in points (FedWalk vs FedAvg, "
        "X+FedWalk vs X); η₀ per method and setting: the grid point with the best seed-mean "
        "best test accuracy (grid points with a diverged seed excluded; * = exact tie, first "
        "in spec order)"
    )
    sub = walk_subtitle(ctx, data, width, BEST_NOTE.format(band="1 std"), legend)
    scale = (width - 60) / sum(widths)  # px per unit of columnwidth (margins 30 + 30)
    lines = max(math.ceil(len(p.label) * 8.5 / (TABLE_COLS["train"] * scale)) for p in panels)
    height = HEADER_PX * (1 + max(lines, 1)) + ROW_PX * len(methods) + 60
    finish_layout(fig, ctx, sub, width, height)
    fig.update_layout(margin={"l": 30, "r": 30, "b": 20})
    notes = table_notes(cells) + no_run_notes(data)
    result = make_result(ctx, data, fig, data.claim_data(spec.profile_curves(ctx.profile)), notes)
    if data.resolution.found:
        result.texts = {"csv": table_csv(cells), "tex": table_latex(ctx, cells, panels, methods)}
    return result


def _row_name(method: str) -> str:
    return method.replace("+", " + ")


def table_notes(cells: list[TableCell]) -> list[str]:
    """Per setting and method with runs: the chosen η_0, the grid's best test accuracies and
    the excluded grid points."""
    notes = []
    for c in cells:
        ch = c.choice
        if ch.label is None:
            continue
        grid = ", ".join(
            f"η={eta_text(lr)} " + (f"{st.text()}" if st and not why else why or "no runs")
            for lr, _, st, why in ch.grid
        )
        notes.append(f"{c.panel.label}: {c.method} at {ch.eta} (best test acc % per η: {grid})")
    return notes


def _num(x: float | None) -> str:
    return "" if x is None else f"{PCT * x:.4f}"


def table_csv(cells: list[TableCell]) -> str:
    """One row per method × setting; accuracies in percent (best = max over rounds per run;
    final = the last round; train_at_best_test = the training accuracy at the round of the
    best test accuracy), seed mean and sample std; deltas to the base method in points."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(
        [
            "setting",
            "panel_id",
            "method",
            "curve",
            "eta0",
            "eta_tied_with",
            "eta_excluded",
            "n",
            "test_best_mean",
            "test_best_std",
            "train_best_mean",
            "train_best_std",
            "test_final_mean",
            "test_final_std",
            "train_final_mean",
            "train_final_std",
            "train_at_best_test_mean",
            "train_at_best_test_std",
            "base",
            "test_best_minus_base",
            "train_best_minus_base",
            "status",
        ]
    )
    for c in cells:
        ch = c.choice

        def pair(s: Stat | None) -> list[str]:
            return [_num(s.mean), _num(s.std)] if s else ["", ""]

        tied = [f"{eta_text(lr)}" for lr, lab, _, _ in ch.grid if lab in ch.tied]
        w.writerow(
            [
                c.panel.label,
                c.panel.panel_id,
                c.method,
                ch.label or "",
                eta_text(ch.lr) if ch.lr is not None else "",
                " ".join(tied),
                "; ".join(ch.excluded),
                c.test.n if c.test else 0,
                *pair(c.test),
                *pair(c.train),
                *pair(c.test_final),
                *pair(c.train_final),
                *pair(c.train_at_best),
                c.base or "",
                _num(c.d_test),
                _num(c.d_train),
                c.status or "ok",
            ]
        )
    return out.getvalue()


def latex_escape(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"),
                 ("#", r"\#"), ("$", r"\$"), ("{", r"\{"), ("}", r"\}")):  # fmt: skip
        text = text.replace(a, b)
    return text


def _tex_eta(lr: float | None) -> str:
    if lr is None:
        return ""
    text = eta_text(lr)
    if "e" in text:
        mant, exp = text.split("e")
        times = "" if mant == "1" else mant + r" \times "
        return f"${times}10^{{{int(exp)}}}$"
    return f"${text}$"


def _tex_acc(s: Stat | None, d: float | None) -> str:
    if s is None:
        return "--"
    text = f"{PCT * s.mean:.2f}" + (f" $\\pm$ {PCT * s.std:.2f}" if s.n > 1 else "")
    return text + (f" ({PCT * d:+.2f})" if d is not None else "")


def table_latex(
    ctx: BuildContext, cells: list[TableCell], panels: list[Panel], methods: list[str]
) -> str:
    """The table in LaTeX (booktabs): per setting Training, Test and η_0 columns."""
    by = {(c.panel.panel_id, c.method): c for c in cells}
    n = len(panels)
    lines = [
        f"% {ctx.spec.title} -- fedsweep, profile {ctx.profile}",
        f"% {ctx.spec.profiles[ctx.profile].note}",
        "% best accuracy (%) = max over rounds per run, seed mean $\\pm$ sample std; (+x) = "
        "difference to the base method in points; eta_0 = the grid point with the best "
        "seed-mean best test accuracy. Needs \\usepackage{booktabs}.",
        "\\begin{tabular}{l" + "rrc" * n + "}",
        "\\toprule",
        " & ".join([""] + [f"\\multicolumn{{3}}{{c}}{{{latex_escape(p.label)}}}" for p in panels])
        + " \\\\",
        " ".join(f"\\cmidrule(lr){{{2 + 3 * i}-{4 + 3 * i}}}" for i in range(n)),
        " & ".join(["Method"] + ["Training", "Test", "$\\eta_0$"] * n) + " \\\\",
        "\\midrule",
    ]
    for i, m in enumerate(methods):
        if i == 4 and len(methods) > 4:
            lines.append("\\midrule")
        row = [latex_escape(_row_name(m))]
        for p in panels:
            c = by[(p.panel_id, m)]
            if c.choice.label is None:
                row += ["--", "--", ""]
                continue
            row += [_tex_acc(c.train, c.d_train), _tex_acc(c.test, c.d_test), _tex_eta(c.choice.lr)]
        lines.append(" & ".join(row) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------- Fig. 2
def method_colors(curves) -> dict[str, str]:
    """Method -> the spec colour of its first curve."""
    out: dict[str, str] = {}
    for c in curves:
        m = walk_method(c)
        if m is not None and c.color:
            out.setdefault(m, c.color)
    return out


def build_fig2(ctx: BuildContext) -> FigureResult:
    """Training loss over rounds per setting (columns; one row per metric, default the
    training loss), per method the curve of the η_0 Table 2 chose in that setting; leashed
    methods dashed. The legend gives each method's η_0 per setting."""
    spec, band = ctx.spec, ctx.options.band
    metrics = ctx.metrics(["train_loss"])
    data = walk_data(ctx, sorted({*metrics, "test_acc"}))
    curves = spec.profile_curves(ctx.profile)
    claim = data.claim_data(curves)
    panels = data.panels
    methods = [m for m in WALK_METHODS if lr_grid(curves, m)]
    choices = {(p.panel_id, m): choose_lr(claim, p.panel_id, m) for p in panels for m in methods}
    colors = method_colors(curves)
    styles = []
    for i, m in enumerate(methods):
        picked = [choices[(p.panel_id, m)] for p in panels]
        counts = [
            data.seeds_of(p.panel_id, ch.label)
            for p, ch in zip(panels, picked, strict=True)
            if ch.label
        ]
        etas = [
            eta_text(ch.lr) if ch.label else "–"
            for p, ch in zip(panels, picked, strict=True)
            if data.has_runs(p.panel_id)
        ] or ["–"]
        eta = f"η={etas[0]}" if len(set(etas)) == 1 else "η " + " | ".join(etas)
        styles.append(
            CurveStyle(
                m,
                seed_label(f"{m}, {eta}", counts or [0]),
                colors.get(m, generic.palette(i)),
                "dash" if m in WALK_BASE_OF else "solid",
                symbol=SYMBOLS[i % len(SYMBOLS)],
                index=i,
                of=len(methods),
            )
        )
    styles = layered(styles)
    fig = generic.metric_panel_subplots(metrics, panels, shared_xaxes=True)
    shown: set[str] = set()
    for r, metric in enumerate(metrics, start=1):
        for c, p in enumerate(panels, start=1):
            if not data.has_runs(p.panel_id):
                generic.mark_empty(fig, r, c)
                continue
            for style in draw_order(styles):
                ch = choices[(p.panel_id, style.key)]
                if ch.label is None:
                    continue
                here = replace(style, hover_note=f"{ch.label} (chosen in {p.label})")
                table = data.table(p.panel_id, ch.label, metric)
                if draw_curve(
                    fig,
                    table,
                    here,
                    row=r,
                    col=c,
                    show_legend=style.key not in shown,
                    band=band,
                    bounds=generic.metric_bounds(metric),
                ):
                    shown.add(style.key)
            if c == 1:
                fig.update_yaxes(title_text=generic.metric_title(metric), row=r, col=c)
    fig.update_xaxes(title_text=X_TITLE, row=len(metrics))
    round_ticks(fig, int(data.agg["round"].max()) if len(data.agg) else None)
    width = max(generic.CELL_WIDTH * len(panels), 640) + generic.LEGEND_WIDTH + 80
    how = (
        "per method and setting the η₀ of Table 2 (best seed-mean best test accuracy, "
        "grid points with a diverged seed excluded); dashed: with the leash (FedWalk)"
    )
    sub = walk_subtitle(ctx, data, width, how)
    finish_layout(fig, ctx, sub, width, 360 * len(metrics) + 80)
    notes = [
        f"{p.label}: {m} drawn at {ch.eta}"
        + (f" ({', '.join(ch.excluded)})" if ch.excluded else "")
        for p in panels
        for m in methods
        if (ch := choices[(p.panel_id, m)]).label
    ]
    return make_result(ctx, data, fig, claim, notes + no_run_notes(data))


# ------------------------------------------------------------------------------- Fig. 3
def quadratic_trend(points: list[tuple[float, Stat]]):
    """(xs, ys) of the least-squares polynomial through the seed means, degree 2 (1 with two
    points), on 60 τ values over the drawn range; None with fewer than 2 points."""
    if len(points) < 2:
        return None
    xs = np.array([t for t, _ in points], dtype=float)
    ys = np.array([s.mean for _, s in points], dtype=float) * PCT
    coef = np.polyfit(xs, ys, 2 if len(points) >= 3 else 1)
    grid = np.linspace(xs.min(), xs.max(), 60)
    return grid, np.polyval(coef, grid)


def build_fig3(ctx: BuildContext) -> FigureResult:
    """One plot: per leash task (the spec's panels) the best test accuracy against τ, points
    with error bars, and a quadratic least-squares trend line through the seed means."""
    spec, band = ctx.spec, ctx.options.band
    data = walk_data(ctx, ["test_acc"])
    curves = spec.profile_curves(ctx.profile)
    claim = data.claim_data(curves)
    fig = go.Figure()
    notes = []
    taus: set[float] = set()
    for i, p in enumerate(data.panels):
        task = str(p.values.get("leash.task", p.panel_id))
        color = TASK_COLORS.get(task, generic.palette(i))
        points = tau_points(claim, p.panel_id, mark=False)
        if not points:
            continue
        taus |= {t for t, _ in points}
        finals = {
            float(t): claim.run_stat(p.panel_id, lab, "test_acc", "final", mark=False)
            for t, lab in claim.curves_with("fedwalk.tau")
        }
        counts = [s.n for _, s in points]
        fig.add_trace(
            go.Scatter(
                x=[t for t, _ in points],
                y=[PCT * s.mean for _, s in points],
                error_y={
                    "type": "data",
                    "array": [PCT * spread(s, band) for _, s in points],
                    "visible": band != "none",
                    "thickness": 1.5,
                    "width": 5,
                },
                mode="markers",
                marker={"symbol": "triangle-up", "size": 13, "color": color},
                name=seed_label(p.label, counts),
                legendgroup=task,
                customdata=[stat_hover(s, finals.get(t)) for t, s in points],
                hovertemplate=f"{p.label}, τ=%{{x}}<br>%{{customdata}}<extra></extra>",
            )
        )
        trend = quadratic_trend(points)
        if trend is not None:
            kind = "quadratic" if len(points) >= 3 else "linear"
            fig.add_trace(
                go.Scatter(
                    x=trend[0],
                    y=trend[1],
                    mode="lines",
                    line={"color": color, "width": 2},
                    name=f"{task} trend ({kind} least squares)",
                    legendgroup=task,
                    hoverinfo="skip",
                )
            )
        top = max(s.mean for _, s in points)
        best = [t for t, s in points if s.mean == top]
        notes.append(
            f"{p.label}: best τ={', '.join(f'{t:g}' for t in best)} ({PCT * top:.2f}%); "
            + ", ".join(f"τ={t:g} {s.text()}" for t, s in points)
        )
    fig.update_xaxes(
        title_text="τ (LLR threshold; larger τ: more leash steps)",
        tickvals=sorted(taus) or None,
    )
    fig.update_yaxes(title_text="Best test accuracy (%)")
    width = 1000
    how = "points: seed means with error bars; lines: least-squares quadratic through them"
    sub = walk_subtitle(ctx, data, width, best_note(ctx), how)
    finish_layout(fig, ctx, sub, width, 520)
    return make_result(ctx, data, fig, claim, notes + no_run_notes(data))


# ------------------------------------------------------------------------------- Fig. 4
def build_fig4(ctx: BuildContext) -> FigureResult:
    """Grouped bars per setting (columns): x = leash task, FedWalk (red) and pre-training then
    FedAvg (blue), error bars; FedAvg without a leash as a dashed reference line."""
    spec, band = ctx.spec, ctx.options.band
    data = walk_data(ctx, ["test_acc"])
    curves = spec.profile_curves(ctx.profile)
    claim = data.claim_data(curves)
    walk, pre = leash_curves(claim, "fedwalk"), leash_curves(claim, "leash_pretrain")
    tasks = [t for t in LEASH_TASKS if t in walk or t in pre]
    tasks += [t for t in sorted({*walk, *pre}) if t not in tasks]
    ref = next((c.label for c in curves if not hooks_of(c)), None)
    panels = data.panels
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        subplot_titles=[f"{generic.letter(i)} {p.label}" for i, p in enumerate(panels)],
        horizontal_spacing=0.08,
        shared_yaxes=True,
    )
    shown: set[str] = set()
    notes: list[str] = []
    lows, highs = [], []
    for col, p in enumerate(panels, start=1):
        if not data.has_runs(p.panel_id):
            generic.mark_empty(fig, 1, col)
            continue
        parts = []
        for name, labels, color in (
            ("FedWalk", walk, WALK_RED),
            ("Pre-training, then FedAvg", pre, PRE_BLUE),
        ):
            xs, ys, errs, hovers, texts = [], [], [], [], []
            for task in tasks:
                lab = labels.get(task)
                s = claim.run_stat(p.panel_id, lab, "test_acc", mark=False) if lab else None
                if s is None:
                    continue
                f = claim.run_stat(p.panel_id, lab, "test_acc", "final", mark=False)
                xs.append(task)
                ys.append(PCT * s.mean)
                errs.append(PCT * spread(s, band))
                hovers.append(f"{lab}<br>{stat_hover(s, f)}")
                texts.append(f"{PCT * s.mean:.2f}")
                lows.append(PCT * (s.mean - spread(s, band)))
                highs.append(PCT * (s.mean + spread(s, band)))
                parts.append(f"{lab} {s.text()}")
            if not xs:
                continue
            fig.add_trace(
                go.Bar(
                    x=xs,
                    y=ys,
                    name=name,
                    marker_color=color,
                    error_y={"type": "data", "array": errs, "visible": band != "none"},
                    customdata=hovers,
                    hovertemplate="%{customdata}<extra></extra>",
                    legendgroup=name,
                    showlegend=name not in shown,
                    offsetgroup=name,
                ),
                row=1,
                col=col,
            )
            fig.add_trace(  # the values above the error bars (scattermode group: same offsets)
                go.Scatter(
                    x=xs,
                    y=[y + e for y, e in zip(ys, errs, strict=True)],
                    mode="text",
                    text=texts,
                    textposition="top center",
                    textfont={"size": 13, "color": "#333"},
                    offsetgroup=name,
                    showlegend=False,
                    hoverinfo="skip",
                ),
                row=1,
                col=col,
            )
            shown.add(name)
        s = claim.run_stat(p.panel_id, ref, "test_acc", mark=False) if ref else None
        if s is not None:
            value = PCT * s.mean
            lows.append(value)
            highs.append(value)
            fig.add_hline(y=value, line=REF_LINE, row=1, col=col)
            title = fig.layout.annotations[col - 1]
            title.text = f"{title.text}<br><span style='font-size:13px;color:#555'>{ref} " + (
                f"{s.text()} %</span>"
            )
            if "__ref" not in shown:
                fig.add_trace(
                    go.Scatter(x=[None], y=[None], mode="lines", line=REF_LINE, name=ref),
                    row=1,
                    col=col,
                )
                shown.add("__ref")
            parts.append(f"{ref} {s.text()}")
        notes.append(f"{p.label}: best test acc (%) " + ", ".join(parts))
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=tasks,
                         title_text="Leash task", row=1, col=col)  # fmt: skip
    truncated = ""
    if lows:
        lo, hi = min(lows), max(highs)
        pad = max(1.0, 0.2 * (hi - lo))
        bottom = max(0.0, math.floor(lo - 2 * pad))
        fig.update_yaxes(range=[bottom, min(100.0, hi + 1.5 * pad)])
        truncated = f"y axis from {bottom:g}%" if bottom > 0 else ""
    fig.update_yaxes(title_text="Best test accuracy (%)", row=1, col=1)
    fig.update_layout(
        barmode="group", bargap=0.25, bargroupgap=0.05, scattermode="group", scattergap=0.25
    )
    width = max(480 * len(panels), 640) + generic.LEGEND_WIDTH
    sub = walk_subtitle(ctx, data, width, best_note(ctx), truncated)
    finish_layout(fig, ctx, sub, width, 480)
    return make_result(ctx, data, fig, claim, notes + no_run_notes(data))


# ------------------------------------------------------------------------------- Fig. 5
def build_fig5(ctx: BuildContext) -> FigureResult:
    """(a) best test accuracy of FedAvg and FedWalk against Dir(a), log x; (b) the gain
    FedWalk − FedAvg in points, error bars √(s₁² + s₂²) of the two spreads."""
    spec, band = ctx.spec, ctx.options.band
    data = walk_data(ctx, ["test_acc"])
    curves = spec.profile_curves(ctx.profile)
    claim = data.claim_data(curves)
    avg, walk = fig5_curves(claim)
    colors = {c.label: c.color for c in curves}
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        row_heights=[0.6, 0.4],
        subplot_titles=[
            "(a) Best test accuracy",
            "(b) Gain of FedWalk over FedAvg (points)",
        ],
    )
    alphas = sorted(
        {
            float(a)
            for p in data.panels
            if isinstance(a := p.values.get("data.dirichlet_alpha"), int | float)
            and data.has_runs(p.panel_id)
        }
    )
    stats: dict[tuple[str, str], Stat] = {}
    for i, label in enumerate(lab for lab in (avg, walk) if lab):
        xs, ys, errs, hovers, counts = [], [], [], [], []
        for p in data.panels:
            a = p.values.get("data.dirichlet_alpha")
            s = claim.run_stat(p.panel_id, label, "test_acc", mark=False)
            if s is None or not isinstance(a, int | float):
                continue
            stats[(p.panel_id, label)] = s
            f = claim.run_stat(p.panel_id, label, "test_acc", "final", mark=False)
            xs.append(float(a))
            ys.append(PCT * s.mean)
            errs.append(PCT * spread(s, band))
            hovers.append(f"{label}, {p.label}<br>{stat_hover(s, f)}")
            counts.append(s.n)
        if not xs:
            continue
        order = np.argsort(xs)
        color = colors.get(label) or (AVG_GREY if label == avg else WALK_RED)
        fig.add_trace(
            go.Scatter(
                x=[xs[j] for j in order],
                y=[ys[j] for j in order],
                error_y={
                    "type": "data",
                    "array": [errs[j] for j in order],
                    "visible": band != "none",
                    "width": 5,
                },  # fmt: skip
                mode="lines+markers",
                marker={"size": 10, "symbol": SYMBOLS[i], "color": color},
                line={"color": color, "width": 2.2},
                name=seed_label(label, counts),
                customdata=[hovers[j] for j in order],
                hovertemplate="%{customdata}<extra></extra>",
            ),
            row=1,
            col=1,
        )
    gains = walk_gains(claim, mark=False)
    if gains:
        xs = [a for a, _, _ in gains]
        ys = [PCT * g for _, _, g in gains]
        errs = [
            PCT
            * math.hypot(
                spread(stats.get((p.panel_id, avg)), band),
                spread(stats.get((p.panel_id, walk)), band),
            )  # fmt: skip
            for _, p, _ in gains
        ]
        top = max(ys)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                error_y={"type": "data", "array": errs, "visible": band != "none", "width": 5},
                mode="lines+markers+text",
                text=[f"{y:+.2f}" for y in ys],
                textposition="top center",
                marker={
                    "size": [16 if y == top else 10 for y in ys],
                    "symbol": ["star" if y == top else "circle" for y in ys],
                    "color": WALK_RED,
                },
                line={"color": WALK_RED, "width": 1.5, "dash": "dot"},
                name="gain FedWalk − FedAvg (★ largest)",
                hovertemplate="Dir(%{x}): gain %{y:+.2f} points<extra></extra>",
            ),
            row=2,
            col=1,
        )
        fig.add_hline(y=0, line={"color": "#444", "width": 1}, row=2, col=1)
        lo = min(0.0, *(y - e for y, e in zip(ys, errs, strict=True)))
        hi = max(0.0, *(y + e for y, e in zip(ys, errs, strict=True)))
        pad = 0.25 * (hi - lo) or 1.0
        fig.update_yaxes(range=[lo - 0.5 * pad, hi + pad], row=2, col=1)
    ticks = {}
    if alphas:
        span = [math.log10(alphas[0]) - 0.15, math.log10(alphas[-1]) + 0.15]
        ticks = {"tickvals": alphas, "ticktext": [f"{a:g}" for a in alphas], "range": span}
    fig.update_xaxes(type="log", **ticks)
    fig.update_xaxes(title_text="Dirichlet concentration a (log scale; smaller a = more non-IID)",
                     row=2, col=1)  # fmt: skip
    fig.update_yaxes(title_text="Best test accuracy (%)", row=1, col=1)
    fig.update_yaxes(title_text="Gain (points)", row=2, col=1)
    width = 1000
    how = "(b) error bars √(s₁² + s₂²) of the two curves' spreads"
    sub = walk_subtitle(ctx, data, width, best_note(ctx), how)
    finish_layout(fig, ctx, sub, width, 640)
    notes = [
        f"{p.label}: gain {PCT * g:+.2f} points (FedWalk − FedAvg best test acc)"
        for _, p, g in gains
    ]
    return make_result(ctx, data, fig, claim, notes + no_run_notes(data))
