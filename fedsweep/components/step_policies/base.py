"""The step-policy interface: each client's task for the round (how many local steps).

``tasks(t, clients, lr) -> [ClientTask]``; ``observe(t, w, updates, cohort, lr)`` after the round
lets an adaptive policy such as FedVeca's set the next round's steps, from what its
``local_observer()`` measured during the local steps.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from fedsweep.core.messages import ClientTask, ClientUpdate, Cohort
from fedsweep.core.registry import Component
from fedsweep.engine.local import StepObserver


class StepPolicy(Component):
    def steps(self, t: int, client: int) -> int:
        raise NotImplementedError

    #: names of this policy's metrics that are estimates, not results: a non-finite value is
    #: logged and handled by the policy, it does not mark the run diverged
    diagnostics: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config, sizes: list[int]) -> None:
        """``sizes``: every client's ``|D_i|``."""
        self.config = config
        self.sizes = sizes
        #: this round's metrics (0-dim tensors; per client as ``client/{i}/name``), set by
        #: ``observe``
        self.metrics: dict[str, torch.Tensor] = {}

    def tasks(self, t: int, clients: list[int], lr: float) -> list[ClientTask]:
        return [ClientTask(i, self.steps(t, i), lr) for i in clients]

    def local_observer(self) -> StepObserver | None:
        """What the policy needs to see of the local steps (``engine.local.StepObserver``)."""
        return None

    def observe(
        self, t: int, w: torch.Tensor, updates: list[ClientUpdate], cohort: Cohort, lr: float
    ) -> None:
        """After the round's aggregation; ``w`` is the round's broadcast model ``w_t`` and
        ``cohort.weights`` the aggregation weights (adaptive policies set the next round's
        steps here)."""

    def nominal_steps(self) -> list[int]:
        """Every client's steps in round 1 (the ``fedsweep.clients.num_steps`` tag)."""
        return [self.steps(1, i) for i in range(len(self.sizes))]

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
