"""Global-model metrics of docs/algorithms.md §1.5, as 0-dim tensors (one host transfer per
round, by the loop): test loss/accuracy; train loss/accuracy over the union of the clients'
data (``F(w) = Σ p_i F_i(w)``, penalty included) and each client's ``F_i``."""

from __future__ import annotations

import torch

from fedsweep.engine.functional import FunctionalModel


class Evaluator:
    def __init__(self, fm: FunctionalModel, test, train, clients, config) -> None:
        """``test``/``train``: ``(x, y)`` pairs; ``config``: the ``eval`` section."""
        self.fm = fm
        (self.x_test, self.y_test), (self.x_train, self.y_train) = test, train
        self.clients = clients
        self.config = config

    def due(self, t: int, rounds: int) -> bool:
        return t % self.config.every == 0 or t == rounds

    @torch.no_grad()
    def evaluate(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        ev, fm = self.config, self.fm
        fm.module.eval()
        penalty = fm.penalty_value(w)
        out: dict[str, torch.Tensor] = {}
        loss_sum, correct = fm.evaluate(w, self.x_test, self.y_test, ev.batch_size)
        out["test_loss"] = loss_sum / len(self.y_test) + penalty
        out["test_acc"] = correct.to(torch.float64) / len(self.y_test)
        if ev.train_metrics:
            total_loss = torch.zeros((), dtype=torch.float64, device=w.device)
            total_correct = torch.zeros((), dtype=torch.long, device=w.device)
            for c in self.clients:
                ls, cr = fm.evaluate(w, self.x_train, self.y_train, ev.batch_size, c.indices)
                out[f"client/{c.index}/train_loss"] = ls / c.num_samples + penalty
                total_loss += ls.to(torch.float64)
                total_correct += cr
            n = sum(c.num_samples for c in self.clients)
            out["train_loss"] = total_loss / n + penalty
            out["train_acc"] = total_correct.to(torch.float64) / n
        fm.module.train()
        return out
