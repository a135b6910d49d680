"""Plain data types shared by the builders, the claim checks, the export and the index, and a
curve's typed run config (:func:`curve_config`)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import plotly.graph_objects as go

from fedsweep.config.hashing import drop_unused
from fedsweep.config.load import build_config, set_dotted
from fedsweep.config.schema import RunConfig
from fedsweep.specs.figure import FigurePlan
from fedsweep.specs.load import CurveSpec, SweepSpec
from fedsweep.specs.regimes import panel_regimes

#: "supported"/"contradicted"/"inconclusive": a 95% interval over seeds against a declared
#: threshold (``dashboards.verdicts``); "not-testable": these runs cannot test the claim (a
#: scaled regime, too few rounds, diverged runs); "n/a": no data or no criterion
Verdict = Literal["supported", "contradicted", "inconclusive", "not-testable", "n/a"]


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


@dataclass(frozen=True)
class Panel:
    """One cell of a spec's panel grid: its id (as in ``Trial.panel_id``), label and values."""

    panel_id: str
    label: str
    values: dict[str, Any] = field(default_factory=dict)
    #: the regime its runs are in at the profile (``fedsweep.specs.model.Regime``): paper,
    #: reconstructed, truncated or scaled; None: not declared (and no paper profile to rule by)
    regime: Any = None


def panels_of(spec: SweepSpec, profile: str | None = None) -> list[Panel]:
    """The spec's panels in grid order, labelled as the spec says ("Case 1", "CNN, MNIST", ...).

    ``values`` holds the axis values (a named axis gives its choice id) and the config overrides
    of the cell (e.g. ``data.partition``, ``model.name``); ``regime`` its regime by the rule
    (:func:`fedsweep.specs.regimes.panel_regimes`: a profile that runs fewer rounds than the
    paper profile is ``truncated`` whatever it declares)."""
    regimes = panel_regimes(spec, profile)
    return [
        Panel(
            cell.panel_id,
            cell.label,
            {**cell.overrides, **dict(cell.pairs)},
            regimes.get(cell.panel_id),
        )
        for cell in spec.panel_cells(profile)
    ]


def run_base(
    spec: SweepSpec, profile: str | None = None, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The config tree a curve's overrides apply to (:func:`curve_config`): the spec's
    ``base`` under the overrides of its first panel (of ``profile``'s panels), as the sweep
    layers them (``fedsweep.specs.load.expand``: panels, then the curve); with ``overrides``
    (a figure drawn under ``--set``: a labelled reading such as ``bherd.scale=one_over_alpha``)
    on top, so that a claim's guards read the method its runs ran (a curve that sets one of
    these keys itself keeps its own value here)."""
    tree = copy.deepcopy(spec.base)
    for key, value in spec.panel_cells(profile)[0].overrides.items():
        set_dotted(tree, key, value)
    for key, value in (overrides or {}).items():
        set_dotted(tree, key, value)
    return tree


_CONFIGS: dict[str, RunConfig] = {}


def curve_config(curve: CurveSpec, base: Mapping[str, Any] | None = None) -> RunConfig:
    """The typed run config of ``curve``: the config tree ``base`` (:func:`run_base`; None: the
    defaults) under the curve's own overrides (``curve.set``), every other field its default,
    the sections the curve's components do not read back at their defaults (as the sweep runs
    it). The profile's and ``--set`` layers are not applied: they scale a sweep's runs, a
    curve's parameters are the spec's. Cached by (base, overrides)."""
    key = json.dumps([base or {}, curve.set], sort_keys=True, default=repr)
    if key not in _CONFIGS:
        config = build_config(
            dict(base or {}),
            curve.set,
            source=f"curve {curve.label!r}",
            files=False,
            unused="keep",
        )
        _CONFIGS[key] = drop_unused(config)
    return _CONFIGS[key]


@dataclass
class ClaimCheck:
    """A paper claim, the computed verdict, the numbers behind it and the criterion used."""

    claim: str
    verdict: Verdict
    numbers: str
    criterion: str = ""
    #: what the index shows instead of the bare verdict, e.g. "not testable at this profile (T=3)"
    label: str = ""
    #: the statistics behind a statistical verdict, one dict per panel (``claims.evidence_row``)
    evidence: tuple = ()
    #: the declared regime of the panels this check judged ("paper", "reconstructed: ...",
    #: "scaled: ..."); "" when the profile declares none
    regime: str = ""
    #: a declared claim's id (``fedsweep.specs.claims.Claim``); "": a legacy prose claim
    id: str = ""
    #: a declared claim's words and where they stand; "": the registry's ``PAPER_WORDS``
    words: str = ""
    #: a declared claim's ``paper_effect`` (``fedsweep.specs.claims.PaperEffect``), or None
    paper: Any = None
    #: the parts whose two sides are the same computation ("Case 1 · FedNova: ..."): named,
    #: not counted toward the verdict (issue 51, item 5)
    degenerate: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        return self.label or self.verdict


@dataclass
class BuildContext:
    """Everything a figure builder needs: the MLflow client, the spec and the run index."""

    client: Any
    spec: SweepSpec
    profile: str
    index: Any  # store.RunIndex
    overrides: dict[str, Any] = field(default_factory=dict)
    options: FigureOptions = field(default_factory=FigureOptions)
    #: normalized claim text -> criterion (``dashboards.registry.CRITERIA``, passed in by
    #: ``build_figures``): how ``figdata.make_result`` checks the spec's claims; a claim
    #: without one is "n/a" ("no criterion defined")
    criteria: Mapping[str, Any] = field(default_factory=dict)
    #: the figure's plan under ``profile`` and ``overrides`` (``build_figures`` builds it once,
    #: checking the overrides); None: :func:`dashboards.store.resolve_runs` builds it
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
    claims: list[ClaimCheck] = field(default_factory=list)
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
    #: per (claim, regime): the claim under each labelled reading of the paper the spec
    #: declares (:func:`dashboards.readings.reading_rows`), the ``readings`` of its JSON row
    readings: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)

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
