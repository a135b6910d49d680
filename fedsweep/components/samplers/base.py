"""The client-sampler interface (docs/algorithms.md §7): ``SELECT(t, w)`` of the round.

Client *sampling* (which clients train this round) is a different thing from the upload
*selector* (which of its local gradients a client sends, ``fedsweep.components.selectors``).

``sample(t, w, rng, oracle) -> Cohort``: ``rng`` is this round's own ``selection`` stream
(``numpy_rng(seed, "selection", t)``, §1.6), so a cohort never depends on batch orders or on
earlier rounds' draws, and a resumed run draws the same cohorts. ``oracle`` answers a client's
full-local-set loss or gradient at a model (Power-of-Choice, DivFL); a sampler that asks nothing
of it costs nothing for the clients it does not pick. State a sampler keeps across rounds
(DivFL's gradient table) is its ``state_dict``.
"""

from __future__ import annotations

import math
from typing import ClassVar, Protocol

import numpy as np
import torch
from pydantic import Field

from fedsweep.core.messages import Cohort
from fedsweep.core.registry import Component
from fedsweep.core.section import Section


class CohortConfig(Section):
    """How many clients a (non-full) sampler picks per round: a count or a fraction."""

    size: int | None = Field(None, ge=1, description="m, clients per round.")
    fraction: float | None = Field(
        None, gt=0, le=1, description="C: m = max(floor(C N), 1) (§7.1)."
    )


class ClientOracle(Protocol):
    """A client's view of its whole local training set at a model ``w`` (``engine.oracle``)."""

    num_clients: int

    def losses(self, clients: list[int], w: torch.Tensor) -> torch.Tensor:
        """``F_k(w)`` over each client's full local set (penalty included), float64 [len]."""

    def batch_losses(
        self, clients: list[int], w: torch.Tensor, rng: np.random.Generator
    ) -> torch.Tensor:
        """``F_k(w)`` on one batch of ``B`` samples drawn from ``rng`` per client, float64."""

    def gradients(self, clients: list[int], w: torch.Tensor) -> torch.Tensor:
        """``∇F_k(w)`` over each client's full local set, ``[len, d]`` in ``w``'s dtype."""


class Sampler(Component):
    #: True: it composes with base methods that pool the data (only full participation does)
    pooled_ok: ClassVar[bool] = False
    #: whether the round records the cohort it drew (every sampler but full participation)
    records_cohort: ClassVar[bool] = True
    #: when its aggregation weights are the simple mean ``1/m`` of the cohort (FedWalk's Eq. 4):
    #: False never (``p_i``), None always, or ``("section.field", values)``
    simple_mean: ClassVar[tuple[str, tuple[str, ...]] | None | bool] = False

    @classmethod
    def config_errors(cls, config) -> list[str]:
        """What makes ``config`` unrunnable for this sampler (one message per problem), checked
        at validation before anything starts. The base rule: a cohort of ``1..N`` clients given
        as exactly one of ``cohort.size`` / ``cohort.fraction``."""
        cohort, n = config.cohort, config.data.num_clients
        if cohort.size is None and cohort.fraction is None:
            return [
                f"sampler {cls.name!r} needs the cohort: set cohort.size (m, allowed: 1..{n}) or "
                "cohort.fraction (C, allowed: > 0 and <= 1)"
            ]
        if cohort.size is not None and cohort.fraction is not None:
            return [
                f"field `cohort.fraction`: got {cohort.fraction!r} and cohort.size "
                f"{cohort.size!r}: give one of them"
            ]
        if cohort.size is not None and cohort.size > n:
            return [
                f"field `cohort.size`: got {cohort.size}: more than the {n} clients "
                f"(data.num_clients) (allowed: 1..{n})"
            ]
        return []

    @classmethod
    def partition_errors(cls, config, sizes: list[int]) -> list[str]:
        """What the actual client sizes ``|D_i|`` rule out (checked once the data is split)."""
        return []

    def __init__(self, config, p: torch.Tensor) -> None:
        """``p``: the clients' data weights ``p_i = |D_i| / |D|`` (float64, sums to 1)."""
        self.config = config
        self.p = p
        self.num_clients = len(p)

    def sample(
        self, t: int, w: torch.Tensor, rng: np.random.Generator, oracle: ClientOracle
    ) -> Cohort:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


#: ``C N`` is a float product (0.29 * 100 = 28.999999999999996): within this of an integer it
#: counts as that integer before the floor
FLOOR_TOL = 1e-9


def cohort_size(config, num_clients: int) -> int:
    """``m``: ``cohort.size``, or ``max(floor(C N), 1)`` from ``cohort.fraction`` (§7.1)."""
    if config.cohort.size is not None:
        return config.cohort.size
    return max(math.floor(config.cohort.fraction * num_clients + FLOOR_TOL), 1)
