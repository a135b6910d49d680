"""FedNova, normalised averaging (docs/algorithms.md §2.4).

Client ``i``: ``τ_i`` local steps of plain SGD, optionally with local momentum ``ρ``
(``fednova.momentum``; buffer reset every round, §1.4) or a FedProx proximal term ``μ``
(``fednova.mu``). It sends ``Δ_i = w_t − y_i`` and the normaliser ``a_i = ||a_i||_1``:

    plain SGD          a_i = τ_i
    momentum ρ         a_i = [τ_i − ρ(1 − ρ^{τ_i})/(1 − ρ)] / (1 − ρ)
    proximal μ         a_i = [1 − (1 − ημ)^{τ_i}] / (ημ)

[R: JYWa/FedNova ``distoptim/FedNova.py``; NIID-Bench ``train_net_fednova``.] The table has no
row for momentum and proximal together, so the config rejects that combination.

Server: ``τ_eff = Σ_i q_i a_i`` (``fednova.taueff = "a"``, default) or ``Σ_i q_i τ_i``
(``"steps"``, the JYWa quirk; N1), and the direction ``u_t = τ_eff Σ_i q_i Δ_i / a_i``: plain
server SGD gives ``w_{t+1} = w_t − u_t``. FedNova's server momentum ``gmf`` [R] is the server
optimizer's: ``server_optimizer: sgd`` with ``server_sgd.momentum`` (it keeps JYWa's buffer in
gradient units, ``buf ← gmf·buf + u_t/η``, ``w ← w − η·buf``). No state across rounds. Equal
``τ_i`` (plain SGD) gives FedAvg (Appendix B.4).

With BHerd (§3.7) the client's ``Δ_i`` and ``a_i = τ_i`` come from the selector.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, model_validator

from fedsweep.components.algorithms.base import BaseMethod, ClientUpdate, weighted_sum
from fedsweep.core.messages import LocalDirection
from fedsweep.core.registry import register
from fedsweep.core.section import Section


class FedNovaConfig(Section):
    momentum: float = Field(0.0, ge=0, lt=1, description="Local momentum rho (§2.4).")
    mu: float = Field(0.0, ge=0, description="Local proximal term (§2.4).")
    taueff: Literal["a", "steps"] = Field(
        "a", description="tau_eff = sum q_i a_i or q_i tau_i (N1)."
    )

    @model_validator(mode="after")
    def _one_local_solver(self) -> FedNovaConfig:
        if self.momentum != 0 and self.mu != 0:
            raise ValueError(
                "fednova.momentum and fednova.mu cannot both be non-zero: §2.4 defines a_i for "
                "momentum SGD or proximal SGD, not both"
            )
        return self


def normaliser(tau: int, lr: float, momentum: float = 0.0, mu: float = 0.0) -> float:
    """``a_i = ||a_i||_1`` of the §2.4 table for ``τ_i`` local steps."""
    if momentum != 0 and mu != 0:
        raise ValueError("FedNova: a_i is defined for momentum or a proximal term, not both")
    if momentum != 0:
        rho = momentum
        return (tau - rho * (1.0 - rho**tau) / (1.0 - rho)) / (1.0 - rho)
    if mu != 0:
        eta_mu = lr * mu
        return (1.0 - (1.0 - eta_mu) ** tau) / eta_mu
    return float(tau)


@register("algorithm", "fednova", sections={"fednova": FedNovaConfig})
class FedNova(BaseMethod):
    def __init__(self, config) -> None:
        super().__init__(config)
        cfg = config.fednova
        self.momentum, self.mu, self.taueff = cfg.momentum, cfg.mu, cfg.taueff
        self._mom: torch.Tensor | None = None  # local momentum buffer of the current client

    def begin_client(self, client, ctx) -> None:
        self._mom = None  # local momentum buffer reset every round (§1.4)

    def local_direction(self, client, g, y, w):
        if self.mu != 0:
            g = torch.add(g, y - w, alpha=self.mu)  # proximal: g + μ (y − w_t)
        if self.momentum != 0:
            if self._mom is None:
                self._mom = g.clone()  # buf_1 = g_1
            else:
                self._mom.mul_(self.momentum).add_(g)  # buf = ρ buf + g
            return self._mom
        return g

    def fused_direction(self, client):
        """Plain or proximal SGD in closed form; momentum SGD steps one at a time."""
        return None if self.momentum != 0 else LocalDirection(mu=self.mu)

    def client_update(
        self, client, w, y, num_samples, num_steps, ctx, delta=None, state_from_trajectory=False
    ):
        a = normaliser(num_steps, ctx.lr, self.momentum, self.mu)
        update = ClientUpdate(client, w - y if delta is None else delta, num_samples, num_steps)
        update.extras["a"] = torch.tensor(a, dtype=torch.float64)  # a selector's "a" overrides
        return update

    def aggregate(self, w, updates, weights, ctx):
        q = weights.tolist()
        a = [float(u.extras["a"]) for u in updates]
        if self.taueff == "a":
            tau_eff = sum(qi * ai for qi, ai in zip(q, a, strict=True))  # Σ q_i a_i
        else:
            tau_eff = sum(qi * u.num_steps for qi, u in zip(q, updates, strict=True))  # N1
        coef = torch.tensor(
            [qi * tau_eff / ai for qi, ai in zip(q, a, strict=True)], dtype=torch.float64
        )
        return weighted_sum([u.delta for u in updates], coef)  # u_t = τ_eff Σ q_i Δ_i / a_i


def plain_sgd_errors(config, who: str, section: str) -> list[str]:
    """``who`` (a composition with FedNova defined for plain local SGD, docs/algorithms.md
    ``section``) refuses FedNova's local momentum and proximal term."""
    if config.algorithm != "fednova" or (config.fednova.momentum == 0 and config.fednova.mu == 0):
        return []
    return [
        f"{who} is defined for plain local SGD (docs/algorithms.md {section}): "
        "set fednova.momentum = 0 and fednova.mu = 0"
    ]
