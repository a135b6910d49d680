"""GraB-FedAvg: one-pass online sign balancing of the local gradients (docs/algorithms.md §4).

Local training is FedAvg's (full ``τ_i`` plain-SGD steps, ``v = g``). Client ``i``, per round,
with ``s = 0, g_acc = 0, n_sel = 0``, at every step ``λ`` (``grab.variant``, B13):

* ``"bherd_alg4"`` (literal Alg. 4, default): ``m ← m + g/τ_i`` (partial sum over ``τ_i``, not a
  running mean; ``m = 0`` at the start of the round), ``z = g − m``, selected iff
  ``⟨s, z⟩ < 0`` (strict: the round's first gradient, at ``s = 0``, is never selected).
* ``"grab_stale_mean"`` (original GraB balancer [R]): ``z = g − m_prev``, where ``m_prev`` is
  this client's mean gradient of its previous round (zero in its first round), selected iff
  ``⟨s, z⟩ ≤ 0`` (ties go to the ``+`` side). ``m_prev`` is the selector's only state.

Selected: ``s ← s + z``, ``g_acc ← g_acc + g``, ``n_sel += 1``; otherwise ``s ← s − z``
(``⟨s,z⟩ < 0 ⇔ ||s+z|| < ||s−z||``). The client sends ``η g_acc`` and ``α_i = n_sel/τ_i``.

Server (Alg. 4 lines 17–19): ``α_t = Σ_i q_i α_i``, ``w_{t+1} = w_t − (η/α_t) Σ_i q_i g_acc,i``:
``finish_round`` divides every client's ``η g_acc,i`` by ``α_t`` and FedAvg aggregates. If
``α_t = 0`` (e.g. every ``τ_i = 1`` under the literal rule) the round's update is skipped
(``w_{t+1} = w_t``) with a warning (B14).

``s`` and ``m`` are kept in float64 so the sign decisions do not depend on the training dtype
drifting over long rounds; the decision stays on the device (no host sync per step).

**Fused** (``fused_buffers``): where a fast path runs the client's steps in one call (the SVM on
the CPU, ``engine.fast``; the trajectory is FedAvg's either way), it writes every ``g`` into this
selector's ``[τ, d]`` buffer and ``finish_client`` balances the buffer in one compiled call
(``engine.fast.balancing``: the same element-wise operations, bit-identical decisions and state
on the same gradients except where ``⟨s, z⟩`` lies within rounding of 0); elsewhere ``record``
balances step by step.
"""

from __future__ import annotations

import warnings
from typing import Literal

import torch
from pydantic import Field

from fedsweep.components.selectors.base import Selection, Selector
from fedsweep.core.messages import ClientUpdate, RoundContext
from fedsweep.core.registry import register
from fedsweep.core.section import Section
from fedsweep.engine.fast.balancing import balance_compiled

VARIANTS = ("bherd_alg4", "grab_stale_mean")


class GraBConfig(Section):
    variant: Literal["bherd_alg4", "grab_stale_mean"] = Field(
        "bherd_alg4", description="Literal BHerd Alg. 4, or GraB's stale-mean balancer (B13)."
    )


