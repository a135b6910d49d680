"""Greedy herding order (BHerd Algorithm 2) from the Gram matrix (docs/algorithms.md §3.5).

``argmin_c ||s + ẑ_c|| = argmin_c (2 r_c + K_cc)`` with ``K = Ẑ Ẑᵀ`` the Gram matrix of the
centred vectors and ``r_c = Σ_{a selected} K_ac``: one GEMM, then ``O(k τ)`` for the greedy.
Everything is float64 so the order is reproducible. The naive ``O(k τ d)`` definition lives in
the test suite as the oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedsweep.engine.device import numba_threads

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


_COMPILED = None
_SCRATCH: dict = {}  # (τ, d) -> herd_compiled's float64 work arrays, kept across calls


def _compiled_kernel():
    """``(all_finite, centred_gram_blocked, greedy)`` compiled, or None without numba."""
    global _COMPILED
    if _COMPILED is None:
        greedy = _greedy_kernel()
        if greedy is None:  # pragma: no cover - numba is a dependency
            _COMPILED = False
            return None
        import numba

        @numba.njit(cache=True, nogil=True, fastmath=True, boundscheck=False, parallel=True)
        def centred_gram_blocked(z, zc, out, gram):
            """``K = Ẑ Ẑᵀ`` of ``z`` ``[τ, d]`` in float64 with explicit centring (§3.5): the
            column mean, ``Ẑ = Z − 1 mᵀ`` in float64 (padded with zero rows to a multiple of
            4), then the lower triangle in 4 × 4 blocks of dot products (each row read once
            per block, 16 sums in registers), mirrored. Row blocks are dealt to the threads
            as 0, n−1, 1, n−2, ... so both halves do the same work; every entry is one
            thread's sum, so the numbers do not depend on the thread count. ``zc``
            ``[4⌈τ/4⌉, d]`` (zero padding rows), ``out`` ``[4⌈τ/4⌉]²`` and ``gram`` ``[τ, τ]`` are
            the caller's scratch (no allocation per call: fresh pages cost as much as the
            arithmetic)."""
            tau, d = z.shape
            nb = (tau + 3) // 4
            m = np.zeros(d)
            for r in range(tau):
                for j in range(d):
                    m[j] += z[r, j]
            for r in range(tau):
                for j in range(d):
                    zc[r, j] = z[r, j] - m[j] / tau
            order = np.empty(nb, np.int64)
            lo, hi, q = 0, nb - 1, 0
            while lo <= hi:
                order[q] = lo
                q += 1
                lo += 1
                if lo <= hi:
                    order[q] = hi
                    q += 1
                    hi -= 1
            for q in numba.prange(nb):
                ib = order[q]
                ra = ib * 4
                a0, a1, a2, a3 = zc[ra], zc[ra + 1], zc[ra + 2], zc[ra + 3]
                for jb in range(ib + 1):
                    rb = jb * 4
                    b0, b1, b2, b3 = zc[rb], zc[rb + 1], zc[rb + 2], zc[rb + 3]
                    s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = 0.0
                    s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = 0.0
                    for j in range(d):
                        u0, u1, u2, u3 = a0[j], a1[j], a2[j], a3[j]
                        v0, v1, v2, v3 = b0[j], b1[j], b2[j], b3[j]
                        s00 += u0 * v0
                        s01 += u0 * v1
                        s02 += u0 * v2
                        s03 += u0 * v3
                        s10 += u1 * v0
                        s11 += u1 * v1
                        s12 += u1 * v2
                        s13 += u1 * v3
                        s20 += u2 * v0
                        s21 += u2 * v1
                        s22 += u2 * v2
                        s23 += u2 * v3
                        s30 += u3 * v0
                        s31 += u3 * v1
                        s32 += u3 * v2
                        s33 += u3 * v3
                    out[ra, rb], out[ra, rb + 1], out[ra, rb + 2], out[ra, rb + 3] = (
                        s00,
                        s01,
                        s02,
                        s03,
                    )
                    out[ra + 1, rb], out[ra + 1, rb + 1] = s10, s11
                    out[ra + 1, rb + 2], out[ra + 1, rb + 3] = s12, s13
                    out[ra + 2, rb], out[ra + 2, rb + 1] = s20, s21
                    out[ra + 2, rb + 2], out[ra + 2, rb + 3] = s22, s23
                    out[ra + 3, rb], out[ra + 3, rb + 1] = s30, s31
                    out[ra + 3, rb + 2], out[ra + 3, rb + 3] = s32, s33
            for a in range(tau):
                for b in range(a + 1):
                    gram[a, b] = out[a, b]
                    gram[b, a] = out[a, b]

        @numba.njit(cache=True, nogil=True)
        def all_finite(z):  # not under fastmath (which assumes no NaN/inf)
            for a in range(z.shape[0]):
                for j in range(z.shape[1]):
                    if not np.isfinite(z[a, j]):
                        return False
            return True

        # Two compiled functions called one after the other, not one calling the other: a
        # compiled function that calls another through a closure is recompiled in every new
        # process (numba keys its disk cache on the pickled closure, and a dispatcher pickles
        # with a per-process id), which cost every trial a second.
        _COMPILED = (all_finite, centred_gram_blocked, greedy)
    return _COMPILED or None


def herd_compiled(z: torch.Tensor, k: int) -> HerdResult | None:
    """:func:`herd` of a CPU tensor ``z`` ``[τ, d]`` (float32 or float64) in compiled code
    (BHerd on the fused SVM trajectory, where the per-client herding would otherwise cost as
    much as a quarter of the client's steps). The Gram matrix is §3.5's float64 explicit-
    centring product, blocked for the cache and summed in another order than BLAS (equal to
    rounding: about 1e-15 relative); the greedy is :func:`herd_gram`'s. None without numba,
    off the CPU, or when ``z`` holds a NaN or an infinity (:func:`herd` then gives torch's NaN
    behaviour)."""
    fn = _compiled_kernel()
    if fn is None or z.device.type != "cpu" or z.dtype not in (torch.float32, torch.float64):
        return None
    if not 1 <= k <= z.shape[0]:
        raise ValueError(f"k={k} must lie in [1, {z.shape[0]}]")
    numba_threads()  # the Gram matrix's row blocks on the run's threads
    tau, d = z.shape
    scratch = _SCRATCH.get((tau, d))
    if scratch is None:  # zero rows pad Ẑ to a multiple of 4; they stay zero
        size = 4 * ((tau + 3) // 4)
        scratch = (np.zeros((size, d)), np.zeros((size, size)), np.empty((tau, tau)))
        if len(_SCRATCH) >= 64:  # one shape per τ_i of the run's clients, usually a few
            _SCRATCH.clear()
        _SCRATCH[(tau, d)] = scratch
    all_finite, centred_gram, greedy = fn
    array = z.contiguous().numpy()
    if not all_finite(array):  # a diverged run: torch's NaN behaviour (herd_gram_loop)
        return None
    centred_gram(array, *scratch)
    order, sum_sq = greedy(scratch[2], k)
    return HerdResult(
        torch.from_numpy(order), torch.tensor(sum_sq, dtype=torch.float64).clamp_min(0.0)
    )


def herd(z: torch.Tensor, k: int) -> HerdResult:
    """Greedy herding order of the rows of ``z`` (shape ``[τ, d]``)."""
    return herd_gram(centred_gram(z), k)
