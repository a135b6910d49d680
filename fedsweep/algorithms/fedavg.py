"""FedAvg (docs/algorithms.md §2.2): plain local SGD, server ``w_{t+1} = w_t − Σ_i q_i Δ_i``.

``q_i = p_i`` under full participation, renormalised over the participants otherwise [R].
No state across rounds.
"""

from __future__ import annotations

from fedsweep.algorithms.base import BaseMethod, weighted_sum


class FedAvg(BaseMethod):
    name = "fedavg"

    def aggregate(self, w, updates, weights, ctx):
        return w - weighted_sum([u.delta for u in updates], weights)
