"""Observers of a run: everything that watches the loop without changing it (MLflow logging,
the progress line, checkpoints, best-metric or blow-up tracking) is a list of these, passed to
``run_federated`` (pfl-research's callbacks, not closures nested in each other).

The loop calls, in list order: ``on_round(t, metrics, result)`` after every round with plain
floats; ``on_end(result)`` once the loop ends normally (finished or diverged);
``on_abort(kind)`` when an exception leaves the loop (``"killed"`` for KeyboardInterrupt,
``"failed"`` otherwise), before it propagates.
"""

from __future__ import annotations

from collections.abc import Callable


class Observer:
    def on_round(self, t: int, metrics: dict[str, float], result) -> None:
        pass

    def on_end(self, result) -> None:
        pass

    def on_abort(self, kind: str) -> None:
        pass


class OnRound(Observer):
    """A plain ``fn(t, metrics, result)`` as an observer."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def on_round(self, t, metrics, result) -> None:
        self.fn(t, metrics, result)


def as_observers(items) -> list[Observer]:
    return [o if isinstance(o, Observer) else OnRound(o) for o in items if o is not None]
