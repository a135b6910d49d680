"""Shared Plotly conventions: paper-like layout, mean curves with bands, flat lines.

A curve is drawn from the aggregated table (``store.aggregate``): the seed mean as a line and a
shaded band in the curve's colour at 0.2 alpha (only where n ≥ 2): ±1 std (``band="std"``, the
default), ±1 standard error std/√n (``"sem"``) or none. A band never leaves the metric's range
(``bounds``: a loss or a distance never below 0, an accuracy within [0, 1]). Each curve appears
once in the legend (``legendgroup``), with its seed count, e.g. "α=0.5 (n=3)". ``flat`` curves
(the papers' black centralized line) are a horizontal line at the curve's final mean.

Curves that coincide stay visible: each curve carries sparse markers (its own symbol, about ten
per curve, staggered between curves so that two identical curves show both symbols), and
dashed/dotted curves are drawn above the solid ones by the builders (``draw_order``). Once a
figure is drawn, :func:`mark_coinciding` finds the curves of a panel that are identical within
plotting resolution (``COINCIDE_TOL`` of the panel's y range), says so in their legend entry and
hover text ("identical to X") and, where the upper one would hide the lower one (the same dash
pattern, and no marker of the lower one's own between the upper one's), gives each markers at
rounds of its own; dash patterns, which carry meaning in the papers' figures (dashed = without
RR), are never changed.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, replace
from typing import Any

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
#: two curves of a panel whose values differ by at most this fraction of the panel's y range at
#: every round draw as one line (half a percent: about 1.5 px of a 300 px high cell)
COINCIDE_TOL = 0.005
IDENTICAL = "identical to"
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


def title_layout(title: str, subtitle: str, size: int = 21) -> dict:
    """A figure's title block: top left, with its subtitle in grey below it."""
    return {
        "text": title,
        "x": 0.01,
        "xanchor": "left",
        "y": 0.98,
        "yanchor": "top",
        "font": {"size": size},
        "subtitle": {"text": subtitle, "font": {"size": 14, "color": "#555"}},
    }


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
                customdata=[(width, int(n[-1]), float(std[-1]))] * 2,
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
            # (band half-width, seeds, std): the hover text shows the first two; the curve's
            # CSV (``export.curve_table``) reads the std and n back from here
            customdata=list(zip(spread, n, std, strict=True)),
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
        title=title_layout(title, subtitle, size=21),
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


# ------------------------------------------------------------------ curves of a drawn figure
def axis_name(ref: str | None, letter: str) -> str:
    """A trace's axis reference (``x2``) as its layout key (``xaxis2``)."""
    ref = ref or letter
    return f"{letter}axis{ref[1:]}"


def panel_titles(fig: go.Figure) -> dict[tuple[str, str], tuple[str, str]]:
    """(x ref, y ref) of every cell of ``fig`` -> (its subplot title, its y axis title): the
    title ``make_subplots`` put centred above the cell ("(a) Case 1"), "" when none; the y
    title of the cell's own axis, else of another axis of its row (generic layouts title the
    first column only)."""
    layout = fig.layout
    notes = [
        a for a in layout.annotations or () if a.xref == "paper" and a.yref == "paper" and a.text
    ]
    refs = {(t.xaxis or "x", t.yaxis or "y") for t in fig.data if t.type in ("scatter", "bar")}
    y_titles: dict[tuple, str] = {}
    for key in layout:
        if key.startswith("yaxis") and layout[key].title.text:
            y_titles.setdefault(tuple(layout[key].domain or (0, 1)), layout[key].title.text)
    out = {}
    for xr, yr in refs:
        xa, ya = layout[axis_name(xr, "x")], layout[axis_name(yr, "y")]
        xd, yd = tuple(xa.domain or (0, 1)), tuple(ya.domain or (0, 1))
        mid, top = (xd[0] + xd[1]) / 2, yd[1]
        title = next((a.text for a in notes if abs(a.x - mid) < 1e-6 and abs(a.y - top) < 1e-6), "")
        out[(xr, yr)] = (title, ya.title.text or y_titles.get(yd, ""))
    return out


def curve_label(trace) -> str:
    """A curve's label without its legend extras: "α=0.5 (n=3) — diverged …" -> "α=0.5"."""
    name = re.sub(r"\s+\(n=[^)]*\).*$", "", trace.name or "", flags=re.S)
    return name.split(f" — {IDENTICAL} ")[0].strip()


def numeric(values) -> np.ndarray | None:
    """``values`` as floats, None when any is not a number (a ``None`` placeholder, a text)."""
    if values is None:
        return None
    try:
        arr = np.asarray(list(values), dtype=float)
    except (TypeError, ValueError):
        return None
    return arr if arr.ndim == 1 and arr.size and np.isfinite(arr).any() else None


