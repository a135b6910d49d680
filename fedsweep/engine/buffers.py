"""Model buffers (BatchNorm running statistics) travel with each client's update
(docs/algorithms.md §8.4).

The flat vector ``w`` holds the parameters only; a model's buffers live in the module (and in
``FunctionalModel.buffers``, the same tensors), and BatchNorm updates them in place at every
training forward. Left alone, every client of a round would start from the previous client's
statistics and the global model would keep the last client's. So, per round:

* ``begin_round``: the global buffers are saved;
* before each client: the global buffers are loaded, the client trains (its forwards update
  them), and its buffers are copied into its ``ClientUpdate.buffers``;
* ``end_round(q)``: the global buffers become ``Σ_i q_i b_i`` of the participants' buffers, with
  the base method's buffer weights (its aggregation weights renormalised to 1); integer buffers
  (``num_batches_tracked``) are taken from the first participant [I, §8.4].

Models without buffers (SVM, the CNNs, the MLP) skip all of it, so their numbers are unchanged.
"""

from __future__ import annotations

import torch

from fedsweep.core.messages import ClientUpdate


class ClientBuffers:
    def __init__(self, live: dict[str, torch.Tensor]) -> None:
        """``live``: the module's buffers by name (``FunctionalModel.buffers``)."""
        self.live = live
        self.active = bool(live)
        self._global: dict[str, torch.Tensor] | None = None

    def snapshot(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.live.items()}

    def load(self, values: dict[str, torch.Tensor]) -> None:
        for name, value in values.items():
            self.live[name].copy_(value)

    def begin_round(self) -> None:
        if self.active:
            self._global = self.snapshot()

    def begin_client(self) -> None:
        """Load the round's global buffers (the first call of a round without ``begin_round``
        takes them as they are)."""
        if not self.active:
            return
        if self._global is None:
            self._global = self.snapshot()
        else:
            self.load(self._global)

    def end_client(self, update: ClientUpdate) -> None:
        if self.active:
            update.buffers = self.snapshot()

    def end_round(self, updates: list[ClientUpdate], weights: torch.Tensor) -> None:
        """Set the global buffers to the ``weights``-average of the participants' buffers."""
        if not self.active:
            return
        self._global = None
        if not updates:
            return
        q = weights.tolist()
        for name, live in self.live.items():
            values = [u.buffers[name] for u in updates]
            if not live.is_floating_point():
                live.copy_(values[0])  # num_batches_tracked: the first participant's [I]
                continue
            total = torch.zeros_like(live)
            for v, qi in zip(values, q, strict=True):
                total.add_(v, alpha=qi)
            live.copy_(total)
