"""The generic round: invariants of docs/algorithms.md Appendix B, schedules, determinism,
divergence."""

from __future__ import annotations

import pytest
import torch

from fedsweep.components.selectors.bherd import keep_count
from fedsweep.engine.batches import BatchSchedule, local_steps
from fedsweep.experiment import FLRun
from tests.helpers import tiny_config, tiny_dataset


def run_to_end(cfg, data=None):
    run = FLRun(cfg, dataset=data or tiny_dataset())
    history = []
    result = run.run(on_round=lambda t, m, r: history.append(dict(m)))
    return run, result, history


# ------------------------------------------------------------------ invariants
@pytest.mark.parametrize("model", ["svm", "mlp"])
def test_bherd_alpha1_equals_fedavg_float64(model):
    """Appendix B.1: alpha=1, E=1, same order => BHerd-FedAvg == FedAvg (rtol 1e-10)."""
    kw = dict(
        model__name=model,
        train__dtype="float64",
        train__order="fixed",
        train__rounds=4,
        data__partition="case3",
        data__num_clients=5,
    )
    data = tiny_dataset()
    fedavg, _, _ = run_to_end(tiny_config(**kw), data)
    bherd, _, _ = run_to_end(tiny_config(selector="bherd", bherd__alpha=1.0, **kw), data)
    assert fedavg.w.dtype == torch.float64
    assert not torch.equal(fedavg.w, fedavg.fm.flatten()) or model == "svm"
    torch.testing.assert_close(bherd.w, fedavg.w, rtol=1e-10, atol=1e-13)


def test_bherd_alpha_below_one_differs_and_logs_its_metrics():
    data = tiny_dataset()
    run, result, history = run_to_end(tiny_config(selector="bherd", bherd__alpha=0.5), data)
    fedavg, _, _ = run_to_end(tiny_config(), data)
    assert not torch.allclose(run.w, fedavg.w)
    records = run.record_arrays()
    for c in run.clients:
        k = keep_count(0.5, c.num_steps)
        sel = records[f"selected_client{c.index}"]
        assert sel.shape == (3, c.num_steps) and sel.dtype == bool
        assert (sel.sum(axis=1) == k).all()
        assert all(h[f"client/{c.index}/k"] == k for h in history)
        assert all(h[f"client/{c.index}/dist"] >= 0 for h in history)


def test_bherd_scale_is_e_over_alpha():
    """One round, one client, one step: the server moves by eta*(E/alpha)*g for E=1 vs E/alpha."""
    data = tiny_dataset(n_train=40)
    base = dict(
        data__num_clients=1,
        train__batch_size=40,
        train__rounds=1,
        train__dtype="float64",
        selector="bherd",
        bherd__alpha=0.5,
    )
    lit, _, _ = run_to_end(tiny_config(**base, train__local_epochs=1.0), data)
    ref, _, _ = run_to_end(
        tiny_config(**base, train__local_epochs=1.0, bherd__scale="one_over_alpha"), data
    )
    torch.testing.assert_close(lit.w, ref.w)  # E = 1: both rules agree (B3)
    fedavg, _, _ = run_to_end(tiny_config(**{**base, "selector": "none"}), data)
    w0 = fedavg.fm.flatten() * 0  # SVM starts at zero
    torch.testing.assert_close(lit.w - w0, 2.0 * (fedavg.w - w0))  # tau=k=1: 1/alpha = 2


def test_stacked_gradient_matches_single_client():
    run = FLRun(tiny_config(model__name="mlp", train__dtype="float64"), dataset=tiny_dataset())
    x, y = run.x_train[:40].view(2, 20, 1, 8, 8), run.y_train[:40].view(2, 20)
    w = torch.stack([run.w, run.w + 0.01])
    g, loss = run.fm.stacked_gradient(w, x, y)
    for s in range(2):
        gs, ls = run.fm.gradient(w[s], x[s], y[s])
        torch.testing.assert_close(g[s], gs)
        torch.testing.assert_close(loss[s], ls)


def test_centralized_is_one_client_holding_everything():
    data = tiny_dataset()
    cen, _, _ = run_to_end(tiny_config(algorithm="centralized", train__order="rr"), data)
    assert len(cen.clients) == 1 and cen.clients[0].num_samples == 600
    one, _, _ = run_to_end(tiny_config(data__num_clients=1, train__order="rr"), data)
    torch.testing.assert_close(cen.w, one.w)


# ---------------------------------------------------------------- determinism
def test_same_config_and_seed_give_identical_metrics():
    cfg = tiny_config(selector="bherd", model__name="mlp", data__partition="dirichlet")
    _, _, h1 = run_to_end(cfg)
    _, _, h2 = run_to_end(cfg)

    def strip(history):
        return [{k: v for k, v in h.items() if k != "round_time"} for h in history]

    assert len(h1) == 3 and strip(h1) == strip(h2)


def test_seed_changes_the_fixed_order_but_not_the_case_partition():
    r0, _, h0 = run_to_end(tiny_config(seed=0, data__partition="case3"))
    r1, _, h1 = run_to_end(tiny_config(seed=1, data__partition="case3"))
    assert r0.partition_hash == r1.partition_hash  # reference cases ignore the seed (§1.6)
    assert h0[-1]["test_loss"] != h1[-1]["test_loss"]


