"""The derivations a derived curve may name (``derive: {from: <label>, set: {key: <name>}}``,
:mod:`fedsweep.specs.derive`): small functions of one source run (:class:`SourceRun`) returning a
Python int, registered in :data:`DERIVATIONS` by the name a spec uses.

The bottom of the spec layer's imports: the spec types (:mod:`fedsweep.specs.curves`) check
derivation names against :data:`DERIVATIONS`, and nothing here imports a spec module.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedsweep.config.schema import RunConfig

#: FedVeca's per-round metric ``Σ_i τ_{k,i}`` (logged by
#: fedsweep/components/step_policies/fedveca.py)
TAU_TOTAL = "tau_total"
#: the value a derivation stands for while its source run is unknown (spec validation, counts);
#: a trial carrying it never runs and its config hash is marked (``UNRESOLVED`` prefix)
PLACEHOLDER = 1
UNRESOLVED = "unresolved:"


class DerivationError(ValueError):
    """A derivation that cannot be computed from its source run (e.g. a metric it never logged).

    Not a ``SpecError`` (the spec modules import this one); the runner re-raises it as one,
    naming the spec file, so the CLI prints one message."""


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
#: per derived trial: (overrides, source run ids), what ``load.expand(derived=...)`` takes
Resolution = dict[TrialKey, tuple[dict[str, Any], list[str]]]
