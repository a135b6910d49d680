"""BHerd's diagnostics (``bherd.diagnostics``) and the readings of Eq. 7's scale
(``bherd.server_scale``), issue 35: defaults change no run, the measures mean what they say."""

from __future__ import annotations

import pytest
import torch

from fedsweep.config.hashing import config_hash
from fedsweep.config.load import ConfigError
from tests.helpers import F64, run_rounds, tiny_config, tiny_dataset

DATA = tiny_dataset(n_train=300, n_test=100)
BASE = dict(algorithm="fedavg", selector="bherd", train__rounds=3, train__lr=0.05, **F64)


def cfg(**kw):
    return tiny_config(**{**BASE, **kw})


def test_defaults_keep_every_hash_and_diagnostics_change_no_number():
    plain = cfg(bherd__alpha=0.5)
    explicit = cfg(bherd__alpha=0.5, bherd__server_scale="inverse_alpha")
    assert config_hash(plain) == config_hash(explicit)
    diag = cfg(bherd__alpha=0.5, bherd__diagnostics=True)
    assert config_hash(diag) != config_hash(plain)  # a run with the extra metrics is its own
    a, b = run_rounds(plain, DATA), run_rounds(diag, DATA)
    assert torch.equal(a.w, b.w)  # bit-identical model


def logged(config, rounds=3):
    """Every round's metrics of a run of ``config`` on the tiny data."""
    from fedsweep.experiment import FLRun

    run = FLRun(config, dataset=DATA)
    return [run.step() for _ in range(rounds)]


def test_alpha_one_uploads_the_full_trajectory_so_both_measures_vanish():
    for m in logged(cfg(bherd__alpha=1.0, bherd__diagnostics=True)):
        for i in range(3):
            assert float(m[f"client/{i}/dev"]) < 1e-12  # float64: only summation order differs
            assert float(m[f"client/{i}/herd_err"]) < 1e-12
        assert float(m["bherd_dev"]) < 1e-12


def test_deviation_matches_a_direct_computation():
    """``dev`` = ||(1/α) Σ_π g − Σ g|| / ||Σ g|| equals ``herd_err`` under Eq. 7 with E = 1
    (they part with E ≠ 1, ``server_scale: none`` or SCAFFOLD's corrected directions)."""
    from fedsweep.components.selectors.bherd import keep_count
    from fedsweep.components.selectors.herding import herd

    g = torch.randn(12, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    g += 2.0  # a mean the herd can track
    k = keep_count(0.5, 12)
    order = herd(g, k).order
    sel = g.index_select(0, order).sum(0)
    mu = g.mean(0)
    want_dev = ((sel / 0.5 - g.sum(0)).norm() / g.sum(0).norm()).item()
    want_err = ((sel / (0.5 * 12) - mu).norm() / mu.norm()).item()
    assert want_dev == pytest.approx(want_err)  # E = 1, v = g: the two are one measure
    for m in logged(cfg(bherd__alpha=0.5, bherd__diagnostics=True), rounds=1):
        for i in range(3):
            assert 0 < float(m[f"client/{i}/dev"]) < 1
            # E = 1 and plain SGD: (1/α) g_sel − τ μ = τ (g_sel/(ατ) − μ), whatever k is
            assert float(m[f"client/{i}/dev"]) == pytest.approx(float(m[f"client/{i}/herd_err"]))


def test_server_scale_none_shrinks_the_step_by_alpha():
    """Without 1/α the upload is the herd sum itself: about α of the full update, so its
    relative deviation is about 1 − α (exactly, at α = 1 where nothing is left out, 0)."""
    m = logged(cfg(bherd__alpha=0.25, bherd__server_scale="none", bherd__diagnostics=True), 1)[0]
    devs = [float(m[f"client/{i}/dev"]) for i in range(3)]
    assert all(0.6 < d < 0.9 for d in devs), devs
    same = cfg(bherd__alpha=1.0, bherd__server_scale="none")
    assert torch.equal(run_rounds(same, DATA).w, run_rounds(cfg(bherd__alpha=1.0), DATA).w)


def test_server_scale_none_is_refused_for_fednova():
    with pytest.raises(ConfigError, match="bherd.server_scale: got 'none' with algorithm fednova"):
        tiny_config(
            unused="refuse", algorithm="fednova", selector="bherd", bherd__server_scale="none"
        )
    with pytest.raises(ConfigError, match="inverse_alpha"):
        tiny_config(selector="bherd", bherd__server_scale="half")
