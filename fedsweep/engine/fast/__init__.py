"""The seam between the reference path and the fast paths (issue 33).

The reference path is the per-step loop of ``engine.local.LocalTrainer.train`` and the
components' own hooks (``local_direction``, ``record``, ``selectors.herding.herd``): it runs
everywhere and states the math. Everything compiled or fused lives in this package and must give
the reference's numbers (bit for bit, or to rounding where its module says so; the equivalence
suite ``tests/engine/test_fast_equivalence.py`` holds every composition to that):

* :mod:`.svm_trajectory`: the SVM's ``τ`` local steps in one numba call (``FEDSWEEP_FUSED=0``
  turns it off), an :class:`Accelerator`;
* :mod:`.layout`: under the ``fixed`` order, a client's rows copied in batch order for the
  accelerators (``FEDSWEEP_LAYOUT=0`` turns it off);
* :mod:`.herding`: BHerd's herding compiled (the greedy always on the CPU, bit-identical; the
  Gram matrix too after a fast trajectory, to rounding), called by ``selectors.herding``.

**The seam's protocol.** ``LocalTrainer`` asks :meth:`FastPath.run` once per client, after the
components' ``begin_client``. A fast path applies when nothing watches single steps (no step
observers), no buffers change during training (no BatchNorm), the base method states its
direction in closed form (``BaseMethod.fused_direction`` returns a ``LocalDirection``, ``v = g +
μ (y − w_t) + offset``; None, e.g. under momentum: no fast path), the selector takes buffers
instead of seeing each step (``Selector.fused_buffers`` returns ``(g_buffer, v_buffer)``; None,
e.g. GraB: no fast path), and an accelerator of :data:`ACCELERATORS` applies (model, device,
dtype, compiled code). ``fused_buffers`` is called only then (it tells the selector its buffers
are filled in one call). Otherwise :meth:`FastPath.run` returns None and the reference loop runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from fedsweep.engine.fast.base import Accelerator, ClientSteps
from fedsweep.engine.fast.layout import RowLayout
from fedsweep.engine.fast.svm_trajectory import SVMAccelerator
from fedsweep.engine.functional import FunctionalModel

if TYPE_CHECKING:
    from fedsweep.engine.batches import Client

__all__ = ["ACCELERATORS", "Accelerator", "ClientSteps", "FastPath"]

#: the fast paths the seam asks, in order (the first that applies runs); one instance of each
#: per trainer (an accelerator may keep scratch memory)
ACCELERATORS: list[type[Accelerator]] = [SVMAccelerator]


class FastPath:
    """The seam, one per ``LocalTrainer``: runs a client's local steps on the first accelerator
    that applies, or declines (None)."""

    def __init__(
        self, fm: FunctionalModel, x, y, method, selector, observers, accelerators=None
    ) -> None:
        self.fm, self.x, self.y = fm, x, y
        self.method, self.selector = method, selector
        self.observers = observers  # the trainer's list (not a copy)
        self.accelerators = [
            cls() for cls in (ACCELERATORS if accelerators is None else accelerators)
        ]
        self.layout = RowLayout(x, y)
        self.clients_run = 0  # clients whose steps ran on an accelerator (tests, diagnostics)

    def accelerator(self, client: int, w: torch.Tensor):
        """``(accelerator, direction)`` for client ``client``'s steps from ``w``, or None: the
        protocol's checks (module docstring) short of the selector's buffers. No side effect;
        call it after the method's ``begin_client``."""
        if self.observers or self.fm.buffers:
            return None
        direction = self.method.fused_direction(client)
        if direction is None:
            return None
        for acc in self.accelerators:
            if acc.applies(self.fm, self.x, w, direction):
                return acc, direction
        return None

    def run(
        self, client: Client, tau: int, rows: torch.Tensor, y: torch.Tensor, w: torch.Tensor, lr
    ) -> torch.Tensor | None:
        """Run the ``τ`` steps the client's schedule just took (``rows`` ``[τ, B]``, global) from
        ``y = w`` (updated in place), filling the selector's buffers; the sum of the step
        losses. None: no fast path applies (nothing changed), the reference loop runs them."""
        chosen = self.accelerator(client.index, w)
        if chosen is None:
            return None
        acc, direction = chosen
        buffers = self.selector.fused_buffers(direction)
        if buffers is None:
            return None
        x, target = self.x, self.y
        if RowLayout.applies(client):  # the fixed order: each batch's rows in sequence
            x, target, rows = self.layout(client, tau)
        self.clients_run += 1
        steps = ClientSteps(y, w, x, target, rows, lr, direction, *buffers)
        return acc.run(self.fm, steps)
