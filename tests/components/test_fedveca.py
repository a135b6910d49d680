"""FedVeca (docs/algorithms.md §5): the step policy, its client estimates and server state, and
the invariants of Appendix B item 8 (τ within [1, τ_max]; with ``tau_rule: fixed`` and equal τ,
FedVeca is FedNova and FedAvg; β̂ non-decreasing and one round late)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from fedsweep.components.algorithms.fedavg import FedAvg
from fedsweep.components.selectors.none import NoSelector
from fedsweep.components.step_policies.fedveca import FedVecaEstimates, FedVecaSteps, r1
from fedsweep.config.load import ConfigError
from fedsweep.core.messages import ClientTask, ClientUpdate, Cohort, RoundContext
from fedsweep.engine.batches import BatchSchedule
from fedsweep.engine.functional import FunctionalModel
from fedsweep.engine.local import Client, LocalTrainer
from fedsweep.engine.oracle import ClientOracle
from fedsweep.experiment import FLRun, run_federated, to_floats
from fedsweep.models.base import FLModel
from tests.helpers import CASE3, run_rounds, tiny_config, tiny_dataset

VECA = dict(algorithm="fednova", step_policy="fedveca", train__lr=0.01, train__batch_size=10)


@pytest.fixture(scope="module")
def data():
    return tiny_dataset()


@pytest.mark.parametrize("fused", ["0", "1"], ids=["per-step", "fused"])
def test_fixed_rule_with_equal_tau_is_fednova_and_fedavg(data, monkeypatch, fused):
    """Equal fixed τ: the estimates are made but change nothing (the extra batch is peeked):
    bit for bit FedNova's run on the same path, the per-step path or the fused SVM trajectory
    (where FedVeca's observer reads the recorded trajectory; the two paths agree to rounding,
    tests/engine/test_fast_equivalence.py)."""
    from fedsweep.engine.fast import svm_trajectory as svm_kernel

    monkeypatch.setenv(svm_kernel.ENV, fused)
    common = dict(CASE3, train__rounds=4, train__lr=0.01, train__batch_size=10)
    veca = run_rounds(
        tiny_config(
            **common,
            algorithm="fednova",
            step_policy="fedveca",
            fedveca__tau_rule="fixed",
            fedveca__tau_init=3,
        ),
        data,
    )
    nova = run_rounds(
        tiny_config(**common, algorithm="fednova", step_policy="fixed", fixed_steps__steps=3), data
    )
    avg = run_rounds(
        tiny_config(**common, algorithm="fedavg", step_policy="fixed", fixed_steps__steps=3), data
    )
    fast = svm_kernel.kernel() is not None and fused == "1"
    assert (veca.trainer.fast.clients_run > 0) == fast
    assert torch.equal(veca.w, nova.w)
    torch.testing.assert_close(veca.w, avg.w, rtol=1e-12, atol=1e-15)
    assert veca.components.step_policy.tau == [3] * 5
    assert not torch.equal(veca.w, run_rounds(tiny_config(**common), data, 1).w)  # it trained


def test_update_is_fednova_shaped_with_unequal_tau(data):
    """``w_{k+1} = w_k − η τ_k Σ p_i d_i`` with ``d_i = Δ_i / (η τ_i)`` (§5.1)."""
    cfg = tiny_config(**CASE3, **VECA, train__rounds=3)
    run = FLRun(cfg, dataset=data)
    run.step(), run.step()  # round 2 sets unequal τ for round 3
    policy = run.components.step_policy
    assert len(set(policy.tau)) > 1
    w, lr, p = run.w.clone(), cfg.train.lr, run.p
    taus = list(policy.tau)
    ctx = RoundContext(3, lr, 1.0)
    sched = [c.schedule.state_dict() for c in run.clients]
    deltas = [
        run.trainer.train(c, ClientTask(c.index, taus[c.index], lr), w, ctx).delta
        for c in run.clients
    ]
    for c, s in zip(run.clients, sched, strict=True):
        c.schedule.load_state_dict(s)
    tau_k = sum(float(pi) * t for pi, t in zip(p, taus, strict=True))
    d = [delta / (lr * t) for delta, t in zip(deltas, taus, strict=True)]
    expected = w - lr * tau_k * sum(float(pi) * di for pi, di in zip(p, d, strict=True))
    run.step()
    torch.testing.assert_close(run.w, expected, rtol=1e-12, atol=1e-14)


def test_r1_is_decreasing_in_A_and_phi_and_clamped_to_range():
    cfg = tiny_config(**VECA, fedveca__tau_max=50)
    policy = FedVecaSteps(cfg, [10] * 3)
    g2 = torch.tensor(0.7, dtype=torch.float64)
    A = torch.logspace(-6, 4, 41, dtype=torch.float64)
    for phi in (0.005, 0.05, 0.5):
        values = r1(A, g2, phi)
        assert (values[1:] < values[:-1]).all()  # strictly decreasing in A
        clamped = [policy.clamp(v, 7) for v in values.tolist()]
        assert all(1 <= c <= 50 for c in clamped)
        assert clamped == sorted(clamped, reverse=True)
    for a in A:
        by_phi = [float(r1(a.reshape(1), g2, phi)[0]) for phi in (0.005, 0.05, 0.5)]
        assert by_phi[0] > by_phi[1] > by_phi[2]
    assert float(r1(torch.zeros(1, dtype=torch.float64), g2, 0.05)[0]) == math.inf
    assert policy.clamp(math.inf, 7) == 50  # A = 0 -> τ_max
    assert policy.clamp(0.4, 7) == 1  # "0 -> 1"
    assert policy.clamp(1e9, 7) == 50
    assert policy.clamp(float("nan"), 7) == 7  # non-finite keeps the previous τ
    assert policy.clamp(-math.inf, 7) == 7


# --------------------------------------------------------------------- quadratic objective
class Quadratic(FLModel):
    """``F(w) = ½ wᵀ H w`` whatever the batch: the Hessian is ``H`` everywhere."""

    def __init__(self, H: torch.Tensor, w0: torch.Tensor) -> None:
        super().__init__()
        self.H = H
        self.w = nn.Parameter(w0.clone())

    def forward(self, x):
        return self.w.expand(len(x), -1)

    def criterion(self, output, target):
        w = output[0]
        return 0.5 * w @ (self.H @ w)

    def correct(self, output, target):
        return torch.zeros((), dtype=torch.long)


def quadratic_client(H, w0, tau, lr, beta_est="stoch_vs_full", n=20, batch=5):
    """One client's round on the quadratic through the real local trainer and oracle."""
    fm = FunctionalModel(Quadratic(H, w0).double())
    x, y = torch.zeros(n, 1, dtype=torch.float64), torch.zeros(n, dtype=torch.long)
    indices = torch.arange(n)
    oracle = ClientOracle(fm, x, y, [indices], eval_batch=7, batch_size=batch)
    estimates = FedVecaEstimates(beta_est)
    estimates.bind(fm, oracle)
    cfg = tiny_config()
    trainer = LocalTrainer(fm, x, y, FedAvg(cfg), NoSelector(cfg, "own"), [estimates])
    client = Client(0, indices, tau, BatchSchedule(n, batch, "fixed", torch.Generator()))
    update = trainer.train(client, ClientTask(0, tau, lr), fm.flatten(), RoundContext(1, lr, 1))
    return update


