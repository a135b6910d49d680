"""Sampling with replacement ∝ p, the slides' "scheme 1" (docs/algorithms.md §7.1).

``m`` indices are drawn i.i.d. with ``P(i) = p_i`` (``rng.choice(N, size=m, replace=True,
p=p)`` on the round's ``selection`` stream) and aggregated with the simple average over the
draws: a client drawn ``c`` times trains once and has ``q_i = c/m`` [P: slides; R:
peng-ju/Power-of-Choice ``image_classification/FedAvg.py``, ``algo == 'rand'``]. Clients train in
ascending index order (§7); ``Cohort.draws`` keeps all ``m`` draws, repeats included. No
options, so no config section.
"""

from __future__ import annotations

from collections import Counter

import torch

from fedsweep.components.samplers.base import CohortConfig, Sampler, cohort_size
from fedsweep.core.messages import Cohort
from fedsweep.core.registry import register


@register("sampler", "replacement", sections={"cohort": CohortConfig})
class ReplacementSampler(Sampler):
    simple_mean = None  # 1/m per draw (scheme 1)

    def __init__(self, config, p: torch.Tensor) -> None:
        super().__init__(config, p)
        self.m = cohort_size(config, self.num_clients)
        self._p = p.detach().cpu().numpy()

    def sample(self, t, w, rng, oracle) -> Cohort:
        draws: list[int] = rng.choice(
            self.num_clients, size=self.m, replace=True, p=self._p
        ).tolist()
        counts = Counter(draws)
        clients = sorted(counts)
        q = torch.tensor([counts[i] / self.m for i in clients], dtype=torch.float64)
        return Cohort(clients, q.to(self.p.device), draws)
