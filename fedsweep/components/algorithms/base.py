"""The hooks of the generic round (docs/algorithms.md §1.4) that a base method fills in.

Sign convention (§1.1): ``delta = w_t - y_i`` is the cumulative local *descent* (positive along
the gradient). A method's hooks are pure functions of their inputs plus the method's explicit
state (``state_dict``), so a run checkpoint captures everything.

Per client and round the engine calls ``begin_client``, then for every local step
``v = local_direction(...)`` (``y <- y − η v``), then ``client_update``. If an upload selector
(BHerd, GraB) is active, its ``Selection.delta`` reaches ``client_update`` as ``delta``: the
method must then build its message from that vector instead of ``w − y``. After all clients,
``aggregate`` returns the server's update direction (the pseudo-gradient ``u_t``, in the
``Δ`` sign convention); the server optimizer turns it into the new global model (plain server
SGD with rate 1: ``w_{t+1} = w_t − u_t``).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from fedsweep.core.messages import ClientUpdate, LocalDirection, RoundContext
from fedsweep.core.registry import Component


class BaseMethod(Component):
    """FedAvg-shaped defaults; subclasses override only the hooks their rule changes."""

    #: True for methods that train one client on the union of all data (centralized SGD).
    pools_data: ClassVar[bool] = False

    def __init__(self, config) -> None:
        self.config = config

    def setup(self, w: torch.Tensor, num_clients: int) -> None:
        """Initialise persistent server/client state from the initial model."""

    def begin_client(self, client: int, ctx: RoundContext) -> None:
        """Called before client ``client``'s first local step of the round."""

    def local_direction(self, client: int, g: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
        """``v`` of the local step ``y <- y - eta v`` (plain SGD: ``v = g``, the same tensor).

        Return ``g`` itself (not a copy) when ``v = g``: selectors use ``v is g`` to skip
        storing a second vector per step."""
        return g

    def fused_direction(self, client: int) -> LocalDirection | None:
        """``local_direction`` in closed form, ``v = g + μ (y − w_t) + offset``, for a fast path
        that runs the whole local trajectory in one call (the seam's protocol,
        ``fedsweep.engine.fast``); None when the direction is not of
        that form (the engine then steps one at a time). Called after ``begin_client``. The
        default covers methods that keep plain SGD's ``v = g``."""
        if type(self).local_direction is BaseMethod.local_direction:
            return LocalDirection()
        return None

    def client_update(
        self,
        client: int,
        w,
        y,
        num_samples: int,
        num_steps: int,
        ctx: RoundContext,
        delta: torch.Tensor | None = None,
        state_from_trajectory: bool = False,
    ) -> ClientUpdate:
        """The client's message. ``delta`` (from a selector) replaces ``Δ_i = w − y``;
        ``state_from_trajectory``: the method's own client state still follows ``w − y``."""
        return ClientUpdate(client, w - y if delta is None else delta, num_samples, num_steps)

    def aggregate(self, w, updates: list[ClientUpdate], weights: torch.Tensor, ctx: RoundContext):
        """The server's update direction ``u_t`` from the participants' updates and their
        weights ``q_i`` (the server optimizer applies it: ``w_{t+1} = w_t − u_t`` for SGD)."""
        raise NotImplementedError

    def buffer_weights(self, updates: list[ClientUpdate], weights: torch.Tensor) -> torch.Tensor:
        """The weights the server averages the clients' model buffers (BatchNorm running
        statistics, §8.4) with: the aggregation's ``q_i``, renormalised to sum to 1 (a method
        that replaces ``q_i`` in ``aggregate`` replaces them here too)."""
        return weights / weights.sum()

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def weighted_sum(vectors: list[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    """``Σ_i q_i v_i`` accumulated in order (deterministic)."""
    total = torch.zeros_like(vectors[0])
    for v, q in zip(vectors, weights.tolist(), strict=True):
        total.add_(v, alpha=q)
    return total
