"""The fast paths against the reference path (issue 33, step 4): one suite over every valid
composition of base method × upload selector × model, each run for a few rounds with the fast
paths on and off (``FEDSWEEP_FUSED``, the switch every fast trajectory obeys).

What is promised (the seam, ``fedsweep.engine.fast``, and tests/engine/test_fast_paths.py):

* where a fast path runs (the SVM, a closed-form direction, a selector that takes buffers,
  step observers that take the recorded trajectory), the numbers equal the per-step path's to
  rounding: float64 to 1e-12 (the compiled sums add in another order than BLAS), float32 to
  1e-4 / 1e-6; BHerd and GraB pick the same steps and FedVeca sets the same τ (their records
  and τ are equal exactly);
* where the seam declines (a model without a fast path, the MLP; momentum; an observer that
  must see single steps: FedVeca's ``same_batch``), the switch changes nothing: the same bits.
"""

from __future__ import annotations

import pytest
import torch

from fedsweep.components.compose import selector_bases
from fedsweep.engine.fast import svm_trajectory
from fedsweep.experiment import FLRun
from tests.helpers import tiny_config, tiny_dataset

DATA = tiny_dataset(n_train=600, side=8)
NUMBA = svm_trajectory.kernel() is not None

#: the base methods of the matrix with the settings that exercise their closed-form direction
METHODS = {
    "fedavg": {},
    "fedprox": {"fedprox__mu": 0.5},  # v = g + μ (y − w_t)
    "fednova": {},  # plain local SGD (BHerd-FedNova is defined for it only)
    "scaffold": {},  # v = g + (c − c_i)
}
SELECTORS = ("none", "bherd", "grab")
#: models with a fast path (the others: the seam declines)
FAST_MODELS = ("svm",)
MODELS = ("svm", "mlp")

CELLS = [
    (method, selector, model)
    for model in MODELS
    for selector in SELECTORS
    for method in METHODS
    if method in selector_bases()[selector]
]


def fast_path_applies(method: str, selector: str, model: str) -> bool:
    """The matrix's promise: which cells run on a fast path (the others decline): every
    selector, BHerd and GraB included, on a model with a fast path."""
    return model in FAST_MODELS


def run(monkeypatch, fast: bool, rounds: int = 3, **overrides):
    monkeypatch.setenv(svm_trajectory.ENV, "1" if fast else "0")
    cfg = tiny_config(train__rounds=rounds, train__lr=0.05, **overrides)
    flrun = FLRun(cfg, dataset=DATA)
    metrics = [flrun.step() for _ in range(rounds)]
    return flrun, metrics


