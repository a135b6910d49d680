"""The data step every builder shares: resolve runs, load metrics, aggregate, count seeds."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go

from dashboards import store
from dashboards.model import BuildContext, FigureResult
from dashboards.style import subtitle
from fedsweep.config.schema import RunConfig
from fedsweep.judge.panels import Panel, panels_of
from fedsweep.judge.runs import ClaimData, aggregate, config_of, curve_configs
from fedsweep.judge.store import (
    Resolution,
    diverged_rounds,
    load_metrics,
    loss_blowups,
    resolve_runs,
)
from fedsweep.specs.figure import figure_plan
from fedsweep.specs.load import CurveSpec

#: what a cell without runs says
NO_RUNS = "no runs"
#: ... when the sweep left its panel out (``fedsweep sweep --panel``)
NOT_SWEPT = "not run at this profile"


@dataclass
class FigureData:
    """Runs, metric histories and seed-aggregated curves of one figure."""

    resolution: Resolution
    long: pd.DataFrame
    agg: pd.DataFrame
    diverged: dict[tuple[str, str], list[tuple[int, int]]]
    panels: list[Panel]
    #: data sets the latest sweep could not run ("cifar10 panels not run: ...")
    skipped_note: str = ""
    #: what is drawn (``agg``, or ``agg`` minus a baseline curve: :func:`diff_from`); the claim
    #: checks always use ``agg``
    view: pd.DataFrame | None = None
    #: the baseline curve subtracted in ``view`` (None: raw values)
    baseline: str | None = None
    #: (panel_id, curve) -> [(seed, tag text)] of finished runs whose loss blew up (finite)
    blowups: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    #: curve label -> the typed config its runs ran with (``fedsweep.judge.runs.curve_configs``)
    configs: dict[str, RunConfig] = field(default_factory=dict, repr=False)
    #: the latest sweep's ``--panel`` filter (axis -> values; {} = every panel was swept)
    panel_filter: dict[str, list[str]] = field(default_factory=dict)

    def config(self, curve: CurveSpec) -> RunConfig:
        """The typed run config of ``curve``'s runs (``ClaimData.config``)."""
        return config_of(curve, self.configs)

    @property
    def data_note(self) -> str:
        """Fallback data sets used, data sets not run and panels not swept, "" when none."""
        notes = [self.resolution.data_note, self.skipped_note]
        unswept = [p.label for p in self.panels if self.not_swept(p.panel_id)]
        if unswept:
            flt = " ".join(f"--panel {k}={','.join(v)}" for k, v in self.panel_filter.items())
            notes.append(
                f"{len(unswept)} of {len(self.panels)} panels not run at this profile "
                f"(the sweep ran {flt})"
            )
        return "; ".join(n for n in notes if n)

    def not_swept(self, panel_id: str) -> bool:
        """A panel without runs that the latest sweep's ``--panel`` filter left out."""
        if not self.panel_filter or self.has_runs(panel_id):
            return False
        panel = next((p for p in self.panels if p.panel_id == panel_id), None)
        if panel is None:
            return False
        return not all(
            str(panel.values.get(axis)) in values for axis, values in self.panel_filter.items()
        )

    def empty_text(self, panel_id: str) -> str:
        """What a cell without runs says: "not run at this profile" (left out by ``--panel``)
        or "no runs"."""
        return NOT_SWEPT if self.not_swept(panel_id) else NO_RUNS

    def has_runs(self, panel_id: str) -> bool:
        return any(tr.trial.panel_id == panel_id for tr in self.resolution.found)

    def seeds_of(self, panel_id: str, curve: str) -> int:
        return sum(
            1
            for tr in self.resolution.found
            if tr.trial.panel_id == panel_id and tr.trial.curve == curve
        )

    def counts(self, curve: str) -> list[int]:
        """Seed counts of ``curve`` in each panel where it has runs."""
        counts = [self.seeds_of(p.panel_id, curve) for p in self.panels]
        return [c for c in counts if c] or [0]

    def diverged_rounds(self, curve: str) -> list[int]:
        return [r for (_, c), runs in self.diverged.items() if c == curve for _, r in runs]

    def blowup_count(self, curve: str) -> int:
        return sum(len(runs) for (_, c), runs in self.blowups.items() if c == curve)

    def table(self, panel_id: str, curve: str, metric: str) -> pd.DataFrame:
        """Rows of one drawn curve (the ``view``: raw, or minus the baseline)."""
        a = self.agg if self.view is None else self.view
        return a[(a["panel_id"] == panel_id) & (a["curve"] == curve) & (a["metric"] == metric)]

    def claim_data(self, curves: list[CurveSpec], target: float | None = None) -> ClaimData:
        """The claim checks' view: seed means, per-run histories, and the profile's target."""
        runs: dict[tuple[str, str], int] = {}
        for tr in self.resolution.found:
            key = (tr.trial.panel_id, tr.trial.curve)
            runs[key] = runs.get(key, 0) + 1
        return ClaimData(
            self.agg,
            curves,
            self.panels,
            self.diverged,
            self.blowups,
            runs,
            target=target,
            long=self.long,
            configs=self.configs,
        )

    def all_seed_counts(self) -> list[int]:
        keys = {(tr.trial.panel_id, tr.trial.curve) for tr in self.resolution.found}
        return sorted(self.seeds_of(p, c) for p, c in keys)


