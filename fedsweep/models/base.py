"""The contract every fedsweep model meets, so the engine can train it as a pure function.

The engine keeps parameters as one flat vector and calls the model through
``torch.func.functional_call``; everything a loss needs must therefore be computable from the
module's output, the targets and the parameter dict.
"""

from __future__ import annotations

import torch
from torch import nn


class FLModel(nn.Module):
    """An ``nn.Module`` with its objective attached.

    Subclasses implement ``forward(x)`` plus the three methods below. ``criterion`` and
    ``penalty`` together give the minibatch objective ``F(w; batch)`` of docs/algorithms.md; the
    reported training loss uses the same two terms.
    """

    def criterion(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean data loss over the batch (a 0-dim tensor)."""
        raise NotImplementedError

    def correct(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Number of correct predictions in the batch (a 0-dim integer tensor, no ``.item()``)."""
        raise NotImplementedError

    def penalty(self, params: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Regulariser that is part of the objective (e.g. the SVM's (lambda/2)||w||^2), or None."""
        return None

    #: The width of the representation the last layer reads, for models that can return it with
    #: ``forward(x, features_only=True)`` (a server-side head on the shared backbone: FedWalk's
    #: separate leash head, docs/algorithms.md §6.4); None: the model has no such split.
    feature_dim: int | None = None

    #: A model may define ``flat_gradient(w, x, target) -> (grad, loss)``: the closed-form
    #: gradient of ``criterion + penalty`` with respect to the flat parameter vector ``w``. The
    #: engine uses it instead of autograd when present; a test must show it equals autograd.
    flat_gradient = None
