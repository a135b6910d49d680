"""The server-optimizer interface: ``w_{t+1} = step(w_t, u_t)``.

The base method's ``aggregate`` returns the update direction ``u_t`` in the ``Δ`` sign
convention (positive along the gradient: ``Σ q_i Δ_i`` for FedAvg, FedNova's normalised
``τ_eff Σ q_i Δ_i / a_i``); ``−u_t`` is FedOpt's pseudo-gradient (docs/algorithms.md §2.6).
Every server optimizer composes with every base method. Its state (momentum buffer, ``m``,
``v``) is its ``state_dict``.
"""

from __future__ import annotations

import torch

from fedsweep.core.messages import RoundContext
from fedsweep.core.registry import Component


class ServerOptimizer(Component):
    def __init__(self, config) -> None:
        self.config = config

    def setup(self, w: torch.Tensor) -> None:
        self._device, self._dtype = w.device, w.dtype

    def step(self, w: torch.Tensor, direction: torch.Tensor, ctx: RoundContext) -> torch.Tensor:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def _restore(self, value: torch.Tensor | None) -> torch.Tensor | None:
        return None if value is None else value.to(self._device, self._dtype)


def cpu_copy(value: torch.Tensor | None) -> torch.Tensor | None:
    return None if value is None else value.detach().cpu().clone()
