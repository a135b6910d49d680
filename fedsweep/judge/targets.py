"""Rounds to reach a target accuracy (McMahan et al.'s Table 2 form), shared by the intro
figures' builders and claim criteria.

A curve *reaches* the target at the first logged round whose value (the seed-mean test
accuracy, as every criterion reads) is at least the target (1e-12 slack for float
representation). A curve that never does within its last logged round ``T`` is "not reached
within T": its rounds are only known to be more than ``T``, so :attr:`Reach.low` is ``T + 1``
(a lower bound) and :attr:`Reach.high` is infinite. The speed-up of a curve over a baseline is
``rounds(baseline) / rounds(curve)`` (McMahan: over FedSGD); with a baseline not reached it is a
lower bound ("≥ 8.2×"), with the curve not reached it is unknown ("—").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

EPS = 1e-12  # = claims.EPS


@dataclass(frozen=True)
class Reach:
    """When a curve reached the target: ``rounds`` (None: not within ``horizon``)."""

    rounds: int | None
    horizon: int  # T: the curve's last logged round

    @property
    def reached(self) -> bool:
        return self.rounds is not None

    @property
    def low(self) -> float:
        """The fewest rounds it can have taken: ``rounds``, or ``T + 1`` when not reached."""
        return float(self.rounds) if self.rounds is not None else float(self.horizon + 1)

    @property
    def high(self) -> float:
        """The most rounds it can have taken: ``rounds``, or infinity when not reached."""
        return float(self.rounds) if self.rounds is not None else math.inf

    @property
    def text(self) -> str:
        """``"12"`` or ``"> 40 (not reached)"``."""
        return str(self.rounds) if self.rounds is not None else f"> {self.horizon} (not reached)"

    @property
    def short(self) -> str:
        """``"12"`` or ``"> 40"``."""
        return str(self.rounds) if self.rounds is not None else f"> {self.horizon}"


def rounds_to_target(series: pd.Series, target: float) -> Reach | None:
    """The first round (``series``' index) whose value is ≥ ``target``; None for an empty
    series. Non-finite values never reach."""
    s = series.sort_index()
    s = s[s.map(lambda v: math.isfinite(float(v)))]
    if not len(s):
        return None
    hit = s[s >= target - EPS]
    horizon = int(s.index.max())
    return Reach(int(hit.index[0]) if len(hit) else None, horizon)


@dataclass(frozen=True)
class SpeedUp:
    """``rounds(base) / rounds(curve)``; ``value`` is exact, or a lower bound (``bound``), or
    None when the curve did not reach the target."""

    value: float | None
    bound: bool = False

    @property
    def text(self) -> str:
        if self.value is None:
            return "—"
        return f"{'≥ ' if self.bound else ''}{self.value:.1f}×"


def speedup(base: Reach, curve: Reach) -> SpeedUp:
    """Speed-up of ``curve`` over ``base`` (McMahan's "speed-up over FedSGD")."""
    if not curve.reached:
        return SpeedUp(None)
    return SpeedUp(base.low / curve.low, bound=not base.reached)


def target_text(target: float) -> str:
    """``0.99`` -> ``"99%"``, ``0.975`` -> ``"97.5%"``."""
    return f"{100 * target:g}%"
