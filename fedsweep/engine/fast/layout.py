"""The fixed-order row layout: a client's training rows copied once in the order of its fixed
pass, so a fast path reads every batch as ``B`` consecutive rows instead of ``B`` rows scattered
over the training set. The same rows in the same order: the same numbers, bit for bit (tested).
Costs one more copy of the clients' training rows. ``FEDSWEEP_LAYOUT=0`` keeps the scattered
rows (bench).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from fedsweep.core.device import switched_on

if TYPE_CHECKING:
    from fedsweep.engine.batches import BatchSchedule, Client

#: environment switch: ``0`` keeps the fast path on the scattered training rows (bench)
LAYOUT_ENV = "FEDSWEEP_LAYOUT"


def taken_batch_numbers(schedule: BatchSchedule, tau: int) -> torch.Tensor:
    """For the ``fixed`` order, *after* ``take(tau)``: which rows of ``schedule.batches`` it
    returned, ``[τ]`` batch numbers. The cursor moved ``τ`` batches round the fixed pass, so the
    numbers are the next take's shifted back by ``τ`` (modulo the pass)."""
    return (schedule.fixed_batch_numbers(tau) - tau) % schedule.n_batches


class RowLayout:
    """Per trainer: each client's rows in the order of its fixed pass, rebuilt if the pass
    changes (a restored checkpoint)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y
        self.clients: dict[int, tuple] = {}  # client -> (its pass, x and y in batch order)

    @staticmethod
    def applies(client: Client) -> bool:
        return client.schedule.order == "fixed" and switched_on(LAYOUT_ENV)

    def whole(self, client: Client):
        """``(x, y)``: the client's copy when it holds every one of its rows (its fixed pass
        drops none: ``n_b B = |D_i|``), else None. Call it after ``__call__`` built the copy."""
        cached = self.clients.get(client.index)
        if cached is None or cached[0] is not client.schedule.batches:
            return None
        return cached[1:] if len(cached[1]) == client.num_samples else None

    def __call__(self, client: Client, tau: int):
        """``(x, y, rows)`` for the ``τ`` batches the client's schedule just took: its copy of
        the rows and ``rows`` ``[τ, B]`` into that copy (the same rows as ``client.indices
        [positions]``, in the same order)."""
        schedule = client.schedule
        batches = schedule.batches
        cached = self.clients.get(client.index)
        if cached is None or cached[0] is not batches:
            rows = client.indices[batches.reshape(-1).to(client.indices.device)]
            cached = (batches, self.x.index_select(0, rows), self.y.index_select(0, rows))
            self.clients[client.index] = cached
        size = batches.shape[1]
        rows = taken_batch_numbers(schedule, tau)[:, None] * size + torch.arange(size)
        return cached[1], cached[2], rows
