"""Shared Plotly conventions: paper-like layout, mean curves with bands, flat lines.

A curve is drawn from the aggregated table (``store.aggregate``): the seed mean as a line and a
shaded band in the curve's colour at 0.2 alpha (only where n ≥ 2): ±1 std (``band="std"``, the
default), ±1 standard error std/√n (``"sem"``) or none. A band never leaves the metric's range
(``bounds``: a loss or a distance never below 0, an accuracy within [0, 1]). Each curve appears
once in the legend (``legendgroup``), with its seed count, e.g. "α=0.5 (n=3)". ``flat`` curves
(the papers' black centralized line) are a horizontal line at the curve's final mean.

Curves that coincide stay visible: each curve carries sparse markers (its own symbol, about ten
per curve, staggered between curves so that two identical curves show both symbols), and
dashed/dotted curves are drawn above the solid ones by the builders (``draw_order``).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import hex_to_rgb, qualitative

FONT = {"family": "Arial, Helvetica, sans-serif", "size": 15, "color": "#222"}
PALETTE = qualitative.D3
X_TITLE = "Communication round t"
Y_TITLES = {
    "test_loss": "Test loss",
    "test_acc": "Test accuracy",
    "train_loss": "Training loss",
    "train_acc": "Training accuracy",
    "bherd_dev": "‖Δ_BHerd − Δ_all‖ / ‖Δ_all‖",
    "bherd_herd_err": "‖g_sel/(ατ) − μ‖ / ‖μ‖",
}
BAND_ALPHA = 0.2
BANDS = ("std", "sem", "none")
SYMBOLS = (
    "circle",
    "square",
    "diamond",
    "triangle-up",
    "x",
    "triangle-down",
    "cross",
    "star",
    "pentagon",
    "hexagon",
)
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
MARKERS_PER_CURVE = 10
WIDTHS = (2.8, 1.6)  # line width of the lowest and of the topmost curve (see ``layered``)
PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


@dataclass(frozen=True)
class CurveStyle:
    """How to draw one curve: its key in the table, legend name, colour, dash, flat."""

    key: str
    name: str
    color: str
    dash: str = "solid"
    flat: bool = False
    hover_note: str = ""
    symbol: str | None = None  # marker symbol (None: no markers)
    index: int = 0  # position among the figure's curves (staggers the markers)
    of: int = 1  # number of curves in the figure
    width: float = 2.0  # line width; the marker size follows it


def metric_bounds(metric: str) -> tuple[float | None, float | None]:
    """The range a metric's band must stay in: losses and distances ≥ 0, accuracies in [0, 1]."""
    name = metric.split("/")[-1].lower()
    if "acc" in name:
        return 0.0, 1.0
    if "loss" in name or name.startswith("dist"):
        return 0.0, None
    return None, None


def band_width(std, n, band: str = "std"):
    """Half-width of the band: std, std/√n (standard error) or 0 (``"none"``)."""
    if band not in BANDS:
        raise ValueError(f"unknown band {band!r}; allowed: {', '.join(BANDS)}")
    std = np.asarray(std, dtype=float)
    if band == "none":
        return np.zeros_like(std)
    if band == "sem":
        n = np.maximum(np.asarray(n, dtype=float), 1.0)
        return std / np.sqrt(n)
    return std


def marker_rounds(rounds, index: int = 0, of: int = 1) -> list[int]:
    """Positions (indices into ``rounds``) of about ``MARKERS_PER_CURVE`` markers; curve
    ``index`` of ``of`` is shifted by index/of of the spacing, so coinciding curves show all
    their symbols side by side."""
    count = len(rounds)
    if count == 0:
        return []
    step = max(1, round(count / MARKERS_PER_CURVE))
    offset = (index * step) // max(of, 1)
    return list(range(offset % step, count, step))


def draw_order(styles: list[CurveStyle]) -> list[CurveStyle]:
    """Solid curves first, dashed/dotted ones last (on top), so a dotted curve under a solid one
    of the same values still shows its pattern."""
    return sorted(styles, key=lambda s: s.dash != "solid")


