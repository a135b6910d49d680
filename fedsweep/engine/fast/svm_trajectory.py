"""A client's whole local trajectory of the squared-hinge SVM (§8.1) in one compiled call: the
fast path (:class:`SVMAccelerator`, an ``Accelerator`` of the seam ``engine.fast``) of
``models.svm.SquaredSVM``, which itself knows nothing of it.

The engine's per-step path costs about 25 tensor operations per SVM step (gather, two
matrix-vector products, clamp, the loss, the update), each with Python and dispatcher overhead,
for a step whose arithmetic is 2·B·d multiply-adds (B = 100, d = 784). This kernel runs all
``τ`` steps of one client in one numba-compiled loop (no allocation per step):

    s_b   = x_b · y                      h_b = max(0, 1 − y_b s_b)
    F     = ½ mean_b h_b² + ½ λ ||y||²   (the step's loss, at the iterate before the step)
    g     = λ y − (1/B) Σ_b y_b h_b x_b  (the closed-form gradient, SquaredSVM.flat_gradient)
    v     = g + μ (y − w_t) + o          (the base method's direction, see ``LocalDirection``)
    y    ← y − η v

with the raw gradients ``g`` (and ``v`` when it differs) written straight into the upload
selector's buffers (BHerd, GraB) and, for a step observer that reads the trajectory (FedVeca's
estimates), the iterate each step starts from, no copy per step. The same kernel at ``η = 0``
over all of a client's rows in one step is its full local gradient (``SVMAccelerator.gradient``,
FedVeca's ``G0``). Each batch row is read once: the rows go 8 at a
time (``GROUP``), their 8 dot products in one pass and their shares of the gradient in a second
pass while the 8 rows are in the L1 cache (8 memory streams in flight, one update of the partial
sum per 8 rows; measured on one thread of this project's 2-core machine, 100-row batches
from a 188 MB array: 28 µs a step against 62 µs a row at a time). The rows are
split into ``BLOCKS`` fixed blocks that run on the run's threads (numba ``prange``) and whose
partial sums are added in a fixed order, so the numbers do not depend on the thread count. The
loops are compiled with ``fastmath`` so sums vectorise: the numbers equal the per-step path to
rounding (tested to 1e-12 in float64), not bit for bit (torch's BLAS sums in another order), and
like BLAS they may differ in the last bits between CPUs of different vector widths. Under the
``fixed`` order the seam hands the kernel each client's rows copied once in batch order
(``engine.fast.layout``), so a step reads 100 consecutive rows: the same rows, the same numbers.

numba is a dependency (``make install``); where it cannot be imported or compiled the
accelerator does not apply and the engine keeps its per-step path. ``FEDSWEEP_FUSED=0`` turns
it off.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from fedsweep.core.device import numba_threads, switched_on
from fedsweep.engine.fast.base import Accelerator, ClientSteps
from fedsweep.engine.functional import FunctionalModel
from fedsweep.models.svm import SquaredSVM

#: environment switch: ``0`` / ``false`` / ``off`` disables the fused trajectory everywhere
ENV = "FEDSWEEP_FUSED"

#: the batch rows are split into this many fixed blocks whose partial sums are added in a fixed
#: order, so the numbers do not depend on how many threads run the blocks
BLOCKS = 2

#: rows read side by side inside a block (the kernel's unrolled group; a constant of its code)
GROUP = 8

_kernel = None
_failed: str | None = None


def enabled() -> bool:
    return switched_on(ENV)


def _compile():
    import numba

    @numba.njit(
        cache=True,
        nogil=True,
        boundscheck=False,
        fastmath=True,
        parallel=True,
        error_model="numpy",
    )
    def trajectory(x, labels, rows, y, w0, c, offset, gbuf, vbuf, ybuf, flags, parts, hparts):
        """``labels``: the digits (±1 = even/odd, §8.1); ``c`` = [0, 1, ½, λ, η, μ, B, L] in
        the data's dtype (``L``: the loss sum the steps add to); ``flags`` = [use offset,
        record g, record v, record y]; ``parts`` ``[K, d]`` and ``hparts`` ``[K]`` hold the K
        row blocks' partial sums. Returns ``L`` plus the step losses, added in step order (a
        trajectory run in parts sums as in one call; dtype of ``y``)."""
        zero, one, half, lam, lr, mu, bsize = c[0], c[1], c[2], c[3], c[4], c[5], c[6]
        use_offset, rec_g, rec_v = flags[0] != 0, flags[1] != 0, flags[2] != 0
        rec_y = flags[3] != 0
        tau, batch = rows.shape
        d = y.shape[0]
        blocks = parts.shape[0]
        per = (batch + blocks - 1) // blocks
        loss_sum = c[7]
        for t in range(tau):
            for k in numba.prange(blocks):  # fixed blocks of rows: the same sums on any threads
                for j in range(d):
                    parts[k, j] = zero
                lo, hi = k * per, min(batch, (k + 1) * per)
                hk = zero
                # GROUP rows side by side: 8 memory streams in flight, and one pass over the
                # block's partial sum per 8 rows. Past the block's end a slot repeats the
                # block's last row with hinge 0 (it adds nothing).
                for b in range(lo, hi, GROUP):
                    last = hi - 1
                    r0, r1 = rows[t, b], rows[t, min(b + 1, last)]
                    r2, r3 = rows[t, min(b + 2, last)], rows[t, min(b + 3, last)]
                    r4, r5 = rows[t, min(b + 4, last)], rows[t, min(b + 5, last)]
                    r6, r7 = rows[t, min(b + 6, last)], rows[t, min(b + 7, last)]
                    x0, x1, x2, x3 = x[r0], x[r1], x[r2], x[r3]
                    x4, x5, x6, x7 = x[r4], x[r5], x[r6], x[r7]
                    p0 = one if labels[r0] % 2 == 0 else -one  # y_b = +1 for even digits
                    p1 = one if labels[r1] % 2 == 0 else -one
                    p2 = one if labels[r2] % 2 == 0 else -one
                    p3 = one if labels[r3] % 2 == 0 else -one
                    p4 = one if labels[r4] % 2 == 0 else -one
                    p5 = one if labels[r5] % 2 == 0 else -one
                    p6 = one if labels[r6] % 2 == 0 else -one
                    p7 = one if labels[r7] % 2 == 0 else -one
                    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = zero
                    for j in range(d):  # the 8 scores s_b = x_b · y
                        yj = y[j]
                        s0 += x0[j] * yj
                        s1 += x1[j] * yj
                        s2 += x2[j] * yj
                        s3 += x3[j] * yj
                        s4 += x4[j] * yj
                        s5 += x5[j] * yj
                        s6 += x6[j] * yj
                        s7 += x7[j] * yj
                    # the hinges h_b = max(0, 1 − y_b s_b); 0 for the repeated slots
                    h0 = max(zero, one - p0 * s0)
                    h1 = max(zero, one - p1 * s1) if b + 1 < hi else zero
                    h2 = max(zero, one - p2 * s2) if b + 2 < hi else zero
                    h3 = max(zero, one - p3 * s3) if b + 3 < hi else zero
                    h4 = max(zero, one - p4 * s4) if b + 4 < hi else zero
                    h5 = max(zero, one - p5 * s5) if b + 5 < hi else zero
                    h6 = max(zero, one - p6 * s6) if b + 6 < hi else zero
                    h7 = max(zero, one - p7 * s7) if b + 7 < hi else zero
                    hk += (h0 * h0 + h1 * h1 + h2 * h2 + h3 * h3) + (
                        h4 * h4 + h5 * h5 + h6 * h6 + h7 * h7
                    )
                    c0, c1, c2, c3 = p0 * h0, p1 * h1, p2 * h2, p3 * h3
                    c4, c5, c6, c7 = p4 * h4, p5 * h5, p6 * h6, p7 * h7
                    for j in range(d):  # Σ_b y_b h_b x_b, while the 8 rows are in L1
                        parts[k, j] += (c0 * x0[j] + c1 * x1[j] + c2 * x2[j] + c3 * x3[j]) + (
                            c4 * x4[j] + c5 * x5[j] + c6 * x6[j] + c7 * x7[j]
                        )
                hparts[k] = hk
            hsum = zero
            for k in range(blocks):
                hsum += hparts[k]
            ysq = zero
            for j in range(d):
                ysq += y[j] * y[j]
            loss_sum += half * (hsum / bsize) + half * lam * ysq
            for j in range(d):
                acc = zero
                for k in range(blocks):
                    acc += parts[k, j]
                g = lam * y[j] - acc / bsize
                v = g
                if mu != zero:
                    v = v + mu * (y[j] - w0[j])
                if use_offset:
                    v = v + offset[j]
                if rec_g:
                    gbuf[t, j] = g
                if rec_v:
                    vbuf[t, j] = v
                if rec_y:
                    ybuf[t, j] = y[j]  # the iterate the step starts from
                y[j] = y[j] - lr * v
        return loss_sum

    return trajectory


def kernel():
    """The compiled trajectory, or None (numba missing, compilation failed, or disabled)."""
    global _kernel, _failed
    if not enabled() or _failed is not None:
        return None
    if _kernel is None:
        try:
            _kernel = _compile()
        except Exception as err:  # noqa: BLE001 - numba absent or broken: the per-step path
            _failed = f"{type(err).__name__}: {err}"
            warnings.warn(
                f"fused SVM trajectory unavailable ({_failed}); using the per-step path",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
    return _kernel


class SVMTrajectory:
    """Runs the kernel on torch tensors (CPU, float32 or float64; zero-copy numpy views).

    The features are read in place (a flat view) and the ±1 labels computed from the digits
    inside the kernel: nothing is prepared or cached per data tensor."""

    def __init__(self, lam: float) -> None:
        self.lam = float(lam)
        self._scratch: dict = {}

    def applies(self, w: torch.Tensor, x: torch.Tensor) -> bool:
        return (
            kernel() is not None
            and w.device.type == "cpu"
            and x.device.type == "cpu"
            and w.dtype in (torch.float32, torch.float64)
            and x.dtype == w.dtype
        )

    def __call__(
        self,
        y: torch.Tensor,
        w: torch.Tensor,
        x: torch.Tensor,
        target: torch.Tensor,
        rows: torch.Tensor,
        lr: float,
        mu: float = 0.0,
        offset: torch.Tensor | None = None,
        gbuf: torch.Tensor | None = None,
        vbuf: torch.Tensor | None = None,
        ybuf: torch.Tensor | None = None,
        loss: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``τ = len(rows)`` steps from ``y`` (updated in place); ``w`` = the broadcast model
        (for ``μ``); ``offset`` = a constant added to every direction (SCAFFOLD's ``c − c_i``);
        ``gbuf``/``vbuf``/``ybuf`` ``[τ, d]`` receive the gradients / directions / the iterates
        each step starts from. Returns ``loss`` (the sum of earlier steps' losses, None: 0) plus
        the sum of these steps' losses as a 0-dim tensor."""
        x2 = x.reshape(len(x), -1).contiguous().numpy()  # a view of the training set
        dtype = x2.dtype
        d = y.shape[0]
        scratch = self._scratch.get((dtype, d, rows.shape[1]))
        if scratch is None:
            scratch = (
                np.empty((BLOCKS, d), dtype),
                np.empty(BLOCKS, dtype),
                np.zeros((1, 1), dtype),
            )
            if len(self._scratch) >= 64:  # one batch size per run, and one row count per
                self._scratch.clear()  # client of the one-call gradients (``gradient``)
            self._scratch[(dtype, d, rows.shape[1])] = scratch
        parts, hparts, dummy = scratch
        numba_threads()  # the row blocks on the run's threads, torch's count kept
        start = 0.0 if loss is None else float(loss)  # exact: a value of the data's dtype
        consts = np.array([0.0, 1.0, 0.5, self.lam, lr, mu, rows.shape[1], start], dtype=dtype)
        flags = np.array(
            [offset is not None, gbuf is not None, vbuf is not None, ybuf is not None], np.int64
        )
        total = kernel()(
            x2,
            target.contiguous().numpy(),
            rows.numpy(),
            y.numpy(),
            w.numpy(),
            consts,
            dummy[0] if offset is None else offset.numpy(),
            dummy if gbuf is None else gbuf.numpy(),
            dummy if vbuf is None else vbuf.numpy(),
            dummy if ybuf is None else ybuf.numpy(),
            flags,
            parts,
            hparts,
        )
        return torch.tensor(total, dtype=y.dtype)


