"""``fedwalk-fig2``: the training loss over rounds per setting, each method at the η_0 Table 2
chose there (seed mean ± band), the leashed methods dashed."""

from __future__ import annotations

from dataclasses import replace

from dashboards import generic
from dashboards.figdata import make_result
from dashboards.model import BuildContext, FigureResult
from dashboards.papers.fedwalk.common import finish_layout, no_run_notes, walk_data, walk_subtitle
from dashboards.papers.fedwalk.methods import (
    WALK_BASE_OF,
    WALK_METHODS,
    choose_lr,
    eta_text,
    lr_grid,
    walk_method,
)
from dashboards.style import (
    SYMBOLS,
    X_TITLE,
    CurveStyle,
    draw_curve,
    draw_order,
    layered,
    round_ticks,
    seed_label,
)
from fedsweep.judge.runs import ClaimData


def method_colors(claim: ClaimData) -> dict[str, str]:
    """Method -> the spec colour of its first curve."""
    out: dict[str, str] = {}
    for c in claim.curves:
        m = walk_method(claim.config(c))
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
    methods = [m for m in WALK_METHODS if lr_grid(claim, m)]
    choices = {(p.panel_id, m): choose_lr(claim, p.panel_id, m) for p in panels for m in methods}
    colors = method_colors(claim)
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
                generic.mark_empty(fig, r, c, data.empty_text(p.panel_id))
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
    return make_result(ctx, data, fig, notes=notes + no_run_notes(data))
