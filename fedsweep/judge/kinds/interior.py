"""``interior_optimum``: the best inner point of the grid ``over`` beats both ends, per seed."""

from __future__ import annotations

import math

from fedsweep.judge.kinds.common import NO_SEEDS, advantage, effects, ordered, rank, values
from fedsweep.judge.measures import MEASURES


def interior(claim, comp, data, panel, m, mine, theirs):
    grid = [c for _, c in ordered(comp, data, mine)]
    if comp.tune is not None:
        return _tuned_interior(claim, comp, data, panel, m, grid)
    if len(grid) < 3:
        return None
    ev = rank(data, panel, m, grid[1:-1], [grid[0], grid[-1]], {}, claim.after)
    return None if ev is None else [("inner − ends", ev)]


def _tuned_interior(claim, comp, data, panel, m, grid):
    """``interior_optimum`` with ``tune``: over the grid points with runs (at least three), the
    inner one with the best seed mean of ``tune.by`` against each end, paired by seed."""
    grid = [c for c in grid if m.fn(data, panel, c, claim.after, mark=False)]
    if len(grid) < 3:
        return None
    by = MEASURES[comp.tune.by]

    def mean(label: str) -> float:
        got = by.fn(data, panel, label, claim.after, mark=False)
        return math.fsum(got.values()) / len(got) if got else math.nan

    pick = min if by.lower_is_better else max
    peak = pick(grid[1:-1], key=mean)
    kind = "faster" if m.lower_is_better else "higher"
    out = []
    for end in (grid[0], grid[-1]):
        a = values(data, panel, end, m, None, claim.after)
        b = values(data, panel, peak, m, None, claim.after)
        seeds = set(a) & set(b)
        ev = effects({s: advantage(m, kind, a[s], b[s]) for s in seeds})
        out.append((f"{peak} − {end}", ev or NO_SEEDS, None if ev else "no common seed"))
    return out
