"""Observers of a run: everything that watches the loop, and may end it or add metrics, is a list
of these passed to ``run_federated`` (pfl-research's ``TrainingProcessCallback`` shape:
``after_central_iteration -> (stop, metrics)``): the divergence watch, the blow-up watch, MLflow
logging, checkpoints, the progress line.

The loop calls, in list order: ``on_round(t, metrics, result)`` after every round with plain
floats, which may return an :class:`Action` (metrics to add, seen by the observers after it and
logged with the round; ``stop`` to end the run after this round, with ``status``);
``on_end(result)`` once the loop ends normally (finished, stopped early or diverged);
``on_abort(kind)`` when an exception leaves the loop (``"killed"`` for KeyboardInterrupt,
``"failed"`` otherwise), before it propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class Action:
    """What an observer asks of the loop after a round."""

    #: end the run after this round
    stop: bool = False
    #: the run's status when ``stop``: ``finished`` (stopped early: its rounds are its result) or
    #: ``diverged``
    status: str = "finished"
    #: metrics to add to the round's (plain floats)
    metrics: dict[str, float] = field(default_factory=dict)


class Observer:
    def on_round(self, t: int, metrics: dict[str, float], result) -> Action | None:
        return None

    def on_end(self, result) -> None:
        pass

    def on_abort(self, kind: str) -> None:
        pass


class OnRound(Observer):
    """A plain ``fn(t, metrics, result)`` as an observer (its return value is the action)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def on_round(self, t, metrics, result) -> Action | None:
        out = self.fn(t, metrics, result)
        return out if isinstance(out, Action) else None


def as_observers(items) -> list[Observer]:
    return [o if isinstance(o, Observer) else OnRound(o) for o in items if o is not None]


class DivergenceWatch(Observer):
    """Ends the run as ``diverged`` at the first round whose model or a metric is not finite.
    An estimate (a component's ``diagnostics``, e.g. FedVeca's β) may be non-finite: it is
    logged and its component handles it."""

    def __init__(self, model: Callable[[], torch.Tensor], diagnostics: set[str]) -> None:
        self.model, self.diagnostics = model, diagnostics

    def on_round(self, t, metrics, result) -> Action | None:
        watched = (v for k, v in metrics.items() if k.rsplit("/", 1)[-1] not in self.diagnostics)
        if all_finite(self.model()) and all(np.isfinite(v) for v in watched):
            return None
        return Action(stop=True, status="diverged")


def all_finite(w: torch.Tensor) -> bool:
    """Whether every entry of ``w`` is finite: a finite sum ``w.sum()`` means
    every entry is finite (an inf or NaN entry makes it inf or NaN); a non-finite sum may also be
    an overflow of finite entries, so then the entries are tested one by one. One pass over
    ``w`` instead of ``isfinite(w).all()``'s several (44 ms a round for ResNet-18's 11.2M
    parameters, measured on 2 cores; the sum 1 ms)."""
    return bool(torch.isfinite(w.sum())) or bool(torch.isfinite(w).all())
