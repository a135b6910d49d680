"""A figure's plan: what a spec under a profile draws and runs, as one typed object.

:func:`figure_plan` is the one place a spec is expanded into trials for the commands: the sweep
driver (:mod:`fedsweep.sweep.runner`), ``fedsweep sweep --plan`` (:mod:`fedsweep.sweep.plan`),
the summary at the end of a sweep (:mod:`fedsweep.sweep.summary`), the figures and the report
(:mod:`dashboards.store`, :mod:`dashboards.build`) and the claim-robustness maps
(:mod:`dashboards.robustness`, ``fedsweep robustness``) all receive a :class:`FigurePlan` from it
instead of expanding the spec (and checking its data) each on its own. The plan holds the panels,
the curves, the trials (each with its validated config and config hash, in the order
:func:`fedsweep.specs.load.expand` gives them), the derived curves, the data substitutions and the
claims; :meth:`FigurePlan.with_data` adds the data check (fallbacks, skipped data sets),
:attr:`FigurePlan.fallback` is the same plan on the profile's ``data_fallback`` data sets (to
find the runs a fallback sweep made) and :meth:`FigurePlan.resolve` gives the derived trials
their real configs from their sources' runs (:func:`fedsweep.specs.derive.resolve`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fedsweep.specs.curves import CurveSpec
from fedsweep.specs.data_check import DataPlan, check_data
from fedsweep.specs.derive import Resolved, resolve
from fedsweep.specs.load import expand
from fedsweep.specs.model import PanelCell, SpecError, SweepSpec, Trial
from fedsweep.specs.regimes import regime_problems
from fedsweep.specs.search import (
    Lookup,
    SearchState,
    scheduler_problems,
    search_state,
    store_lookup,
)


@dataclass(frozen=True)
class FigurePlan:
    """What ``spec`` under ``profile`` draws and runs (build it with :func:`figure_plan`)."""

    spec: SweepSpec
    profile: str
    #: the overrides every trial carries: ``--set`` (and a sweep's ``data.root``)
    extra: Mapping[str, Any]
    #: ``--panel`` (axis -> values) as given to :func:`figure_plan`; None or {}: every panel
    panel_filter: Mapping[str, list[str]] | None
    #: the panel cells the profile runs (after ``panel_filter``), in the grid's order
    panels: tuple[PanelCell, ...]
    #: the curves the profile runs, in the spec's order (derived ones included)
    curves: tuple[CurveSpec, ...]
    #: panels x curves x seeds, each with its config and config hash; derived trials carry
    #: placeholders until :meth:`resolve` (``Trial.unresolved``)
    trials: tuple[Trial, ...]
    #: configured data set -> the one the trials run on instead ({}: none substituted)
    substitute: Mapping[str, str] = field(default_factory=dict)
    #: the data check (:meth:`with_data`): substitutions and skipped data sets; None: unchecked
    data: DataPlan | None = None

    @property
    def figure(self) -> str:
        return self.spec.figure

    @property
    def derived_curves(self) -> tuple[CurveSpec, ...]:
        """The curves whose settings come from another curve's runs (``derive:``)."""
        return tuple(c for c in self.curves if c.derive is not None)

    @property
    def claims(self) -> tuple[str, ...]:
        """The paper's claims the figure judges (the spec's ``claims``)."""
        return tuple(self.spec.claims)

    @property
    def config_hashes(self) -> list[str]:
        """The trials' config hashes, sorted (two plans with these equal run the same runs)."""
        return sorted(t.config_hash for t in self.trials)

    @property
    def runnable(self) -> list[Trial]:
        """The trials the data check kept (all of them when it has not run): those of a
        skipped data set, or skipped for their own data (leash data, weights), left out."""
        if self.data is None:
            return list(self.trials)
        return [
            t
            for t in self.trials
            if t.config.data.dataset not in self.data.skipped
            and (t.panel, t.curve, t.seed) not in self.data.skipped_trials
        ]

    def with_data(self, data_root: Path) -> FigurePlan:
        """This plan with its data checked as the sweep does (:func:`check_data`: every data set
        loads, else the profile's fallback or skip): the trials re-expanded on the substituted
        data sets. Raises the data error when the profile allows neither."""
        data = check_data(list(self.trials), self.spec, self.profile, data_root)
        trials = self.trials
        if data.substitute:
            trials = tuple(self._expand(data.substitute))
        return replace(self, trials=trials, substitute=dict(data.substitute), data=data)

    @functools.cached_property
    def fallback(self) -> FigurePlan | None:
        """The same trials on the profile's ``data_fallback`` data sets (trial ``i`` of both is
        the same panel, curve and seed), where a sweep that found a data set missing ran them;
        None when the profile has no fallback for the trials' data sets."""
        prof = self.spec.profiles[self.profile]
        substitute = {
            name: fb
            for name in {t.config.data.dataset for t in self.trials}
            if (fb := prof.fallback_for(name)) is not None
        }
        if not substitute:
            return None
        return replace(
            self, trials=tuple(self._expand(substitute)), substitute=substitute, data=None
        )

    def resolve(
        self,
        run_of: Callable[[str], str | None],
        client,
        trials: list[Trial] | tuple[Trial, ...] | None = None,
    ) -> Resolved:
        """``trials`` (this plan's, or some of them) with the derived ones given their real
        configs from their sources' runs (``run_of(config hash)``: a done run's id or None;
        ``client`` reads its history); see :func:`fedsweep.specs.derive.resolve`."""
        trials = list(self.trials if trials is None else trials)
        best = None
        if self.search_curves and any(t.derive is not None and t.derive.tuned for t in trials):
            best = self.search_state(store_lookup(client)).best
        return resolve(
            self.spec,
            self.profile,
            trials,
            run_of,
            client,
            extra=dict(self.extra),
            substitute=dict(self.substitute) or None,
            best=best,
        )

    @property
    def search_curves(self) -> tuple[CurveSpec, ...]:
        """The curves with a hyperparameter search (``search:``, :mod:`fedsweep.specs.search`)."""
        return tuple(c for c in self.curves if c.search is not None)

    def search_trials(self, points: Mapping[tuple[str, str], list[dict[str, Any]]]) -> list[Trial]:
        """The search trials of ``points`` (``(panel id, curve label) -> [point, ...]``),
        expanded as this plan's trials are (its ``--set``, data substitutions and panels)."""
        return expand(
            self.spec,
            self.profile,
            extra=dict(self.extra),
            substitute=dict(self.substitute) or None,
            panels=self.panel_filter,  # type: ignore[arg-type]
            search=dict(points),
        )

    def search_state(self, lookup: Lookup | None) -> SearchState:
        """Where this plan's searches stand against a store (``lookup``, e.g.
        :func:`fedsweep.specs.search.store_lookup`; None: nothing ran): the search trials asked
        so far, those without a run, and each finished search's best trial
        (:func:`fedsweep.specs.search.search_state`)."""
        cells = [cell.panel_id for cell in self.panels]
        return search_state(self.spec, self.profile, lookup, self.search_trials, cells)

    def _expand(self, substitute: Mapping[str, str]) -> list[Trial]:
        return expand(
            self.spec,
            self.profile,
            extra=dict(self.extra),
            substitute=dict(substitute),
            panels=self.panel_filter,  # type: ignore[arg-type]
        )


