"""FedVeca's per-step sums (docs/algorithms.md §5.3) over a recorded trajectory in one compiled
pass: the fast path of ``components.step_policies.fedveca.FedVecaEstimates.on_step`` (which
calls it from ``on_trajectory``, and falls back to tensor operations over ``[τ, d]``).

For every step ``t``, in float64, with ``r_t = y_t − w`` (the displacement from the broadcast
model the step starts at), ``r'_t = r_t − η v_t`` (where it ends) and ``e_t = g_t − ref``:

    out[t] = (||r_t||², ||r'_t||², ||e_t||²)

Each row's elements are formed as the tensor operations form them (a conversion to float64 and
a subtraction; ``η v_t`` one product), the three sums added in another order (vectorised):
equal to ``on_step``'s dot products and norms to rounding, non-finite values included (no
assumption of finite values). One pass over the rows instead of some twelve tensor operations
over ``[τ, d]`` float64 copies: about 40 µs against 420 µs for τ = 120, d = 784.

Returns None where it cannot run (no numba, off the CPU): the caller's tensor operations run.
"""

from __future__ import annotations

import functools

import numpy as np
import torch


@functools.cache
def _sums_kernel():
    """The compiled pass, or None without numba."""
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return None

    # ``reassoc`` only: the sums vectorise; no finite-math assumption (a NaN stays a NaN)
    @numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
    def step_sums(y, g, v, w, ref, lr, out):
        """``y``, ``g``, ``v`` ``[τ, d]`` (one dtype), ``w``, ``ref`` ``[d]`` float64,
        ``out`` ``[τ, 3]`` float64."""
        tau, d = y.shape
        for t in range(tau):
            a = 0.0
            b = 0.0
            c = 0.0
            for j in range(d):
                r = np.float64(y[t, j]) - w[j]
                r_next = r - lr * np.float64(v[t, j])
                e = np.float64(g[t, j]) - ref[j]
                a += r * r
                b += r_next * r_next
                c += e * e
            out[t, 0] = a
            out[t, 1] = b
            out[t, 2] = c

    return step_sums


def step_sums(
    y: torch.Tensor,
    g: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor,
    ref: torch.Tensor,
    lr: float,
) -> torch.Tensor | None:
    """``[τ, 3]`` float64: per step ``(||y_t − w||², ||y_t − w − η v_t||², ||g_t − ref||²)``
    (``w``, ``ref`` float64 ``[d]``); None where the compiled pass cannot run."""
    fn = _sums_kernel()
    tensors = (y, g, v, w, ref)
    if fn is None or any(t.device.type != "cpu" for t in tensors):
        return None
    if not (y.dtype == g.dtype == v.dtype) or y.dtype not in (torch.float32, torch.float64):
        return None
    out = torch.empty(len(y), 3, dtype=torch.float64)
    fn(
        y.contiguous().numpy(),
        g.contiguous().numpy(),
        v.contiguous().numpy(),
        w.contiguous().numpy(),
        ref.contiguous().numpy(),
        float(lr),
        out.numpy(),
    )
    return out