class SVMAccelerator(Accelerator):
    """The seam's fast path for :class:`SquaredSVM`: every local step in one :class:`SVMTrajectory`
    call. Applies to the SVM itself (not a subclass, whose objective may differ) when the kernel
    runs here (numba, ``FEDSWEEP_FUSED``, CPU, float32/float64); every closed-form direction."""

    name = "svm-trajectory"

    def __init__(self) -> None:
        self._trajectory: SVMTrajectory | None = None

    def applies(self, fm: FunctionalModel, x: torch.Tensor, w: torch.Tensor, direction) -> bool:
        if type(fm.module) is not SquaredSVM:
            return False
        traj = self._trajectory
        if traj is None or traj.lam != fm.module.lam:
            traj = self._trajectory = SVMTrajectory(fm.module.lam)
        return traj.applies(w, x)

    def run(self, fm: FunctionalModel, steps: ClientSteps) -> torch.Tensor:
        direction = steps.direction
        return self._trajectory(
            steps.y,
            steps.w,
            steps.x,
            steps.target,
            steps.rows,
            steps.lr,
            direction.mu,
            direction.offset,
            steps.gbuf,
            steps.vbuf,
            steps.ybuf,
            steps.loss,
        )

    def gradient(
        self, fm: FunctionalModel, x: torch.Tensor, target: torch.Tensor, rows, w
    ) -> torch.Tensor:
        """``∇F(w)`` over the rows ``rows`` as the kernel's one step of ``B = len(rows)`` at
        ``η = 0``: each row read once, 8 side by side (FedVeca's ``G0`` after a fused
        trajectory, ``FastPath.full_gradient``)."""
        grads = torch.empty(1, w.shape[0], dtype=w.dtype)
        rows = rows.reshape(1, -1).to(torch.int64).contiguous()
        self._trajectory(w.clone(), w, x, target, rows, 0.0, gbuf=grads)
        return grads[0]


