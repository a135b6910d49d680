"""FedProx (docs/algorithms.md §2.3): local SGD on ``F_i(y) + (μ/2)||y − w_t||²``, FedAvg's
server.

Local step: ``v = g + μ (y − w_t)`` [R: litian96/FedProx ``pgd.py``]. Server: FedAvg's
``w_{t+1} = w_t − Σ_i q_i Δ_i`` with weights renormalised over the participants [R]. ``μ = 0``
gives FedAvg exactly (Appendix B.4): ``g + 0·(y − w) = g``. Default ``μ = 0.01`` (W18). No state.
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedsweep.components.algorithms.fedavg import FedAvg
from fedsweep.core.messages import LocalDirection
from fedsweep.core.registry import register
from fedsweep.core.section import Section


class FedProxConfig(Section):
    mu: float = Field(0.01, ge=0, description="Proximal weight (§2.3; default W18).")


@register("algorithm", "fedprox", sections={"fedprox": FedProxConfig})
class FedProx(FedAvg):
    def __init__(self, config) -> None:
        super().__init__(config)
        self.mu = config.fedprox.mu

    def local_direction(self, client: int, g: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
        return torch.add(g, y - w, alpha=self.mu)  # v = g + μ (y − w_t)

    def fused_direction(self, client: int) -> LocalDirection:
        return LocalDirection(mu=self.mu)  # the same v = g + μ (y − w_t)
