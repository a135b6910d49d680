"""Local training of one client for one round (docs/algorithms.md §1.4, the inner loop).

The base method supplies the local direction and builds the message; the upload selector
records every step and, if active, hands the method the vector to upload (``delta``) before the
message is built. Tensor code only: the batch rows of all steps are gathered up front, the loss
is accumulated as a tensor (no host transfer per step). This loop is the reference path: the
fast paths (a client's steps in one compiled call) sit behind one seam, ``engine.fast``, asked
once per client (``FastPath.run``); where none applies, or one is switched off, this loop runs.

**Step observers** watch the local trajectory without changing it (FedVeca's smoothness and
divergence estimates, §5.3, are one): any component may contribute one
(``local_observer()``). Per client and round the trainer calls ``begin_client`` with the task and
the broadcast model, ``on_step`` at every step before the update (``y = w^t``, the gradient
``g_t`` on the step's batch, the direction ``v_t`` the step applies), and ``end_client`` with the
final model and, when the observer asks for it (``wants_next_batch``), the client's *next* batch
(peeked: the batch cursor does not move). Observers add their measurements to the update's
``metrics`` (logged) and ``extras`` (read by the server-side components).

An observer that can read the whole trajectory at once (FedVeca's estimates) names what it
reads of every step in ``fused_record``; where a fast path runs the client's steps in one call
it then gets them in one ``on_trajectory`` call (``[τ, d]`` tensors) in place of ``on_step``.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from fedsweep.core.messages import ClientTask, ClientUpdate, LocalDirection, RoundContext
from fedsweep.engine.batches import Client
from fedsweep.engine.buffers import ClientBuffers
from fedsweep.engine.fast import FastPath, Trajectory
from fedsweep.engine.functional import FunctionalModel


class StepObserver:
    """Watches one client's local steps; measurements only (never changes ``y`` or ``g``)."""

    #: True: ``end_client`` receives the client's next batch (``(x, y)``), else None
    wants_next_batch: ClassVar[bool] = False

    def bind(self, fm: FunctionalModel, oracle) -> None:
        """The model function and the client oracle, once, before the first round."""

    def begin_client(self, client: int, task: ClientTask, w: torch.Tensor) -> None:
        """Before the first local step; ``w`` is the broadcast model ``w_t``."""

    def on_step(
        self, t: int, y: torch.Tensor, g: torch.Tensor, v: torch.Tensor, lr: float, batch
    ) -> None:
        """Step ``t`` (0-based), before ``y <- y − lr v``; ``batch`` is ``(x_t, y_t)``."""

    def fused_record(self, direction: LocalDirection) -> frozenset[str] | None:
        """What this observer reads of every step when a fast path runs the client's steps in
        one call (``engine.fast``): a subset of ``{"y", "g", "v"}`` (the iterate a step starts
        from, its gradient, its direction), handed over in one :meth:`on_trajectory` call. None
        (the default): it must see the steps one at a time, with their batches (the engine then
        does not fuse). No side effect; asked after ``begin_client``."""
        return None

    def on_trajectory(self, steps: Trajectory) -> None:
        """Every step at once, after a fast path ran them, in place of ``on_step``: ``steps.y``,
        ``.g``, ``.v`` ``[τ, d]`` (row ``t``: step ``t``, as ``on_step`` would have seen it),
        each None unless :meth:`fused_record` named it (``v is g`` under plain SGD), and the
        client's full local gradient at ``w_t`` in one accelerator call
        (``steps.full_gradient()``). The tensors are the engine's buffers: read them here,
        keep no reference."""

    def end_client(self, y: torch.Tensor, next_batch, update: ClientUpdate) -> None:
        """After the last step: add measurements to ``update.metrics`` / ``update.extras``."""


#: local steps between two ``LocalTrainer.on_steps`` calls inside one client's training
STEP_REPORT = 256


