"""Greedy herding order (BHerd Algorithm 2) from the Gram matrix (docs/algorithms.md §3.5): the
reference path.

``argmin_c ||s + ẑ_c|| = argmin_c (2 r_c + K_cc)`` with ``K = Ẑ Ẑᵀ`` the Gram matrix of the
centred vectors and ``r_c = Σ_{a selected} K_ac``: one GEMM, then ``O(k τ)`` for the greedy.
Everything is float64 so the order is reproducible. The naive ``O(k τ d)`` definition lives in
the test suite as the oracle. The compiled herding BHerd runs (the greedy bit-identical to
:func:`herd_gram_loop`, the Gram matrix after a fast trajectory to rounding) is a fast path:
``engine.fast.herding``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedsweep.engine.fast import herding as fast

#: columns per block when accumulating the Gram matrix (bounds the float64 working copy)
GRAM_BLOCK = 1 << 16


def centred_gram(z: torch.Tensor, block: int = GRAM_BLOCK) -> torch.Tensor:
    """``K = Ẑ Ẑᵀ`` in float64 with explicit centring (``Ẑ = Z − 1 mᵀ``), blocked over columns."""
    tau, dim = z.shape
    gram = torch.zeros(tau, tau, dtype=torch.float64, device=z.device)
    for start in range(0, dim, block):
        zc = z[:, start : start + block].to(torch.float64)
        zc = zc - zc.mean(dim=0, keepdim=True)
        gram.addmm_(zc, zc.T)
    return gram


@dataclass
class HerdResult:
    order: torch.Tensor  # [k] step indices (0-based) in selection order
    sum_sq: torch.Tensor  # ||s_final||², s = Σ_{selected} ẑ  (0-dim float64)
    selected: torch.Tensor | None = None  # [τ] bool, True at order's entries (compiled path)


def herd_gram_loop(gram: torch.Tensor, k: int) -> HerdResult:
    """First ``k`` picks of the greedy herding order from the centred Gram matrix, as a loop of
    tensor operations (any device; NaN handled as torch's ``argmin`` does).

    Lowest index wins exact ties (``argmin`` returns the first minimiser). The running
    ``||s||²`` is accumulated as ``||s||² += key_p`` (§3.5)."""
    tau = gram.shape[0]
    if not 1 <= k <= tau:
        raise ValueError(f"k={k} must lie in [1, {tau}]")
    diag = torch.diagonal(gram).clone()
    r = torch.zeros(tau, dtype=gram.dtype, device=gram.device)
    taken = torch.zeros(tau, dtype=torch.bool, device=gram.device)
    inf = torch.tensor(float("inf"), dtype=gram.dtype, device=gram.device)
    order = torch.empty(k, dtype=torch.long, device=gram.device)
    sum_sq = torch.zeros((), dtype=gram.dtype, device=gram.device)
    for j in range(k):
        key = torch.where(taken, inf, 2.0 * r + diag)
        p = torch.argmin(key)
        order[j] = p
        sum_sq += key[p]
        taken[p] = True
        r += gram[p]
    return HerdResult(order, sum_sq.clamp_min(0.0))


def herd_reference(z: torch.Tensor, k: int) -> HerdResult:
    """Greedy herding order of the rows of ``z`` (shape ``[τ, d]``): the reference path alone."""
    return herd_gram_loop(centred_gram(z), k)


def herd_gram(gram: torch.Tensor, k: int) -> HerdResult:
    """:func:`herd_gram_loop`'s order, compiled where it runs (bit-identical)."""
    if not 1 <= k <= gram.shape[0]:
        raise ValueError(f"k={k} must lie in [1, {gram.shape[0]}]")
    found = fast.greedy_compiled(gram, k)
    return herd_gram_loop(gram, k) if found is None else HerdResult(*found)


def herd(z: torch.Tensor, k: int, compiled_gram: bool = False) -> HerdResult:
    """Greedy herding order of the rows of ``z`` (shape ``[τ, d]``): the Gram matrix in
    compiled code when ``compiled_gram`` (after a fast trajectory; equal to rounding), else
    :func:`centred_gram` (BLAS, the reference's bits); the greedy compiled where it runs
    (:func:`herd_gram`, bit-identical)."""
    found = fast.herd_compiled(z, k) if compiled_gram else None
    return herd_gram(centred_gram(z), k) if found is None else HerdResult(*found)