def test_estimates_on_a_two_step_quadratic_match_the_hand_computation():
    """H = diag(2, 1), w_k = (1, 1), η = 0.1, τ = 2 (worked by hand):
    g0 = (2, 1), w1 = (0.8, 0.9), g1 = (1.6, 0.9), w2 = (0.64, 0.81), g2 = (1.28, 0.81);
    δ: t = 0 gives ||w1 − w_k||²/η = 0.05/0.1 = 0.5, t = 1 gives (0.1657 − 0.05)/0.1 = 1.157;
    β: t = 1 gives sqrt(0.17/0.05) = sqrt(3.4), t = τ gives sqrt(0.5545/0.1657) = 1.8293;
    A = η β² δ = 0.1 · 3.4 · 1.157."""
    H = torch.diag(torch.tensor([2.0, 1.0], dtype=torch.float64))
    w0 = torch.ones(2, dtype=torch.float64)
    for est in ("stoch_vs_full", "same_batch"):  # equal here: every batch has the same Hessian
        m = quadratic_client(H, w0, tau=2, lr=0.1, beta_est=est).metrics
        assert float(m["delta"]) == pytest.approx(1.157, rel=1e-12)
        assert float(m["beta"]) == pytest.approx(math.sqrt(3.4), rel=1e-12)
        assert float(m["A"]) == pytest.approx(0.1 * 3.4 * 1.157, rel=1e-12)
        assert float(m["tau"]) == 2