class LocalTrainer:
    def __init__(self, fm: FunctionalModel, x, y, method, selector, observers=()) -> None:
        self.fm, self.x, self.y = fm, x, y
        self.method, self.selector = method, selector
        self.observers: list[StepObserver] = list(observers)
        self.buffers = ClientBuffers(fm.buffers)  # BatchNorm statistics per client (§8.4)
        #: ``on_steps(done, total)``: the local steps of this round done so far (every client),
        #: told at most every :data:`STEP_REPORT` steps and after each client (a progress bar
        #: inside long rounds: FedVeca's τ can reach τ_max); None: nobody asks
        self.on_steps = None
        self._steps_done = self._steps_total = 0
        #: the seam to the fast paths (``engine.fast``), asked once per client
        self.fast = FastPath(fm, x, y, method, selector, self.observers)

    @property
    def _report(self):
        """``report(done)`` for the seam: the client's first ``done`` steps are done (None:
        nobody asks)."""
        if self.on_steps is None:
            return None
        return lambda done: self.on_steps(self._steps_done + done, self._steps_total)

    def begin_round(self, tasks: list[ClientTask]) -> None:
        """A round of ``tasks`` starts: the BatchNorm statistics and the step count reset."""
        self.buffers.begin_round()
        self._steps_done, self._steps_total = 0, sum(task.num_steps for task in tasks)

    def train(self, client: Client, task: ClientTask, w: torch.Tensor, ctx: RoundContext):
        """``task.num_steps`` local steps of client ``client`` from the broadcast ``w``."""
        fm, method, selector, observers = self.fm, self.method, self.selector, self.observers
        tau, lr = task.num_steps, task.lr
        record = selector.records_gradients
        rows = client.indices[client.schedule.take(tau).to(w.device)]
        y = w.clone()
        self.buffers.begin_client()
        selector.begin_client(client.index, tau, fm.dim, w.dtype, w.device)
        method.begin_client(client.index, ctx)
        for obs in observers:
            obs.begin_client(client.index, task, w)
        # the seam: every step in one call on a fast path, or None (then the loop runs them)
        fast_loss = self.fast.run(client, tau, rows, y, w, lr, self._report, STEP_REPORT)
        if fast_loss is None:
            loss_sum, reference_steps = torch.zeros((), dtype=w.dtype, device=w.device), tau
        else:
            loss_sum, reference_steps = fast_loss, 0
        for step in range(reference_steps):
            batch = rows[step]
            xb, yb = self.x.index_select(0, batch), self.y.index_select(0, batch)
            g, loss = fm.gradient(y, xb, yb)
            v = method.local_direction(client.index, g, y, w)
            if record:
                selector.record(step, g, v)
            for obs in observers:
                obs.on_step(step, y, g, v, lr, (xb, yb))
            y.sub_(v, alpha=lr)
            loss_sum += loss
            if self.on_steps is not None and step % STEP_REPORT == STEP_REPORT - 1:
                self.on_steps(self._steps_done + step + 1, self._steps_total)
        sel = selector.finish_client(client.index, ctx)
        update: ClientUpdate = method.client_update(
            client.index,
            w,
            y,
            client.num_samples,
            tau,
            ctx,
            delta=None if sel is None else sel.delta,
            state_from_trajectory=sel is not None and sel.state_from_trajectory,
        )
        update.metrics["local_loss"] = loss_sum / tau
        if sel is not None:
            update.metrics.update(sel.metrics)
            update.records.update(sel.records)
            update.extras.update(sel.extras)
        self.buffers.end_client(update)
        if observers:
            nxt = None
            if any(obs.wants_next_batch for obs in observers):
                batch = client.indices[client.schedule.peek().to(w.device)]
                nxt = (self.x.index_select(0, batch), self.y.index_select(0, batch))
            for obs in observers:
                obs.end_client(y, nxt, update)
        self._steps_done += tau
        if self.on_steps is not None:
            self.on_steps(self._steps_done, self._steps_total)
        return update
