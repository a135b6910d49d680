"""GraB on the fused path (issue 49, item 3): where a fast path runs a client's steps in one call
(the SVM on the CPU), the trajectory writes every gradient into GraB's buffer and the selector
balances it in one compiled call (``engine.fast.balancing``).

* On the same gradients the compiled balancing gives the per-step ``record`` loop's selections,
  ``α_i``, upload and stale means bit for bit (random inputs, exact ties, both rules, float32
  and float64).
* Whole runs with ``FEDSWEEP_FUSED`` on and off pick the same steps; the models agree to
  rounding (the fused trajectory's sums add in another order than BLAS; float64 to 1e-12 in
  tests/engine/test_fast_equivalence.py, float32 here).
* The fused path is taken: every client on the accelerator, ``record`` never called.
"""

from __future__ import annotations

import pytest
import torch

from fedsweep.components.selectors.grab import GraB
from fedsweep.core.messages import LocalDirection, RoundContext
from fedsweep.engine.fast import svm_trajectory
from fedsweep.engine.fast.balancing import balance_compiled
from fedsweep.experiment import FLRun
from tests.helpers import tiny_config, tiny_dataset

needs_numba = pytest.mark.skipif(svm_trajectory.kernel() is None, reason="numba is not available")

VARIANTS = ("bherd_alg4", "grab_stale_mean")


def selector(variant: str) -> GraB:
    return GraB(tiny_config(selector="grab", grab__variant=variant))


def per_step(sel: GraB, client: int, grads: torch.Tensor, ctx: RoundContext):
    """One client's round through ``record``, step by step (the reference path)."""
    tau, dim = grads.shape
    sel.begin_client(client, tau, dim, grads.dtype, grads.device)
    for step in range(tau):
        sel.record(step, grads[step], grads[step])
    return sel.finish_client(client, ctx)


def fused(sel: GraB, client: int, grads: torch.Tensor, ctx: RoundContext):
    """The same round as a fast path runs it: the buffer filled at once, balanced compiled."""
    tau, dim = grads.shape
    sel.begin_client(client, tau, dim, grads.dtype, grads.device)
    gbuf, vbuf = sel.fused_buffers(LocalDirection())
    assert vbuf is None and gbuf.shape == (tau, dim)
    gbuf.copy_(grads)
    return sel.finish_client(client, ctx)


def assert_same_selection(a, b) -> None:
    assert torch.equal(a.delta, b.delta)
    assert torch.equal(a.records["selected"], b.records["selected"])
    assert torch.equal(a.metrics["alpha"], b.metrics["alpha"])
    assert torch.equal(a.extras["alpha"], b.extras["alpha"])


def gradients(kind: str, tau: int, dim: int, dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if kind == "random":
        return torch.randn(tau, dim, generator=g, dtype=dtype) * 10.0 ** torch.randint(
            -3, 3, (tau, 1), generator=g
        ).to(dtype)
    if kind == "zero":  # every ⟨s, z⟩ is an exact 0: the tie rules decide every step
        return torch.zeros(tau, dim, dtype=dtype)
    if kind == "repeated":  # one gradient τ times
        return torch.randn(1, dim, generator=g, dtype=dtype).expand(tau, dim).contiguous()
    # small integers on orthogonal axes, τ a power of 2: every sum exact, many exact-0 products
    axes = torch.randint(0, 3, (tau,), generator=g)
    grads = torch.zeros(tau, dim, dtype=dtype)
    grads[torch.arange(tau), axes] = torch.randint(-2, 3, (tau,), generator=g).to(dtype)
    return grads


@needs_numba
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("kind", ["random", "zero", "repeated", "integer-axes"])
def test_compiled_balancing_equals_record_bit_for_bit(variant, dtype, kind):
    """Three rounds of two clients (the stale means carry over), τ from 1 up: selections,
    ``α_i``, the upload ``η g_acc`` and the state, bit for bit."""
    ref, fast = selector(variant), selector(variant)
    for round_ in (1, 2, 3):
        ctx = RoundContext(round_, 0.05, 1.0)
        for client, tau in ((0, 8 if kind == "integer-axes" else 37), (1, round_)):
            grads = gradients(kind, tau, 50, dtype, seed=100 * round_ + client)
            assert_same_selection(
                per_step(ref, client, grads, ctx), fused(fast, client, grads, ctx)
            )
    assert ref.state_dict().keys() == fast.state_dict().keys()
    for client, mean in ref.state_dict()["prev_mean"].items():
        assert torch.equal(fast.state_dict()["prev_mean"][client], mean)


@needs_numba
def test_the_tie_rules_hold_on_the_compiled_path():
    """``⟨s, z⟩ = 0``: the literal rule never selects (its first gradient, at s = 0, neither),
    the stale-mean rule always does (ties to the + side)."""
    grads = torch.zeros(6, 4, dtype=torch.float64)
    for centre, expected in ((None, False), (torch.zeros(4, dtype=torch.float64), True)):
        state = [torch.zeros(4, dtype=torch.float64) for _ in range(3)]
        selected = torch.zeros(6, dtype=torch.bool)
        count = balance_compiled(grads, *state, selected, centre)
        assert selected.tolist() == [expected] * 6
        assert float(count) == (6 if expected else 0)
    # a random first gradient: never selected under the literal rule, always under the stale one
    grads = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for centre, first in ((None, False), (torch.zeros(4, dtype=torch.float64), True)):
        selected = torch.zeros(5, dtype=torch.bool)
        state = [torch.zeros(4, dtype=torch.float64) for _ in range(3)]
        balance_compiled(grads, *state, selected, centre)
        assert bool(selected[0]) == first


DATA = tiny_dataset(n_train=600, side=8)


def run(monkeypatch, fused_path: bool, rounds: int = 3, **overrides):
    monkeypatch.setenv(svm_trajectory.ENV, "1" if fused_path else "0")
    cfg = tiny_config(selector="grab", train__rounds=rounds, train__lr=0.05, **overrides)
    flrun = FLRun(cfg, dataset=DATA)
    return flrun, [flrun.step() for _ in range(rounds)]


@needs_numba
@pytest.mark.parametrize(
    "overrides",
    [
        {"seed": 3, "data__partition": "case3"},
        {"seed": 4, "data__partition": "case2", "grab__variant": "grab_stale_mean"},
        {"train__order": "rr", "lr_schedule": "step", "lr_step__milestones": [1]},
    ],
    ids=["literal-case3", "stale-case2", "rr-step-lr"],
)
def test_fused_grab_picks_the_steps_of_the_per_step_path(monkeypatch, overrides):
    """float32 (the default dtype): the same selections and α_i, round by round; the models to
    float32 rounding. The fused run never calls ``record``: its steps ran on the accelerator
    and its balancing compiled."""
    ref, ref_metrics = run(monkeypatch, False, **overrides)
    assert ref.trainer.fast.clients_run == 0

    def no_record(self, step, g, v):
        raise AssertionError("record called on the fused path")

    monkeypatch.setattr(GraB, "record", no_record)
    fast, fast_metrics = run(monkeypatch, True, **overrides)
    assert fast.trainer.fast.clients_run == 3 * len(fast.clients)
    for key, value in ref.record_arrays().items():
        assert (fast.record_arrays()[key] == value).all(), key
    for a, b in zip(ref_metrics, fast_metrics, strict=True):
        alphas = [k for k in a if k.endswith("/alpha")]
        assert alphas and all(torch.equal(a[k], b[k]) for k in alphas)
    torch.testing.assert_close(fast.w, ref.w, rtol=1e-4, atol=1e-6)