def figure_plan(
    spec: SweepSpec,
    profile: str,
    *,
    extra: Mapping[str, Any] | None = None,
    panels: Mapping[str, list[str]] | None = None,
    data_root: Path | None = None,
    seeds: list[int] | None = None,
) -> FigurePlan:
    """The plan of ``spec`` under ``profile``: its trials expanded with ``extra`` (``--set``,
    a sweep's ``data.root``; a bad key or value raises the spec's ``SpecError``), only the
    ``panels`` cells (``--panel``, checked), ``seeds`` instead of the profile's (``--seeds``:
    :meth:`SweepSpec.with_seeds`, the plan's ``spec`` is that one); with ``data_root``, its data
    checked too (:meth:`FigurePlan.with_data`). A profile that declares a regime less removed
    than the rule gives (:func:`fedsweep.specs.regimes.regime_problems`) raises ``SpecError``."""
    if seeds is not None:
        spec = spec.with_seeds(profile, seeds)
    extra = dict(extra or {})
    trials = expand(spec, profile, extra=extra, panels=panels)  # type: ignore[arg-type]
    problems = regime_problems(spec, _source(spec), [profile])
    problems += [f"{_source(spec)}: {p}" for p in scheduler_problems(spec, profile, trials)]
    if problems:
        raise SpecError(problems[0])
    plan = FigurePlan(
        spec,
        profile,
        extra,
        panels,
        tuple(spec.panel_cells(profile, only=panels)),  # type: ignore[arg-type]
        tuple(spec.profile_curves(profile)),
        tuple(trials),
    )
    return plan if data_root is None else plan.with_data(data_root)


def _source(spec: SweepSpec) -> str:
    """The spec's file name for a message (its figure id when it has no file)."""
    path = getattr(spec, "_path", None)
    return Path(path).name if path else f"{spec.figure}.yaml"