@pytest.mark.parametrize("seed", range(4))
def test_beta_never_exceeds_the_largest_eigenvalue(seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))[0]
    eig = torch.rand(6, generator=g, dtype=torch.float64) * 4 + 0.1
    H = q @ torch.diag(eig) @ q.T
    w0 = torch.randn(6, generator=g, dtype=torch.float64)
    for tau in (1, 2, 7):
        for est in ("stoch_vs_full", "same_batch"):
            beta = float(quadratic_client(H, w0, tau, 0.05, est).metrics["beta"])
            assert beta <= float(eig.max()) * (1 + 1e-12)
            assert beta >= float(eig.min()) * (1 - 1e-12)  # a ratio of H-images, so ≥ λ_min


# ------------------------------------------------------------------------------ server side
def test_beta_hat_is_one_round_late_and_blank_at_round_one(data):
    cfg = tiny_config(**CASE3, **VECA, train__rounds=4)
    run = FLRun(cfg, dataset=data)
    every = list(range(5))
    ws, logs = [], []
    for _ in range(4):
        ws.append(run.w.clone())
        logs.append(to_floats(run.step()))
    for key in ("beta_hat", "premise", "w_change", "client/0/tau_r1"):
        assert key not in logs[0]
        assert all(key in m for m in logs[1:])
    g = [(run.p[:, None] * run.oracle.gradients(every, w)).sum(0) for w in ws]
    beta_hat = 0.0
    for k in range(1, 4):
        ratio = float((g[k] - g[k - 1]).norm() / (ws[k] - ws[k - 1]).norm())
        beta_hat = max(beta_hat, ratio)
        assert logs[k]["beta_hat"] == pytest.approx(beta_hat, rel=1e-10)
        assert logs[k]["w_change"] == pytest.approx(float((ws[k] - ws[k - 1]).norm()), rel=1e-12)
        assert logs[k]["premise"] == pytest.approx(0.01 * beta_hat * logs[k]["tau_k"], rel=1e-10)
    assert logs[0]["tau_total"] == 5 and logs[0]["tau_k"] == 1  # τ_init = 1, no update after 1
    assert [logs[1][f"client/{i}/tau"] for i in range(5)] == [1.0] * 5
    assert logs[2]["tau_total"] == sum(logs[2][f"client/{i}/tau"] for i in range(5))
    assert all(1 <= logs[k][f"client/{i}/tau"] <= 100 for k in range(4) for i in range(5))


