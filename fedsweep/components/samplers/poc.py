"""Power-of-Choice, ``pow-d`` / ``cpow-d`` of Cho et al. (docs/algorithms.md §7.2).

1. ``A`` = ``d`` candidates drawn without replacement ∝ ``p`` (``rng.choice(N, size=d,
   replace=False, p=p)`` on the round's ``selection`` stream);
2. each candidate reports ``F_k(w_t)`` over its whole local set (``pow-d``), or on one batch of
   ``B`` samples drawn from the same stream after ``A`` (``cpow-d``), from the client oracle;
3. ``S_t`` = the ``m`` candidates with the largest loss (stable sort: equal losses keep ``A``'s
   draw order);
4. ``q_i = 1/m``.

[R: peng-ju/Power-of-Choice ``image_classification/FedAvg.py::select_clients`` and its plain-mean
``aggregate``]. ``d = m`` is sampling ∝ ``p`` without replacement. Losses are fresh at ``w_t``
every round; ``poc.first_round = "uniform"`` picks round 1 uniformly without asking the oracle,
as the reproduction code does (S4). Only the ``d`` candidates are asked. Clients train in
ascending index order (§7); ``Cohort.draws`` is ``S_t`` by descending loss. No state.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from pydantic import Field

from fedsweep.components.samplers.base import CohortConfig, Sampler, cohort_size
from fedsweep.core.messages import Cohort
from fedsweep.core.registry import register
from fedsweep.core.section import Section


class PocConfig(Section):
    d: int | None = Field(
        None, ge=1, description="d, the candidates per round (allowed: m..N); default min(2m, N)."
    )
    variant: Literal["pow-d", "cpow-d"] = Field(
        "pow-d", description="Candidate losses on the full local set, or on one batch of B."
    )
    first_round: Literal["fresh", "uniform"] = Field(
        "fresh", description="Round 1 by fresh losses, or uniformly as the reference code (S4)."
    )


@register("sampler", "poc", sections={"cohort": CohortConfig, "poc": PocConfig})
class PowerOfChoice(Sampler):
    simple_mean = None

    @classmethod
    def config_errors(cls, config) -> list[str]:
        errors = super().config_errors(config)
        d, n = config.poc.d, config.data.num_clients
        if errors or d is None:
            return errors
        m = cohort_size(config, n)
        if not m <= d <= n:
            return [f"field `poc.d`: got {d}: needs m <= d <= N (allowed: {m}..{n})"]
        return []

    def __init__(self, config, p: torch.Tensor) -> None:
        super().__init__(config, p)
        n = self.num_clients
        self.m = cohort_size(config, n)
        self.d = config.poc.d if config.poc.d is not None else min(2 * self.m, n)
        if not self.m <= self.d <= n:
            raise ValueError(f"poc.d = {self.d} not in m..N = {self.m}..{n}")
        self.variant = config.poc.variant
        self.first_round = config.poc.first_round
        self._p = p.detach().cpu().numpy()

    def sample(self, t, w, rng, oracle) -> Cohort:
        n, m = self.num_clients, self.m
        if t == 1 and self.first_round == "uniform":
            draws: list[int] = rng.choice(n, size=m, replace=False).tolist()
        else:
            cand: list[int] = rng.choice(n, size=self.d, replace=False, p=self._p).tolist()
            if self.variant == "pow-d":
                losses = oracle.losses(cand, w)
            else:
                losses = oracle.batch_losses(cand, w, rng)
            values = losses.detach().to(torch.float64).cpu().numpy()  # the one host transfer
            order = np.argsort(-values, kind="stable")[:m]  # ties keep the draw order
            draws = [cand[i] for i in order.tolist()]
        q = torch.full((m,), 1.0 / m, dtype=torch.float64, device=self.p.device)
        return Cohort(sorted(draws), q, draws)
