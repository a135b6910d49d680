"""``epochs`` (the default): ``τ_i = floor(E |D_i| / B)``, at least 1 (docs/algorithms.md §1.2),
with ``B = |D_i|`` under ``train.batch_size: full`` (FedSGD: one full-batch step per epoch)."""

from __future__ import annotations

import warnings

from fedsweep.components.step_policies.base import StepPolicy
from fedsweep.core.registry import register
from fedsweep.engine.batches import client_batch_size, local_steps


@register("step_policy", "epochs", default=True)
class EpochSteps(StepPolicy):
    def __init__(self, config, sizes: list[int]) -> None:
        super().__init__(config, sizes)
        train = config.train
        self.tau = []
        small = 0  # clients with E|D_i|/B < 1: one warning with the count, not one per client
        for n in sizes:
            b = client_batch_size(train.batch_size, n)
            small += int(train.local_epochs * n // b) == 0
            self.tau.append(local_steps(n, train.local_epochs, b))
        if small:
            warnings.warn(
                f"{small} of {len(sizes)} clients have E|D_i|/B < 1: using tau_i = 1 (§1.2)",
                stacklevel=2,
            )

    def steps(self, t, client):
        return self.tau[client]