def prepare(ctx: BuildContext, keys: list[str]) -> FigureData:
    """Resolve the figure's trials to runs (by config hash) and load ``keys`` for them."""
    plan = ctx.plan or figure_plan(ctx.spec, ctx.profile, extra=ctx.overrides)
    res = resolve_runs(ctx.spec, ctx.profile, ctx.index, ctx.overrides, ctx.client, plan=plan)
    long = load_metrics(ctx.client, res.found, keys)
    return FigureData(
        res,
        long,
        aggregate(long),
        diverged_rounds(long, res.found),
        panels_of(ctx.spec, ctx.profile),
        store.skipped_data_note(ctx.client, ctx.spec.figure, ctx.profile) if res.missing else "",
        blowups=loss_blowups(res.found),
        configs=curve_configs(plan),
        panel_filter=(
            store.panel_filter(ctx.client, ctx.spec.figure, ctx.profile) if res.missing else {}
        ),
    )


def diff_from(agg: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Every curve minus ``baseline``'s seed mean, per (panel, metric, round); the std and n of
    each curve are kept (its band is its own spread around the difference). Rounds where the
    baseline has no value are dropped; panels without the baseline are dropped."""
    if agg.empty:
        return agg
    if baseline not in set(agg["curve"]):
        raise ValueError(
            f"--diff-from {baseline!r}: no such curve with data; curves: "
            f"{', '.join(sorted(set(agg['curve'])))}"
        )
    keys = ["panel_id", "metric", "round"]
    base = agg[agg["curve"] == baseline][[*keys, "mean"]].rename(columns={"mean": "base"})
    out = agg.merge(base, on=keys, how="inner")
    out["mean"] = out["mean"] - out["base"]
    return out.drop(columns="base")[list(agg.columns)].reset_index(drop=True)


def figure_subtitle(ctx: BuildContext, data: FigureData) -> str:
    """Profile note, the ``--set`` overrides and the data note in bold, the missing-run count,
    the baseline and the band when not the default."""
    res = data.resolution
    note = f"<b>{data.data_note}</b>" if data.data_note else ""
    miss = f"{len(res.missing)} of {len(res.trials)} runs missing" if res.missing else ""
    band = {"std": "", "sem": "bands ±1 standard error", "none": "no bands"}[ctx.options.band]
    diff = f"<b>difference from {data.baseline}</b>" if data.baseline else ""
    sets = ", ".join(f"{k}={v}" for k, v in ctx.overrides.items())
    sets = f"<b>runs with --set {sets}</b>" if sets else ""
    return subtitle(ctx.spec.profiles[ctx.profile].note, sets, note, miss, diff, band)


def make_result(
    ctx: BuildContext,
    data: FigureData,
    figure: go.Figure | None,
    *,
    notes: list[str] | None = None,
    parts: dict[str, go.Figure] | None = None,
) -> FigureResult:
    """Bookkeeping common to all builders (seed/run counts, notes). Nothing here judges: the
    claims are judged from the figure's plan and runs by ``build_figures``
    (:func:`fedsweep.judge.judge`), whatever a builder draws."""
    spec, res = ctx.spec, data.resolution
    expected_seeds = sorted({t.seed for t in res.trials})
    notes = list(notes or [])
    for (panel, curve), runs in sorted(data.diverged.items()):
        for seed, r in runs:
            notes.append(f"{curve} [{panel}] seed {seed} diverged at round {r}")
    for (panel, curve), runs in sorted(data.blowups.items()):
        for seed, text in runs:
            notes.append(f"{curve} [{panel}] seed {seed} loss blew up (finite): {text}")
    return FigureResult(
        figure_id=spec.figure,
        title=spec.title,
        profile=ctx.profile,
        figure=figure if res.found else None,
        seeds=res.seeds,
        expected_seeds=expected_seeds,
        runs=len(res.found),
        expected_runs=len(res.trials),
        profile_note=spec.profiles[ctx.profile].note,
        data_note=data.data_note,
        notes=notes,
        seed_counts=data.all_seed_counts(),
        parts=dict(parts or {}) if res.found else {},
        band=ctx.options.band,
    )