# ------------------------------------------------------------------ schedules
def test_local_steps_floor_and_minimum():
    assert local_steps(12000, 1.0, 100) == 120
    assert local_steps(11344, 1.0, 100) == 113
    assert local_steps(12000, 0.1, 100) == 12
    assert local_steps(50, 1.0, 100) == 1


def _schedule(n, b, order, seed=0):
    return BatchSchedule(n, b, order, torch.Generator().manual_seed(seed))


def test_fixed_order_repeats_every_round_and_drops_the_incomplete_batch():
    s = _schedule(105, 10, "fixed")
    assert s.n_batches == 10
    r1, r2 = s.take(10), s.take(10)
    assert torch.equal(r1, r2)
    assert len(torch.unique(r1)) == 100  # a pass is without replacement


def test_rr_reshuffles_at_each_pass():
    s = _schedule(100, 10, "rr")
    r1, r2 = s.take(10), s.take(10)
    assert not torch.equal(r1, r2)
    assert sorted(r1.flatten().tolist()) == sorted(r2.flatten().tolist()) == list(range(100))


def test_fractional_epochs_continue_through_the_pass():
    s = _schedule(100, 10, "fixed")
    full = _schedule(100, 10, "fixed").take(10)
    first, second, third = s.take(5), s.take(5), s.take(5)
    assert torch.equal(torch.cat([first, second]), full)
    assert torch.equal(third, full[:5])  # wrapped to the same fixed order
    s15 = _schedule(100, 10, "fixed")
    assert torch.equal(s15.take(15), torch.cat([full, full[:5]]))  # E = 1.5: repeats batches


def test_iid_batches_and_small_client():
    s = _schedule(50, 10, "iid")
    b = s.take(7)
    assert b.shape == (7, 10)
    assert all(len(torch.unique(row)) == 10 for row in b)
    small = _schedule(30, 100, "fixed")
    assert small.take(1).shape == (1, 30)  # |D_i| < B: a batch is the whole set


def test_schedule_state_roundtrip():
    s = _schedule(100, 10, "rr")
    s.take(13)
    state = s.state_dict()
    expected = s.take(25)
    t = _schedule(100, 10, "rr", seed=99)
    t.load_state_dict(state)
    assert torch.equal(t.take(25), expected)


# ----------------------------------------------------------------- divergence
def test_divergence_stops_cleanly_and_is_recorded():
    cfg = tiny_config(
        selector="bherd", bherd__alpha=0.1, train__lr=1e4, train__rounds=50, model__name="mlp"
    )
    run, result, history = run_to_end(cfg)
    assert result.status == "diverged"
    assert result.rounds < 50 and len(history) == result.rounds


def test_learning_happens_on_the_synthetic_signal():
    _, result, history = run_to_end(tiny_config(train__rounds=10, train__lr=0.5))
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert result.final["test_acc"] > 0.7
    assert {
        "test_loss",
        "test_acc",
        "train_loss",
        "train_acc",
        "client/0/train_loss",
        "client/0/local_loss",
        "round_time",
    } <= set(history[-1])


# ---------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("order", ["fixed", "rr", "iid"])
def test_checkpoint_resume_is_exact(order, tmp_path):
    cfg = tiny_config(
        selector="bherd",
        model__name="mlp",
        train__order=order,
        train__rounds=5,
        train__local_epochs=0.7,
    )
    data = tiny_dataset()
    straight, _, h_straight = run_to_end(cfg, data)

    first = FLRun(cfg, dataset=data)
    for _ in range(2):
        first.step()
    torch.save(first.state_dict(), tmp_path / "state.pt")
    second = FLRun(cfg, dataset=data)
    second.load_state_dict(torch.load(tmp_path / "state.pt"))
    history = []
    second.run(on_round=lambda t, m, r: history.append(dict(m)))
    assert second.round == 5 and len(history) == 3
    assert torch.equal(second.w, straight.w)
    for k, v in straight.record_arrays().items():
        assert (second.record_arrays()[k] == v).all()
    assert history[-1]["test_loss"] == h_straight[-1]["test_loss"]


def test_checkpoint_refuses_another_partition():
    data = tiny_dataset()
    a = FLRun(tiny_config(data__partition="case2"), dataset=data)
    b = FLRun(tiny_config(data__partition="case3"), dataset=data)
    with pytest.raises(ValueError, match="partition"):
        b.load_state_dict(a.state_dict())


def test_iid_batches_are_drawn_in_blocks_with_the_same_numbers(monkeypatch):
    """A long iid round is drawn block by block (memory), with the numbers of one draw."""
    from fedsweep.engine import batches

    def draw(block: int | None):
        if block is not None:
            monkeypatch.setattr(batches, "IID_BLOCK", block)
        sched = batches.BatchSchedule(500, 20, "iid", torch.Generator().manual_seed(7))
        return sched.take(37), sched.take(5)

    g = torch.Generator().manual_seed(7)
    torch.randperm(500, generator=g)  # what the schedule's constructor draws first
    whole = torch.rand(37, 500, generator=g).argsort(dim=1)[:, :20]
    first, second = draw(None)
    assert torch.equal(first, whole)
    for block in (500, 1500, 499):  # 1 row, 3 rows, and fewer keys than one row: still 1 row
        a, b = draw(block)
        assert torch.equal(a, first) and torch.equal(b, second)
