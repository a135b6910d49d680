"""Server SGD (the default): ``w_{t+1} = w_t − η_s u_t``, optionally with momentum.

``η_s = server_sgd.lr`` (1 by default: the plain FedAvg/FedNova/SCAFFOLD server; SCAFFOLD's
``η_g``, §2.5). Momentum ``μ = server_sgd.momentum`` (FedNova's ``gmf``, §2.4, now for every base
method) keeps the buffer in gradient units as the FedNova code does [R: JYWa/FedNova]::

    buf ← μ·buf + u_t / η_t ;   w_{t+1} = w_t − η_s η_t · buf

(``η_t`` the client rate of the round). With a constant ``η`` this is ``buf' ← μ buf' + u_t``,
``w ← w − η_s buf'``; the gradient units keep the buffer meaningful when a schedule changes
``η_t``. The buffer starts at zero and exists only when ``μ > 0``.
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedsweep.components.server_optimizers.base import ServerOptimizer, cpu_copy
from fedsweep.core.registry import register
from fedsweep.core.section import Section


class ServerSGDConfig(Section):
    lr: float = Field(1.0, gt=0, description="eta_s (SCAFFOLD's eta_g); 1: the plain server.")
    momentum: float = Field(
        0.0, ge=0, lt=1, description="Server momentum (FedNova's gmf), for every base method."
    )


@register("server_optimizer", "sgd", sections={"server_sgd": ServerSGDConfig}, default=True)
class ServerSGD(ServerOptimizer):
    def __init__(self, config) -> None:
        super().__init__(config)
        self.lr, self.momentum = config.server_sgd.lr, config.server_sgd.momentum
        self.buf: torch.Tensor | None = None

    def step(self, w, direction, ctx):
        if self.momentum == 0:
            # w − u exactly when η_s = 1 (the arithmetic of every run before server optimizers)
            return w - direction if self.lr == 1 else w - self.lr * direction
        if self.buf is None:
            self.buf = torch.zeros_like(w)
        self.buf.mul_(self.momentum).add_(direction, alpha=1.0 / ctx.lr)  # μ buf + u_t/η_t
        return w - (self.lr * ctx.lr) * self.buf

    def state_dict(self) -> dict:
        return {"buf": cpu_copy(self.buf)}

    def load_state_dict(self, state: dict) -> None:
        self.buf = self._restore(state.get("buf"))
