"""The round as a pipeline (docs/algorithms.md §1.4, §2.6, §7): server optimizers, samplers in
the engine, FedSGD, schedules, checkpoints, and the renamed config keys. Invariants the spec
states as equalities are asserted exactly (float64)."""

from __future__ import annotations

import pytest
import torch

from fedsweep.components.server_optimizers.adaptive import FedAdagrad, FedAdam, FedYogi
from fedsweep.components.server_optimizers.sgd import ServerSGD
from fedsweep.config.hashing import config_hash
from fedsweep.core.messages import RoundContext
from fedsweep.experiment import FLRun
from tests.helpers import CASE3, F64, run_rounds, tiny_config, tiny_dataset

IID10 = dict(data__partition="iid", data__num_clients=10, **F64)


# ------------------------------------------------------------------ server optimizers
def test_server_sgd_momentum_is_fednova_gmf_in_gradient_units():
    """buf ← μ buf + u/η ; w ← w − η_s η buf (JYWa's gmf), by hand over three rounds."""
    cfg = tiny_config(server_sgd__lr=0.5, server_sgd__momentum=0.9)
    opt = ServerSGD(cfg)
    w = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    opt.setup(w)
    buf = torch.zeros(3, dtype=torch.float64)
    expected = w.clone()
    for t, (u, lr) in enumerate(
        [([0.1, 0.2, -0.3], 0.1), ([0.05, -0.1, 0.2], 0.1), ([0.3, 0.0, 0.1], 0.01)], start=1
    ):
        u = torch.tensor(u, dtype=torch.float64)
        w = opt.step(w, u, RoundContext(t, lr, 1.0))
        buf = 0.9 * buf + u / lr
        expected = expected - 0.5 * lr * buf
        torch.testing.assert_close(w, expected, rtol=1e-15, atol=0)


def _by_hand(kind: str, updates: list[list[float]], lr=0.1, b1=0.9, b2=0.99, tau=1e-3):
    """FedAdagrad/FedAdam/FedYogi of §2.6 in plain Python floats, element by element."""
    w = [0.0] * len(updates[0])
    m = [0.0] * len(w)
    v = [tau * tau] * len(w)
    for u in updates:
        for j, uj in enumerate(u):
            m[j] = b1 * m[j] + (1 - b1) * uj
            u2 = uj * uj
            if kind == "adagrad":
                v[j] = v[j] + u2
            elif kind == "adam":
                v[j] = b2 * v[j] + (1 - b2) * u2
            else:
                sign = (v[j] > u2) - (v[j] < u2)
                v[j] = v[j] - (1 - b2) * u2 * sign
            w[j] = w[j] - lr * m[j] / (v[j] ** 0.5 + tau)
    return w


@pytest.mark.parametrize("cls", [FedAdagrad, FedAdam, FedYogi], ids=["adagrad", "adam", "yogi"])
def test_adaptive_server_optimizers_two_steps_by_hand(cls):
    """Two steps on vectors chosen so that Yogi's sign term takes both signs and zero never
    decides (v_0 = τ² = 1e-6 < u² except for the exact zero entry)."""
    updates = [[0.5, -0.02, 0.0, 3.0], [0.25, 0.04, 1e-4, -1.0]]
    cfg = tiny_config(server_optimizer=cls.name)
    opt = cls(cfg)
    w = torch.zeros(4, dtype=torch.float64)
    opt.setup(w)
    for t, u in enumerate(updates, start=1):
        w = opt.step(w, torch.tensor(u, dtype=torch.float64), RoundContext(t, 0.05, 1.0))
    assert w.tolist() == pytest.approx(_by_hand(cls.name, updates), rel=1e-14, abs=0)
    # the three differ after two steps (adagrad accumulates, yogi moves v additively)
    assert _by_hand("adagrad", updates) != _by_hand("adam", updates) != _by_hand("yogi", updates)


def test_adagrad_without_momentum_is_flowers():
    """O1: fedopt.beta1 = 0 gives FedAdagrad without a first moment: w -= η u/(√v+τ)."""
    cfg = tiny_config(server_optimizer="adagrad", fedopt__beta1=0.0, fedopt__lr=1.0)
    opt = FedAdagrad(cfg)
    w = torch.zeros(2, dtype=torch.float64)
    opt.setup(w)
    u = torch.tensor([2.0, -1.0], dtype=torch.float64)
    w = opt.step(w, u, RoundContext(1, 0.1, 1.0))
    v = 1e-6 + u * u
    torch.testing.assert_close(w, -u / (v.sqrt() + 1e-3), rtol=1e-15, atol=0)


