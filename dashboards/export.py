"""Write figures as offline HTML (plotly.js shared beside them, no CDN) and as PNG, PDF and SVG
(kaleido; the format is the path's suffix, all images of a build in one browser start).

PNG export needs a Chrome/Chromium for kaleido 1.x. :func:`find_browser` looks, in order, at
``$BROWSER_PATH`` (the variable kaleido/choreographer honour; when set it must point to an
executable, nothing else is tried), then choreographer's own search: a browser downloaded by
``kaleido_get_chrome``, the executables ``chrome``/``chromium``/... on ``PATH``, and the usual
install paths (``/usr/bin/chromium`` for Debian's ``chromium`` package). The path found is
passed to kaleido explicitly; MathJax is disabled (it would come from a CDN) and plotly.js is
the copy shipped with plotly. Without a browser, or when the export fails, the HTML files stay,
ONE warning is emitted per call, and the build goes on.

What kaleido and choreographer log during an export (:data:`BROWSER_LOGGERS`) is kept from the
terminal (:func:`browser_logs`): choreographer logs, with a traceback, messages it could not
decode and then ignores, e.g. its own ``{bye}`` written to unblock the pipe while the browser
closes (choreographer 1.4). Every image is checked once the export returns (a non-empty file);
when one is missing, the warning names what was logged, one line per record, without the
traceback.

The HTML page fits the browser window (:func:`responsive`: no fixed width, Plotly's
``responsive`` config; the figure's height is kept), while images keep the figure's fixed,
paper-like size. :func:`curve_table` is every curve a figure draws as a table (written beside
the figure as ``<stem>.csv`` by ``dashboards.build``).
"""

from __future__ import annotations

import contextlib
import functools
import html
import logging
import os
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

from dashboards.style import PLOT_CONFIG, curve_label, curve_traces, numeric, panel_titles
from fedsweep.core import atomic

PNG_SCALE = 2
FALLBACK_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
BROWSER_LOGGERS = ("kaleido", "choreographer", "logistro")


class PngExportWarning(UserWarning):
    """PNG export was skipped or failed (the HTML files were written)."""


@dataclass(frozen=True)
class PngJob:
    figure: go.Figure
    path: Path


IMAGE_FORMATS = ("png", "pdf", "svg")
VIEWPORT = '<meta name="viewport" content="width=device-width, initial-scale=1">'
#: the columns of a figure's curve table (:func:`curve_table`)
CURVE_COLUMNS = ["panel", "y_axis", "curve", "legend", "x_axis", "x", "mean", "std", "n"]
HEADER_STYLE = "font-family:Arial,Helvetica,sans-serif;font-size:14px;margin:8px 12px;color:#444"
#: below this width (px) a figure's legend moves from the right of the panels to below them, so
#: the panels keep the window's width (issue 52: at 800 px a legend on the right squeezed a 3x3
#: grid until its panel titles and tick labels ran into each other)
NARROW_PX = 1100
#: the page script that does it, on load and on every resize (the original legend comes back
#: on a wide window); ``Plotly.relayout`` changes the page only, never the saved image
NARROW_SCRIPT = """<script>
(function () {
  var gd = document.querySelector('.plotly-graph-div');
  if (!gd || !window.Plotly) { return; }
  var saved = null, state = null;
  function fit() {
    if (!gd.layout) { return; }
    if (saved === null) {
      saved = {legend: JSON.parse(JSON.stringify(gd.layout.legend || {})),
               bottom: (gd.layout.margin || {}).b};
    }
    var narrow = gd.clientWidth < NARROW_PX;
    if (narrow === state) { return; }
    state = narrow;
    if (narrow) {
      // below everything: the container's bottom, in a margin tall enough for its rows
      var rows = (gd.data || []).filter(function (t) { return t.showlegend !== false; }).length;
      Plotly.relayout(gd, {'legend.orientation': 'h', 'legend.x': 0, 'legend.xanchor': 'left',
                           'legend.yref': 'container', 'legend.y': 0, 'legend.yanchor': 'bottom',
                           'margin.b': 70 + 24 * Math.min(rows, 12)});
    } else {
      Plotly.relayout(gd, {legend: saved.legend, 'margin.b': saved.bottom});
    }
  }
  window.addEventListener('load', fit);
  window.addEventListener('resize', fit);
})();
</script>""".replace("NARROW_PX", str(NARROW_PX))


class OutputFolderError(ValueError):
    """An output folder that is a file, or cannot be created or written (exit 2 in the CLI)."""


