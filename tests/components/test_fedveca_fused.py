"""FedVeca on the fused path (issue 49, item 3): where a fast path runs a client's steps in one
call (the SVM on the CPU), FedVeca's estimates (§5.3) come from the recorded trajectory in one
``on_trajectory`` call (the per-step norms in one compiled pass, ``engine.fast.estimates``), and
``G0`` from one accelerator call (``Trajectory.full_gradient``), instead of one ``on_step`` per
step and the client oracle's chunks.

* Given the same trajectory (a test accelerator that replays the per-step loop's tensor
  operations, so the steps are bit for bit the reference's), the trajectory path gives the
  step path's ``β``, ``δ``, ``A`` to 1e-12 and the same τ, round after round, the non-finite
  cases included.
* The one-call ``G0`` equals the oracle's chunks to 1e-12 in float64, read from the client's
  fixed-order copy or from its scattered rows; the compiled per-step sums equal the tensor
  operations to 1e-12.
* Whole runs on the real kernel set the same τ as the per-step path (float32 here; float64 in
  tests/engine/test_fast_equivalence.py), never call ``on_step`` and never take the oracle's
  chunks; ``beta_est: same_batch`` keeps the per-step path.
"""

from __future__ import annotations

import math

import pytest
import torch

from fedsweep.components.step_policies.fedveca import FedVecaEstimates
from fedsweep.engine.fast import Accelerator, svm_trajectory
from fedsweep.engine.fast.estimates import step_sums
from fedsweep.engine.oracle import ClientOracle
from fedsweep.experiment import FLRun
from tests.helpers import tiny_config, tiny_dataset

needs_numba = pytest.mark.skipif(svm_trajectory.kernel() is None, reason="numba is not available")

DATA = tiny_dataset(n_train=600, side=8)
VECA = dict(algorithm="fednova", step_policy="fedveca", fedveca__tau_max=12)


class Replay(Accelerator):
    """Runs the steps with the reference loop's own tensor operations (the same bits), filling
    the buffers the seam hands it; no one-call gradient (``G0`` takes the oracle's chunks)."""

    name = "replay"

    def applies(self, fm, x, w, direction) -> bool:
        return direction.is_gradient

    def run(self, fm, steps) -> torch.Tensor:
        loss_sum = torch.zeros((), dtype=steps.y.dtype) if steps.loss is None else steps.loss
        for t, batch in enumerate(steps.rows):
            xb, yb = steps.x.index_select(0, batch), steps.target.index_select(0, batch)
            g, loss = fm.gradient(steps.y, xb, yb)
            for buf, value in ((steps.ybuf, steps.y), (steps.gbuf, g), (steps.vbuf, g)):
                if buf is not None:
                    buf[t].copy_(value)
            steps.y.sub_(g, alpha=steps.lr)
            loss_sum += loss
        return loss_sum


def run(monkeypatch, fused: bool, rounds: int, replay: bool = False, **overrides):
    """``replay``: the steps on :class:`Replay` (the switch off: the SVM kernel and its
    one-call ``G0`` stay off, so ``G0`` comes from the oracle's chunks as step by step)."""
    monkeypatch.setenv(svm_trajectory.ENV, "1" if fused and not replay else "0")
    cfg = tiny_config(**{"train__rounds": rounds, "train__lr": 0.05, **overrides})
    flrun = FLRun(cfg, dataset=DATA)
    if replay:
        flrun.trainer.fast.accelerators = [Replay()]
    return flrun, [flrun.step() for _ in range(rounds)]


def taus(metrics) -> list[dict[str, float]]:
    return [{k: float(v) for k, v in m.items() if k.endswith("/tau")} for m in metrics]