def layered(styles: list[CurveStyle]) -> list[CurveStyle]:
    """``styles`` with line widths (and marker sizes) decreasing in draw order: a curve drawn
    below another is wider, so where two curves coincide the lower one shows as a rim around
    the upper one (e.g. FedAvg's dotted line on α=1.0 in Fig. 3a)."""
    order = {s.key: i for i, s in enumerate(draw_order(styles))}
    last = max(len(styles) - 1, 1)
    return [
        replace(
            s, width=round(WIDTHS[1] + (WIDTHS[0] - WIDTHS[1]) * (last - order[s.key]) / last, 2)
        )
        for s in styles
    ]


def rgba(color: str, alpha: float) -> str:
    """``#rrggbb`` / ``rgb(r,g,b)`` -> ``rgba(r,g,b,alpha)``."""
    if color.startswith("#"):
        r, g, b = hex_to_rgb(color)
    else:
        r, g, b = (int(float(v)) for v in color[color.index("(") + 1 : -1].split(",")[:3])
    return f"rgba({r},{g},{b},{alpha})"


def palette(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def seed_label(
    name: str, counts: list[int], diverged: list[int] | None = None, blowups: int = 0
) -> str:
    """Legend text: "α=0.5 (n=3)", "(n=2–3)" when panels differ, plus divergence rounds and
    the number of runs whose loss blew up while staying finite (tag ``fedsweep.loss_blowup``)."""
    lo, hi = (min(counts), max(counts)) if counts else (0, 0)
    n = f"n={hi}" if lo == hi else f"n={lo}–{hi}"
    text = f"{name} ({n})"
    if diverged:
        rounds = sorted(diverged)
        if len(rounds) == 1:
            text += f" — diverged at round {rounds[0]}"
        else:
            shown = ", ".join(str(r) for r in rounds[:4]) + ("…" if len(rounds) > 4 else "")
            text += f" — {len(rounds)} runs diverged, at rounds {shown}"
    if blowups:
        text += " — loss blew up" if blowups == 1 else f" — {blowups} runs' loss blew up"
    return text


def draw_curve(
    fig: go.Figure,
    table: pd.DataFrame,
    style: CurveStyle,
    *,
    row: int,
    col: int,
    show_legend: bool,
    x_end: int | None = None,
    band: str = "std",
    bounds: tuple[float | None, float | None] = (None, None),
) -> bool:
    """Draw one curve of ``table`` (rows of one panel and metric: round, mean, std, n) with a
    ``band`` (std, sem or none) clipped to ``bounds`` (see :func:`metric_bounds`).

    Returns False (and draws nothing) when the table has no rows for it."""
    if table.empty:
        return False
    table = table.sort_values("round")
    x, mean = table["round"].to_numpy(), table["mean"].to_numpy(dtype=float)
    std, n = table["std"].to_numpy(dtype=float), table["n"].to_numpy()
    spread = band_width(std, n, band)
    lo, hi = bounds
    band_name = {"std": "±1 std", "sem": "±1 s.e.", "none": ""}[band]
    common = {"legendgroup": style.key, "name": style.name}
    note = f"<br>{style.hover_note}" if style.hover_note else ""
    if style.flat:
        x0, x1 = int(x.min()), int(max(x_end or x.max(), x.max()))
        value, width = float(mean[-1]), float(spread[-1])
        if n[-1] >= 2 and width > 0:
            up, down = _clip(value + width, lo, hi), _clip(value - width, lo, hi)
            band_xy = [x0, x1, x1, x0], [up, up, down, down]
            fig.add_trace(_band(*band_xy, style, band_name), row=row, col=col)
        fig.add_trace(
            go.Scatter(
                x=[x0, x1],
                y=[value, value],
                mode="lines",
                line={"color": style.color, "dash": style.dash, "width": 2.5},
                showlegend=show_legend,
                hovertemplate=f"{style.name}<br>final value %{{y:.4f}} (n={int(n[-1])})"
                f"{note}<extra></extra>",
                **common,
            ),
            row=row,
            col=col,
        )
        return True
    if (n >= 2).any() and band != "none":
        upper, lower = _clip(mean + spread, lo, hi), _clip(mean - spread, lo, hi)
        xs = list(x) + list(x[::-1])
        ys = list(upper) + list(lower[::-1])
        fig.add_trace(_band(xs, ys, style, band_name), row=row, col=col)
    marker = {}
    mode = "lines"
    if style.symbol:
        mode = "lines+markers"
        size = np.zeros(len(x))
        size[marker_rounds(x, style.index, style.of)] = round(3 * style.width + 2)
        marker = {
            "marker": {
                "symbol": style.symbol,
                "size": list(size),
                "color": style.color,
                "line": {"width": 1, "color": "white"},
            }
        }
    fig.add_trace(
        go.Scatter(
            x=x,
            y=mean,
            mode=mode,
            line={"color": style.color, "dash": style.dash, "width": style.width},
            customdata=list(zip(spread, n, strict=True)),
            showlegend=show_legend,
            hovertemplate=f"{style.name}<br>t=%{{x}}: %{{y:.4f}} ± %{{customdata[0]:.4f}} "
            f"{band_name.replace('±1 ', '') or 'spread'} (n=%{{customdata[1]}}){note}"
            "<extra></extra>",
            **marker,
            **common,
        ),
        row=row,
        col=col,
    )
    return True


def _clip(values, lo: float | None, hi: float | None):
    if lo is None and hi is None:
        return values
    return np.clip(values, lo, hi)


def _band(x: list, y: list, style: CurveStyle, what: str = "±1 std") -> go.Scatter:
    return go.Scatter(
        x=x,
        y=y,
        fill="toself",
        fillcolor=rgba(style.color, BAND_ALPHA),
        line={"width": 0, "color": rgba(style.color, 0)},
        mode="lines",
        hoverinfo="skip",
        showlegend=False,
        legendgroup=style.key,
        name=f"{style.name} {what}",
    )


def paper_layout(
    fig: go.Figure, title: str, subtitle: str, *, width: int, height: int, top: int = 110
) -> go.Figure:
    """White template, readable fonts, title + subtitle, legend on the right."""
    fig.update_layout(
        template="plotly_white",
        font=FONT,
        width=width,
        height=height,
        margin={"l": 80, "r": 30, "t": top, "b": 70},
        title={
            "text": title,
            "x": 0.01,
            "xanchor": "left",
            "y": 0.98,
            "yanchor": "top",
            "font": {"size": 21},
            "subtitle": {"text": subtitle, "font": {"size": 14, "color": "#555"}},
        },
        legend={
            "x": 1.01,
            "xanchor": "left",
            "y": 1.0,
            "yanchor": "top",
            "bgcolor": "rgba(255,255,255,0.85)",
            "bordercolor": "#ccc",
            "borderwidth": 1,
            "font": {"size": 14},
            "tracegroupgap": 2,
            "itemsizing": "constant",  # the marker symbol shows even where sizes vary per point
        },
        hovermode="closest",
    )
    fig.update_annotations(font={"size": 17})
    fig.update_xaxes(
        showline=True, linecolor="#444", mirror=True, ticks="outside", gridcolor="#eee"
    )
    fig.update_yaxes(
        showline=True, linecolor="#444", mirror=True, ticks="outside", gridcolor="#eee"
    )
    return fig


def round_ticks(fig: go.Figure, last_round: int | None, **where) -> go.Figure:
    """Integer ticks on the round axes (one per round for short runs); ``where`` (``row``,
    ``col``) limits them to one cell's axis."""
    if last_round is not None and last_round <= 12:
        fig.update_xaxes(dtick=1, tick0=1, **where)
    else:
        fig.update_xaxes(tickformat="d", **where)
    return fig


def subtitle(*parts: str) -> str:
    """Join the non-empty subtitle parts (profile note, data note, run counts)."""
    return " · ".join(p for p in parts if p)


def wrap_subtitle(sub: str, width: int, *, break_on_hyphens: bool = True) -> str:
    """One line per subtitle part, each wrapped to the figure's width (about 7.5 px a
    character at the subtitle's 14 px); ``break_on_hyphens=False``: never inside a word
    ("mnist-5k" stays whole)."""
    chars = max(60, int((width - 120) / 7.5))
    lines = []
    for part in sub.replace("<br>", " · ").split(" · "):
        lines += textwrap.wrap(part, chars, break_on_hyphens=break_on_hyphens) or [""]
    return "<br>".join(lines)
