"""BHerd Fig. 4e: random reshuffling vs fixed order, one panel per metric.

The generic single-panel layout (:mod:`dashboards.generic`: the metrics side by side): solid =
with RR, dashed = without RR, one colour per case (the spec's curves carry both).
"""

from __future__ import annotations

from dashboards import generic
from dashboards.model import BuildContext, FigureResult


def build(ctx: BuildContext) -> FigureResult:
    return generic.build(ctx)
