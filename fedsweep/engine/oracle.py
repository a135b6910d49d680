"""The client oracle: a client's loss or gradient over its whole local training set at a model.

Power-of-Choice asks the candidates' losses at ``w_t``, DivFL the full local gradients (§7.2,
§7.3); FedVeca's ``G0`` and FedWalk's ``L_k``. These are measurements, not training:
they run with the model in eval mode, use no random stream except the one passed in, and leave
every client's batch cursor alone. Values stay tensors (one host transfer where a sampler needs
numbers).
"""

from __future__ import annotations

import numpy as np
import torch

from fedsweep.engine.batches import client_batch_size
from fedsweep.engine.functional import FunctionalModel


class ClientOracle:
    def __init__(
        self,
        fm: FunctionalModel,
        x,
        y,
        indices: list[torch.Tensor],
        eval_batch: int,
        batch_size: int | str,
    ) -> None:
        """``indices[k]``: client ``k``'s rows of ``x``/``y``; ``batch_size``: the training
        ``B`` (``cpow-d`` estimates a loss on one such batch)."""
        self.fm, self.x, self.y = fm, x, y
        self.indices = indices
        self.num_clients = len(indices)
        self.eval_batch = eval_batch
        self.batch_size = batch_size

    def _mode(self):
        return _EvalMode(self.fm.module)

    @torch.no_grad()
    def losses(self, clients: list[int], w: torch.Tensor, penalty: bool = True) -> torch.Tensor:
        """``F_k(w)`` over each client's full local set, the model's penalty included unless
        ``penalty=False`` (FedWalk's ``L_k`` is the task loss alone); float64 ``[len]``."""
        with self._mode():
            if penalty:
                penalty = self.fm.penalty_value(w)
            else:
                penalty = torch.zeros((), dtype=w.dtype, device=w.device)
            out = []
            for k in clients:
                idx = self.indices[k]
                loss_sum, _ = self.fm.evaluate(w, self.x, self.y, self.eval_batch, idx)
                out.append(loss_sum / len(idx) + penalty)
        return torch.stack(out).to(torch.float64)

    @torch.no_grad()
    def batch_losses(
        self, clients: list[int], w: torch.Tensor, rng: np.random.Generator
    ) -> torch.Tensor:
        """``F_k(w)`` on one batch of ``B`` of client ``k``'s samples drawn from ``rng``."""
        with self._mode():
            penalty = self.fm.penalty_value(w)
            out = []
            for k in clients:
                idx = self.indices[k]
                b = client_batch_size(self.batch_size, len(idx))
                pos = torch.as_tensor(rng.choice(len(idx), size=min(b, len(idx)), replace=False))
                rows = idx[pos.to(idx.device)]
                loss_sum, _ = self.fm.evaluate(w, self.x, self.y, self.eval_batch, rows)
                out.append(loss_sum / len(rows) + penalty)
        return torch.stack(out).to(torch.float64)

    def gradients(self, clients: list[int], w: torch.Tensor) -> torch.Tensor:
        """``∇F_k(w)`` over each client's full local set, ``[len, d]`` in ``w``'s dtype: the
        size-weighted mean of the gradients of ``eval.batch_size`` chunks."""
        out = torch.empty(len(clients), w.numel(), dtype=w.dtype, device=w.device)
        with self._mode():
            for row, k in enumerate(clients):
                idx = self.indices[k]
                total = out[row].zero_()
                for start in range(0, len(idx), self.eval_batch):
                    rows = idx[start : start + self.eval_batch]
                    g, _ = self.fm.gradient(
                        w, self.x.index_select(0, rows), self.y.index_select(0, rows)
                    )
                    total.add_(g, alpha=len(rows) / len(idx))
        return out


class _EvalMode:
    """Eval mode inside, the module's previous mode after."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module

    def __enter__(self):
        self.was_training = self.module.training
        self.module.eval()

    def __exit__(self, *exc):
        self.module.train(self.was_training)