@register("selector", "grab", sections={"grab": GraBConfig})
class GraB(Selector):
    uploads = {"fedavg": "descent"}
    records_gradients = True

    def __init__(self, config, upload: str = "descent") -> None:
        super().__init__(config, upload)
        self.variant = config.grab.variant
        if self.variant not in VARIANTS:
            raise ValueError(f"grab.variant {self.variant!r} not in {VARIANTS}")
        self.prev_mean: dict[int, torch.Tensor] = {}  # stale-mean variant: m_prev per client
        self._buffer: torch.Tensor | None = None  # g of every step, when the steps run fused
        self._fused = False  # this client's steps ran as one fused call

    def begin_client(self, client, num_steps, dim, dtype, device) -> None:
        self._client, self._tau = client, num_steps
        self._fused = False
        f64 = dict(dtype=torch.float64, device=device)
        self._s = torch.zeros(dim, **f64)
        self._m = torch.zeros(dim, **f64)  # literal: partial sum / τ; stale: Σ g (for next m_prev)
        self._g_acc = torch.zeros(dim, dtype=dtype, device=device)
        self._n_sel = torch.zeros((), dtype=torch.float64, device=device)
        self._selected = torch.zeros(num_steps, dtype=torch.bool, device=device)
        if self.variant == "grab_stale_mean":
            prev = self.prev_mean.get(client)  # zero in the client's first round
            self._centre = torch.zeros(dim, **f64) if prev is None else prev.to(device)

    def record(self, step: int, g: torch.Tensor, v: torch.Tensor) -> None:
        g64 = g.to(torch.float64)
        if self.variant == "bherd_alg4":
            self._m.add_(g64, alpha=1.0 / self._tau)  # m = m + g/τ_i
            z = g64 - self._m
            sel = torch.dot(self._s, z) < 0  # strict: ties (incl. s = 0) are not selected
        else:
            self._m.add_(g64)  # Σ g of this round -> next round's m_prev
            z = g64 - self._centre
            sel = torch.dot(self._s, z) <= 0  # ties to the + side (GraB deterministic_balance)
        self._s.add_(torch.where(sel, z, -z))
        self._g_acc.add_(g * sel.to(g.dtype))
        self._n_sel.add_(sel.to(torch.float64))
        self._selected[step] = sel

    def fused_buffers(self, direction):
        """A ``[τ, d]`` buffer for every step's ``g`` (GraB composes with FedAvg: ``v = g``),
        balanced in ``finish_client``; kept across clients and rounds."""
        tau, dim = self._tau, self._m.shape[0]
        dtype, device = self._g_acc.dtype, self._g_acc.device
        buf = self._buffer
        if buf is None or buf.shape[0] < tau or buf.dtype != dtype or buf.device != device:
            buf = self._buffer = torch.empty(tau, dim, dtype=dtype, device=device)
        self._fused = True
        return buf[:tau], None

    def _balance_buffer(self) -> None:
        """The recorded steps balanced in one compiled call, else by ``record`` one by one."""
        g = self._buffer[: self._tau]
        centre = self._centre if self.variant == "grab_stale_mean" else None  # None: literal
        count = balance_compiled(g, self._s, self._m, self._g_acc, self._selected, centre)
        if count is None:
            for step in range(self._tau):
                self.record(step, g[step], g[step])
        else:
            self._n_sel = count

    def finish_client(self, client: int, ctx: RoundContext) -> Selection:
        if self._fused:
            self._balance_buffer()
        if self.variant == "grab_stale_mean":
            self.prev_mean[client] = self._m.div_(self._tau)
        alpha_i = self._n_sel / self._tau  # α_i = n_sel / τ_i
        return Selection(
            delta=self._g_acc.mul_(ctx.lr),  # η g_acc; divided by α_t in finish_round
            metrics={"alpha": alpha_i},
            records={"selected": self._selected},
            extras={"alpha": alpha_i},
        )

    def finish_round(
        self, updates: list[ClientUpdate], weights: torch.Tensor, ctx: RoundContext
    ) -> None:
        alpha_t = sum(
            q * float(u.extras["alpha"]) for u, q in zip(updates, weights.tolist(), strict=True)
        )  # α_t = Σ_i q_i α_i
        if alpha_t == 0:
            warnings.warn(
                f"GraB round {ctx.round}: alpha_t = 0 (no client selected any gradient); "
                "update skipped (docs/algorithms.md §4, B14)",
                stacklevel=2,
            )
            for u in updates:
                u.delta = torch.zeros_like(u.delta)
            return
        for u in updates:
            u.delta = u.delta / alpha_t

    def state_dict(self) -> dict:
        return {"prev_mean": {i: m.detach().cpu().clone() for i, m in self.prev_mean.items()}}

    def load_state_dict(self, state: dict) -> None:
        # kept on the CPU here; begin_client moves a client's vector to the run's device
        self.prev_mean = {int(i): m.clone() for i, m in state.get("prev_mean", {}).items()}
