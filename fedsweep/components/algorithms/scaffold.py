"""SCAFFOLD, option II (docs/algorithms.md §2.5).

State: server control variate ``c`` and one ``c_i`` per client, all initialised to zero (C2),
persisting across rounds (``state_dict``). ``c_i`` is stored only for clients that have trained
(a client that never trained has ``c_i = 0``): at ResNet-18 scale a dense ``[N, d]`` table is
4.5 GB for N = 100 whether or not the clients ever ran.

Client ``i`` (receives ``w_t`` and ``c``)::

    v = g + c − c_i                      local step y ← y − η v
    c_i_new = c_i − c + (w_t − y)/(τ_i η)    option II, τ_i = the actual step count
    send Δ_i = w_t − y (= −Δy_i) and Δc_i = c_i_new − c_i ;  c_i ← c_i_new

Server (our ``Δ_i = −Δy_i``)::

    u_t     = Σ_{i∈S_t} q_i Δ_i            server SGD: w_{t+1} = w_t − η_g u_t (= w_t + η_g Σ q_i Δy_i)
    c       = c + (|S_t|/N) Σ_{i∈S_t} q_i Δc_i

``scaffold.weights`` (C1): ``"data"`` (default) ``q_i = p_i`` renormalised over ``S_t`` for both
sums (keeps ``c = Σ p_i c_i`` under full participation); ``"uniform"`` ``q_i = 1/|S_t|`` for
both (the paper; the ``c`` update is then ``c += (1/N) Σ Δc_i``); the sampler's ``q_i`` under
``"data"``. ``η_g`` is the server optimizer's rate (``server_sgd.lr``, default 1; it was
``scaffold.server_lr``). Round 1 (``c = c_i = 0``) equals FedAvg (Appendix B.4).

With BHerd (§3.8) the selector's ``delta = η (E/α) Σ_{λ∈π} v_λ`` is the client's ``Δ_i`` and
the control variate uses it: ``c_i_new = c_i − c + delta/(τ_i η)``; with
``bherd.scaffold_ci = "full"`` it uses the true trajectory ``w_t − y`` instead.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from fedsweep.components.algorithms.base import BaseMethod, ClientUpdate, weighted_sum
from fedsweep.core.messages import LocalDirection
from fedsweep.core.registry import register
from fedsweep.core.section import Section
from fedsweep.engine.client_state import client_table, is_client_table


class ScaffoldConfig(Section):
    weights: Literal["data", "uniform"] = Field(
        "data", description="q_i of both server sums: the sampler's q_i, or 1/|S_t| (C1)."
    )


@register("algorithm", "scaffold", sections={"scaffold": ScaffoldConfig})
class Scaffold(BaseMethod):
    def __init__(self, config) -> None:
        super().__init__(config)
        self.weights = config.scaffold.weights
        self.c: torch.Tensor | None = None  # [d]
        self.ci: dict[int, torch.Tensor] = {}  # client -> c_i, for clients that have trained
        self.ci_round: dict[int, int] = {}  # client -> the round its c_i last changed
        self._corr: torch.Tensor | None = None  # c − c_i of the current client

    def setup(self, w, num_clients) -> None:
        self.num_clients = num_clients
        self.c = torch.zeros_like(w)  # zero init (C2)
        self.ci = {}  # c_i = 0 for every client until it trains
        self.ci_round = {}

    def client_variate(self, client: int) -> torch.Tensor:
        """``c_i`` (zero for a client that has not trained yet)."""
        ci = self.ci.get(client)
        return torch.zeros_like(self.c) if ci is None else ci

    def dense_variates(self) -> torch.Tensor:
        """Every client's ``c_i`` as one ``[N, d]`` tensor (for tests and inspection: it
        allocates the dense table the run avoids)."""
        return torch.stack([self.client_variate(k) for k in range(self.num_clients)])

    def begin_client(self, client, ctx) -> None:
        self._corr = self.c - self.client_variate(client)  # constant during the client's round

    def local_direction(self, client, g, y, w):
        return g + self._corr  # v = g + c − c_i

    def fused_direction(self, client):
        return LocalDirection(offset=self._corr)  # the same v = g + (c − c_i)

    def client_update(
        self, client, w, y, num_samples, num_steps, ctx, delta=None, state_from_trajectory=False
    ):
        message = w - y if delta is None else delta
        descent = w - y if state_from_trajectory else message
        ci_old = self.client_variate(client)
        # option II: c_i_new = c_i − c + (w_t − y)/(τ_i η)
        ci_new = ci_old - self.c + descent / (num_steps * ctx.lr)
        update = ClientUpdate(client, message, num_samples, num_steps)
        update.extras["dc"] = ci_new - ci_old  # Δc_i
        self.ci[client] = ci_new  # c_i ← c_i_new (c itself changes only in aggregate)
        self.ci_round[client] = ctx.round
        return update

    def aggregate(self, w, updates, weights, ctx):
        weights = self._weights(updates, weights)
        direction = weighted_sum([u.delta for u in updates], weights)  # u_t = Σ q_i Δ_i
        dc = weighted_sum([u.extras["dc"] for u in updates], weights)  # Σ q_i Δc_i
        self.c.add_(dc, alpha=len(updates) / self.num_clients)  # c += (|S_t|/N) Σ q_i Δc_i
        return direction

    def _weights(self, updates, weights: torch.Tensor) -> torch.Tensor:
        if self.weights == "uniform":
            return torch.full((len(updates),), 1.0 / len(updates), dtype=torch.float64)
        return weights

    def buffer_weights(self, updates, weights):
        w = self._weights(updates, weights)
        return w / w.sum()

    def state_dict(self) -> dict:
        """``c`` and the ``c_i`` of the clients that have trained, as a client table
        (``engine.client_state``: a sweep checkpoint writes each ``c_i`` once per change)."""
        return {"c": self.c.detach().cpu().clone(), "ci": client_table(self.ci, self.ci_round)}

    def load_state_dict(self, state: dict) -> None:
        self.c = state["c"].to(self.c.device, self.c.dtype)
        ci, rounds = state["ci"], {}
        if isinstance(ci, torch.Tensor):  # a checkpoint from before sparse storage: [N, d]
            ci = {k: row for k, row in enumerate(ci) if bool(row.any())}
        elif is_client_table(ci):
            ci, rounds = ci["tensors"], ci["versions"]
        self.ci = {int(k): v.to(self.c.device, self.c.dtype).clone() for k, v in ci.items()}
        self.ci_round = {int(k): int(rounds.get(k, 0)) for k in self.ci}
