"""Squared-hinge linear SVM for MNIST even/odd (docs/algorithms.md §8.1; Section 10, B21 and B22).

Objective on a set ``S`` (the engine adds ``penalty`` to ``criterion``)::

    F(w; S) = (lam/2) ||w||^2 + (1 / (2|S|)) sum_j max(0, 1 - y_j w^T x_j)^2

Inputs are the raw pixels scaled to [0, 1] and flattened (§8.5: pixel/255, no mean
subtraction; the data module does the scaling). Autograd of ``criterion + penalty`` reproduces
the closed-form gradient of §8.1. Where it can, the engine runs a client's local steps in one
compiled call (``engine.fast.svm_trajectory``, a fast path the model does not know about).
"""

from __future__ import annotations

import torch
from torch import nn

from fedsweep.models.base import FLModel


def even_odd_labels(target: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Map digit labels to +1 (even) / -1 (odd) (§8.1 [R], B21)."""
    return 1.0 - 2.0 * torch.remainder(target, 2).to(dtype)


class SquaredSVM(FLModel):
    """``w in R^in_features``, no bias, zero init, lambda = 0.1 by default (§8.1, B21)."""

    def __init__(self, in_features: int = 784, lam: float = 0.1) -> None:
        super().__init__()
        if in_features < 1:
            raise ValueError(f"in_features must be >= 1, got {in_features}")
        if lam < 0:
            raise ValueError(f"lam must be >= 0, got {lam}")
        self.in_features = in_features
        self.lam = float(lam)
        self.linear = nn.Linear(in_features, 1, bias=False)  # no bias term [R]
        nn.init.zeros_(self.linear.weight)  # w_0 = 0 [R]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Scores ``w^T x`` of shape [n]; accepts [n, 1, 28, 28] or [n, 784]."""
        return self.linear(x.flatten(1)).squeeze(-1)

    def criterion(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(1/(2|S|)) sum max(0, 1 - y w^T x)^2 with y = +1 for even digits (§8.1)."""
        y = even_odd_labels(target, output.dtype)
        hinge = torch.clamp(1.0 - y * output, min=0.0)
        return 0.5 * hinge.square().mean()

    def correct(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Predict +1 iff w^T x > 0; a tie w^T x = 0 is always an error (§8.1 [R]).

        Every sample counts, including sample 0 (B22: the reference's skip is not replicated).
        """
        y = even_odd_labels(target, output.dtype)
        return (y * output > 0).sum()

    def penalty(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        """(lam/2) ||w||^2, computed from the given parameter dict only (§8.1 [R])."""
        w = params["linear.weight"]
        return 0.5 * self.lam * w.square().sum()

    def flat_gradient(self, w: torch.Tensor, x: torch.Tensor, target: torch.Tensor):
        """Closed-form ``(∇F, F)`` of §8.1 for the flat weight vector ``w`` (784 values).

        ``∇F = λw − (1/|S|) Σ_{y wᵀx < 1} y x (1 − y wᵀx)``. Autograd gives the same numbers
        (tested); this path avoids autograd's per-op overhead, which dominates a B=100 SVM step.
        """
        xf = x.flatten(1)
        y = even_odd_labels(target, xf.dtype)
        hinge = torch.clamp(1.0 - y * (xf @ w), min=0.0)
        loss = 0.5 * hinge.square().mean() + 0.5 * self.lam * w.square().sum()
        grad = self.lam * w - (xf.T @ (y * hinge)) / len(xf)
        return grad, loss
