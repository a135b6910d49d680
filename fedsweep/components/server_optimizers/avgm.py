"""FedAvgM: server momentum with the buffer in model units [P: Hsu, Qi, Brown 2019, Alg. 1;
R: Flower's ``FedAvgM``].

With ``u_t`` the base method's direction (FedAvg's ``Σ q_i Δ_i``)::

    v_t = β v_{t−1} + u_t
    w_{t+1} = w_t − η_s v_t

``v_0 = 0``; defaults ``η_s = 1`` [R: Flower's ``server_learning_rate``] and ``β = 0.9`` [I: the
paper's common setting; Flower's default is 0, which is plain FedAvg]. Under a constant client
rate this is ``server_optimizer: sgd`` with ``server_sgd.momentum = β`` (whose buffer is kept in
gradient units, ``u_t / η_t``, as FedNova's code does); the two differ when ``lr_schedule``
changes ``η_t``: FedAvgM's buffer keeps the old rounds' steps at their old size.
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedsweep.components.server_optimizers.base import ServerOptimizer, cpu_copy
from fedsweep.core.registry import register
from fedsweep.core.section import Section


class FedAvgMConfig(Section):
    lr: float = Field(1.0, gt=0, description="eta_s, the server learning rate.")
    momentum: float = Field(0.9, ge=0, lt=1, description="beta, the server momentum.")


@register("server_optimizer", "avgm", sections={"fedavgm": FedAvgMConfig})
class FedAvgM(ServerOptimizer):
    def __init__(self, config) -> None:
        super().__init__(config)
        self.lr, self.momentum = config.fedavgm.lr, config.fedavgm.momentum
        self.v: torch.Tensor | None = None

    def step(self, w, direction, ctx):
        if self.v is None:
            self.v = torch.zeros_like(w)
        self.v.mul_(self.momentum).add_(direction)
        return w - self.lr * self.v

    def state_dict(self) -> dict:
        return {"v": cpu_copy(self.v)}

    def load_state_dict(self, state: dict) -> None:
        self.v = self._restore(state.get("v"))
