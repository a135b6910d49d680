"""GraB's online sign balancing (docs/algorithms.md §4) in compiled code: the fast path of the
reference loop ``components.selectors.grab.GraB.record`` (which calls it after a fast trajectory
recorded the client's gradients, and falls back to its own loop).

For every step ``t`` in order, with ``g64`` the gradient in float64 (the selector's docstring):

    literal (``bherd_alg4``)   m ← m + g64/τ (one fused multiply-add, as torch's ``add_(alpha=)``)
                               z = g64 − m,        selected iff ⟨s, z⟩ < 0
    stale mean                 m ← m + g64,        z = g64 − centre,  selected iff ⟨s, z⟩ ≤ 0
    then                       s ← s ± z,  g_acc ← g_acc + g·[selected] (in the gradient's dtype)

The element-wise operations are torch's, in the same order and rounding (``m``, ``z``, ``s`` and
``g_acc`` are bit-identical to the reference whenever the decisions agree); the inner product
is a plain sequential sum where torch calls the BLAS, so a decision can differ only where
``⟨s, z⟩`` lies within rounding of 0 (an exact 0, as at ``s = 0``, is the same 0). Tested on
random and on tie inputs (tests/components/test_grab_fused.py). Each call costs ``O(τ d)``: about
one microsecond a step at ``d = 784`` (130 µs a client at τ = 120), against about 28 µs a step
for the loop of tensor operations.

Returns None where it cannot run (no numba): the reference loop runs then.
"""

from __future__ import annotations

import functools

import numpy as np
import torch


@functools.cache
def _balance_kernel():
    """The compiled loop, or None without numba."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return None

    # ``contract`` only: ``m + a g`` becomes one fused multiply-add, as torch's vectorised
    # ``add_(g, alpha=a)`` computes it (no reassociation: the same sums in the same order)
    @numba.njit(cache=True, nogil=True, fastmath={"contract"})
    def balance(g, s, m, centre, gacc, selected, scale, weights, literal, z):
        """``g`` ``[τ, d]`` (float32 or float64); ``s``, ``m``, ``centre``, ``z`` ``[d]``
        float64 (``z`` scratch); ``gacc`` ``[d]`` and ``weights`` = [0, 1] in ``g``'s dtype;
        ``selected`` ``[τ]`` bool; ``scale`` = 1/τ (literal). Updates ``s``, ``m``,
        ``gacc`` in place; returns the number of selected steps."""
        tau, d = g.shape
        count = 0
        for t in range(tau):
            dot = 0.0
            for j in range(d):
                gj = np.float64(g[t, j])
                if literal:
                    mj = m[j] + scale * gj  # m + g/τ (fused, as torch)
                    m[j] = mj
                    zj = gj - mj
                else:
                    m[j] = m[j] + gj  # Σ g: the next round's m_prev
                    zj = gj - centre[j]
                z[j] = zj
                dot += s[j] * zj
            take = dot < 0.0 if literal else dot <= 0.0  # ties: strict / to the + side
            selected[t] = take
            count += take
            weight = weights[1] if take else weights[0]
            for j in range(d):
                s[j] = s[j] + z[j] if take else s[j] - z[j]
                gacc[j] = gacc[j] + g[t, j] * weight  # g·[selected], then added (as torch)
        return count

    return balance


def balance_compiled(
    g: torch.Tensor,
    s: torch.Tensor,
    m: torch.Tensor,
    g_acc: torch.Tensor,
    selected: torch.Tensor,
    centre: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Balance the rows of ``g`` ``[τ, d]`` (CPU, float32/float64) from the state ``s``, ``m``
    (float64 ``[d]``), ``g_acc`` (``[d]``, ``g``'s dtype), updated in place, ``selected``
    (``[τ]`` bool) filled; ``centre``: the stale-mean variant's ``m_prev`` (None: literal, with
    ``m ← m + g/τ``). Returns the number of selected steps (0-dim float64), or None where the
    compiled loop cannot run (no numba, off the CPU): then nothing changed."""
    fn = _balance_kernel()
    tensors = (g, s, m, g_acc, selected) + (() if centre is None else (centre,))
    if fn is None or any(t.device.type != "cpu" for t in tensors):
        return None
    if g.dtype not in (torch.float32, torch.float64) or not g.is_contiguous():
        return None
    tau, d = g.shape
    scale = 1.0 / tau  # the reference's alpha, the same double
    z = np.empty(d)
    dummy = centre if centre is not None else s  # not read by the literal rule
    count = fn(
        g.numpy(),
        s.numpy(),
        m.numpy(),
        dummy.numpy(),
        g_acc.numpy(),
        selected.numpy(),
        scale,
        np.array([0.0, 1.0], dtype=g.numpy().dtype),
        centre is None,
        z,
    )
    return torch.tensor(float(count), dtype=torch.float64)