def curve_traces(fig: go.Figure, *, lines_only: bool = True) -> list[tuple[int, Any]]:
    """(position, trace) of every curve of ``fig``: a visible scatter trace with numeric x and
    y that is not a band (``fill="toself"``); ``lines_only``: drawn with lines (a markers-only
    scatter is a set of points, not a curve two others can hide)."""
    out = []
    for i, t in enumerate(fig.data):
        if t.type != "scatter" or t.fill == "toself" or t.visible is False:
            continue
        if lines_only and t.mode is not None and "lines" not in t.mode:
            continue
        x, y = numeric(t.x), numeric(t.y)
        if x is None or y is None or len(x) != len(y) or (lines_only and len(x) < 2):
            continue
        out.append((i, t))
    return out


def _span(fig: go.Figure, yref: str, values: list[np.ndarray]) -> tuple[float, bool]:
    """The y range of a cell (its axis range when fixed, else the values' extent, bands
    included) and whether its axis is logarithmic (the range is then in decades)."""
    axis = fig.layout[axis_name(yref, "y")]
    log = axis.type == "log"
    if axis.range is not None and None not in axis.range:
        return abs(float(axis.range[1]) - float(axis.range[0])), log
    arr = np.concatenate(values) if values else np.array([])
    arr = arr[np.isfinite(arr)]
    if log:
        arr = np.log10(arr[arr > 0])
    return (float(arr.max() - arr.min()) if arr.size else 0.0), log


def _same(a: np.ndarray, b: np.ndarray, tol: float, log: bool) -> bool:
    """Whether two curves' y values (at the same x) differ by at most ``tol`` everywhere; a
    non-finite value must be non-finite in both."""
    fa, fb = np.isfinite(a), np.isfinite(b)
    if not np.array_equal(fa, fb) or not fa.any():
        return False
    a, b = a[fa], b[fa]
    if log:
        if (a <= 0).any() or (b <= 0).any():
            return bool(np.array_equal(a, b))
        a, b = np.log10(a), np.log10(b)
    return bool(np.max(np.abs(a - b)) <= tol)


def coinciding(fig: go.Figure, rel_tol: float = COINCIDE_TOL) -> list[tuple[int, int, str]]:
    """Pairs of curves (positions in ``fig.data``, lower one first) drawn at the same x whose
    y values differ nowhere by more than ``rel_tol`` of their cell's y range (a cell whose
    curves are all flat and equal: identical values), with the cell's title. Deterministic:
    the same figure always gives the same pairs."""
    cells: dict[tuple[str, str], list[tuple[int, Any]]] = {}
    for i, t in curve_traces(fig):
        cells.setdefault((t.xaxis or "x", t.yaxis or "y"), []).append((i, t))
    titles = panel_titles(fig)
    everything: dict[tuple[str, str], list[np.ndarray]] = {}
    for t in fig.data:
        if t.type == "scatter" and (y := numeric(t.y)) is not None:
            everything.setdefault((t.xaxis or "x", t.yaxis or "y"), []).append(y)
    pairs = []
    for ref, traces in cells.items():
        span, log = _span(fig, ref[1], everything.get(ref, []))
        tol = rel_tol * span
        for k, (i, a) in enumerate(traces):
            xa, ya = numeric(a.x), numeric(a.y)
            for j, b in traces[k + 1 :]:
                xb = numeric(b.x)
                if len(xa) != len(xb) or not np.array_equal(xa, xb):
                    continue
                if _same(ya, numeric(b.y), tol, log):
                    pairs.append((i, j, titles.get(ref, ("", ""))[0]))
    return pairs


def _panel_tag(title: str) -> str:
    """A cell's short name in a note: its letter "(a)", else its title."""
    match = re.match(r"^\(([a-z]{1,2})\)", title or "")
    return f"({match.group(1)})" if match else (title or "")


