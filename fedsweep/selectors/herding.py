"""Greedy herding order (BHerd Algorithm 2) from the Gram matrix (docs/algorithms.md §3.5).

``argmin_c ||s + ẑ_c|| = argmin_c (2 r_c + K_cc)`` with ``K = Ẑ Ẑᵀ`` the Gram matrix of the
centred vectors and ``r_c = Σ_{a selected} K_ac``: one GEMM, then ``O(k τ)`` for the greedy.
Everything is float64 so the order is reproducible. The naive ``O(k τ d)`` definition lives in
the test suite as the oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

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


def herd_gram(gram: torch.Tensor, k: int) -> HerdResult:
    """First ``k`` picks of the greedy herding order from the centred Gram matrix.

    Lowest index wins exact ties (``argmin`` returns the first minimiser). The running
    ``||s||²`` is accumulated as ``||s||² += key_p`` (§3.5). On the CPU the greedy loop runs
    compiled (:func:`_greedy`, the same float64 operations in the same order: bit-identical,
    tested); a Gram matrix on a GPU or with a NaN (a diverged run) takes the tensor loop."""
    tau = gram.shape[0]
    if not 1 <= k <= tau:
        raise ValueError(f"k={k} must lie in [1, {tau}]")
    greedy = _greedy_kernel()
    if greedy is not None and gram.device.type == "cpu" and gram.dtype == torch.float64:
        g = gram.contiguous()
        if not torch.isnan(g).any():
            order, sum_sq = greedy(g.numpy(), k)
            out = torch.from_numpy(order)
            return HerdResult(out, torch.tensor(sum_sq, dtype=gram.dtype).clamp_min(0.0))
    return herd_gram_loop(gram, k)


def herd_gram_loop(gram: torch.Tensor, k: int) -> HerdResult:
    """:func:`herd_gram` as a loop of tensor operations (any device; NaN handled as torch's
    ``argmin`` does)."""
    tau = gram.shape[0]
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


_GREEDY = None


def _greedy_kernel():
    """The compiled greedy loop, or None without numba (then the tensor loop runs)."""
    global _GREEDY
    if _GREEDY is None:
        try:
            import numba
            import numpy as np
        except ImportError:  # pragma: no cover - numba is a dependency
            _GREEDY = False
            return None

        @numba.njit(cache=True, nogil=True)  # no fastmath: IEEE operations as torch does them
        def greedy(gram, k):
            tau = gram.shape[0]
            r = np.zeros(tau)
            taken = np.zeros(tau, np.bool_)
            order = np.empty(k, np.int64)
            sum_sq = 0.0
            for j in range(k):
                best = -1
                best_key = 0.0
                for c in range(tau):
                    if taken[c]:
                        continue
                    key = 2.0 * r[c] + gram[c, c]
                    if best < 0 or key < best_key:  # the first minimiser wins ties
                        best, best_key = c, key
                order[j] = best
                sum_sq += best_key
                taken[best] = True
                for c in range(tau):
                    r[c] += gram[best, c]
            return order, sum_sq

        _GREEDY = greedy
    return _GREEDY or None


def herd(z: torch.Tensor, k: int) -> HerdResult:
    """Greedy herding order of the rows of ``z`` (shape ``[τ, d]``)."""
    return herd_gram(centred_gram(z), k)
