"""BHerd Fig. 4a–c: where the selected local gradients are (one run per case).

One heatmap per client (columns "Client 1".."Client 5") and case (rows): x = local epoch (= round
t when E = 1), y = index of the local gradient within the round (1..tau_i), dark = selected.
The heatmap's ``z`` is the ``records/selected_client{i}.npz`` array itself, shape [T, tau_i],
drawn with ``transpose=True``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards import store
from dashboards.figdata import figure_subtitle, make_result, prepare
from dashboards.generic import letter
from dashboards.model import BuildContext, FigureDataError, FigureResult
from dashboards.style import paper_layout

COLORSCALE = [[0.0, "#f2f2f2"], [1.0, "#111111"]]
#: the artifact of client i's selection record (0-based), as BHerd logs it
RECORD = "records/selected_client{i}.npz"


def heatmap(selected: np.ndarray, name: str) -> go.Heatmap:
    """A [T, tau_i] bool array as a grey/black heatmap (x = round, y = gradient index)."""
    t, tau = selected.shape
    return go.Heatmap(
        z=selected.astype(np.uint8),
        x=np.arange(1, t + 1),
        y=np.arange(1, tau + 1),
        transpose=True,
        zmin=0,
        zmax=1,
        colorscale=COLORSCALE,
        showscale=False,
        name=name,
        hovertemplate=f"{name}<br>epoch %{{x}}, index %{{y}}: selected=%{{z}}<extra></extra>",
    )


def missing_records(num_clients: int, arrays: dict[int, np.ndarray]) -> list[str]:
    """The artifacts of one run's selection records that are not there (0-based clients)."""
    return [RECORD.format(i=i) for i in range(num_clients) if i not in arrays]


def check_records(ctx: BuildContext, data, panels, chosen: dict) -> None:
    """Every run drawn must have its selection records (``records/selected_client{i}.npz``, one
    per client; logged with ``tracking.log_records: true``); else :class:`FigureDataError`
    naming each run and what it lacks, so nothing empty is drawn over a good figure."""
    lacking = []
    for panel in panels:
        if panel.panel_id not in chosen:
            continue
        tr, arrays = chosen[panel.panel_id]
        absent = missing_records(tr.trial.config.data.num_clients, arrays)
        if not absent:
            continue
        what = (
            f"records/selected_client{{0..{len(absent) - 1}}}.npz (all {len(absent)} clients)"
            if not arrays
            else ", ".join(absent)
        )
        lacking.append(f"run {tr.run.run_id} ({panel.label}, seed {tr.trial.seed}) lacks {what}")
    if lacking:
        res = data.resolution
        raise FigureDataError(
            f"{ctx.spec.figure}: selection records missing, nothing drawn: "
            + "; ".join(lacking)
            + ". They were logged without them (tracking.log_records: false?): delete those runs "
            f"and run `fedsweep sweep {ctx.spec.figure} --profile {ctx.profile}` again",
            runs=len(res.found),
            expected_runs=len(res.trials),
        )


def build(ctx: BuildContext) -> FigureResult:
    """Fig. 4a-c: rows = cases, columns = clients; the lowest seed's run of each case."""
    spec = ctx.spec
    data = prepare(ctx, [])
    panels = data.panels
    chosen = {}  # panel_id -> (TrialRun, {client: array})
    for tr in sorted(data.resolution.found, key=lambda tr: tr.trial.seed):
        if tr.trial.panel_id not in chosen:
            chosen[tr.trial.panel_id] = (tr, store.load_selected(ctx.client, tr.run.run_id))
    check_records(ctx, data, panels, chosen)
    n_cols = max([tr.trial.config.data.num_clients for tr, _ in chosen.values()] or [5])
    fig = make_subplots(
        rows=len(panels),
        cols=n_cols,
        column_titles=[f"Client {i + 1}" for i in range(n_cols)],
        row_titles=[f"{letter(i)} {p.label}" for i, p in enumerate(panels)],  # Fig. 4a, 4b, 4c
        horizontal_spacing=0.025,
        vertical_spacing=0.06,
    )
    notes = []
    epochs = {tr.trial.config.train.local_epochs for tr, _ in chosen.values()}
    for r, panel in enumerate(panels, start=1):
        if panel.panel_id not in chosen:
            notes.append(f"{panel.label}: no run")
            continue
        tr, arrays = chosen[panel.panel_id]
        for i, arr in arrays.items():
            name = f"{panel.label}, Client {i + 1} (seed {tr.trial.seed})"
            fig.add_trace(heatmap(arr, name), row=r, col=i + 1)
        fig.update_yaxes(title_text="Gradient index", row=r, col=1)
    x_title = "Local epoch (= round t)" if epochs <= {1.0} else "Round t"
    fig.update_xaxes(title_text=x_title, row=len(panels))
    fig.update_xaxes(showgrid=False, ticks="outside")
    fig.update_yaxes(showgrid=False, ticks="outside")
    paper_layout(
        fig, spec.title, figure_subtitle(ctx, data), width=1500, height=300 * len(panels) + 150
    )
    fig.update_layout(margin={"r": 60})
    return make_result(ctx, data, fig, notes=notes)
