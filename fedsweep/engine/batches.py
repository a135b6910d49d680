"""Minibatch schedules of docs/algorithms.md §1.3, with a cursor that persists across rounds.

A pass over a client's ``n`` samples has ``n_b = floor(n / B)`` batches (the last incomplete
batch is dropped, D6); if ``n < B`` a batch is the whole local set (§1.2). ``take(tau)`` returns
the next ``tau`` batches as a ``[tau, B]`` tensor of *local* positions:

* ``fixed``: one permutation drawn at creation, cut into batches, visited cyclically;
* ``rr``: a fresh permutation every time the cursor wraps to the start of a pass;
* ``iid``: every step draws ``B`` positions uniformly without replacement.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ORDERS = ("fixed", "rr", "iid")
IID_BLOCK = 1 << 22  # random keys drawn at once by the iid order (16 MB of float32)


def local_steps(num_samples: int, local_epochs: float, batch_size: int) -> int:
    """``tau_i = floor(E |D_i| / B)``, at least 1 (§1.2, B4)."""
    return max(1, int(local_epochs * num_samples // batch_size))


class BatchSchedule:
    def __init__(self, num_samples: int, batch_size: int, order: str, generator: torch.Generator):
        if order not in ORDERS:
            raise ValueError(f"order {order!r} not in {ORDERS}")
        if num_samples < 1:
            raise ValueError("a client needs at least one sample")
        self.n = num_samples
        self.batch_size = min(batch_size, num_samples)
        self.n_batches = num_samples // self.batch_size
        self.order = order
        self.generator = generator
        self.cursor = 0
        self.batches = self._new_pass()

    def _new_pass(self) -> torch.Tensor:
        perm = torch.randperm(self.n, generator=self.generator)
        return perm[: self.n_batches * self.batch_size].view(self.n_batches, self.batch_size)

    def _iid_block(self, steps: int) -> torch.Tensor:
        keys = torch.rand(steps, self.n, generator=self.generator)
        # a copy, not a view: a view would keep the block's whole n-wide key order alive
        return keys.argsort(dim=1)[:, : self.batch_size].clone()

    def take(self, tau: int) -> torch.Tensor:
        """The next ``tau`` batches of local positions, shape ``[tau, batch_size]``."""
        if self.order == "iid":
            # B of n without replacement per step: the first B of a random key order. Drawn in
            # blocks of steps (the same numbers as one tau x n draw: the generator fills in
            # order), so a long round (FedVeca's centralized baseline: ~30,000 steps on 60,000
            # samples) holds neither a tau x n matrix of keys nor of their order (7 + 14 GB there)
            rows = max(1, IID_BLOCK // self.n)
            return torch.cat([self._iid_block(min(rows, tau - s)) for s in range(0, tau, rows)])
        pieces = []
        remaining = tau
        while remaining > 0:
            if self.cursor == self.n_batches:
                self.cursor = 0
                if self.order == "rr":
                    self.batches = self._new_pass()
            k = min(remaining, self.n_batches - self.cursor)
            pieces.append(self.batches[self.cursor : self.cursor + k])
            self.cursor += k
            remaining -= k
        return torch.cat(pieces) if len(pieces) > 1 else pieces[0]

    def fixed_batch_numbers(self, tau: int) -> torch.Tensor | None:
        """For the ``fixed`` order: which rows of ``batches`` the next ``take(tau)`` returns,
        as ``[tau]`` batch numbers (the pass never changes, so step ``s`` takes batch
        ``(cursor + s) mod n_b``); call it before ``take``. None for the other orders."""
        if self.order != "fixed":
            return None
        return (self.cursor + torch.arange(tau)) % self.n_batches

    def peek(self) -> torch.Tensor:
        """The batch ``take(1)`` would return next, without moving the cursor or the generator
        (a measurement such as FedVeca's extra batch at ``t = tau`` must not change training).
        The pass is put back as the same tensor, not a copy (``take`` never writes into it): the
        fixed-order row layout of the fast paths (``engine.fast.layout``) keeps its copy of the
        client's rows."""
        cursor, batches, generator = self.cursor, self.batches, self.generator.get_state()
        batch = self.take(1)[0].clone()
        self.cursor, self.batches = cursor, batches
        self.generator.set_state(generator)
        return batch

    def state_dict(self) -> dict:
        return {
            "cursor": self.cursor,
            "batches": self.batches.clone(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.cursor = int(state["cursor"])
        self.batches = state["batches"].clone()
        self.generator.set_state(state["generator"])


def client_batch_size(batch_size: int | str, num_samples: int) -> int:
    """``B`` of one client: the configured size, or the whole local set for ``full``."""
    return num_samples if batch_size == "full" else int(batch_size)


@dataclass
class Client:
    index: int
    indices: torch.Tensor  # global training indices (on the run's device)
    num_steps: int  # τ_i of round 1 (the step policy decides each round's)
    schedule: BatchSchedule

    @property
    def num_samples(self) -> int:
        return len(self.indices)
