"""What the FedWalk figures share: the data step, the subtitle and layout, error bars and
hover texts of "best over rounds" statistics, the colours."""

from __future__ import annotations

import plotly.graph_objects as go

from dashboards import store
from dashboards.figdata import FigureData, figure_subtitle, prepare
from dashboards.model import BuildContext
from dashboards.style import band_width, paper_layout, subtitle, wrap_subtitle
from fedsweep.judge.panels import Panel
from fedsweep.judge.reducers import Stat

PCT = 100.0
BEST_NOTE = "best = max over rounds per run (W11), then seed mean ± {band}"
BAND_TEXT = {"std": "1 std", "sem": "1 standard error", "none": "(no error bars)"}
WALK_RED, PRE_BLUE, AVG_GREY = "#d62728", "#1f77b4", "#7f7f7f"


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
    part per line, wrapped to ``width`` (``style.wrap_subtitle``, never inside a word:
    "mnist-5k" stays whole)."""
    sub = subtitle(figure_subtitle(ctx, data), *extra)
    return wrap_subtitle(sub, width, break_on_hyphens=False)


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
