"""Each client's task for the round: a step policy (how many local steps) and a learning-rate
schedule (at what rate). Both are components chosen by config (``step_policy``,
``lr_schedule``) and own their config sections.

Step policies (``tasks(t, clients, lr) -> [ClientTask]``; ``observe(t, w, updates, cohort, lr)``
after the round lets an adaptive policy such as FedVeca's set the next round's steps, from what
its ``local_observer()`` measured during the local steps):

* ``epochs`` (default): ``τ_i = floor(E |D_i| / B)``, at least 1 (docs/algorithms.md §1.2), with
  ``B = |D_i|`` under ``train.batch_size: full`` (FedSGD: one full-batch step per epoch).
* ``fixed``: ``τ_i = fixed_steps.steps`` for every client (``K`` local steps, the FedOpt slides'
  "K steps"; FedWalk's ``T_c``; FedVeca's fixed-τ baselines).
* ``fedveca``: FedVeca's adaptive per-client steps (``fedsweep.algorithms.fedveca``, §5).

Learning-rate schedules (``lr(t)``): ``constant`` (``train.lr``) and ``step``:
``η_t = train.lr · γ^{#{m ∈ milestones : t > m}}`` (FedWalk's "1e-2 until round 100, then 1e-5"
is ``milestones: [100]``, ``gamma: 0.001``).
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import torch
from pydantic import Field, field_validator

from fedsweep.config.section import Section
from fedsweep.engine.batches import local_steps
from fedsweep.engine.local import StepObserver
from fedsweep.engine.messages import ClientTask, ClientUpdate, Cohort


def client_batch_size(batch_size: int | str, num_samples: int) -> int:
    """``B`` of one client: the configured size, or the whole local set for ``full``."""
    return num_samples if batch_size == "full" else int(batch_size)


# ------------------------------------------------------------------------------ step policies
class FixedStepsConfig(Section):
    steps: int = Field(1, ge=1, description="Local steps per round for every client (K).")


class StepPolicy:
    name: ClassVar[str] = ""

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


class EpochSteps(StepPolicy):
    name = "epochs"

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


class FixedSteps(StepPolicy):
    name = "fixed"

    def steps(self, t, client):
        return self.config.fixed_steps.steps


# --------------------------------------------------------------------------- learning rates
class StepLRConfig(Section):
    milestones: list[int] = Field(
        default_factory=list, description="Rounds after which the rate is multiplied by gamma."
    )
    gamma: float = Field(0.1, gt=0, description="Factor applied at every milestone.")

    @field_validator("milestones")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(m < 1 for m in value) or any(b <= a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError(
                f"milestones must be rounds >= 1 in increasing order (allowed: e.g. [100] or "
                f"[100, 200]), got {value}"
            )
        return value


class LRSchedule:
    name: ClassVar[str] = ""

    def __init__(self, config) -> None:
        self.config = config
        self.base = config.train.lr

    def lr(self, t: int) -> float:
        raise NotImplementedError


class ConstantLR(LRSchedule):
    name = "constant"

    def lr(self, t):
        return self.base


class StepLR(LRSchedule):
    name = "step"

    def lr(self, t):
        passed = sum(1 for m in self.config.lr_step.milestones if t > m)
        return self.base if passed == 0 else self.base * self.config.lr_step.gamma**passed