@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox", "fednova", "scaffold"])
@pytest.mark.parametrize("server", ["adam", "yogi"])
def test_adaptive_server_composes_with_every_base_method(algorithm, server):
    """The server optimizer sees only the base method's direction: the first step of FedAdam
    is w − η_s (1−β1) u/(√((1−β2)u² + β2 τ²) + τ), with u from the same base method's run."""
    data = tiny_dataset()
    kw = dict(algorithm=algorithm, model__name="mlp", **CASE3)
    plain = run_rounds(tiny_config(**kw, train__rounds=1), data)
    u = FLRun(tiny_config(**kw), dataset=data).w - plain.w  # w_1 − w_2 = u_1 (server SGD, η_s=1)
    adaptive = run_rounds(tiny_config(**kw, server_optimizer=server, train__rounds=1), data)
    w1 = FLRun(tiny_config(**kw), dataset=data).w
    b1, b2, tau, lr = 0.9, 0.99, 1e-3, 0.1
    m = (1 - b1) * u
    if server == "adam":
        v = b2 * tau**2 + (1 - b2) * u * u
    else:
        v = tau**2 - (1 - b2) * u * u * torch.sign(tau**2 - u * u)
    torch.testing.assert_close(adaptive.w, w1 - lr * m / (v.sqrt() + tau), rtol=1e-12, atol=1e-15)


def test_renamed_keys_load_and_keep_their_hash():
    """fednova.gmf and scaffold.server_lr (configs and finished runs written before the server
    optimizer) load as server_sgd.momentum / server_sgd.lr, give the same numbers, and hash as
    before: the hash maps the new keys back (values measured on the commit before the change)."""
    data = tiny_dataset()
    old = tiny_config(algorithm="fednova", fednova__gmf=0.3, **CASE3)
    new = tiny_config(algorithm="fednova", server_sgd__momentum=0.3, **CASE3)
    assert old == new and old.server_sgd.momentum == 0.3
    assert torch.equal(run_rounds(old, data).w, run_rounds(new, data).w)
    assert config_hash(new) == config_hash(
        tiny_config(algorithm="fednova", fednova__gmf=0.3, **CASE3)
    )
    sc = tiny_config(algorithm="scaffold", scaffold__server_lr=0.5)
    assert sc.server_sgd.lr == 0.5
    # hashes on the commit before the rename (6a0ea08; tests/helpers.tiny_config unchanged)
    assert config_hash(tiny_config(algorithm="fednova", fednova__gmf=0.3)) == "b35ba7b9663aa598"
    assert config_hash(tiny_config(algorithm="fednova", server_sgd__momentum=0.3)) == (
        "b35ba7b9663aa598"
    )
    assert config_hash(tiny_config(algorithm="scaffold", server_sgd__lr=0.5)) == "d1a6802d494dd59d"
    assert config_hash(tiny_config()) == "8099afb2db835e82"
    assert config_hash(tiny_config(train__batch_size=7)) == "600dac6f520c5ba7"
    # the old key on another base method had no effect: dropped, as before it was moot
    assert tiny_config(fednova__gmf=0.3).server_sgd.momentum == 0.0


# ---------------------------------------------------------------------------- samplers
def test_uniform_sampler_with_every_client_is_full_participation():
    """m = N, renormalised weights: bit-identical to the default full participation."""
    data = tiny_dataset()
    for kw in (dict(algorithm="fedavg"), dict(algorithm="scaffold"), dict(selector="bherd")):
        full = run_rounds(tiny_config(**kw, **CASE3), data)
        uni = run_rounds(tiny_config(**kw, **CASE3, sampler="uniform", cohort__size=5), data)
        assert torch.equal(full.w, uni.w)


def test_partial_participation_trains_only_the_cohort_and_records_it():
    data = tiny_dataset()
    cfg = tiny_config(
        sampler="uniform", cohort__fraction=0.3, selector="bherd", train__rounds=4, **IID10
    )
    run = FLRun(cfg, dataset=data)
    before = [c.schedule.state_dict() for c in run.clients]
    metrics = run.step()
    cohort = run.records["cohort"][0].tolist()
    assert len(cohort) == 3 == len(set(cohort))
    trained = {int(k.split("/")[1]) for k in metrics if k.endswith("/local_loss")}
    assert trained == set(cohort)
    for c in run.clients:  # clients not sampled cost nothing: their batch cursor did not move
        moved = c.schedule.state_dict()["cursor"] != before[c.index]["cursor"]
        assert moved == (c.index in cohort)
    run.step(), run.step(), run.step()
    arrays = run.record_arrays()
    assert arrays["cohort"].shape == (4, 3)
    # per-client records of partial participation say which rounds their rows belong to
    cohorts = arrays["cohort"].tolist()
    for c in run.clients:
        rounds = [t for t in range(1, 5) if c.index in cohorts[t - 1]]
        if not rounds:
            assert f"selected_client{c.index}" not in arrays
        elif rounds != [1, 2, 3, 4]:
            assert arrays[f"selected_client{c.index}_rounds"].tolist() == rounds
            assert arrays[f"selected_client{c.index}"].shape == (len(rounds), c.num_steps)


