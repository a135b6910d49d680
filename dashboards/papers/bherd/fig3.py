"""BHerd Fig. 3a–3d: hyper-parameter sweeps, a 2 x 3 grid (test loss / test accuracy x Case).

Exactly the generic layout (:mod:`dashboards.generic`): one curve per spec curve (α, E, B or N
values, plus the reference curves the spec adds), mean ± band over seeds, letters (a)–(f).
"""

from __future__ import annotations

from dashboards import generic
from dashboards.model import BuildContext, FigureResult


def build(ctx: BuildContext) -> FigureResult:
    """Fig. 3a/3b/3c/3d (the spec decides which)."""
    return generic.build(ctx)
