"""The post-aggregation hook interface.

``after_aggregation(w, ctx, updates, oracle) -> w``: runs after the server optimizer made
``w_{t+1}`` and before evaluation and the next broadcast; sees the round's client updates (their
metrics) and the client oracle. Hooks run in the order the config lists them. Its state is its
``state_dict``; it logs through ``metrics`` (0-dim tensors, merged into the round's metrics).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from fedsweep.engine.messages import ClientUpdate, RoundContext


class PostAggregationHook:
    name: ClassVar[str] = ""

    def __init__(self, config) -> None:
        self.config = config
        self.metrics: dict[str, torch.Tensor] = {}

    def setup(self, w: torch.Tensor) -> None:
        pass

    def after_aggregation(
        self, w: torch.Tensor, ctx: RoundContext, updates: list[ClientUpdate], oracle
    ) -> torch.Tensor:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