def assert_estimates_agree(ref_metrics, fast_metrics, tol: float) -> None:
    for a, b in zip(ref_metrics, fast_metrics, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if "time" not in key:
                torch.testing.assert_close(b[key], a[key], rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize(
    "overrides",
    [
        {"train__dtype": "float64"},
        {"train__dtype": "float64", "algorithm": "fedavg", "data__partition": "case3"},
        {"train__dtype": "float64", "fedveca__tau_damping": "bounded", "seed": 2},
        {
            "train__dtype": "float64",
            "fedveca__tau_rule": "fixed",
            "fedveca__tau_init": 5,
            "fedveca__tau_max": 5,
        },
        {
            "data__partition": "case2",
            "train__order": "rr",
            "lr_schedule": "step",
            "lr_step__milestones": [2],
            "lr_step__gamma": 0.5,
        },
    ],
    ids=["fednova-f64", "fedavg-case3-f64", "bounded-f64", "fixed-f64", "case2-rr-step-lr-f32"],
)
def test_the_trajectory_path_equals_the_step_path_on_the_same_steps(monkeypatch, overrides):
    """The steps bit for bit the reference's (the replay accelerator) and ``G0`` from the same
    chunks: the batched estimates equal ``on_step``'s to rounding, the τ exactly, and so the
    model: every client went through ``on_trajectory``."""
    kw = {**VECA, **overrides}
    ref, ref_metrics = run(monkeypatch, False, 6, **kw)
    monkeypatch.setattr(FedVecaEstimates, "on_step", lambda *a: pytest.fail("on_step called"))
    fast, fast_metrics = run(monkeypatch, True, 6, replay=True, **kw)
    assert fast.trainer.fast.clients_run == 6 * len(fast.clients)
    assert taus(fast_metrics) == taus(ref_metrics)
    assert fast.components.step_policy.tau == ref.components.step_policy.tau
    tol = 1e-12 if overrides.get("train__dtype") == "float64" else 1e-5
    assert_estimates_agree(ref_metrics, fast_metrics, tol)
    torch.testing.assert_close(fast.w, ref.w, rtol=tol, atol=tol)


def test_non_finite_trajectories_give_the_step_paths_estimates(monkeypatch):
    """A learning rate that blows the iterates up: the same NaN/inf estimates (NaN kept by the
    maxima, steps with a NaN displacement skipped), and the run goes on as the reference."""
    kw = {**VECA, "train__dtype": "float64", "train__lr": 1e30, "fedveca__tau_init": 12}
    ref, ref_metrics = run(monkeypatch, False, 4, **kw)
    fast, fast_metrics = run(monkeypatch, True, 4, replay=True, **kw)
    assert fast.trainer.fast.clients_run > 0
    values = [float(m[k]) for m in ref_metrics for k in m if k.endswith(("/beta", "/delta"))]
    assert any(not math.isfinite(v) for v in values)  # the case is exercised
    assert_estimates_agree(ref_metrics, fast_metrics, 1e-12)
    assert taus(fast_metrics) == taus(ref_metrics)


@needs_numba
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("batch", [20, 30], ids=["copy-holds-every-row", "scattered-rows"])
def test_the_one_call_full_gradient_equals_the_oracles_chunks(monkeypatch, dtype, batch):
    """``Trajectory.full_gradient`` is one accelerator call per client, equal to the oracle's
    chunks (``eval.batch_size`` 64: several per client) to rounding: from the client's
    fixed-order copy when its pass holds every row (200 = 10 × 20), else from its scattered
    rows (200 > 6 × 30)."""
    read = []
    one_call = svm_trajectory.SVMAccelerator.gradient

    def counted(self, fm, x, *args):
        read.append(x)
        return one_call(self, fm, x, *args)

    monkeypatch.setattr(svm_trajectory.SVMAccelerator, "gradient", counted)
    cfg = tiny_config(train__dtype=dtype, train__batch_size=batch, eval__batch_size=64, **VECA)
    flrun = FLRun(cfg, dataset=DATA)
    flrun.step()  # the fixed-order copies are built
    fast = flrun.trainer.fast
    w = torch.randn(flrun.fm.dim, dtype=flrun.w.dtype, generator=torch.Generator().manual_seed(0))
    tol = 1e-12 if dtype == "float64" else 1e-5
    for client in flrun.clients:
        read.clear()
        acc = fast.accelerator(client.index, w)[0]
        got = fast.full_gradient(acc, client, w)
        want = flrun.oracle.gradients([client.index], w)[0]
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)
        assert len(read) == 1 and (read[0] is flrun.x_train) == (batch == 30)


def test_the_compiled_step_sums_equal_the_tensor_operations():
    """``(||r_t||², ||r_t − η v_t||², ||g_t − ref||²)`` per step, float32 and float64 rows, with
    non-finite entries kept as the tensor operations keep them."""
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        y, grads, v = (torch.randn(9, 50, generator=g, dtype=dtype) for _ in range(3))
        y[3, 7], grads[5, 1], v[6, 2] = float("nan"), float("inf"), float("-inf")
        w, ref = (
            torch.randn(50, generator=g, dtype=torch.float64),
            torch.randn(50, dtype=torch.float64),
        )
        lr = 0.3
        got = step_sums(y, grads, v, w, ref, lr)
        r = y.double() - w
        r_next = r - lr * v.double()
        e = grads.double() - ref
        want = torch.stack([(r * r).sum(1), (r_next * r_next).sum(1), (e * e).sum(1)], 1)
        if got is None:
            pytest.skip("numba is not available")
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0, equal_nan=True)


