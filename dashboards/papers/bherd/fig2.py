"""BHerd Fig. 2a / 2b: 3 x 3 grids (rows SVM+MNIST, CNN+MNIST, CNN+CIFAR-10; columns Case 1–3),
one figure for the test loss (``<id>-loss``) and one for the test accuracy (``<id>-acc``), the
methods as curves (the spec decides which).

The generic two-axis layout (:mod:`dashboards.generic`) plus two touches: the long subtitle
(profile scaling and data notes) one part per line, and a note per panel on the rounds where
GraB selected no gradient. A panel without runs (e.g. CIFAR-10 could not be found, so the sweep
skipped it) is drawn empty with a "no runs" note in the cell, never filled with another data
set's numbers.
"""

from __future__ import annotations

from dashboards import generic
from dashboards.figdata import figure_subtitle, make_result, prepare
from dashboards.model import BuildContext, FigureResult
from fedsweep.judge.store import load_metrics

METRICS = ("test_loss", "test_acc")


def build(ctx: BuildContext) -> FigureResult:
    spec = ctx.spec
    metrics = ctx.metrics(list(METRICS))
    data = generic.with_view(ctx, prepare(ctx, metrics))
    curves = spec.curve_list()
    # the subtitle is long (profile scaling + data notes): one line per part
    sub = figure_subtitle(ctx, data).replace(" · ", "<br>")
    fig, parts = generic.draw(ctx, data, generic.curve_styles(curves, data), metrics, sub=sub)
    notes = [f"{p.label}: no runs" for p in data.panels if not data.has_runs(p.panel_id)]
    notes += grab_stalls(ctx, data)
    return make_result(ctx, data, fig, notes=notes, parts=parts)


def grab_stalls(ctx: BuildContext, data) -> list[str]:
    """Per panel, the rounds in which GraB-FedAvg selected no gradient on any client
    (``alpha_t = 0``: the update is skipped, docs/algorithms.md §4), summed over seeds."""
    runs = [tr for tr in data.resolution.found if tr.trial.config.selector == "grab"]
    if not runs or ctx.client is None:
        return []
    long = load_metrics(ctx.client, runs, ["client/{i}/alpha"])
    if long.empty:
        return []
    per_round = long.groupby(["panel_id", "curve", "run_id", "round"])["value"].max()
    stalled = (per_round == 0).groupby(level=["panel_id", "curve"]).agg(["sum", "count"])
    return [
        f"{curve} [{p.label}]: no client selected a gradient (alpha_t = 0, update skipped) "
        f"in {int(row['sum'])} of {int(row['count'])} rounds (all seeds)"
        for p in data.panels
        for (pid, curve), row in stalled.iterrows()
        if pid == p.panel_id and row["sum"] > 0
    ]
