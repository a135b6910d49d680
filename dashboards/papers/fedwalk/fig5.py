"""``fedwalk-fig5``: FedAvg and FedWalk against the Dirichlet a (log axis), and below the gain
FedWalk − FedAvg."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards.figdata import make_result
from dashboards.model import BuildContext, FigureResult
from dashboards.papers.fedwalk.common import (
    AVG_GREY,
    PCT,
    WALK_RED,
    best_note,
    finish_layout,
    no_run_notes,
    spread,
    stat_hover,
    walk_data,
    walk_subtitle,
)
from dashboards.papers.fedwalk.methods import fig5_curves, walk_gains
from dashboards.style import SYMBOLS, seed_label
from fedsweep.judge.reducers import Stat


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
    return make_result(ctx, data, fig, notes=notes + no_run_notes(data))
