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
  Gram matrix too after a fast trajectory, to rounding), called by ``selectors.herding``;
* :mod:`.balancing`: GraB's online sign balancing compiled, over the gradients a fast
  trajectory recorded (bit-identical to the selector's per-step loop on the same gradients
  whenever no inner product lies within rounding of 0), called by ``selectors.grab``.

**The seam's protocol.** ``LocalTrainer`` asks :meth:`FastPath.run` once per client, after the
components' ``begin_client``. A fast path applies when no buffers change during training (no
BatchNorm), the base method states its direction in closed form (``BaseMethod.fused_direction``
returns a ``LocalDirection``, ``v = g + μ (y − w_t) + offset``; None, e.g. under momentum: no
fast path), every step observer takes the recorded trajectory instead of single steps
(``StepObserver.fused_record`` names what it reads of every step, ``{"y", "g", "v"}``; None,
e.g. FedWalk's ``L_k``: no fast path), the selector takes buffers instead of seeing each step
(``Selector.fused_buffers`` returns ``(g_buffer, v_buffer)``, e.g. BHerd and GraB; None: no fast
path), and an accelerator of :data:`ACCELERATORS` applies (model, device, dtype, compiled
code). ``fused_buffers`` is called only then (it tells the selector its buffers are filled in
one call), and after the steps each observer gets what it asked for, ``[τ, d]`` each, in one
``StepObserver.on_trajectory`` call (a :class:`Trajectory`, in place of ``on_step``; the seam's
buffers, or the selector's ``g`` buffer, valid during the call), with the client's full local
gradient at ``w_t`` on the same accelerator (``Trajectory.full_gradient``: FedVeca's ``G0``).
Otherwise :meth:`FastPath.run` returns None and the reference loop runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from fedsweep.engine.fast.base import Accelerator, ClientSteps, Trajectory
from fedsweep.engine.fast.layout import RowLayout
from fedsweep.engine.fast.svm_trajectory import SVMAccelerator
from fedsweep.engine.functional import FunctionalModel

if TYPE_CHECKING:
    from fedsweep.engine.batches import Client

__all__ = ["ACCELERATORS", "Accelerator", "ClientSteps", "FastPath", "Trajectory"]

#: the fast paths the seam asks, in order (the first that applies runs); one instance of each
#: per trainer (an accelerator may keep scratch memory)
ACCELERATORS: list[type[Accelerator]] = [SVMAccelerator]


#: what a fast trajectory records of every step for a step observer
#: (``StepObserver.fused_record``): the iterate the step starts from, the gradient, the direction
RECORDABLE = frozenset({"y", "g", "v"})


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
        self._buffers: dict[str, torch.Tensor] = {}  # the observers' [τ, d] buffers, reused

    def observer_records(self, direction) -> list[frozenset[str]] | None:
        """What each step observer reads of the recorded trajectory (``fused_record``), or None
        when one must see single steps. No side effect."""
        asked = []
        for obs in self.observers:
            record = getattr(obs, "fused_record", None)  # not a StepObserver: single steps
            wants = None if record is None else record(direction)
            if wants is None:
                return None
            if not wants <= RECORDABLE:
                raise ValueError(
                    f"{type(obs).__name__}.fused_record: {sorted(wants)} not in "
                    f"{sorted(RECORDABLE)}"
                )
            asked.append(frozenset(wants))
        return asked

    def accelerator(self, client: int, w: torch.Tensor):
        """``(accelerator, direction)`` for client ``client``'s steps from ``w``, or None: the
        protocol's checks (module docstring) short of the selector's buffers. No side effect;
        call it after the components' ``begin_client``."""
        if self.fm.buffers:
            return None
        direction = self.method.fused_direction(client)
        if direction is None or self.observer_records(direction) is None:
            return None
        for acc in self.accelerators:
            if acc.applies(self.fm, self.x, w, direction):
                return acc, direction
        return None

    def _buffer(self, kind: str, tau: int, w: torch.Tensor) -> torch.Tensor:
        """The seam's ``[τ, d]`` buffer for ``kind`` (kept across clients, grown as needed)."""
        buf = self._buffers.get(kind)
        if buf is None or buf.shape[0] < tau or buf.dtype != w.dtype or buf.device != w.device:
            buf = self._buffers[kind] = torch.empty(tau, w.shape[0], dtype=w.dtype, device=w.device)
        return buf[:tau]

    def run(
        self,
        client: Client,
        tau: int,
        rows: torch.Tensor,
        y: torch.Tensor,
        w: torch.Tensor,
        lr,
        report=None,
        every: int = 0,
    ) -> torch.Tensor | None:
        """Run the ``τ`` steps the client's schedule just took (``rows`` ``[τ, B]``, global) from
        ``y = w`` (updated in place), filling the selector's buffers and handing the step
        observers the trajectory; the sum of the step losses. None: no fast path applies
        (nothing changed), the reference loop runs them. ``report(done)``: called after every
        ``every`` steps, as the reference loop reports its progress (the steps then run in
        parts of ``every``: the same numbers, bit for bit)."""
        chosen = self.accelerator(client.index, w)
        if chosen is None:
            return None
        acc, direction = chosen
        asked = self.observer_records(direction)
        buffers = self.selector.fused_buffers(direction)
        if buffers is None:
            return None
        gbuf, vbuf = buffers
        wanted = frozenset().union(*asked)
        if direction.is_gradient and "v" in wanted:  # v is g: one buffer serves both
            wanted = wanted - {"v"} | {"g"}
        if "g" in wanted and gbuf is None:
            gbuf = self._buffer("g", tau, w)
        if "v" in wanted and vbuf is None:
            vbuf = self._buffer("v", tau, w)
        ybuf = self._buffer("y", tau, w) if "y" in wanted else None
        x, target = self.x, self.y
        if RowLayout.applies(client):  # the fixed order: each batch's rows in sequence
            x, target, rows = self.layout(client, tau)
        self.clients_run += 1
        steps = ClientSteps(y, w, x, target, rows, lr, direction, gbuf, vbuf, ybuf)
        if report is None or not every or tau < every:
            loss = acc.run(self.fm, steps)
        else:
            loss = None
            for start in range(0, tau, every):
                stop = min(tau, start + every)
                loss = acc.run(self.fm, steps.part(start, stop, loss))
                if stop % every == 0:
                    report(stop)
        recorded = {"y": ybuf, "g": gbuf, "v": gbuf if direction.is_gradient else vbuf}
        for obs, wants in zip(self.observers, asked, strict=True):
            kept = (recorded[k] if k in wants else None for k in ("y", "g", "v"))
            obs.on_trajectory(Trajectory(*kept, lr, lambda: self.full_gradient(acc, client, w)))
        return loss

    def full_gradient(self, acc: Accelerator, client: Client, w: torch.Tensor):
        """``∇F_i(w)`` over client ``client``'s whole local set on ``acc`` (None: it has no
        one-call gradient), read from the client's fixed-order copy where it holds every row
        (in sequence: a quarter faster than the scattered rows)."""
        whole = self.layout.whole(client) if RowLayout.applies(client) else None
        if whole is None:
            return acc.gradient(self.fm, self.x, self.y, client.indices, w)
        x, target = whole
        return acc.gradient(self.fm, x, target, torch.arange(len(x)), w)
