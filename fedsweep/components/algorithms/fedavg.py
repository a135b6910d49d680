"""FedAvg (docs/algorithms.md §2.2): plain local SGD; the server averages the clients' models,
``w_{t+1} = Σ_i q_i w_i`` with ``w_i = w_t − Δ_i``, so its direction is
``u_t = w_t − Σ_i q_i w_i = Σ_i q_i Δ_i + (1 − Σ_i q_i) w_t`` and plain server SGD gives
``w_{t+1} = w_t − u_t``.

``q_i`` come from the client sampler: ``p_i`` under full participation, renormalised over the
participants for uniform sampling [R], other weightings per §7. They sum to 1 for every sampler
except Li et al.'s scheme 2 on clients of unequal sizes (``uniform.weighting: scheme2``,
``q_i = p_i N / m``): there the model term ``(1 − Σ q_i) w_t`` is what makes scheme 2 the
average of *models* Li et al. analyse and run (their ``w = (N/K) Σ_{k∈S_t} p_k w_k``), not a
rescaled average of updates. Where ``|1 − Σ q_i| < 1e-6`` the weights are normalised and the
difference is float rounding: the term is left out, so every run with normalised weights keeps
its numbers bit for bit. No state across rounds.
"""

from __future__ import annotations

from fedsweep.components.algorithms.base import BaseMethod, weighted_sum
from fedsweep.core.registry import register

#: |1 − Σ q_i| from which the weights are unnormalised by design, not by float rounding
UNNORMALISED = 1e-6


@register("algorithm", "fedavg", default=True)
class FedAvg(BaseMethod):
    def aggregate(self, w, updates, weights, ctx):
        direction = weighted_sum([u.delta for u in updates], weights)  # Σ_i q_i Δ_i
        missing = 1.0 - float(weights.sum())
        if abs(missing) >= UNNORMALISED:  # Σ q_i ≠ 1 by design (scheme 2, unequal sizes)
            direction.add_(w, alpha=missing)  # + (1 − Σ_i q_i) w_t: an average of models
        return direction
