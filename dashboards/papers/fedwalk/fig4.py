"""``fedwalk-fig4``: grouped bars per setting, FedWalk (red) vs pre-training (blue) per leash
task, FedAvg without a leash as a dashed reference line."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards import generic
from dashboards.figdata import make_result
from dashboards.model import BuildContext, FigureResult
from dashboards.papers.fedwalk.common import (
    AVG_GREY,
    PCT,
    PRE_BLUE,
    WALK_RED,
    best_note,
    finish_layout,
    no_run_notes,
    spread,
    stat_hover,
    walk_data,
    walk_subtitle,
)
from dashboards.papers.fedwalk.methods import LEASH_TASKS, leash_curves

REF_LINE = {"color": AVG_GREY, "width": 2, "dash": "dash"}


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
    ref = next((c.label for c in curves if not claim.config(c).hooks), None)
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
            generic.mark_empty(fig, 1, col, data.empty_text(p.panel_id))
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
    return make_result(ctx, data, fig, notes=notes + no_run_notes(data))
