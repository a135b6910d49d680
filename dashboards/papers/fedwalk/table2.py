"""``fedwalk-table2``: Table 2 as a figure (rows the eight methods, per setting the best
training and test accuracy and the chosen η_0; leashed rows carry their difference to the base
method in points), and its CSV and LaTeX forms (``fedwalk-table2.csv``, ``.tex``); for the
reproduction report, the table beside the paper's printed one (:func:`table2_beside_paper`,
:data:`PAPER_TABLE2`)."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from dashboards.figdata import FigureData, make_result
from dashboards.model import BuildContext, FigureResult
from dashboards.papers.fedwalk.common import (
    BEST_NOTE,
    PCT,
    finish_layout,
    no_run_notes,
    skipped_reason,
    walk_data,
    walk_subtitle,
)
from dashboards.papers.fedwalk.methods import (
    WALK_BASE_OF,
    WALK_METHODS,
    LrChoice,
    choose_lr,
    eta_text,
    lr_grid,
)
from fedsweep.judge.panels import Panel
from fedsweep.judge.reducers import Stat, stat_of, value_at_best
from fedsweep.judge.runs import ClaimData

NOT_RUN = "not run"
UP, DOWN = "#1f5fbf", "#c0392b"  # the paper's blue (increase) and red (decrease)
TABLE_COLS = {"method": 190, "train": 150, "test": 150, "eta": 92}
ROW_PX, HEADER_PX = 46, 30


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
    methods = [m for m in WALK_METHODS if lr_grid(claim, m)]
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
    result = make_result(ctx, data, fig, notes=notes)
    if data.resolution.found:
        result.texts = {"csv": table_csv(cells), "tex": table_latex(ctx, cells, panels, methods)}
        beside = table2_beside_paper(result.texts["csv"])
        result.report_tables = [
            "**Table 2 beside the paper** (best test accuracy, %; gain = over the base method):"
            "\n\n" + table2_markdown(beside)
        ]
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


# ------------------------------------------------------------------ beside the paper's Table 2
#: FedWalk's Table 2 as printed (fedwalk.txt, Sec. 5.2), verbatim: setting id (the spec's panel
#: ids) -> method -> (training, test, training gain, test gain) in percent; the gains (against
#: the base method) only on the leashed rows, as the paper writes them ("+2.6", "+7", "+0")
PAPER_TABLE2: dict[str, dict[str, tuple[str, str, str | None, str | None]]] = {
    "c10-dir0.1": {
        "FedAvg": ("92.66", "88.06", None, None),
        "SCAFFOLD": ("84.92", "82.84", None, None),
        "FedProx": ("90.97", "85.23", None, None),
        "FedNova": ("91.70", "86.32", None, None),
        "FedWalk": ("95.26", "91.45", "+2.6", "+3.39"),
        "SCAFFOLD+FedWalk": ("94.05", "86.48", "+9.13", "+3.64"),
        "FedProx+FedWalk": ("95.55", "91.41", "+4.58", "+6.18"),
        "FedNova+FedWalk": ("96.63", "91.89", "+4.93", "+5.57"),
    },
    "c10-iid": {
        "FedAvg": ("99.99", "95.58", None, None),
        "SCAFFOLD": ("100", "94.99", None, None),
        "FedProx": ("99.99", "95.48", None, None),
        "FedNova": ("99.99", "95.46", None, None),
        "FedWalk": ("100", "95.88", "+0.01", "+0.03"),
        "SCAFFOLD+FedWalk": ("99.99", "96.58", "-0.01", "+1.59"),
        "FedProx+FedWalk": ("99.99", "95.82", "+0", "+0.34"),
        "FedNova+FedWalk": ("100", "95.82", "+0.01", "+0.36"),
    },
    "c100-dir0.01": {
        "FedAvg": ("67.13", "58.53", None, None),
        "SCAFFOLD": ("62.17", "52.66", None, None),
        "FedProx": ("67.18", "58.72", None, None),
        "FedNova": ("69.93", "60.12", None, None),
        "FedWalk": ("71.22", "61.35", "+4.09", "+2.83"),
        "SCAFFOLD+FedWalk": ("69.17", "57.04", "+7", "+4.38"),
        "FedProx+FedWalk": ("71.11", "61.65", "+3.93", "+2.92"),
        "FedNova+FedWalk": ("73.88", "63.27", "+3.95", "+3.15"),
    },
    "c100-iid": {
        "FedAvg": ("99.97", "80.03", None, None),
        "SCAFFOLD": ("99.12", "78.59", None, None),
        "FedProx": ("99.98", "80.13", None, None),
        "FedNova": ("99.98", "80.11", None, None),
        "FedWalk": ("99.98", "80.38", "+0.01", "+0.35"),
        "SCAFFOLD+FedWalk": ("99.93", "82.46", "+0.81", "+3.87"),
        "FedProx+FedWalk": ("99.98", "80.84", "+0", "+0.71"),
        "FedNova+FedWalk": ("99.98", "80.84", "+0", "+0.73"),
    },
}
#: a printed gain further than this from the difference of the paper's own two numbers is a
#: misprint, not rounding (two values printed with 2 decimals differ from their difference by at
#: most 0.01)
MISPRINT_ABOVE = 0.015


def _paper_gain(setting: str, method: str, col: int) -> tuple[str | None, float | None, str]:
    """(printed gain, gain recomputed from the paper's two numbers, note on a misprint)."""
    table = PAPER_TABLE2.get(setting, {})
    row, base = table.get(method), table.get(WALK_BASE_OF.get(method, ""))
    if row is None or base is None:
        return None, None, ""
    printed = row[2 + col]
    recomputed = round(float(row[col]) - float(base[col]), 2)
    note = ""
    if printed is not None and abs(float(printed) - recomputed) > MISPRINT_ABOVE:
        note = (
            f'the paper prints "{printed}"; its own numbers give {recomputed:+.2f} '
            f"({row[col]} − {base[col]}): a misprint"
        )
    return printed, recomputed, note


def table2_beside_paper(csv_text: str, metric: str = "test") -> list[dict[str, Any]]:
    """Our Table 2 beside the paper's, one row per setting × method (settings in the order of
    the CSV, methods in the paper's order): from the CSV the Table 2 figure writes
    (``fedwalk-table2.csv``: :func:`table_csv`, also ``FigureResult.texts["csv"]`` of the
    ``fedwalk-table2`` result), ``metric`` "test" (default) or "train".

    Each row: ``setting`` (label), ``setting_id`` (the panel id without ``setting=``),
    ``method``, ``eta0`` (our chosen η_0), ``n`` (seeds), ``ours_mean`` / ``ours_std`` (our best
    accuracy in %, seed mean and sample std; None without runs), ``ours`` (the text "27.25 ±
    0.30 (n=2)", or the cell's status, e.g. "not run: …"), ``ours_gain`` (our seed-mean
    difference to the base method, points; None on the base rows), ``paper`` (the paper's
    printed value, None for a setting the paper does not have), ``paper_gain`` (its printed
    gain, None on the base rows), ``paper_gain_recomputed`` (the difference of its own two
    numbers) and ``note`` (where the printed gain is not the difference of its numbers: the
    paper's "+0.03" for FedWalk's CIFAR-10 IID test accuracy, whose numbers give +0.30)."""
    if metric not in ("test", "train"):
        raise ValueError(f"metric is 'test' or 'train', not {metric!r}")
    col = 1 if metric == "test" else 0
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    settings = list(dict.fromkeys(r["panel_id"] for r in rows))
    order = {m: i for i, m in enumerate(WALK_METHODS)}
    rows.sort(key=lambda r: (settings.index(r["panel_id"]), order.get(r["method"], len(order))))
    out = []
    for r in rows:
        setting = r["panel_id"].partition("=")[2] or r["panel_id"]
        mean, std = r[f"{metric}_best_mean"], r[f"{metric}_best_std"]
        n = int(r["n"] or 0)
        if mean:
            ours = f"{float(mean):.2f}" + (f" ± {float(std):.2f}" if n > 1 and std else "")
            ours += f" (n={n})"
        else:
            ours = r["status"] if r["status"] != "ok" else "no runs"
        gain = r[f"{metric}_best_minus_base"]
        paper_row = PAPER_TABLE2.get(setting, {}).get(r["method"])
        printed, recomputed, note = _paper_gain(setting, r["method"], col)
        out.append(
            {
                "setting": r["setting"],
                "setting_id": setting,
                "method": r["method"],
                "eta0": r["eta0"] or None,
                "n": n,
                "ours_mean": float(mean) if mean else None,
                "ours_std": float(std) if mean and std else None,
                "ours": ours,
                "ours_gain": float(gain) if gain else None,
                "paper": paper_row[col] if paper_row else None,
                "paper_gain": printed,
                "paper_gain_recomputed": recomputed,
                "note": note,
            }
        )
    return out


def table2_markdown(rows: list[dict[str, Any]], metric: str = "test") -> str:
    """The rows of :func:`table2_beside_paper` as a Markdown table: setting, method, ours (best
    accuracy % mean ± std (n), η_0), our gain over the base method, the paper's value, its
    printed gain, and the note."""
    lines = [
        f"| setting | method | ours: best {metric} acc (%) | ours: gain | paper | paper: gain "
        "| note |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        eta = f", η₀={r['eta0']}" if r["eta0"] else ""
        gain = f"{r['ours_gain']:+.2f}" if r["ours_gain"] is not None else ""
        cells = [r["setting"], r["method"], r["ours"] + eta, gain, r["paper"] or "–",
                 r["paper_gain"] or "", r["note"]]  # fmt: skip
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
