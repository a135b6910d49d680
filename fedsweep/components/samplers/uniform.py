"""Uniform sampling without replacement (docs/algorithms.md §7.1).

``S_t`` is a uniformly random subset of ``m`` clients, ``rng.choice(N, size=m, replace=False)``
on the round's ``selection`` stream (§1.6). Weights (``uniform.weighting``, S5):

* ``renorm`` (default): ``q_i = p_i / Σ_{j∈S_t} p_j`` [R: FedProx ``fedbase.py::select_clients``
  with ``replace=False`` and the data-weighted ``aggregate``];
* ``simple``: ``q_i = 1/m`` [P: FedWalk Eq. 4];
* ``scheme2``: ``q_i = p_i N / m``, the unbiased "scheme 2" of the FedAvg convergence analysis
  [P: slides Eq. 11]; the weights need not sum to 1 and it assumes ``p_i = 1/N``.

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

    @classmethod
    def config_errors(cls, config) -> list[str]:
        """Besides the cohort: scheme 2 only where every partition gives equal client sizes
        without loading data (``shards``; ``iid`` and ``case1`` when ``N`` divides ``|D|``)."""
        out = super().config_errors(config)
        if config.uniform.weighting != "scheme2":
            return out
        from fedsweep.data.catalog import TRAIN_SIZES

        data = config.data
        total = TRAIN_SIZES[data.dataset]
        if data.train_subset is not None:
            total = min(total, data.train_subset)
        equal = data.partition == "shards" or (
            data.partition in ("iid", "case1") and total % data.num_clients == 0
        )
        if not equal:
            out.append(
                f"field `uniform.weighting`: got 'scheme2', which assumes p_i = 1/N (equal client "
                f"sizes), but partition {data.partition!r} of {total} samples on "
                f"{data.num_clients} clients gives unequal sizes (allowed: renorm or simple; "
                "scheme2 with shards, or iid/case1 when num_clients divides the sample count)"
            )
        return out

    @classmethod
    def partition_errors(cls, config, sizes: list[int]) -> list[str]:
        """Scheme 2 assumes ``p_i = 1/N``: refused for client sizes ``|D_i|`` that differ (S5).
        Needs the partition, so it is for the caller that knows the sizes to ask."""
        if config.uniform.weighting != "scheme2" or len(set(sizes)) <= 1:
            return []
        return [
            f"field `uniform.weighting`: got 'scheme2', which assumes p_i = 1/N, but partition "
            f"{config.data.partition!r} gives clients of {min(sizes)}..{max(sizes)} samples "
            "(allowed: scheme2 only for equal client sizes; renorm or simple otherwise)"
        ]

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
