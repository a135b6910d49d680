"""Plain data types shared by the builders, the claim checks, the export and the index, and a
curve's typed run config (:func:`curve_config`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from fedsweep.judge.verdicts import ClaimVerdict
from fedsweep.specs.figure import FigurePlan
from fedsweep.specs.load import SweepSpec


@dataclass(frozen=True)
class FigureOptions:
    """How to draw (never which runs): the band, a baseline to subtract, the metrics to plot.

    ``band``: "std" (±1 sample std over seeds, default), "sem" (±1 standard error) or "none".
    ``diff_from``: a curve label; every curve is drawn minus that curve's seed mean, per panel
    and round (the baseline becomes the zero line). ``metrics``: metric keys to draw instead of
    the spec's ``metrics`` (e.g. ``client/{i}/dist`` for Fig. 4d's ÷k_i form)."""

    band: str = "std"
    diff_from: str | None = None
    metrics: tuple[str, ...] = ()
    #: the pages reload themselves every ``reload_s`` seconds (``fedsweep figures --watch``,
    #: while runs finish); None: static pages
    reload_s: int | None = None


@dataclass
class BuildContext:
    """Everything a figure builder needs: the MLflow client, the spec and the run index."""

    client: Any
    spec: SweepSpec
    profile: str
    index: Any  # store.RunIndex
    overrides: dict[str, Any] = field(default_factory=dict)
    options: FigureOptions = field(default_factory=FigureOptions)
    #: the figure's plan under ``profile`` and ``overrides`` (``build_figures`` builds it once,
    #: checking the overrides); None: :func:`fedsweep.judge.store.resolve_runs` builds it
    plan: FigurePlan | None = None

    def metrics(self, default: list[str] | tuple[str, ...] | None = None) -> list[str]:
        """The metric keys to draw: ``options.metrics``, else ``default``, else the spec's."""
        if self.options.metrics:
            return list(self.options.metrics)
        return list(default if default is not None else self.spec.metrics)


class FigureDataError(Exception):
    """The runs of a figure lack what it is drawn from (e.g. Fig. 4a-c's selection records):
    the message names the runs and what each lacks. The figure fails (exit 1) and nothing is
    drawn over the previous build's files. ``runs``/``expected_runs``: the runs found."""

    def __init__(self, message: str, runs: int = 0, expected_runs: int = 0):
        super().__init__(message)
        self.runs = runs
        self.expected_runs = expected_runs


@dataclass
class FigureResult:
    """What a builder produced: the figure (None without runs) and its bookkeeping.

    A builder that draws several figures (Fig. 2a: one for the loss, one for the accuracy) puts
    them in ``parts`` (file suffix -> figure, written as ``<id>-<suffix>.html``/``.png``);
    ``figure`` is then the first part."""

    figure_id: str
    title: str
    profile: str
    figure: go.Figure | None
    seeds: list[int]
    expected_seeds: list[int]
    runs: int
    expected_runs: int
    profile_note: str = ""
    data_note: str = ""
    #: the figure's claims judged (``fedsweep.judge.judge``, by ``build_figures``)
    claims: list[ClaimVerdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seed_counts: list[int] = field(default_factory=list)  # seeds found per (panel, curve)
    html: Path | None = None
    png: Path | None = None
    error: str | None = None
    parts: dict[str, go.Figure] = field(default_factory=dict)
    #: every file written for the figure (HTML, PNG, PDF, SVG of each part)
    files: list[Path] = field(default_factory=list)
    experiment_url: str = ""
    #: the command that serves ``experiment_url`` when no MLflow UI was known to serve the
    #: store as the figure was drawn (``tracking.store.ui_open_hint``), else ""
    experiment_hint: str = ""
    band: str = "std"
    #: extra text files written beside the figure: file suffix -> content, written as
    #: ``<id>.<suffix>`` (e.g. ``{"csv": ..., "tex": ...}`` for a table figure); listed in
    #: ``files`` once written
    texts: dict[str, str] = field(default_factory=dict)
    #: a figure that failed: the previous build's files, left as they were (listed in the index)
    kept: list[Path] = field(default_factory=list)
    #: Markdown blocks for the reproduction report beside the claims (e.g. FedWalk's Table 2
    #: beside the paper's printed numbers)
    report_tables: list[str] = field(default_factory=list)
    #: per (claim id, regime): the claim under each labelled reading of the paper the spec
    #: declares (:func:`dashboards.readings.reading_rows`), the ``readings`` of its JSON row
    readings: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    #: every claim judged (``fedsweep.judge.FigureVerdicts``); ``claims`` lists its verdicts
    verdicts: Any = field(default=None, repr=False)

    def stems(self) -> list[tuple[str, go.Figure]]:
        """(file stem, figure) of every figure to write: ``<id>`` or ``<id>-<suffix>``s."""
        if self.figure is None:
            return []
        if self.parts:
            return [(f"{self.figure_id}-{k}", f) for k, f in self.parts.items()]
        return [(self.figure_id, self.figure)]

    @property
    def run_count(self) -> int:
        """Runs found (alias of ``runs``, used by the CLI)."""
        return self.runs

    @property
    def missing(self) -> int:
        return self.expected_runs - self.runs

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        if self.runs == 0:
            return "no runs"
        return "partial" if self.missing else "complete"

    @property
    def seed_count(self) -> str:
        """Seeds per curve, e.g. "3" or "2–3" when some curves lack seeds."""
        counts = self.seed_counts or ([len(self.seeds)] if self.seeds else [0])
        lo, hi = min(counts), max(counts)
        return str(hi) if lo == hi else f"{lo}–{hi}"
