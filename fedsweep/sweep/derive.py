"""Derived curves: settings computed from the finished runs of another curve of the same spec.

A paper's baselines are often defined by its own method's runs (FedVeca: FedAvg and FedNova run
``round(mean τ)`` local steps of the matching FedVeca run, Centralized SGD its total number of
local iterations). A curve with ``derive: {from: <label>, set: {key: <derivation>}}`` names
its source curve; each of its trials reads the source trial's run (same panel cell, same seed)
from MLflow and sets ``key`` to the derivation's value. The sweep runs the source trials first
(stage 0), then resolves and runs the derived ones (stage 1, :mod:`fedsweep.sweep.runner`); the
figures resolve them the same way (:func:`resolve`) to find their runs by config hash.

Derivations are small functions of one source run (:class:`SourceRun`) returning a Python int,
registered in :data:`DERIVATIONS` by the name a spec uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # spec.py imports this module: no runtime import back
    from fedsweep.config.schema import RunConfig
    from fedsweep.sweep.spec import SweepSpec, Trial

#: FedVeca's per-round metric ``Σ_i τ_{k,i}`` (fedsweep/algorithms/fedveca.py logs it)
TAU_TOTAL = "tau_total"
#: the value a derivation stands for while its source run is unknown (spec validation, counts);
#: a trial carrying it never runs and its config hash is marked (``UNRESOLVED`` prefix)
PLACEHOLDER = 1
UNRESOLVED = "unresolved:"


class DerivationError(ValueError):
    """A derivation that cannot be computed from its source run (e.g. a metric it never logged).

    Not a ``SpecError`` (spec.py imports this module); the runner re-raises it as one, naming
    the spec file, so the CLI prints one message."""


@dataclass
class SourceRun:
    """The finished (or diverged) run of a derived trial's source trial."""

    client: Any  # an MlflowClient on the sweep's store
    run_id: str
    label: str  # the source curve's label, for messages
    config: RunConfig  # the source trial's config (what the run ran)
    _histories: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def history(self, metric: str) -> list[float]:
        """The per-round values of ``metric`` in round order (one per round: a step logged
        twice, e.g. by a resumed run, counts once). Raises :class:`DerivationError` when the run
        has none."""
        if metric not in self._histories:
            by_step = {m.step: m.value for m in self.client.get_metric_history(self.run_id, metric)}
            if not by_step:
                raise DerivationError(
                    f"{self.label} run {self.run_id} has no `{metric}` history, which its "
                    f"derived curves need (is its step policy one that logs `{metric}`, e.g. "
                    "step_policy: fedveca?)"
                )
            self._histories[metric] = [by_step[k] for k in sorted(by_step)]
        return self._histories[metric]


def total_steps(source: SourceRun) -> int:
    """``S = Σ_k Σ_i τ_{k,i}``: every local iteration of the run (Centralized SGD's budget)."""
    return math.floor(sum(source.history(TAU_TOTAL)) + 0.5)


def mean_tau(source: SourceRun) -> int:
    """``round(S / (K N))``, half up: the mean local steps per client and round (FedAvg's and
    FedNova's fixed τ); K = rounds in the history, N = ``data.num_clients``."""
    taus = source.history(TAU_TOTAL)
    return math.floor(sum(taus) / (len(taus) * source.config.data.num_clients) + 0.5)


Derivation = Callable[[SourceRun], int]
#: the derivations a spec's ``derive.set`` may name
DERIVATIONS: dict[str, Derivation] = {"mean_tau": mean_tau, "total_steps": total_steps}

#: (panel id, curve label, seed) of a derived trial
TrialKey = tuple[str, str, int]
#: per derived trial: (overrides, source run ids), what ``spec.expand(derived=...)`` takes
Resolution = dict[TrialKey, tuple[dict[str, Any], list[str]]]


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
) -> Resolved:
    """Resolve the derived trials among ``trials`` (an ``expand(spec, profile, extra=...,
    substitute=...)``, possibly filtered) from their sources' runs.

    ``run_of(config_hash)`` is the run id of a finished or diverged run with that hash, or None
    (the runner's ``finished_runs``, or a figure's run index); ``client`` reads the histories.
    Re-expands with the computed values (real configs, real config hashes)."""
    from fedsweep.sweep.spec import expand

    values: Resolution = {}
    missing: list[tuple[Trial, Trial | None]] = []
    sources: dict[str, SourceRun] = {}  # one history read per source run
    for trial in trials:
        if trial.derive is None:
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