def _compile_floor():
    import numba

    @numba.njit(cache=True, nogil=True, boundscheck=False, fastmath=True, parallel=True)
    def read_rows(x, rows, parts):
        """Sum every batch's rows, 8 side by side in the kernel's row blocks (its memory
        traffic, no model): the floor of a step."""
        tau, batch = rows.shape
        d = x.shape[1]
        blocks = parts.shape[0]
        per = (batch + blocks - 1) // blocks
        for t in range(tau):
            for k in numba.prange(blocks):
                lo, hi = k * per, min(batch, (k + 1) * per)
                for b in range(lo, hi, GROUP):
                    last = hi - 1
                    x0, x1 = x[rows[t, b]], x[rows[t, min(b + 1, last)]]
                    x2, x3 = x[rows[t, min(b + 2, last)]], x[rows[t, min(b + 3, last)]]
                    x4, x5 = x[rows[t, min(b + 4, last)]], x[rows[t, min(b + 5, last)]]
                    x6, x7 = x[rows[t, min(b + 6, last)]], x[rows[t, min(b + 7, last)]]
                    for j in range(d):
                        parts[k, j] += (x0[j] + x1[j] + x2[j] + x3[j]) + (
                            x4[j] + x5[j] + x6[j] + x7[j]
                        )
        return parts[0, 0]

    return read_rows


def memory_floor(x: torch.Tensor, rows: torch.Tensor) -> float:
    """Seconds to read every batch of ``rows`` ``[τ, B]`` once from ``x``, as the fused kernel
    reads them (8 rows side by side, the same blocks and threads): what a step cannot go below
    on this machine (bench; under the fixed order the engine reads each client's rows in
    sequence, see ``engine.fast.layout``)."""
    import time

    fn = _compile_floor()
    x2 = x.reshape(len(x), -1).contiguous().numpy()
    parts = np.zeros((BLOCKS, x2.shape[1]), x2.dtype)
    numba_threads()
    fn(x2, rows[:1].numpy(), parts)  # compile
    start = time.perf_counter()
    fn(x2, rows.numpy(), parts)
    return time.perf_counter() - start
