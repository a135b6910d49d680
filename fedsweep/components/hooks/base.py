"""The post-aggregation hook interface.

``after_aggregation(w, ctx, updates, oracle) -> w``: runs after the server optimizer made
``w_{t+1}`` and before evaluation and the next broadcast; sees the round's client updates (their
metrics) and the client oracle. Hooks run in the order the config lists them. Its state is its
``state_dict``; it logs through ``metrics`` (0-dim tensors, merged into the round's metrics).

Before round 1 the run calls ``bind(env)`` (the model function, the oracle, the server's public
data when the hook asks for it with ``needs_public_data``, the seed) and then ``setup(w)``, which
returns the initial global model (a pre-training hook changes it; others return ``w``). A hook may
contribute a local-step observer (``local_observer()``, e.g. FedWalk's ``L_k``) and name metrics
that are estimates rather than results (``diagnostics``: a non-finite value does not end the run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from fedsweep.core.messages import ClientUpdate, RoundContext
from fedsweep.core.registry import Component


@dataclass
class HookEnv:
    """What the run gives its hooks before round 1."""

    fm: Any  # engine.functional.FunctionalModel
    oracle: Any  # engine.oracle.ClientOracle
    seed: int
    eval_batch: int
    first_lr: float  # the client rate of round 1 (the lr schedule's value)
    public: Any = None  # data.leash.LeashData, when a hook has needs_public_data


class PostAggregationHook(Component):
    #: True: the run loads the server's public data set (the ``leash`` section) for this hook
    needs_public_data: ClassVar[bool] = False
    #: metric names that are estimates (non-finite values are logged, not divergence)
    diagnostics: ClassVar[tuple[str, ...]] = ()
    #: base methods with which this hook aggregates with the simple mean ``1/m``
    simple_mean_bases: ClassVar[tuple[str, ...]] = ()
    #: hooks it is an alternative to (never both in one run)
    excludes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config) -> None:
        self.config = config
        self.metrics: dict[str, torch.Tensor] = {}

    def bind(self, env: HookEnv) -> None:
        self.env = env

    def setup(self, w: torch.Tensor) -> torch.Tensor:
        """Called once before round 1 (also before a resumed run loads its checkpoint); returns
        the initial global model."""
        return w

    def local_observer(self):
        """An ``engine.local.StepObserver`` to run on every client, or None."""
        return None

    def after_aggregation(
        self, w: torch.Tensor, ctx: RoundContext, updates: list[ClientUpdate], oracle
    ) -> torch.Tensor:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