def mark_coinciding(fig: go.Figure, rel_tol: float = COINCIDE_TOL) -> list[tuple[str, str, str]]:
    """Make the curves of ``fig`` that coincide (:func:`coinciding`) visible as two: their
    legend entries and hover texts say "identical to X" ("… in (a), (c)" when they coincide in
    some cells only), and where the two have the same dash pattern and the lower one shows no
    marker of its own (no markers, or at the same rounds as the upper's: a short run) each
    curve of the coinciding group gets markers at rounds of its own (:func:`_interleave`; a
    curve without a marker symbol gets one no curve of the figure has). Idempotent. Returns (lower label, upper label, cell title) per
    coinciding pair."""
    pairs = coinciding(fig, rel_tol)
    if not pairs:
        return []
    data = fig.data
    group = {i: (data[i].legendgroup or f"#{i}") for i, _ in curve_traces(fig)}
    cell_of = {i: (data[i].xaxis or "x", data[i].yaxis or "y") for i in group}
    titles = panel_titles(fig)
    shared: dict[tuple[str, str], set] = {}  # (group, group) -> cells where both are drawn
    for i, gi in group.items():
        for j, gj in group.items():
            if gi != gj and cell_of[i] == cell_of[j]:
                shared.setdefault((gi, gj), set()).add(cell_of[i])
    same: dict[tuple[str, str], set] = {}  # (group, group) -> cells where they coincide
    out = []
    for i, j, title in pairs:
        gi, gj = group[i], group[j]
        out.append((curve_label(data[i]), curve_label(data[j]), title))
        if gi == gj:
            continue
        same.setdefault((gi, gj), set()).add(cell_of[i])
        same.setdefault((gj, gi), set()).add(cell_of[i])
        for t, other in ((data[i], data[j]), (data[j], data[i])):
            note = f"{IDENTICAL} {curve_label(other)}"
            hover = t.hovertemplate
            if hover and note not in hover:
                at = hover.find("<extra>")
                t.hovertemplate = (
                    hover[:at] + f"<br>{note}" + hover[at:] if at >= 0 else f"{hover}<br>{note}"
                )
    for members in _clusters([(i, j) for i, j, _ in pairs if group[i] != group[j]]):
        hidden = any(
            _dash(data[i]) == _dash(data[j]) and not _marks(data[i]) - _marks(data[j])
            for n, i in enumerate(members)
            for j in members[n + 1 :]
        )
        if hidden:  # a lower curve would show nothing of its own
            _interleave(data, group, members)
    label_of: dict[str, str] = {}
    for i, g in group.items():
        label_of.setdefault(g, curve_label(data[i]))
    for g in dict.fromkeys(group.values()):
        parts = []
        for (a, h), cells in sorted(same.items(), key=lambda kv: label_of[kv[0][1]]):
            if a != g:
                continue
            text = label_of[h]
            if cells != shared.get((g, h), set()):  # not in every cell both are drawn in
                tags = [_panel_tag(titles.get(c, ("", ""))[0]) for c in cells]
                tags = sorted((t for t in tags if t), key=lambda t: (len(t), t))
                text += " in " + ", ".join(tags) if tags else ""
            parts.append(text)
        if not parts:
            continue
        more = f" and {len(parts) - 1} more" if len(parts) > 2 else ""  # the hover lists all
        note = f" — {IDENTICAL} " + ("; ".join(parts) if len(parts) <= 2 else parts[0] + more)
        for k, h in group.items():
            t = data[k]
            if h == g and t.showlegend is not False and f" — {IDENTICAL} " not in (t.name or ""):
                t.name = (t.name or "") + note
    return out


def _dash(trace) -> str:
    return trace.line.dash or "solid"


def _symbol(trace) -> str | None:
    symbol = trace.marker.symbol
    shown = trace.mode is None or "markers" in trace.mode
    return symbol if shown and isinstance(symbol, str) else None


def _clusters(pairs: list[tuple[int, int]]) -> list[list[int]]:
    """The groups of curves that coincide with one another (connected by ``pairs``), each in
    drawing order."""
    root: dict[int, int] = {}

    def find(i: int) -> int:
        while root.setdefault(i, i) != i:
            i = root[i]
        return i

    for i, j in pairs:
        root[find(j)] = find(i)
    out: dict[int, list[int]] = {}
    for i in sorted(root):
        out.setdefault(find(i), []).append(i)
    return list(out.values())


def _interleave(data, group: dict[int, str], members: list[int]) -> None:
    """Markers on the coinciding curves ``members`` (positions in ``data``, one cell, the same
    x) at rounds of their own: staggered sparse markers (as :func:`marker_rounds`) in a long
    run, else every k-th round for k curves; a curve of a group without markers gets a symbol
    that no curve of the figure has (on every trace of its group, markers hidden elsewhere, so
    that its legend entry shows it)."""
    used = {s for k in group if (s := _symbol(data[k]))}
    count, of = len(data[members[0]].x), len(members)
    if max(1, round(count / MARKERS_PER_CURVE)) >= of:
        spots = [marker_rounds(range(count), m, of) for m in range(of)]
    else:
        spots = [[n for n in range(count) if n % of == m] for m in range(of)]
    for k, where in zip(members, spots, strict=True):
        trace = data[k]
        if _symbol(trace) is None:
            symbol = next((s for s in SYMBOLS if s not in used), "circle")
            used.add(symbol)
            for m, g in group.items():
                if g == group[k] and _symbol(data[m]) is None:
                    _add_markers(data[m], symbol)
        size = round(3 * (trace.line.width or 2) + 2)
        trace.marker.size = [size if n in where else 0 for n in range(count)]


def _add_markers(trace, symbol: str) -> None:
    """``trace`` drawn with (so far invisible) markers of ``symbol`` in its line's colour."""
    trace.mode = "lines+markers" if trace.mode in (None, "lines") else f"{trace.mode}+markers"
    trace.marker.symbol = symbol
    trace.marker.size = [0] * len(trace.x)
    trace.marker.color = trace.marker.color or trace.line.color
    trace.marker.line = {"width": 1, "color": "white"}


def _marks(trace) -> set[int]:
    """The points of a curve that carry a marker (``draw_curve`` sizes the others 0)."""
    if trace.mode is not None and "markers" not in trace.mode:
        return set()
    size = trace.marker.size
    count = len(trace.x)
    if size is None or isinstance(size, int | float):
        return set(range(count)) if size != 0 else set()
    return {k for k, v in enumerate(size) if v}