def output_folder(path: str | Path, option: str = "--out") -> Path:
    """``path`` as an output folder, created if missing; raises :class:`OutputFolderError`
    naming ``option`` for an existing file there or a folder that cannot be created or
    written."""
    from fedsweep.core.atomic import unsafe_folder_problem

    unsafe = unsafe_folder_problem(path, option)  # too long a name, /, a system folder
    if unsafe:
        raise OutputFolderError(unsafe)
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputFolderError(
            f"{option} {path}: is a file, not a folder; name a folder for the outputs"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputFolderError(
            f"{option} {path}: cannot create the folder ({err.strerror or err})"
        ) from None
    if not os.access(path, os.W_OK):
        raise OutputFolderError(f"{option} {path}: the folder is not writable")
    return path


def responsive(fig: go.Figure) -> tuple[go.Figure, dict]:
    """A copy of ``fig`` for a web page, and its Plotly config: no fixed width (the figure
    fills the window and follows its resizing: ``autosize`` and ``responsive``), the height
    kept; the camera button still saves an image at the figure's own size."""
    page = go.Figure(fig)
    width, height = fig.layout.width, fig.layout.height
    page.update_layout(width=None, autosize=True)
    image = dict(PLOT_CONFIG.get("toImageButtonOptions", {}))
    if width:
        image.update(width=width, height=height or 700)
    return page, {**PLOT_CONFIG, "responsive": True, "toImageButtonOptions": image}


def reload_tag(seconds: int | None) -> str:
    """The ``<meta>`` that reloads a page every ``seconds`` (a live figure); "" for None."""
    return f'<meta http-equiv="refresh" content="{int(seconds)}">' if seconds else ""


def write_html(
    fig: go.Figure,
    path: Path,
    title: str,
    links: list[tuple[str, str]] | None = None,
    reload_s: int | None = None,
) -> Path:
    """Offline HTML that fits the browser window (:func:`responsive`); ``plotly.min.js`` is
    written once beside it (``include_plotlyjs="directory"``). ``links`` = (text, url) shown in
    a line above the figure (the index, the MLflow experiment). Both files are written
    atomically (:mod:`fedsweep.core.atomic`): a build killed halfway leaves the previous file,
    never a truncated one. ``reload_s``: the page reloads itself that often (a live figure)."""
    import plotly.io as pio

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    page, config = responsive(fig)
    height = f"{int(fig.layout.height)}px" if fig.layout.height else "100vh"
    text = pio.to_html(
        page,
        include_plotlyjs="directory",
        config=config,
        full_html=True,
        default_width="100%",
        default_height=height,
    )
    text = text.replace("<head>", f"<head>\n    <title>{html.escape(title)}</title>", 1)
    text = text.replace("<head>", f"<head>\n    {VIEWPORT}", 1)
    if reload_s:
        text = text.replace("<head>", f"<head>\n    {reload_tag(reload_s)}", 1)
    if links:
        items = " · ".join(
            f'<a href="{html.escape(url)}">{html.escape(label)}</a>' for label, url in links
        )
        text = text.replace("<body>", f'<body>\n<div style="{HEADER_STYLE}">{items}</div>', 1)
    if fig.layout.showlegend is not False:
        text = text.replace("</body>", f"{NARROW_SCRIPT}\n</body>", 1)
    write_plotlyjs(path.parent)
    atomic.write_text(path, text)
    return path


def write_plotlyjs(folder: Path) -> Path:
    """``folder/plotly.min.js`` (the bundle shipped with plotly), written when missing or not
    the bundle's size (a copy cut short by an older, non-atomic build)."""
    path = Path(folder) / "plotly.min.js"
    if not (path.is_file() and path.stat().st_size == _plotlyjs_size()):
        atomic.write_bytes(path, _plotlyjs())
    return path


def _plotlyjs() -> bytes:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().encode("utf-8")


@functools.cache
def _plotlyjs_size() -> int:
    return len(_plotlyjs())


def _executable(path: str | None) -> bool:
    return bool(path) and Path(path).is_file() and os.access(path, os.X_OK)


def find_browser() -> str | None:
    """The Chrome/Chromium kaleido should use, or None (see the module docstring)."""
    env = os.environ.get("BROWSER_PATH")
    if env:
        return env if _executable(env) else None
    try:
        from choreographer.browsers.chromium import Chromium

        found = Chromium.find_browser(skip_local=False)
        if _executable(found):
            return found
    except Exception:  # noqa: BLE001 - best effort; fall back to PATH
        pass
    for name in FALLBACK_NAMES:
        found = shutil.which(name)
        if _executable(found):
            return found
    return None


@contextlib.contextmanager
def browser_logs() -> Iterator[list[logging.LogRecord]]:
    """The records (WARNING and above) :data:`BROWSER_LOGGERS` log inside the block, kept in
    the list yielded instead of reaching the root logger's handlers (the terminal)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(logging.WARNING)
    loggers = [logging.getLogger(name) for name in BROWSER_LOGGERS]
    propagate = [log.propagate for log in loggers]
    for log in loggers:
        log.addHandler(keep)
        log.propagate = False
    try:
        yield records
    finally:
        for log, was in zip(loggers, propagate, strict=True):
            log.removeHandler(keep)
            log.propagate = was


def _record_line(record: logging.LogRecord) -> str:
    line = f"{record.name}: {record.getMessage()}"
    if record.exc_info and record.exc_info[1] is not None:
        err = record.exc_info[1]
        cause = err.__cause__ or err.__context__
        line += f" ({type(err).__name__}{f': {cause}' if cause else ''})"
    return line


def write_pngs(jobs: list[PngJob]) -> dict[Path, bool]:
    """Render all ``jobs`` (PNG, PDF or SVG, by the path's suffix) with one browser start;
    returns path -> written. Warns once. Each image is rendered to a temporary file beside its
    path and renamed into place once complete (:mod:`fedsweep.core.atomic`): an export that fails
    or is killed halfway leaves the previous image as it was, never a 0-byte file."""
    if not jobs:
        return {}
    done = {job.path: False for job in jobs}
    browser = find_browser()
    if browser is None:
        where = os.environ.get("BROWSER_PATH")
        why = (
            f"BROWSER_PATH={where!r} is not an executable" if where else "no Chrome/Chromium found"
        )
        _warn(
            f"PNG/PDF/SVG export skipped ({why}); HTML written. Install chromium or set "
            "BROWSER_PATH."
        )
        return done
    parts: dict[Path, Path] = {}  # final path -> its temporary file
    logged: list[logging.LogRecord] = []
    try:
        try:
            import kaleido

            specs = []
            for job in jobs:
                job.path.parent.mkdir(parents=True, exist_ok=True)
                layout = job.figure.layout
                fmt = job.path.suffix.lstrip(".").lower()
                if fmt not in IMAGE_FORMATS:
                    raise ValueError(f"{job.path}: image format {fmt!r}; allowed {IMAGE_FORMATS}")
                opts = {
                    "format": fmt,
                    "width": layout.width or 1200,
                    "height": layout.height or 700,
                    "scale": PNG_SCALE if fmt == "png" else 1,
                }
                part = parts[job.path] = atomic.part_path(job.path)
                specs.append({"fig": job.figure, "path": part, "opts": opts})
            with browser_logs() as logged:
                errors = kaleido.write_fig_from_object_sync(
                    specs, kopts={"path": browser, "mathjax": False}, cancel_on_error=False
                )
        except Exception as err:  # noqa: BLE001 - PNG must never break the build
            said = "".join(f"; {_record_line(r)}" for r in logged[:2])
            _warn(
                f"PNG export failed with {browser}: {type(err).__name__}: {err}{said}; "
                "HTML written."
            )
            return done
        write_errors = []
        for path, part in parts.items():
            if part.is_file() and part.stat().st_size > 0:
                try:
                    atomic.commit(part, path)
                    done[path] = True
                except OSError as err:
                    write_errors.append(str(err))
    finally:
        for part in parts.values():
            part.unlink(missing_ok=True)
    failed = [p.name for p, ok in done.items() if not ok]
    if failed:
        detail = "; ".join(
            str(e) for e in [*(errors or ())[:2], *write_errors[:2], *map(_record_line, logged[:2])]
        )
        _warn(f"PNG export failed for {', '.join(failed)} ({detail}); HTML written.")
    return done


def _warn(message: str) -> None:
    warnings.warn(message, PngExportWarning, stacklevel=3)


def curve_table(fig: go.Figure) -> pd.DataFrame:
    """Every curve ``fig`` draws, one row per point: its cell's title (``panel``, "" for a
    figure of one cell) and y axis title, the curve's label and legend text, the x axis title,
    x (the round, for curves over rounds), the plotted value (``mean``: the seed mean, or what
    the cell draws, e.g. a difference from a baseline) and, for curves drawn by
    ``style.draw_curve``, the std over seeds and the seed count ``n`` (empty otherwise). Bands,
    heatmaps and tables are not curves; points drawn without lines are."""
    titles = panel_titles(fig)
    rows = []
    for _, t in curve_traces(fig, lines_only=False):
        x, y = numeric(t.x), numeric(t.y)
        cell = (t.xaxis or "x", t.yaxis or "y")
        panel, y_title = titles.get(cell, ("", ""))
        x_title = fig.layout[f"xaxis{cell[0][1:]}"].title.text or ""
        extra = _std_n(t.customdata, len(x))
        for k in range(len(x)):
            std, n = extra[k]
            rows.append((panel, y_title, curve_label(t), t.name or "", x_title, x[k], y[k], std, n))
    table = pd.DataFrame(rows, columns=CURVE_COLUMNS)
    if not table.empty and (table["x"] == table["x"].round()).all():
        table["x"] = table["x"].astype(int)  # rounds
    return table


def _std_n(customdata, count: int) -> list[tuple[float | None, int | None]]:
    """(std, n) per point from ``style.draw_curve``'s customdata (band, n, std), else Nones."""
    rows = list(customdata) if customdata is not None else []
    out: list[tuple[float | None, int | None]] = []
    for k in range(count):
        row = rows[k] if k < len(rows) else None
        if isinstance(row, str | bytes) or not hasattr(row, "__len__") or len(row) != 3:
            out.append((None, None))
            continue
        try:
            out.append((float(row[2]), int(row[1])))
        except (TypeError, ValueError, IndexError):
            out.append((None, None))
    return out


def curves_csv(fig: go.Figure) -> str | None:
    """:func:`curve_table` as CSV text (floats written exactly), None when ``fig`` draws no
    curve."""
    table = curve_table(fig)
    if table.empty:
        return None
    table["n"] = table["n"].astype("Int64")
    return table.to_csv(index=False)
