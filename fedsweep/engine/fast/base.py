"""What a fast path is (:class:`Accelerator`) and what it is handed (:class:`ClientSteps`).

A fast path runs one client's ``τ`` local steps in one call and must give the numbers of the
reference loop (``engine.local.LocalTrainer.train``): bit for bit, or to rounding where its
module says so and a test in ``tests/engine/`` holds it to that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
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
    ybuf: torch.Tensor | None = None  # [τ, d]: receives the iterate each step starts from
    loss: torch.Tensor | None = None  # the loss sum of the client's earlier steps (None: 0)

    def part(self, start: int, stop: int, loss: torch.Tensor | None) -> ClientSteps:
        """Steps ``start`` to ``stop`` (views of the rows and buffers), adding to ``loss``."""

        def cut(buf):
            return None if buf is None else buf[start:stop]

        return replace(
            self,
            rows=self.rows[start:stop],
            gbuf=cut(self.gbuf),
            vbuf=cut(self.vbuf),
            ybuf=cut(self.ybuf),
            loss=loss,
        )


@dataclass
class Trajectory:
    """What a fast path recorded of one client's steps, for a step observer
    (``StepObserver.on_trajectory``): row ``t`` of each ``[τ, d]`` tensor is step ``t`` as
    ``on_step`` would have seen it; a tensor the observer did not name in ``fused_record`` is
    None. The tensors are the seam's buffers: valid during the call only."""

    y: torch.Tensor | None  # the iterate each step starts from
    g: torch.Tensor | None  # the step's gradient
    v: torch.Tensor | None  # the step's direction (``v is g`` under plain SGD)
    lr: float  # η of the round
    #: ``∇F_i(w_t)`` over the client's whole local set in one call of the accelerator that ran
    #: the steps (equal to the client oracle's chunks to rounding), or None where it has none
    full_gradient: Callable[[], torch.Tensor | None]


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
        """Run ``len(steps.rows)`` steps: ``steps.y`` updated in place, every ``g``/``v``/iterate
        written to ``steps.gbuf``/``steps.vbuf``/``steps.ybuf`` (when not None). Returns
        ``steps.loss`` (None: 0) plus the step losses (each at the iterate before its step),
        added in step order, as a 0-dim tensor of ``y``'s dtype: a client's steps run in parts
        (``ClientSteps.part``, to report progress) sum as in one call."""
        raise NotImplementedError

    def gradient(
        self,
        fm: FunctionalModel,
        x: torch.Tensor,
        target: torch.Tensor,
        rows: torch.Tensor,
        w: torch.Tensor,
    ) -> torch.Tensor | None:
        """``∇F(w)`` (the mean over the rows ``rows`` of ``x`` plus the model's penalty) in one
        call, for an accelerator that :meth:`applies` to ``fm``, ``x`` and ``w``; equal to the
        client oracle's chunked gradient to rounding (``Trajectory.full_gradient``). None (the
        default): none here (the caller takes the oracle's)."""
        return None