def test_checkpoint_resume_is_exact(data):
    cfg = tiny_config(**CASE3, **VECA, train__rounds=6)
    straight = FLRun(cfg, dataset=data)
    logs = [to_floats(straight.step()) for _ in range(6)]
    first = run_rounds(cfg, data, 3)
    state = first.state_dict()
    assert state["step_policy"]["g_prev"] is not None
    second = FLRun(cfg, dataset=data)
    second.load_state_dict(state)
    resumed = [to_floats(second.step()) for _ in range(3)]
    assert torch.equal(second.w, straight.w)
    a, b = second.components.step_policy, straight.components.step_policy
    assert a.tau == b.tau and a.beta_hat == b.beta_hat and torch.equal(a.g_prev, b.g_prev)
    for got, want in zip(resumed, logs[3:], strict=True):
        assert {k: v for k, v in got.items() if k != "round_time"} == {
            k: v for k, v in want.items() if k != "round_time"
        }


def test_non_finite_estimates_are_logged_and_the_run_goes_on(data):
    """A rule that returns NaN for every client: the guard keeps τ, the run finishes."""
    cfg = tiny_config(
        **CASE3,
        **VECA,
        train__rounds=4,
        fedveca__tau_init=2,
        fedveca__tau_rule="tests-nan",  # registered by tests.helpers
    )
    run = FLRun(cfg, dataset=data)
    seen = []
    result = run_federated(run, [lambda t, m, r: seen.append(m)])
    assert result.status == "finished" and result.rounds == 4
    assert math.isnan(seen[1]["client/0/tau_r1"])
    assert run.components.step_policy.tau == [2] * 5
    # and on the server side directly: a non-finite A or ratio never reaches τ or β̂
    policy = FedVecaSteps(tiny_config(**VECA), [10, 10])
    w = torch.zeros(3, dtype=torch.float64)
    for t, A in ((1, 1.0), (2, float("nan")), (3, float("inf"))):
        ups = [ClientUpdate(i, w, 10, policy.tau[i]) for i in range(2)]
        for u in ups:
            u.extras.update({"g0": torch.ones(3) * t, "A": torch.tensor(A, dtype=torch.float64)})
        policy.observe(t, w + t * (t != 2), ups, Cohort([0, 1], torch.tensor([0.5, 0.5])), 0.01)
    assert policy.tau == [1, 1]  # NaN kept τ = 1 at round 2; A = inf gives R1 = 1 at round 3
    assert math.isfinite(policy.beta_hat)


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"fedveca__phi": 0}, "fedveca.phi"),
        ({"fedveca__phi": -0.1}, "fedveca.phi"),
        ({"fedveca__tau_max": 0}, "fedveca.tau_max"),
        ({"fedveca__tau_init": 0}, "fedveca.tau_init"),
        ({"fedveca__tau_init": 101}, "tau_init (101) is above tau_max (100)"),
        ({"fedveca__tau_rule": "R2"}, "unknown tau_rule 'R2' (allowed: R1, "),
        ({"fedveca__tau_rule": "nowhere.mod:rule"}, "unknown tau_rule 'nowhere.mod:rule'"),
        ({"fedveca__tau_max": 10**9}, "at most 100 passes over the whole training set"),
        ({"fedveca__beta_est": "exact"}, "stoch_vs_full"),
        ({"selector": "bherd"}, "selector 'bherd' (allowed: none"),
        ({"sampler": "uniform"}, "sampler 'uniform' (allowed: full; samplers that exist: full"),
        ({"algorithm": "scaffold"}, "algorithm 'scaffold' (allowed: fednova, fedavg"),
        ({"fednova__momentum": 0.9}, "plain local SGD"),
    ],
)
def test_bad_fedveca_configs_fail_with_the_field_and_allowed_values(overrides, needle):
    with pytest.raises(ConfigError) as err:
        tiny_config(**{**VECA, **overrides})
    assert needle in str(err.value)


# ------------------------------------------------------------------------------ the specs
FEDVECA_SPECS = [f"fedveca-fig{i}" for i in range(3, 9)]