def test_cohorts_use_their_own_stream():
    """Changing the sampler changes neither the batch orders nor the model init: a client's
    first round draws the same batches under any sampler."""
    data = tiny_dataset()
    a = FLRun(tiny_config(sampler="uniform", cohort__size=10, **IID10), dataset=data)
    b = FLRun(tiny_config(sampler="replacement", cohort__size=4, **IID10), dataset=data)
    assert torch.equal(a.w, b.w)
    a.step(), b.step()
    for k in set(b.records["cohort"][0].tolist()):
        sa, sb = a.clients[k].schedule.state_dict(), b.clients[k].schedule.state_dict()
        assert sa["cursor"] == sb["cursor"] and torch.equal(sa["batches"], sb["batches"])


def test_scheme2_and_with_replacement_weights_in_the_aggregate():
    """FedAvg's direction is Σ q_i Δ_i with the sampler's q: scheme 2 q_i = p_i N/m (equal p:
    1/m each... times N p_i = 1), with replacement q_i = count_i/m."""
    data = tiny_dataset()
    for kw in (dict(sampler="uniform", uniform__weighting="scheme2"), dict(sampler="replacement")):
        cfg = tiny_config(cohort__size=6, train__rounds=1, **IID10, **kw)
        run = FLRun(cfg, dataset=data)
        w0 = run.w.clone()
        run.step()
        draws = run.records["cohort"][0].tolist()
        replay = FLRun(cfg, dataset=data)
        ctx = RoundContext(1, cfg.train.lr, 1.0)
        expected = torch.zeros_like(w0)
        for k in dict.fromkeys(draws):
            delta = replay.local_train(replay.clients[k], ctx).delta
            q = draws.count(k) / 6 if kw["sampler"] == "replacement" else float(run.p[k]) * 10 / 6
            expected += q * delta
        torch.testing.assert_close(run.w, w0 - expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "kw",
    [
        dict(sampler="uniform", cohort__size=4, server_optimizer="adam"),
        dict(sampler="poc", cohort__size=3, poc__d=6, server_optimizer="yogi"),
        dict(sampler="divfl", cohort__size=3, algorithm="scaffold", server_optimizer="adagrad"),
        dict(sampler="replacement", cohort__fraction=0.5, server_sgd__momentum=0.5),
    ],
    ids=["uniform-adam", "poc-yogi", "divfl-scaffold-adagrad", "replacement-momentum"],
)
def test_checkpoint_resume_is_exact_with_samplers_and_server_state(tmp_path, kw):
    data = tiny_dataset()
    cfg = tiny_config(train__rounds=5, model__name="mlp", **IID10, **kw)
    straight = run_rounds(cfg, data)
    first = run_rounds(cfg, data, rounds=2)
    torch.save(first.state_dict(), tmp_path / "s.pt")
    second = FLRun(cfg, dataset=data)
    second.load_state_dict(torch.load(tmp_path / "s.pt", weights_only=True))
    for _ in range(3):
        second.step()
    assert torch.equal(second.w, straight.w)
    for name, values in straight.record_arrays().items():
        assert (second.record_arrays()[name] == values).all(), name


# ------------------------------------------------------------------ FedSGD and schedules
def test_fedsgd_is_one_full_batch_step():
    """batch_size: full, E = 1: τ_i = 1 on the whole local set, so FedAvg's round is
    w − η Σ p_i ∇F_i(w) = w − η ∇F(w) (full-batch gradient descent on the union)."""
    data = tiny_dataset()
    cfg = tiny_config(train__batch_size="full", train__rounds=1, **CASE3)
    run = FLRun(cfg, dataset=data)
    assert [c.num_steps for c in run.clients] == [1] * 5
    w0 = run.w.clone()
    grads = run.oracle.gradients(list(range(5)), w0)
    run.step()
    expected = w0 - cfg.train.lr * (run.p[:, None] * grads).sum(0)
    torch.testing.assert_close(run.w, expected, rtol=1e-12, atol=1e-15)


def test_step_lr_schedule():
    """η_t = η γ^{#milestones passed}: round 2 of FedSGD after milestone 1 steps η/2."""
    data = tiny_dataset()
    cfg = tiny_config(
        train__batch_size="full",
        lr_schedule="step",
        lr_step__milestones=[1],
        lr_step__gamma=0.5,
        train__rounds=2,
        **CASE3,
    )
    run = FLRun(cfg, dataset=data)
    assert [run.components.lr_schedule.lr(t) for t in (1, 2, 50)] == [0.05, 0.025, 0.025]
    run.step()
    w1 = run.w.clone()
    grads = run.oracle.gradients(list(range(5)), w1)
    run.step()
    expected = w1 - 0.025 * (run.p[:, None] * grads).sum(0)
    torch.testing.assert_close(run.w, expected, rtol=1e-12, atol=1e-15)


def test_fixed_step_policy():
    data = tiny_dataset()
    cfg = tiny_config(step_policy="fixed", fixed_steps__steps=3, **CASE3)
    run = FLRun(cfg, dataset=data)
    assert [c.num_steps for c in run.clients] == [3] * 5
    metrics = run.step()
    assert all(f"client/{i}/local_loss" in metrics for i in range(5))
    assert run.records == {}  # no selector, full participation: nothing recorded
