"""BHerd's herding (docs/algorithms.md §3.5) in compiled code: the fast path of the reference
``components.selectors.herding`` (which calls it, and falls back to its own loop).

* The greedy (:func:`greedy_compiled`): the same float64 operations in the same order as the
  reference's tensor loop (``herd_gram_loop``): bit-identical (tested), on every CPU Gram matrix.
* The Gram matrix too (:func:`herd_compiled`), after a client's steps ran on a fast trajectory
  (``engine.fast``), where the per-client herding would otherwise cost as much as a quarter of
  the client's steps: §3.5's float64 explicit-centring product, blocked for the cache (equal to
  rounding). Only there: the reference path keeps BLAS's Gram matrix, so its numbers stay.

Each returns None where it cannot run (no numba, off the CPU, a NaN, an overflowing key).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from fedsweep.core.device import numba_threads


class FastHerd(NamedTuple):
    """The compiled herding's result, the fields of the reference's ``HerdResult``."""

    order: torch.Tensor  # [k] step indices in selection order
    sum_sq: torch.Tensor  # ||s_final||² (0-dim float64)
    selected: torch.Tensor  # [τ] bool


def greedy_compiled(gram: torch.Tensor, k: int) -> FastHerd | None:
    """The reference greedy (``herd_gram_loop``: first ``k`` picks, lowest index wins ties)
    compiled (:func:`_greedy_kernel`, the same float64 operations in the same order:
    bit-identical, tested); None for a Gram matrix off the CPU, with a NaN (a diverged run) or
    whose keys overflow, or without numba: the reference loop runs then."""
    greedy = _greedy_kernel()
    if greedy is not None and gram.device.type == "cpu" and gram.dtype == torch.float64:
        g = gram.contiguous()
        if not torch.isnan(g).any():
            return _greedy_result(greedy, g.numpy(), k)
    return None


def _greedy_result(greedy, gram: np.ndarray, k: int) -> FastHerd | None:
    """The compiled ``greedy`` on a float64 numpy Gram matrix as a :class:`HerdResult`
    (``||s||²`` clamped at 0 as :func:`herd_gram_loop` does), or None when a key overflowed
    (the caller then takes torch's semantics, :func:`herd_gram_loop`)."""
    order, sum_sq, taken, ok = greedy(gram, k)
    if not ok:
        return None
    sum_sq = torch.tensor(max(sum_sq, 0.0), dtype=torch.float64)  # clamp_min(0), one tensor op
    return FastHerd(torch.from_numpy(order), sum_sq, torch.from_numpy(taken))


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
            """The keys ``2 r_c + K_cc`` kept in an array, ``+inf`` once taken, so a pick is a
            branch-free scan for the first minimiser and ``r ← r + K[p, :]`` one pass (the
            same float64 operations as :func:`herd_gram_loop`, so the same bits; 10 µs
            against 22 µs with a test per candidate at τ = 120, k = 60). Valid only while
            every candidate's key is finite: ``ok`` is False otherwise (an overflow), and the
            caller then takes the tensor loop."""
            tau = gram.shape[0]
            inf = np.inf
            diag = np.empty(tau)
            r = np.zeros(tau)
            keys = np.empty(tau)
            ok = True
            for c in range(tau):
                diag[c] = gram[c, c]
                key = 2.0 * r[c] + diag[c]
                keys[c] = key
                ok &= -inf < key < inf
            taken = np.zeros(tau, np.bool_)
            order = np.empty(k, np.int64)
            sum_sq = 0.0
            for j in range(k):
                best = 0
                best_key = keys[0]
                for c in range(1, tau):  # the first minimiser wins ties
                    key = keys[c]
                    lower = key < best_key
                    best = c if lower else best
                    best_key = key if lower else best_key
                order[j] = best
                sum_sq += best_key
                taken[best] = True
                if j == k - 1:
                    break
                row = gram[best]
                for c in range(tau):
                    rc = r[c] + row[c]
                    r[c] = rc
                    key = 2.0 * rc + diag[c]
                    ok &= taken[c] or -inf < key < inf
                    keys[c] = inf if taken[c] else key
            return order, sum_sq, taken, ok

        _GREEDY = greedy
    return _GREEDY or None


_COMPILED = None
_SCRATCH: dict = {}  # (τ, d, parts) -> herd_compiled's float64 work arrays, kept across calls
#: float itemsize -> (the unsigned integer type of its bits, its exponent bits)
_EXPONENT_BITS = {
    4: (np.uint32, np.uint32(0x7F800000)),
    8: (np.uint64, np.uint64(0x7FF0000000000000)),
}


def _compiled_kernel():
    """``(centred_gram_blocked, greedy)`` compiled, or None without numba."""
    global _COMPILED
    if _COMPILED is None:
        greedy = _greedy_kernel()
        if greedy is None:  # pragma: no cover - numba is a dependency
            _COMPILED = False
            return None
        import numba

        @numba.njit(cache=True, nogil=True, fastmath=True, boundscheck=False, parallel=True)
        def centred_gram_blocked(z, bits, mask, shift, arows, out, gram):
            """``K = Ẑ Ẑᵀ`` of ``z`` ``[τ, d]`` in float64 with explicit centring (§3.5,
            ``Ẑ = Z − 1 mᵀ``, ``m`` the column mean in float64): the lower triangle in 4 × 4
            blocks of dot products (16 sums in registers), mirrored.

            ``Ẑ`` is never stored. The row blocks ``ib`` are split into ``P = len(arows)``
            parts that run on the run's threads, part ``p`` taking the blocks with
            ``ib mod 2P`` in ``{p, 2P − 1 − p}`` (dealt back and forth: the same work per
            part). A part centres its block's 4 rows into ``arows[p]`` (25 KB in float64 at
            d = 784, held in the L1 cache) and centres every other row as it reads it from
            ``z`` (``z[b, j] − m_j``: a conversion and a subtraction next to 4 multiply-adds
            per element). Right after a client's trajectory has streamed its training rows
            through the caches, a stored ``Ẑ`` (750 KB per copy) came from memory: measured
            at τ = 120, d = 784 on this project's 2 cores, 280 µs with a stored ``Ẑ`` against
            160 µs without (135 µs against 200 µs with warm caches). Every entry is one
            part's sum, so the numbers depend neither on ``P`` nor on the thread count
            (tested). Scratch from the caller (no allocation per call): ``shift`` ``[d]``
            (receives ``m``), ``arows`` ``[P, 4, d]``, ``out`` ``[4⌈τ/4⌉]²`` and ``gram``
            ``[τ, τ]``.

            Returns False, before any product, when ``z`` holds a NaN or an infinity:
            ``bits`` is ``z`` viewed as unsigned integers and ``mask`` its exponent bits (all
            set only for NaN and ±inf), tested in the pass that sums the mean. Integer
            operations: fastmath, which lets the float sums vectorise, assumes the floats
            finite and may drop a float test."""
            tau, d = z.shape
            parts = arows.shape[0]
            nb = (tau + 3) // 4
            for j in range(d):
                shift[j] = 0.0
            bad = 0
            for r in range(tau):
                for j in range(d):
                    shift[j] += z[r, j]
                    bad += (bits[r, j] & mask) == mask
            if bad:
                return False
            for j in range(d):
                shift[j] = shift[j] / tau
            last = tau - 1
            for p in numba.prange(parts):
                ap = arows[p]
                for ib in range(nb):
                    deal = ib % (2 * parts)
                    if deal != p and deal != 2 * parts - 1 - p:
                        continue
                    ra = ib * 4
                    for a in range(4):  # rows past τ are zero (their entries are padding)
                        if ra + a < tau:
                            for j in range(d):
                                ap[a, j] = z[ra + a, j] - shift[j]
                        else:
                            for j in range(d):
                                ap[a, j] = 0.0
                    a0, a1, a2, a3 = ap[0], ap[1], ap[2], ap[3]
                    for jb in range(ib + 1):
                        rb = jb * 4  # a row past τ reads row τ − 1: it fills padding only
                        b0, b1 = z[min(rb, last)], z[min(rb + 1, last)]
                        b2, b3 = z[min(rb + 2, last)], z[min(rb + 3, last)]
                        s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = 0.0
                        s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = 0.0
                        for j in range(d):
                            u0, u1, u2, u3 = a0[j], a1[j], a2[j], a3[j]
                            mj = shift[j]
                            v0, v1, v2, v3 = b0[j] - mj, b1[j] - mj, b2[j] - mj, b3[j] - mj
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
                        out[ra, rb], out[ra, rb + 1] = s00, s01
                        out[ra, rb + 2], out[ra, rb + 3] = s02, s03
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
            return True

        # Two compiled functions called one after the other, not one calling the other: a
        # compiled function that calls another through a closure is recompiled in every new
        # process (numba keys its disk cache on the pickled closure, and a dispatcher pickles
        # with a per-process id), which cost every trial a second.
        _COMPILED = (centred_gram_blocked, greedy)
    return _COMPILED or None


def herd_compiled(z: torch.Tensor, k: int) -> FastHerd | None:
    """The reference ``herd`` of a CPU tensor ``z`` ``[τ, d]`` (float32 or float64) in compiled code
    (BHerd on the fused SVM trajectory, where the per-client herding would otherwise cost as
    much as a quarter of the client's steps). The Gram matrix is §3.5's float64 explicit-
    centring product, blocked for the cache and summed in another order than BLAS (equal to
    rounding: about 1e-15 relative); the greedy is :func:`greedy_compiled`'s. None without numba,
    off the CPU, when ``z`` holds a NaN or an infinity, or when a greedy key overflows
    (the reference then gives torch's behaviour)."""
    fn = _compiled_kernel()
    if fn is None or z.device.type != "cpu" or z.dtype not in (torch.float32, torch.float64):
        return None
    if not 1 <= k <= z.shape[0]:
        raise ValueError(f"k={k} must lie in [1, {z.shape[0]}]")
    numba_threads()  # the Gram matrix's parts on the run's threads
    import numba

    tau, d = z.shape
    parts = numba.get_num_threads()
    scratch = _SCRATCH.get((tau, d, parts))
    if scratch is None:
        size = 4 * ((tau + 3) // 4)  # the 4 × 4 blocks pad τ to a multiple of 4
        scratch = (
            np.empty(d),
            np.empty((parts, 4, d)),
            np.empty((size, size)),
            np.empty((tau, tau)),
        )
        if len(_SCRATCH) >= 64:  # one shape per τ_i of the run's clients, usually a few
            _SCRATCH.clear()
        _SCRATCH[(tau, d, parts)] = scratch
    gram_blocked, greedy = fn
    array = z.contiguous().numpy()
    bits, mask = _EXPONENT_BITS[array.dtype.itemsize]
    if not gram_blocked(array, array.view(bits), mask, *scratch):
        return None  # a NaN or an infinity (a diverged run): torch's behaviour (herd_gram_loop)
    return _greedy_result(greedy, scratch[3], k)