@pytest.mark.parametrize("figure", FEDVECA_SPECS)
def test_fedveca_specs_expand_at_every_profile(figure):
    from fedsweep.specs.load import SWEEPS_DIRS, expand, load_spec

    spec = load_spec(SWEEPS_DIRS[1] / f"{figure}.yaml")
    for profile in ("paper", "quick", "smoke"):
        trials = expand(spec, profile)
        veca = [t for t in trials if t.config.step_policy == "fedveca"]
        assert veca and all(t.config.algorithm == "fednova" for t in veca)
        assert all(t.config.train.lr == 0.01 and t.config.train.batch_size == 100 for t in veca)
    for t in expand(spec, "paper"):  # §5.7 defaults at the paper profile
        assert t.config.train.rounds in (100, 1) and t.config.data.dataset in ("mnist", "cifar10")
        if t.config.step_policy == "fedveca":
            assert t.config.fedveca.tau_max == 100 and t.config.fedveca.tau_init == 1
    smoke = expand(spec, "smoke")
    assert all(t.config.train.rounds <= 3 for t in smoke)


def test_quick_profile_runs_the_svm_panels_at_paper_settings_and_fewer_cnn_seeds():
    from fedsweep.specs.load import SWEEPS_DIRS, expand, load_spec

    trials = expand(load_spec(SWEEPS_DIRS[1] / "fedveca-fig3.yaml"), "quick")
    svm = [t for t in trials if t.panel_id == "setting=svm-mnist"]
    cnn = [t for t in trials if t.panel_id != "setting=svm-mnist"]
    assert sorted({t.seed for t in svm}) == list(range(10)) and len(svm) == 40
    assert sorted({t.seed for t in cnn}) == [0, 1] and len(cnn) == 16
    assert all(t.config.data.train_subset is None for t in svm)
    assert all(t.config.fedveca.tau_max == 100 for t in svm if not t.derive)


def test_panel_seeds_name_a_panel_of_the_spec(tmp_path):
    from fedsweep.specs.load import SpecError, load_spec
    from tests.helpers import small_spec, write_yaml

    tree = small_spec("seeds-test", seeds=(0, 1, 2))
    tree["profiles"]["smoke"] = {"panel_seeds": {"data.partition=case1": [5]}}
    from fedsweep.specs.load import expand

    assert {t.seed for t in expand(load_spec(write_yaml(tmp_path / "a.yaml", tree)), "smoke")} == {
        5
    }
    tree["profiles"]["smoke"] = {"panel_seeds": {"data.partition=case9": [5]}}
    with pytest.raises(SpecError, match="panel_seeds: unknown panel value"):
        load_spec(write_yaml(tmp_path / "b.yaml", tree))
    tree["profiles"]["smoke"] = {"panel_seeds": {"data.partition=case1": [1, 1]}}
    with pytest.raises(SpecError, match="repeated seed"):
        load_spec(write_yaml(tmp_path / "c.yaml", tree))


# ===================================================================== issue 35: damped variant
# ``fedveca.tau_damping: bounded`` (our reconstruction's damped variant [U]): the change of the
# global step size τ_k per round bounded to a factor 1 + c (at least one step either way), the
# clients' τ scaled by one common factor. Default (``none``) = R1, bit for bit and hash for hash.
from fedsweep.components.step_policies.fedveca import (  # noqa: E402
    VARIANT_LABEL,
    bound_tau_k,
    rule_label,
    tau_bounds,
)
from fedsweep.config.hashing import config_hash  # noqa: E402

DAMPED = dict(**CASE3, **VECA, fedveca__tau_damping="bounded")


def weighted(weights, taus) -> float:
    return math.fsum(p * t for p, t in zip(weights, taus, strict=True))


def test_tau_bounds_are_relative_and_at_least_one_step():
    assert tau_bounds(10.0, 0.5) == (10.0 / 1.5, 15.0)
    assert tau_bounds(1.0, 0.5) == (0.0, 2.0)  # τ_k = 1 can grow: one step up at least
    assert tau_bounds(2.0, 0.1) == (1.0, 3.0)
    lo, hi = tau_bounds(100.0, 0.1)
    assert lo == pytest.approx(100 / 1.1) and hi == pytest.approx(110.0)


