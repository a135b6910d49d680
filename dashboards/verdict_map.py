"""The verdict map of ``fedsweep robustness`` (issue 35): a figure's claims x the values of one
config axis, each cell the verdict (supported / contradicted / inconclusive / not-testable) with
the effect and 95% interval of the claim's least favourable panel (named when the claim is
judged on several) and its seeds; ★ marks the value the profile runs as configured.

:class:`VerdictMap` is the table (rows: :class:`MapRow`, one per claim and regime; columns:
:class:`Column`, one per :class:`AxisValue`; cells: :class:`Cell`), as Markdown, JSON and a
Plotly table. :func:`write_map` writes ``<out>/<figure>--<key>.md`` (the table, a one-line
legend and the command that made it), ``.json`` (the same, as data), ``.html`` and ``.png``
(cells coloured per verdict as the index colours them; the PNG best effort). A claim not
testable in any column (e.g. the claims of the panels a ``--panel`` filter left out) is no row:
it is listed under the table with its reason. :func:`report_section` is the reproduction
report's "Claim robustness" section: the maps of ``<report dir>/robustness/`` for a paper's
figures at the report's profile (``dashboards.report.write_report`` appends it).

Built by :func:`dashboards.robustness.build_map`; this module imports neither the report nor the
figure builder (the report imports it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from fedsweep.core import atomic
from fedsweep.judge.stats import INTERVAL_METHOD

#: the folder of the maps beside the reproduction reports (``docs/reproduction/robustness``)
ROBUSTNESS_DIR = "robustness"
#: marks the column of the value the profile runs as configured
STAR = "★"
#: a map file's marker (its JSON), so :func:`load_maps` reads only maps
MAP_KEY = "fedsweep_verdict_map"
#: (fill, text) colour per verdict: those of the index's and the report's verdict classes
#: (``dashboards.index.CSS``: .yes, .no, .inc, .na)
VERDICT_COLORS = {
    "supported": ("#d9f2d9", "#11621a"),
    "contradicted": ("#f9d6d5", "#9c1c14"),
    "inconclusive": ("#fbefd0", "#7a5300"),
    "not-testable": ("#ececec", "#666666"),
}
ERROR_COLORS = ("#ffffff", "#9c1c14")
#: the longest reason a cell shows (the full text is in the JSON's ``why`` and ``numbers``)
REASON_CHARS = 120
LEGEND = (
    "Each cell: the verdict when every run has `{key}` = the column's value, the effect "
    "[{interval}] of the claim's least favourable panel (named when there are several) and its "
    "seeds; {star} = the value the `{profile}` profile runs as configured."
)


@dataclass(frozen=True)
class AxisValue:
    """One column: the value as typed (``1e-5``) and as the ``--set`` override it becomes."""

    text: str
    value: Any


@dataclass
class Cell:
    """One claim at one axis value: its verdict and the statistics of its headline panel."""

    verdict: str
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    seeds: int = 0
    #: the headline (least favourable) panel, "" when the claim is judged on one panel
    panel: str = ""
    why: str = ""
    numbers: str = ""
    #: every panel's evidence row (``claims.evidence_row``)
    panels: list[dict[str, Any]] = field(default_factory=list)

    def statistic(self) -> str:
        """``0.012 [−0.004, 0.028], 3 seeds (Case 2)``, after the reason of a not-testable
        cell (``4 of 4 runs diverged; 0 [0, 0], 2 seeds``); the reason alone for a cell without
        an effect."""
        reason = self.reason()
        if self.effect is None:
            return reason or self.censored() or "–"
        text = f"{effect_text(self.effect, self.ci_low, self.ci_high)}, {self.seeds} seed{'s' * (self.seeds != 1)}"
        if self.panel:
            text += f" ({self.panel})"
        return f"{reason}; {text}" if reason and self.verdict == "not-testable" else text

    def censored(self) -> str:
        """Why a claim measured in rounds-to-a-level has no effect: some seed never reached the
        level (``claims.evidence_row``'s ``censored``), with the seeds; "" otherwise."""
        for row in self.panels:
            if row.get("censored"):
                seeds = len(row.get("seeds") or ()) or self.seeds
                return f"no effect: {row['censored']}; {seeds} seed{'s' * (seeds != 1)}"
        return ""

    def reason(self) -> str:
        """Why the claim is not testable (or what else its verdict says), in a few words:
        ``4 of 4 runs diverged (4 of them finite loss blow-ups)``."""
        why = re.sub(r"^\[[^\]]*\] ", "", self.why)  # a regime group's "[scaled regime: ...] "
        why = why.split("; ")[0]
        for lead in ("not testable at this profile: ", "not testable: "):
            why = why.removeprefix(lead)
        return why if len(why) <= REASON_CHARS else why[: REASON_CHARS - 1].rstrip() + "…"


@dataclass
class MapRow:
    """One claim (in one regime) across the columns."""

    claim: str
    regime: str
    cells: list[Cell | None]  # None: the figure had no such row at that value (it failed)

    @property
    def testable(self) -> bool:
        return any(c is not None and c.verdict != "not-testable" for c in self.cells)

    def name(self, split: bool) -> str:
        """The claim, with its regime's kind when the figure judges regimes apart."""
        return f"{self.claim} [{self.regime.split(':')[0]}]" if split else self.claim


@dataclass
class Column:
    """What the figure found at one axis value."""

    value: AxisValue
    configured: bool
    runs: int = 0
    expected_runs: int = 0
    seeds: list[int] = field(default_factory=list)
    status: str = ""
    error: str | None = None

    def label(self, key: str) -> str:
        return f"{key}={self.value.text}" + (f" {STAR}" if self.configured else "")


@dataclass
class VerdictMap:
    """Claims x axis values of one figure at one profile."""

    figure: str
    title: str
    profile: str
    key: str
    columns: list[Column]
    rows: list[MapRow]
    command: str = ""
    panels: str = ""  # the --panel filter as typed ("" = every panel)
    date: str = ""

    @property
    def stem(self) -> str:
        return f"{self.figure}--{self.key}"

    @property
    def shown(self) -> list[MapRow]:
        """The rows testable in at least one column."""
        return [r for r in self.rows if r.testable]

    @property
    def untestable(self) -> list[MapRow]:
        return [r for r in self.rows if not r.testable]

    @property
    def split(self) -> bool:
        """Whether some claim has rows in several regimes (then the rows name the regime)."""
        claims = [r.claim for r in self.rows]
        return len(set(claims)) < len(claims)

    def cell(self, row: MapRow, i: int) -> tuple[str, str]:
        """(verdict, statistic) of ``row`` at column ``i`` (an error or a missing row says so)."""
        col, cell = self.columns[i], row.cells[i]
        if col.error:
            return "error", "the figure failed to build"
        if cell is None:
            return "–", "no such row at this value"
        return cell.verdict, cell.statistic()

    # ------------------------------------------------------------------------ Markdown
    def markdown(self, heading: str = "#", link_prefix: str = "", png: bool = True) -> str:
        """The map as Markdown: a heading, the legend, the table, the rows not testable at any
        value, the command. ``link_prefix``: where the PNG is, relative to the Markdown file."""
        where = f", panels {self.panels}" if self.panels else ""
        lines = [
            f"{heading} {self.figure} over `{self.key}` ({self.profile} profile{where})",
            "",
            f"{self.title}. "
            + LEGEND.format(
                key=self.key, interval=INTERVAL_METHOD, star=STAR, profile=self.profile
            ),
            "",
            "| claim | " + " | ".join(c.label(self.key) for c in self.columns) + " |",
            "|---|" + "---|" * len(self.columns),
        ]
        for row in self.shown:
            cells = []
            for i in range(len(self.columns)):
                verdict, stat = self.cell(row, i)
                cells.append(f"**{verdict}** {stat}")
            lines.append(f"| {_md(row.name(self.split))} | " + " | ".join(map(_md, cells)) + " |")
        runs = [
            f"{c.runs} of {c.expected_runs}" + (f" ({c.error.splitlines()[0]})" if c.error else "")
            for c in self.columns
        ]
        lines.append("| *runs found* | " + " | ".join(map(_md, runs)) + " |")
        if not self.shown:
            lines += ["", "No claim is testable at any of these values."]
        for row in self.untestable:
            why = next((c.reason() for c in row.cells if c is not None and c.why), "")
            if self.panels and all(c is None or not c.panels for c in row.cells):
                why = f"its panels were not run: --panel {self.panels}"
            lines += [
                "",
                f"Not testable at any value: *{row.name(self.split)}*"
                + (f" ({why})" if why else ""),
            ]
        if png:
            lines += ["", f"![{self.stem}]({link_prefix}{self.stem}.png)"]
        if self.command:
            made = f"Made by `{self.command}`" + (f" on {self.date}" if self.date else "")
            lines += ["", made + "."]
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------------ data
    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["stem"] = self.stem
        data["interval"] = INTERVAL_METHOD
        data[MAP_KEY] = 1
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VerdictMap:
        columns = [
            Column(**{**c, "value": AxisValue(**c["value"])}) for c in data.get("columns", [])
        ]
        rows = [
            MapRow(
                r["claim"],
                r.get("regime", ""),
                [None if c is None else Cell(**c) for c in r.get("cells", [])],
            )
            for r in data.get("rows", [])
        ]
        return cls(
            data["figure"],
            data.get("title", ""),
            data["profile"],
            data["key"],
            columns,
            rows,
            data.get("command", ""),
            data.get("panels", ""),
            data.get("date", ""),
        )

    # ------------------------------------------------------------------------ figure
    def plotly(self) -> go.Figure:
        """The map as a Plotly table, each cell coloured per verdict (the index's colours)."""
        rows = self.shown
        header = ["claim", *(c.label(self.key) for c in self.columns)]
        values: list[list[str]] = [[_wrap(r.name(self.split), 34) for r in rows]]
        fills: list[list[str]] = [["#ffffff"] * len(rows)]
        fonts: list[list[str]] = [["#222222"] * len(rows)]
        for i in range(len(self.columns)):
            texts, fill, font = [], [], []
            for row in rows:
                verdict, stat = self.cell(row, i)
                colors = VERDICT_COLORS.get(verdict, ERROR_COLORS)
                texts.append(f"<b>{verdict}</b><br>{_wrap(stat, 30)}")
                fill.append(colors[0])
                font.append(colors[1])
            values.append(texts)
            fills.append(fill)
            fonts.append(font)
        lines = [max(v.count("<br>") + 1 for v in row) for row in zip(*values, strict=True)]
        height = 150 + 19 * sum(lines) + 14 * len(rows)
        width = 320 + 250 * len(self.columns)
        fig = go.Figure(
            go.Table(
                columnwidth=[320, *([250] * len(self.columns))],
                header={
                    "values": [f"<b>{h}</b>" for h in header],
                    "fill_color": "#f6f6f6",
                    "align": "left",
                    "font": {"size": 14, "color": "#222"},
                    "height": 32,
                },
                cells={
                    "values": values,
                    "fill_color": fills,
                    "font": {"size": 13, "color": fonts},
                    "align": "left",
                    "height": 30,
                },
            )
        )
        where = f", panels {self.panels}" if self.panels else ""
        fig.update_layout(
            title={
                "text": f"{self.figure}: claims over {self.key} ({self.profile}{where})",
                "subtitle": {
                    "text": f"{STAR} = as configured; cell: verdict, effect [95% CI], seeds",
                    "font": {"size": 13, "color": "#555"},
                },
                "font": {"size": 18},
            },
            font={"family": "Arial, Helvetica, sans-serif"},
            margin={"l": 20, "r": 20, "t": 80, "b": 20},
            width=width,
            height=max(height, 260),
            paper_bgcolor="white",
        )
        return fig


def _md(text: str) -> str:
    """A Markdown table cell: no pipes, no line breaks."""
    return text.replace("|", "\\|").replace("\n", " ")


def _wrap(text: str, width: int) -> str:
    """``text`` in lines of about ``width`` characters joined by ``<br>`` (a Plotly table)."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join([*lines, line]) if line or lines else ""


def effect_text(effect: float | None, low: float | None, high: float | None) -> str:
    """``0.012 [-0.004, 0.028]`` as the reproduction report prints an effect and its interval
    (``dashboards.report._effect``): "–" without an effect, "(no interval)" without one."""
    if effect is None:
        return "–"
    if low is None:
        return f"{effect:.4g} (no interval)"
    return f"{effect:.4g} [{low:.4g}, {high:.4g}]"


def write_map(vmap: VerdictMap, out_dir: str | Path, png: bool = True) -> list[Path]:
    """``<out_dir>/<figure>--<key>.md``, ``.json``, ``.html`` and (best effort, ``png``)
    ``.png``, each written atomically; returns the files written."""
    from dashboards.export import PngJob, output_folder, write_html, write_pngs

    out = output_folder(out_dir)
    atomic.remove_stale_parts(out)
    stem = vmap.stem
    files = []
    fig = vmap.plotly()
    files.append(write_html(fig, out / f"{stem}.html", f"{vmap.figure}: claims over {vmap.key}"))
    image = out / f"{stem}.png"
    drawn = png and write_pngs([PngJob(fig, image)]).get(image, False)
    if drawn:
        files.append(image)
    has_png = drawn or image.is_file()
    files.append(atomic.write_text(out / f"{stem}.md", vmap.markdown(png=has_png)))
    text = json.dumps(vmap.to_json(), indent=1, ensure_ascii=False, allow_nan=False)
    files.insert(0, atomic.write_text(out / f"{stem}.json", text + "\n"))
    return files


# ------------------------------------------------------------------------------ the report
def load_maps(folder: str | Path) -> list[VerdictMap]:
    """The verdict maps of ``folder`` (its ``*.json`` map files, by name); [] without any."""
    maps = []
    for path in sorted(Path(folder).glob("*--*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get(MAP_KEY):
            maps.append(VerdictMap.from_json(data))
    return maps


def report_section(out_dir: str | Path, profile: str, figures: Iterable[str]) -> str:
    """The reproduction report's "Claim robustness" section for ``figures`` (in their order):
    each map of ``<out_dir>/robustness/`` of one of them at ``profile``, its table embedded
    and its PNG linked; "" when there is none."""
    folder = Path(out_dir) / ROBUSTNESS_DIR
    order = {fid: i for i, fid in enumerate(figures)}
    maps = [m for m in load_maps(folder) if m.figure in order and m.profile == profile]
    if not maps:
        return ""
    maps.sort(key=lambda m: (order[m.figure], m.key, m.panels))
    lines = [
        "",
        "## Claim robustness",
        "",
        "Each figure's claims judged again along one more setting (`fedsweep robustness`): "
        f"one column per value, {STAR} = the value the profile runs.",
    ]
    for m in maps:
        has_png = (folder / f"{m.stem}.png").is_file()
        lines += ["", m.markdown("###", f"{ROBUSTNESS_DIR}/", png=has_png).rstrip("\n")]
    return "\n".join(lines) + "\n"
