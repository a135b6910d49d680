"""Uniform sampling without replacement (docs/algorithms.md §7.1).

``S_t`` is a uniformly random subset of ``m`` clients, ``rng.choice(N, size=m, replace=False)``
on the round's ``selection`` stream (§1.6). Weights (``uniform.weighting``, S5):

* ``renorm`` (default): ``q_i = p_i / Σ_{j∈S_t} p_j`` [R: FedProx ``fedbase.py::select_clients``
  with ``replace=False`` and the data-weighted ``aggregate``];
* ``simple``: ``q_i = 1/m`` [P: FedWalk Eq. 4];
* ``scheme2``: ``q_i = p_i N / m``, the unbiased "scheme 2" of the FedAvg convergence analysis
  [P: slides Eq. 11; Li et al. 2020 Sec. 3.3, ``w = (N/K) Σ_{k∈S_t} p_k w_k``], for any client
  sizes: ``E[Σ_{i∈S_t} q_i v_i] = Σ_i p_i v_i``. With equal sizes ``q_i = 1/m``; with unequal
  ones the weights do not sum to 1 (``Σ q_i`` varies from round to round, mean 1); Li et al.'s
  Theorem 3 assumes ``p_i = 1/N``, their experiments also run scheme 2 on unbalanced data.
  FedAvg averages the models as Li et al. do, ``w_{t+1} = Σ q_i w_i``, which rescales ``w_t``
  by ``Σ q_i`` when the weights do not sum to 1 (``components/algorithms/fedavg.py``).

Clients train in ascending index order (§7), so with ``m = N`` and ``renorm`` this is ``full``
bit for bit; ``Cohort.draws`` keeps the drawn order.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from fedsweep.components.samplers.base import CohortConfig, Sampler, cohort_size
from fedsweep.core.messages import Cohort
from fedsweep.core.registry import register
from fedsweep.core.section import Section


class UniformConfig(Section):
    weighting: Literal["renorm", "simple", "scheme2"] = Field(
        "renorm",
        description="q_i: p_i renormalised over S_t, 1/m, or scheme 2's p_i N/m (S5, §7.1).",
    )


@register("sampler", "uniform", sections={"cohort": CohortConfig, "uniform": UniformConfig})
class UniformSampler(Sampler):
    simple_mean = ("uniform.weighting", ("simple",))

    def __init__(self, config, p: torch.Tensor) -> None:
        super().__init__(config, p)
        self.m = cohort_size(config, self.num_clients)
        self.weighting = config.uniform.weighting

    def sample(self, t, w, rng, oracle) -> Cohort:
        draws: list[int] = rng.choice(self.num_clients, size=self.m, replace=False).tolist()
        clients = sorted(draws)
        p = self.p[clients]
        if self.weighting == "renorm":
            q = p / p.sum()
        elif self.weighting == "simple":
            q = torch.full_like(p, 1.0 / self.m)
        else:  # scheme2
            q = p * self.num_clients / self.m
        return Cohort(clients, q, draws)
