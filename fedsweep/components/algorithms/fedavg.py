"""FedAvg (docs/algorithms.md §2.2): plain local SGD; the server's direction is
``u_t = Σ_i q_i Δ_i``, so plain server SGD gives ``w_{t+1} = w_t − Σ_i q_i Δ_i``.

``q_i`` come from the client sampler: ``p_i`` under full participation, renormalised over the
participants for uniform sampling [R], other weightings per §7. No state across rounds.
"""

from __future__ import annotations

from fedsweep.components.algorithms.base import BaseMethod, weighted_sum
from fedsweep.core.registry import register


@register("algorithm", "fedavg", default=True)
class FedAvg(BaseMethod):
    def aggregate(self, w, updates, weights, ctx):
        return weighted_sum([u.delta for u in updates], weights)  # u_t = Σ_i q_i Δ_i
