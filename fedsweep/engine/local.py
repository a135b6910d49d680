"""Local training of one client for one round (docs/algorithms.md §1.4, the inner loop).

The base method supplies the local direction and builds the message; the upload selector
records every step and, if active, hands the method the vector to upload (``delta``) before the
message is built. Tensor code only: the batch rows of all steps are gathered up front, the loss
is accumulated as a tensor (no host transfer per step).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedsweep.engine.batches import BatchSchedule
from fedsweep.engine.functional import FunctionalModel
from fedsweep.engine.messages import ClientTask, ClientUpdate, RoundContext


@dataclass
class Client:
    index: int
    indices: torch.Tensor  # global training indices (on the run's device)
    num_steps: int  # τ_i of round 1 (the step policy decides each round's)
    schedule: BatchSchedule

    @property
    def num_samples(self) -> int:
        return len(self.indices)


class LocalTrainer:
    def __init__(self, fm: FunctionalModel, x, y, method, selector) -> None:
        self.fm, self.x, self.y = fm, x, y
        self.method, self.selector = method, selector

    def train(self, client: Client, task: ClientTask, w: torch.Tensor, ctx: RoundContext):
        """``task.num_steps`` local steps of client ``client`` from the broadcast ``w``."""
        fm, method, selector = self.fm, self.method, self.selector
        tau, lr = task.num_steps, task.lr
        record = selector.records_gradients
        rows = client.indices[client.schedule.take(tau).to(w.device)]
        y = w.clone()
        loss_sum = torch.zeros((), dtype=w.dtype, device=w.device)
        selector.begin_client(client.index, tau, fm.dim, w.dtype, w.device)
        method.begin_client(client.index, ctx)
        for step in range(tau):
            batch = rows[step]
            g, loss = fm.gradient(y, self.x.index_select(0, batch), self.y.index_select(0, batch))
            v = method.local_direction(client.index, g, y, w)
            if record:
                selector.record(step, g, v)
            y.sub_(v, alpha=lr)
            loss_sum += loss
        sel = selector.finish_client(client.index, ctx)
        update: ClientUpdate = method.client_update(
            client.index,
            w,
            y,
            client.num_samples,
            tau,
            ctx,
            delta=None if sel is None else sel.delta,
        )
        update.metrics["local_loss"] = loss_sum / tau
        if sel is not None:
            update.metrics.update(sel.metrics)
            update.records.update(sel.records)
            update.extras.update(sel.extras)
        return update