def assert_runs_agree(ref, ref_metrics, fast, fast_metrics, tol: float) -> None:
    """The final model, every logged number but times, every record (exactly) and SCAFFOLD's
    server variate agree to ``tol`` (0: the same bits)."""
    torch.testing.assert_close(fast.w, ref.w, rtol=tol, atol=tol)
    for a, b in zip(ref_metrics, fast_metrics, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if "time" in key:
                continue
            torch.testing.assert_close(b[key], a[key], rtol=tol, atol=tol, msg=key)
    ref_records, fast_records = ref.record_arrays(), fast.record_arrays()
    assert ref_records.keys() == fast_records.keys()
    for key, value in ref_records.items():  # BHerd picked the same steps from the same g
        assert (fast_records[key] == value).all(), key
    if hasattr(ref.method, "c"):
        torch.testing.assert_close(fast.method.c, ref.method.c, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    ("method", "selector", "model"), CELLS, ids=["-".join(cell) for cell in CELLS]
)
def test_fast_path_equals_the_reference_path(monkeypatch, method, selector, model):
    applies = fast_path_applies(method, selector, model)
    if applies and not NUMBA:
        pytest.skip("numba is not available: no fast path to compare")
    overrides = {
        "train__dtype": "float64",
        "algorithm": method,
        "selector": selector,
        "model__name": model,
        **METHODS[method],
    }
    ref, ref_metrics = run(monkeypatch, False, **overrides)
    assert ref.trainer.fast.clients_run == 0  # the switch turns every fast path off
    fast, fast_metrics = run(monkeypatch, True, **overrides)
    if applies:
        assert fast.trainer.fast.clients_run > 0
        assert_runs_agree(ref, ref_metrics, fast, fast_metrics, tol=1e-12)
    else:  # the seam declines: nothing changes
        assert fast.trainer.fast.clients_run == 0
        assert_runs_agree(ref, ref_metrics, fast, fast_metrics, tol=0.0)


@pytest.mark.skipif(not NUMBA, reason="numba is not available")
@pytest.mark.parametrize(
    "overrides",
    [
        {"algorithm": "fednova", "fednova__mu": 0.2},  # FedNova's proximal term
        {"algorithm": "centralized"},  # one client on the pooled data
        {"selector": "grab", "grab__variant": "grab_stale_mean"},  # GraB's other balancer
        # FedVeca: its estimates from the recorded trajectory, the default adaptive τ (R1),
        # on FedNova and on FedAvg, and fixed τ
        {"algorithm": "fednova", "step_policy": "fedveca", "fedveca__tau_max": 12},
        {"algorithm": "fedavg", "step_policy": "fedveca", "fedveca__tau_max": 12},
        {
            "algorithm": "fednova",
            "step_policy": "fedveca",
            "fedveca__tau_rule": "fixed",
            "fedveca__tau_init": 4,
            "fedveca__tau_max": 4,
        },
    ],
    ids=[
        "fednova-mu",
        "centralized",
        "grab-stale-mean",
        "fedveca",
        "fedveca-fedavg",
        "fedveca-fixed",
    ],
)
def test_fast_path_equals_the_reference_path_beyond_the_matrix(monkeypatch, overrides):
    overrides = {"train__dtype": "float64", **overrides}
    rounds = 5 if "step_policy" in overrides else 3  # FedVeca's rule acts from round 2
    ref, ref_metrics = run(monkeypatch, False, rounds=rounds, **overrides)
    fast, fast_metrics = run(monkeypatch, True, rounds=rounds, **overrides)
    assert ref.trainer.fast.clients_run == 0
    assert fast.trainer.fast.clients_run == rounds * len(fast.clients)  # every client fused
    assert_runs_agree(ref, ref_metrics, fast, fast_metrics, tol=1e-12)
    if "step_policy" in overrides:  # the same τ, client by client and round by round

        def taus(metrics):
            return [{k: float(v) for k, v in m.items() if k.endswith("/tau")} for m in metrics]

        assert taus(fast_metrics) == taus(ref_metrics) and taus(ref_metrics)[-1]
        assert fast.components.step_policy.tau == ref.components.step_policy.tau


@pytest.mark.skipif(not NUMBA, reason="numba is not available")
def test_float32_agrees_to_rounding(monkeypatch):
    ref, _ = run(monkeypatch, False)
    fast, _ = run(monkeypatch, True)
    assert fast.w.dtype == torch.float32 and fast.trainer.fast.clients_run > 0
    torch.testing.assert_close(fast.w, ref.w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "overrides",
    [
        {"algorithm": "fednova", "fednova__momentum": 0.9},  # momentum: no closed form
        # β against the same batch: the observer needs every step's batch
        {"algorithm": "fednova", "step_policy": "fedveca", "fedveca__beta_est": "same_batch"},
    ],
    ids=["fednova-momentum", "fedveca-same-batch"],
)
def test_the_seam_declines_beyond_the_matrix(monkeypatch, overrides):
    ref, ref_metrics = run(monkeypatch, False, rounds=2, **overrides)
    fast, fast_metrics = run(monkeypatch, True, rounds=2, **overrides)
    assert fast.trainer.fast.clients_run == 0
    assert_runs_agree(ref, ref_metrics, fast, fast_metrics, tol=0.0)
