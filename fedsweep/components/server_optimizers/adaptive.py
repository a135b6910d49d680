"""FedAdagrad, FedAdam, FedYogi (docs/algorithms.md §2.6) [P: Reddi et al.; slides Alg. 2].

With ``u_t`` the base method's direction (``−u_t`` is the pseudo-gradient), elementwise::

    m_t = β1 m_{t−1} + (1 − β1) u_t
    adagrad:  v_t = v_{t−1} + u_t²
    adam:     v_t = β2 v_{t−1} + (1 − β2) u_t²
    yogi:     v_t = v_{t−1} − (1 − β2) u_t² ⊙ sign(v_{t−1} − u_t²)
    w_{t+1} = w_t − η_s m_t / (√v_t + τ)

``m_0 = 0``, ``v_0 = τ²`` [P: slides Alg. 2, ``v_{−1} ≥ τ²``]; no bias correction [P].
Defaults ``η_s = 0.1``, ``β1 = 0.9``, ``β2 = 0.99``, ``τ = 1e-3`` [R: Flower's FedAdam/FedOpt
constructor defaults; O2]. ``β1`` applies to FedAdagrad too, as in the slides' Alg. 2
(``fedopt.beta1: 0`` gives Flower's FedAdagrad, O1); FedAdagrad ignores ``β2``.
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedsweep.components.server_optimizers.base import ServerOptimizer, cpu_copy
from fedsweep.core.registry import register
from fedsweep.core.section import Section


class FedOptConfig(Section):
    lr: float = Field(0.1, gt=0, description="eta_s, the server learning rate.")
    beta1: float = Field(0.9, ge=0, lt=1, description="First-moment decay (all three, O1).")
    beta2: float = Field(0.99, ge=0, lt=1, description="Second-moment decay (adam, yogi).")
    tau: float = Field(1e-3, gt=0, description="Degree of adaptivity; v starts at tau^2 (O2).")


class AdaptiveServer(ServerOptimizer):
    """The shared update; subclasses give ``second_moment``."""

    def __init__(self, config) -> None:
        super().__init__(config)
        cfg = config.fedopt
        self.lr, self.beta1, self.beta2, self.tau = cfg.lr, cfg.beta1, cfg.beta2, cfg.tau
        self.m: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def second_moment(self, v: torch.Tensor, u2: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def step(self, w, direction, ctx):
        if self.m is None:
            self.m = torch.zeros_like(w)
            self.v = torch.full_like(w, self.tau**2)
        self.m.mul_(self.beta1).add_(direction, alpha=1.0 - self.beta1)
        self.v = self.second_moment(self.v, direction * direction)
        return w - self.lr * self.m / (self.v.sqrt() + self.tau)

    def state_dict(self) -> dict:
        return {"m": cpu_copy(self.m), "v": cpu_copy(self.v)}

    def load_state_dict(self, state: dict) -> None:
        self.m, self.v = self._restore(state.get("m")), self._restore(state.get("v"))


@register("server_optimizer", "adagrad", sections={"fedopt": FedOptConfig})
class FedAdagrad(AdaptiveServer):
    def second_moment(self, v, u2):
        return v + u2


@register("server_optimizer", "adam", sections={"fedopt": FedOptConfig})
class FedAdam(AdaptiveServer):
    def second_moment(self, v, u2):
        return self.beta2 * v + (1.0 - self.beta2) * u2


@register("server_optimizer", "yogi", sections={"fedopt": FedOptConfig})
class FedYogi(AdaptiveServer):
    def second_moment(self, v, u2):
        return v - (1.0 - self.beta2) * u2 * torch.sign(v - u2)
