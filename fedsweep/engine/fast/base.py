"""What a fast path is (:class:`Accelerator`) and what it is handed (:class:`ClientSteps`).

A fast path runs one client's ``τ`` local steps in one call and must give the numbers of the
reference loop (``engine.local.LocalTrainer.train``): bit for bit, or to rounding where its
module says so and a test in ``tests/engine/`` holds it to that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from fedsweep.core.messages import LocalDirection
from fedsweep.engine.functional import FunctionalModel


@dataclass
class ClientSteps:
    """One client's local steps, as the reference loop would run them."""

    y: torch.Tensor  # the iterate, ``w_t`` at the start; the fast path updates it in place
    w: torch.Tensor  # the broadcast model ``w_t`` (FedProx's ``μ (y − w_t)``)
    x: torch.Tensor  # the training rows (the whole set, or a client's copy in batch order)
    target: torch.Tensor  # their labels
    rows: torch.Tensor  # [τ, B]: step ``t`` reads ``x[rows[t]]``
    lr: float  # η of the round
    direction: LocalDirection  # the base method's ``v = g + μ (y − w_t) + offset``
    gbuf: torch.Tensor | None  # [τ, d]: receives every step's ``g`` (the selector's), or None
    vbuf: torch.Tensor | None  # [τ, d]: receives every step's ``v``, or None


class Accelerator:
    """A fast path for one client's local steps.

    The seam (``engine.fast.FastPath``) has already checked what every fast path needs (no step
    observers, no BatchNorm buffers, a closed-form direction, a selector that takes buffers);
    ``applies`` adds what this one needs (the model, the device, the dtype, its compiled code),
    and ``run`` runs the steps."""

    name: ClassVar[str] = ""

    def applies(
        self, fm: FunctionalModel, x: torch.Tensor, w: torch.Tensor, direction: LocalDirection
    ) -> bool:
        """Whether :meth:`run` can run the steps of model ``fm`` on the data ``x`` from ``w``
        with ``direction`` here (no side effect)."""
        raise NotImplementedError

    def run(self, fm: FunctionalModel, steps: ClientSteps) -> torch.Tensor:
        """Run ``len(steps.rows)`` steps: ``steps.y`` updated in place, every ``g``/``v`` written
        to ``steps.gbuf``/``steps.vbuf`` (when not None). Returns the sum of the step losses
        (each at the iterate before its step) as a 0-dim tensor of ``y``'s dtype."""
        raise NotImplementedError
