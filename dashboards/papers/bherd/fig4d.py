"""BHerd Fig. 4d: distance of the selected gradients from the local mean, one curve per client.

Reads the per-client metric of the spec of the BHerd runs (found by config hash, so fig4abc's
runs serve), one panel per case; legend "Client 1".."Client 5". The spec draws the paper's form
``client/{i}/dist_paper`` = ‖g_sel/(α τ_i) − μ_i‖ (docs/figures.md); the ÷k_i form
``client/{i}/dist`` = ‖g_sel/k_i − μ_i‖ is drawn with ``fedsweep figures --figure bherd-fig4d
--metric 'client/{i}/dist'``. BHerd logs both for every run. The generic metric grid
(:mod:`dashboards.generic`) draws it, with one row (the metric).
"""

from __future__ import annotations

import re

from dashboards import generic
from dashboards.figdata import FigureData, figure_subtitle, make_result, prepare
from dashboards.model import BuildContext, FigureResult
from dashboards.style import SYMBOLS, CurveStyle, layered, palette, paper_layout, seed_label
from fedsweep.judge.runs import aggregate

DEFAULT_KEY = "client/{i}/dist_paper"
Y_TITLES = {
    "dist_paper": "‖g<sub>sel</sub>/(α τ<sub>i</sub>) − μ<sub>i</sub>‖",
    "dist": "‖g<sub>sel</sub>/k<sub>i</sub> − μ<sub>i</sub>‖",
}


def per_client(data: FigureData, pattern: str) -> FigureData:
    """Turn ``client/{i}/<name>`` metrics into curves "Client i+1" with metric ``<name>``."""
    rx = re.compile("^" + re.escape(pattern).replace(r"\{i\}", r"(\d+)") + "$")
    long = data.long.copy()
    match = long["metric"].str.extract(rx, expand=False)
    long = long[match.notna()].copy()
    long["curve"] = [f"Client {int(i) + 1}" for i in match.dropna()]
    long["metric"] = pattern.split("/")[-1]
    long = long.reset_index(drop=True)
    clients = sorted(set(long["curve"]))

    def per_panel(cells: dict) -> dict:
        """A run's divergence (or blow-up) in a panel concerns every client curve there."""
        out: dict = {}
        for (panel, _), runs in cells.items():
            for c in clients:
                out.setdefault((panel, c), []).extend(runs)
        return out

    return FigureData(
        data.resolution,
        long,
        aggregate(long),
        per_panel(data.diverged),
        data.panels,
        blowups=per_panel(data.blowups),
        configs=data.configs,
    )


def build(ctx: BuildContext) -> FigureResult:
    """Fig. 4d: one panel per case, one curve per client (seed mean ± band when n > 1)."""
    spec = ctx.spec
    pattern = next((m for m in ctx.metrics() if "{i}" in m), DEFAULT_KEY)
    raw = prepare(ctx, [pattern])
    data = generic.with_view(ctx, per_client(raw, pattern))
    clients = sorted(set(data.long["curve"]), key=lambda c: int(c.split()[-1]))
    counts = raw.all_seed_counts() or [0]
    n = len(clients)
    styles = layered(
        [
            CurveStyle(c, seed_label(c, counts), palette(i), "solid", False, "", SYMBOLS[i], i, n)
            for i, c in enumerate(clients)
        ]
    )
    raw.baseline = data.baseline
    metric = pattern.split("/")[-1]
    title = Y_TITLES.get(metric, metric)
    if data.baseline:
        title += f" − {data.baseline}"
    fig = generic.metric_grid(
        data, data.panels, styles, (metric,), {metric: title}, band=ctx.options.band
    )
    if not data.baseline:
        fig.update_yaxes(rangemode="tozero")
    width = generic.CELL_WIDTH * len(data.panels) + generic.LEGEND_WIDTH
    paper_layout(fig, spec.title, figure_subtitle(ctx, raw), width=width, height=520)
    return make_result(ctx, raw, fig)
