"""Comparisons that cannot differ (issue 51, item 5): two sides that computed the same thing.

A claim that compares FedNova with FedAvg where every client takes the same number of local
steps, BHerd at α = 1 with FedAvg under the reading without 1/α, or two configs that differ
only in a setting their components never read, compares a computation with itself: whatever
the interval says, it is no evidence about the claim. The typed configs catch the plainest case
(identical configs: :mod:`fedsweep.judge.claim`); the runs catch every other one, whatever made the
two computations equal: the two sides' per-run histories agree on every seed and round to float
rounding (:data:`TOLERANCE`; two computations that differ in anything that matters, one
learning-rate step or one sample, differ by many orders of magnitude more after a few rounds).

:func:`same_computation` says so in words for a pair of curves of one panel; the judge then
names the part ``degenerate`` and leaves it out of the verdict.
"""

from __future__ import annotations

import math

#: largest relative difference of two runs' values that still counts as the same computation
#: (float64 rounding of a different order of the same operations: about 1e-16 per operation)
TOLERANCE = 1e-12
#: the metrics compared (every run logs them every round); a metric neither curve has is skipped
METRICS = ("test_loss", "test_acc")


def same_computation(data, panel: str, a: str, b: str, metrics=METRICS) -> str | None:
    """Why curves ``a`` and ``b`` of ``panel`` are the same computation (each of ``metrics``
    has equal histories, to :data:`TOLERANCE`, on every seed both have, at every round), or
    None (they differ somewhere, or share no seed with a history). ``data``: a
    :class:`fedsweep.judge.runs.ClaimData` with its per-run histories."""
    if a == b:
        return f"{a!r} is compared with itself"
    found = largest_difference(data, panel, a, b, TOLERANCE, metrics)
    if found is None:
        return None
    worst, seeds, rounds, compared = found
    return (
        f"{a!r} and {b!r} computed the same {' and '.join(compared)} on every seed and round "
        f"(largest relative difference {worst:.1g} over {seeds} seeds, {rounds} values): the "
        "comparison cannot differ"
    )


def largest_difference(
    data, panel: str, a: str, b: str, tolerance: float, metrics=METRICS
) -> tuple[float, int, int, list[str]] | None:
    """``(largest relative difference, seeds, values, metrics compared)`` of curves ``a`` and
    ``b`` of ``panel`` when every value of ``metrics`` on every seed both have, at every round,
    is within ``tolerance`` of the other's (relative); None when one is not, or they share no
    seed with a history."""
    worst, rounds, seeds, compared = 0.0, 0, 0, []
    for metric in metrics:
        runs_a = data.seed_series(panel, a, metric, mark=False)
        runs_b = data.seed_series(panel, b, metric, mark=False)
        if not runs_a and not runs_b:
            continue
        common = sorted(set(runs_a) & set(runs_b))
        if not common:
            return None
        for seed in common:
            x, y = runs_a[seed], runs_b[seed]
            if len(x) < 2 or not x.index.equals(y.index):
                return None
            for u, v in zip(x.to_numpy(dtype=float), y.to_numpy(dtype=float), strict=True):
                scale = max(abs(u), abs(v), math.ulp(1.0))
                worst = max(worst, abs(u - v) / scale)
                if worst > tolerance:
                    return None
            rounds += len(x)
        seeds = max(seeds, len(common))
        compared.append(metric)
    if not compared:
        return None
    return worst, seeds, rounds, compared
