"""``fedwalk-fig3``: best test accuracy against τ, one colour per leash task (points with error
bars, a quadratic least-squares trend line through the seed means)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from dashboards import generic
from dashboards.figdata import make_result
from dashboards.model import BuildContext, FigureResult
from dashboards.papers.fedwalk.common import (
    PCT,
    best_note,
    finish_layout,
    no_run_notes,
    spread,
    stat_hover,
    walk_data,
    walk_subtitle,
)
from dashboards.papers.fedwalk.methods import tau_points
from dashboards.style import seed_label
from fedsweep.judge.reducers import Stat

TASK_COLORS = {"LH": "#d62728", "MH": "#ff7f0e", "HH": "#8c564b"}


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
    return make_result(ctx, data, fig, notes=notes + no_run_notes(data))