@pytest.mark.parametrize("seed", range(3))
def test_bound_tau_k_keeps_tau_k_within_its_bounds_and_clients_in_range(seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(400):
        n = int(torch.randint(1, 9, (1,), generator=g))
        tau_max = [5, 20, 100][int(torch.randint(0, 3, (1,), generator=g))]
        w = torch.rand(n, generator=g, dtype=torch.float64) + 0.01
        w = (w / w.sum()).tolist()
        current = torch.randint(1, tau_max + 1, (n,), generator=g).tolist()
        proposed = torch.randint(1, tau_max + 1, (n,), generator=g).tolist()
        c = [0.05, 0.25, 0.5, 2.0][int(torch.randint(0, 4, (1,), generator=g))]
        out, scale = bound_tau_k(proposed, w, current, c, tau_max)
        lo, hi = tau_bounds(weighted(w, current), c)
        assert lo - 1e-9 <= weighted(w, out) <= hi + 1e-9
        assert all(1 <= t <= tau_max for t in out) and all(isinstance(t, int) for t in out)
        if lo <= weighted(w, proposed) <= hi:
            assert out == proposed and scale == 1.0
        elif scale < 1:  # scaled down: no client above its proposal, the order kept
            assert all(a <= b for a, b in zip(out, proposed, strict=True))
        else:
            assert scale > 1 and all(a >= b for a, b in zip(out, proposed, strict=True))
        order = sorted(range(n), key=lambda i: proposed[i])
        assert [out[i] for i in order] == sorted(out)  # one common factor: proportions kept


def test_bound_tau_k_on_a_worked_example():
    """τ_k = 10 (c = 0.5: τ_{k+1} ≤ 15); the rule asks for (40, 20) with p = (½, ½): τ' = 30.
    ½ floor(40 s) + ½ floor(20 s) ≤ 15 holds for s < 0.525 (at 0.525 client 1 takes 21 steps):
    (20, 10)."""
    out, scale = bound_tau_k([40, 20], [0.5, 0.5], [10, 10], 0.5, 100)
    assert out == [20, 10] and 0.5 <= scale < 0.525 and scale == pytest.approx(0.525)
    out, scale = bound_tau_k([2, 2], [0.5, 0.5], [30, 30], 0.5, 100)  # down to 2: lifted to 20
    assert out == [20, 20] and scale == pytest.approx(10.0)
    assert bound_tau_k([12, 14], [0.5, 0.5], [10, 10], 0.5, 100) == ([12, 14], 1.0)


def test_damped_run_bounds_tau_k_on_every_round(data):
    """A real run (R1 jumps τ_k from 1 to ≈ 18 on this data): with the bound every round's τ_k
    lies within tau_bounds of the previous one, the bound acted, and the logs say by how much."""
    rounds = 8
    for c in (0.5, 0.2):
        run = FLRun(tiny_config(**DAMPED, fedveca__tau_max_change=c, train__rounds=rounds), data)
        logs = [to_floats(run.step()) for _ in range(rounds)]
        taus = [m["tau_k"] for m in logs]
        for prev, new in zip(taus, taus[1:], strict=False):
            lo, hi = tau_bounds(prev, c)
            assert lo - 1e-9 <= new <= hi + 1e-9, (prev, new, c)
        assert "tau_scale" not in logs[0] and all("tau_scale" in m for m in logs[1:])
        assert any(m["tau_scale"] < 1 for m in logs[1:])  # the bound acted
        for k in range(1, rounds):  # the scale is 1 exactly where the rule stayed within bounds
            clients = [logs[k][f"client/{i}/tau"] for i in range(5)]
            assert all(1 <= t <= 100 for t in clients)
    r1 = FLRun(tiny_config(**CASE3, **VECA, train__rounds=rounds), data)
    r1_taus = [to_floats(r1.step())["tau_k"] for _ in range(rounds)]
    assert max(b / a for a, b in zip(r1_taus, r1_taus[1:], strict=False)) > 1.5  # R1 unbounded


def test_damping_defaults_are_r1_bit_for_bit_and_hash_for_hash(data):
    """``tau_damping: none`` (the default) is R1: the same config hash as a config that never
    names it, and a bound so loose that it never acts gives R1's trajectory bit for bit."""
    plain = tiny_config(**CASE3, **VECA, train__rounds=6)
    named = tiny_config(**CASE3, **VECA, train__rounds=6, fedveca__tau_damping="none")
    assert config_hash(named) == config_hash(plain)
    loose = tiny_config(**DAMPED, train__rounds=6, fedveca__tau_max_change=1e6)
    damped = tiny_config(**DAMPED, train__rounds=6)
    assert len({config_hash(plain), config_hash(loose), config_hash(damped)}) == 3
    a, b = FLRun(plain, dataset=data), FLRun(loose, dataset=data)
    for _ in range(6):
        la, lb = to_floats(a.step()), to_floats(b.step())
        assert lb.pop("tau_scale", 1.0) == 1.0
        la.pop("round_time", None), lb.pop("round_time", None)
        assert la == lb
    assert torch.equal(a.w, b.w) and a.components.step_policy.tau == b.components.step_policy.tau
    c = run_rounds(damped, data)
    assert not torch.equal(c.w, a.w)  # the default bound does act on this data


def test_damped_checkpoint_resume_is_exact(data):
    cfg = tiny_config(**DAMPED, train__rounds=6, fedveca__tau_max_change=0.3)
    straight = FLRun(cfg, dataset=data)
    logs = [to_floats(straight.step()) for _ in range(6)]
    state = run_rounds(cfg, data, 3).state_dict()
    second = FLRun(cfg, dataset=data)
    second.load_state_dict(state)
    resumed = [to_floats(second.step()) for _ in range(3)]
    assert torch.equal(second.w, straight.w)
    assert second.components.step_policy.tau == straight.components.step_policy.tau
    for got, want in zip(resumed, logs[3:], strict=True):
        got.pop("round_time", None), want.pop("round_time", None)
        assert got == want


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"fedveca__tau_damping": "ema"}, "field `fedveca.tau_damping`: got 'ema'"),
        ({"fedveca__tau_damping": "ema"}, "'none' or 'bounded'"),
        ({"fedveca__tau_damping": "bounded", "fedveca__tau_max_change": 0}, "tau_max_change"),
        ({"fedveca__tau_damping": "bounded", "fedveca__tau_max_change": -1}, "> 0"),
        (
            {"fedveca__tau_max_change": 0.3},
            "tau_max_change (0.3) is read only with tau_damping 'bounded', and tau_damping is "
            "'none' (allowed tau_damping: none, bounded)",
        ),
        (
            {"fedveca__tau_damping": "bounded", "fedveca__tau_rule": "fixed"},
            "tau_damping 'bounded' with tau_rule 'fixed'",
        ),
    ],
)
def test_bad_damping_configs_name_the_field_the_value_and_the_allowed(overrides, needle):
    with pytest.raises(ConfigError) as err:
        tiny_config(**{**VECA, **overrides})
    assert needle in str(err.value)


def test_rule_labels_name_the_variant_as_our_reconstruction():
    assert rule_label() == "R1 (our reconstruction)"
    assert tiny_config(**VECA).fedveca.rule_label() == "R1 (our reconstruction)"
    damped = tiny_config(**VECA, fedveca__tau_damping="bounded").fedveca.rule_label()
    assert damped == f"R1 + bounded τ_k change (c = 0.5): {VARIANT_LABEL}"
    assert VARIANT_LABEL == "our reconstruction's damped variant [U]"
    assert "c = 0.2" in rule_label("R1", "bounded", 0.2)