@needs_numba
@pytest.mark.parametrize(
    "overrides",
    [
        {"seed": 1},
        {"seed": 2, "data__partition": "case3", "algorithm": "fedavg"},
        {"seed": 3, "fedveca__tau_rule": "fixed", "fedveca__tau_init": 6, "fedveca__tau_max": 6},
        {"seed": 4, "train__order": "iid", "eval__train_metrics": True, "eval__every": 2},
    ],
    ids=["fednova", "fedavg-case3", "fixed", "iid-eval"],
)
def test_fused_fedveca_sets_the_per_step_paths_tau(monkeypatch, overrides):
    """The real kernel, float32 (the default): the same τ, client by client and round by round,
    the estimates and the model to float32 rounding. The fused run never calls ``on_step`` and
    never asks the client oracle (``G0`` in one accelerator call)."""
    kw = {**VECA, **overrides}
    ref, ref_metrics = run(monkeypatch, False, 6, **kw)
    assert ref.trainer.fast.clients_run == 0
    monkeypatch.setattr(FedVecaEstimates, "on_step", lambda *a: pytest.fail("on_step called"))
    monkeypatch.setattr(ClientOracle, "gradients", lambda *a: pytest.fail("oracle asked"))
    fast, fast_metrics = run(monkeypatch, True, 6, **kw)
    assert fast.trainer.fast.clients_run == 6 * len(fast.clients)
    assert taus(fast_metrics) == taus(ref_metrics)
    for a, b in zip(ref_metrics, fast_metrics, strict=True):
        for key in a:
            if key.endswith(("/beta", "/delta", "/A", "test_loss")):
                torch.testing.assert_close(b[key], a[key], rtol=1e-3, atol=1e-6)
    torch.testing.assert_close(fast.w, ref.w, rtol=1e-4, atol=1e-6)


def test_same_batch_keeps_the_per_step_path(monkeypatch):
    """``beta_est: same_batch`` compares each step with its own batch at ``w_k``: the observer
    must see the batches, so the seam declines and the switch changes nothing."""
    kw = {**VECA, "train__dtype": "float64", "fedveca__beta_est": "same_batch"}
    ref, ref_metrics = run(monkeypatch, False, 3, **kw)
    fast, fast_metrics = run(monkeypatch, True, 3, **kw)
    assert fast.trainer.fast.clients_run == 0
    assert torch.equal(fast.w, ref.w)
    assert_estimates_agree(ref_metrics, fast_metrics, 0.0)
