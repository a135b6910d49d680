"""Derived curves: settings computed from the finished runs of another curve of the same spec.

A paper's baselines are often defined by its own method's runs (FedVeca: FedAvg and FedNova run
``round(mean τ)`` local steps of the matching FedVeca run, Centralized SGD its total number of
local iterations). A curve with ``derive: {from: <label>, set: {key: <derivation>}}`` names
its source curve; each of its trials reads the source trial's run (same panel cell, same seed)
from MLflow and sets ``key`` to the derivation's value. The sweep runs the source trials first
(stage 0), then resolves and runs the derived ones (stage 1, :mod:`fedsweep.sweep.runner`); the
figures resolve them the same way (:func:`resolve`) to find their runs by config hash.

The derivations themselves (:data:`~fedsweep.specs.derivations.DERIVATIONS`, small functions of
one :class:`~fedsweep.specs.derivations.SourceRun`) live in :mod:`fedsweep.specs.derivations`,
below the spec modules; this module sits above them (it re-expands a spec with the computed
values), so the imports run one way: derivations <- spec <- derive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fedsweep.specs.derivations import DERIVATIONS, Resolution, SourceRun, TrialKey
from fedsweep.specs.load import SweepSpec, Trial, expand
from fedsweep.specs.search import TUNED, Best


def trial_key(trial: Trial) -> TrialKey:
    return (trial.panel_id, trial.curve, trial.seed)


def source_of(trial: Trial, trials: list[Trial]) -> Trial | None:
    """The trial ``trial`` derives from: same panel cell and seed, the source curve's label."""
    if trial.derive is None:
        return None
    want = (trial.panel_id, trial.derive.from_, trial.seed)
    return next((t for t in trials if trial_key(t) == want), None)


def overrides_from(trial: Trial, source: SourceRun) -> dict[str, Any]:
    """The config overrides of ``trial``'s ``derive.set``: each derivation computed from
    ``source``, literals as they are."""
    assert trial.derive is not None
    return {
        key: DERIVATIONS[value](source) if isinstance(value, str) else value
        for key, value in trial.derive.set.items()
    }


@dataclass
class Resolved:
    """The outcome of :func:`resolve`."""

    #: the trials in their order, derived ones with their real values where they could be
    #: resolved (the others keep their placeholders, ``Trial.unresolved``)
    trials: list[Trial]
    #: (derived trial, its source trial or None) for each derived trial whose source has no run
    missing: list[tuple[Trial, Trial | None]]

    @property
    def derived(self) -> list[Trial]:
        """The resolved derived trials (what the sweep's second stage runs)."""
        return [t for t in self.trials if t.derive is not None and not t.unresolved]


def resolve(
    spec: SweepSpec,
    profile: str,
    trials: list[Trial],
    run_of: Callable[[str], str | None],
    client,
    *,
    extra: dict[str, Any] | None = None,
    substitute: dict[str, str] | None = None,
    best: Mapping[tuple[str, str], Best] | None = None,
) -> Resolved:
    """Resolve the derived trials among ``trials`` (an ``expand(spec, profile, extra=...,
    substitute=...)``, possibly filtered) from their sources' runs.

    ``run_of(config_hash)`` is the run id of a finished or diverged run with that hash, or None
    (the runner's ``finished_runs``, or a figure's run index); ``client`` reads the histories.
    Re-expands with the computed values (real configs, real config hashes).

    A tuned curve's trials (``derive.set: {key: tuned}``) take ``best[(panel id, source
    label)]``'s point (:class:`fedsweep.specs.search.Best`, the finished search's best trial);
    a search not finished leaves them unresolved, in ``missing`` without a source trial."""
    values: Resolution = {}
    missing: list[tuple[Trial, Trial | None]] = []
    sources: dict[str, SourceRun] = {}  # one history read per source run
    for trial in trials:
        if trial.derive is None:
            continue
        if trial.derive.tuned:
            found = (best or {}).get((trial.panel_id, trial.derive.from_))
            if found is None:
                missing.append((trial, None))
                continue
            overrides = {
                k: found.point[k] if v == TUNED else v for k, v in trial.derive.set.items()
            }
            values[trial_key(trial)] = (overrides, [found.run_id])
            continue
        src = source_of(trial, trials)
        run_id = None
        for digest in src.hashes if src is not None else ():  # its hash, else its legacy hash
            run_id = run_id or run_of(digest)
        if src is None or run_id is None:
            missing.append((trial, src))
            continue
        source = sources.setdefault(run_id, SourceRun(client, run_id, src.curve, src.config))
        values[trial_key(trial)] = (overrides_from(trial, source), [run_id])
    if not values:
        return Resolved(list(trials), missing)
    again = expand(spec, profile, extra=extra, substitute=substitute, derived=values)
    by_id = {t.trial_id: t for t in again}
    out = [by_id[t.trial_id] if trial_key(t) in values else t for t in trials]
    return Resolved(out, missing)
