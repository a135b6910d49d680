"""FedWalk's leash as a post-aggregation hook (docs/algorithms.md §6), BatchNorm statistics per
client (§8.4) and SCAFFOLD's sparse client state (§2.5)."""

from __future__ import annotations

import math

import pytest
import torch

from fedsweep.components.algorithms.scaffold import Scaffold
from fedsweep.config.load import ConfigError, build_config
from fedsweep.experiment import FLRun
from tests.helpers import F64, run_rounds, tiny_config, tiny_dataset

#: 6 clients, 3 per round (uniform), MLP, 2 local steps: small and float64
FW = dict(
    model__name="mlp",
    data__partition="dirichlet",
    data__dirichlet_alpha=0.5,
    data__num_clients=6,
    data__holdout=100,
    sampler="uniform",
    cohort__size=3,
    step_policy="fixed",
    fixed_steps__steps=2,
    train__batch_size=16,
    train__lr=0.05,
    leash__source="standin",
    leash__task="LH",
    fedwalk__batch_size=8,
    **F64,
)
BASES = {
    "fedavg": dict(algorithm="fedavg", uniform__weighting="simple"),
    "fedprox": dict(algorithm="fedprox", fedprox__mu=0.1),
    "fednova": dict(algorithm="fednova"),
    "scaffold": dict(algorithm="scaffold"),
}


def _cfg(**kw):
    """FedWalk-FedAvg aggregates with the simple mean (Eq. 4, W6): its configs get
    ``uniform.weighting: simple`` unless they set a weighting (the others keep FW's)."""
    kw = {**FW, **kw}
    if "fedwalk" in kw.get("hooks", []) and kw.get("algorithm", "fedavg") == "fedavg":
        kw.setdefault("uniform__weighting", "simple")
    return tiny_config(**kw)


@pytest.fixture(scope="module")
def data():
    return tiny_dataset(n_train=600, n_test=100)


# ------------------------------------------------------------------ equal to the base method
@pytest.mark.parametrize("base", list(BASES))
@pytest.mark.parametrize("how", ["never", "no_steps"])
def test_fedwalk_without_leash_steps_equals_its_base(data, base, how):
    """§6.5: a threshold so low that it never leashes, or T_s = 0, leaves the base method's
    numbers exactly as they are (w, and SCAFFOLD's c and c_i), over 4 rounds in float64."""
    kw = dict(BASES[base], train__rounds=4)
    plain = run_rounds(_cfg(**kw), data)
    extra = dict(fedwalk__tau=-1e9) if how == "never" else dict(fedwalk__tau=5.0, fedwalk__steps=0)
    walk = run_rounds(_cfg(hooks=["fedwalk"], **kw, **extra), data)
    assert torch.equal(walk.w, plain.w)
    if base == "scaffold":
        assert torch.equal(walk.method.c, plain.method.c)
        assert torch.equal(walk.method.dense_variates(), plain.method.dense_variates())
    leashed = walk.components.hooks[0].metrics["leashed"]
    assert float(leashed) == (0.0 if how == "never" else 1.0)


def test_scaffold_control_variates_never_see_a_leash_gradient(data):
    """SCAFFOLD+FedWalk leashing every round against plain SCAFFOLD given the same broadcast
    models: before each round the plain run gets the leashed run's w_t; after the round c and
    every c_i are identical bit for bit (the leash moved only w, never c or c_i), while the
    leashed run's next w differs from plain SCAFFOLD's."""
    kw = dict(BASES["scaffold"], train__rounds=4)
    walk = FLRun(_cfg(hooks=["fedwalk"], fedwalk__tau=100.0, **kw), dataset=data)
    plain = FLRun(_cfg(**kw), dataset=data)
    for _ in range(4):
        plain.w = walk.w.clone()  # the same broadcast model
        metrics = walk.step()
        plain.step()
        assert float(metrics["leashed"]) == 1.0
        assert not torch.equal(walk.w, plain.w)  # the leash moved W̄
        assert torch.equal(walk.method.c, plain.method.c)
        assert torch.equal(walk.method.dense_variates(), plain.method.dense_variates())


def test_llr_bookkeeping_by_hand(data):
    """Three rounds: L^c = β L^c + (1 − β) mean L_k (L^c_0 = 0), LLR = log2(L^c / L^s) with the
    updated L^c, leash iff LLR < τ, L^s refreshed only after leashing (to L_leash(W̄))."""
    cfg = _cfg(hooks=["fedwalk"], fedwalk__tau=-0.5, fedwalk__beta=0.5, train__rounds=3)
    run = FLRun(cfg, dataset=data)
    hook = run.components.hooks[0]
    ls = float(hook.task.loss(run.w))
    assert float(hook.ls) == ls  # L^s_0 = L_leash(W_0, D_s) (§6.3)
    lc, seen = 0.0, []
    for _ in range(3):
        metrics = run.step()
        lks = [float(v) for k, v in metrics.items() if k.endswith("/L_k")]
        assert len(lks) == 3  # one per sampled client
        lc = 0.5 * lc + 0.5 * sum(lks) / 3
        llr = math.log2(lc / ls)
        assert float(metrics["Lc"]) == pytest.approx(lc, rel=1e-12)
        assert float(metrics["LLR"]) == pytest.approx(llr, rel=1e-12)
        leashed = float(metrics["LLR"]) < -0.5  # the hook's own LLR decides (no float tie)
        assert float(metrics["leashed"]) == float(leashed)
        if leashed:
            ls = float(hook.task.loss(run.w))
        assert float(metrics["Ls"]) == pytest.approx(ls, rel=1e-12)
        seen.append(leashed)
    # L^c starts at 0 without bias correction: round 1's LLR is about log2(0.5) = −1 < −0.5
    assert seen[0]


def test_lk_is_the_final_local_models_task_loss_on_its_whole_set(data):
    """L_k = L(V_k, D_k): the oracle's loss of the final local model, without any penalty."""
    cfg = _cfg(hooks=["fedwalk"], fedwalk__tau=-1e9, train__rounds=1)
    run = FLRun(cfg, dataset=data)
    client = run.clients[2]
    from fedsweep.core.messages import ClientTask, RoundContext

    ctx = RoundContext(1, 0.05, 1.0)
    w0 = run.w.clone()
    update = run.trainer.train(client, ClientTask(2, 2, 0.05), w0, ctx)
    y = w0 - update.delta
    expected = run.oracle.losses([2], y, penalty=False)[0]
    assert torch.equal(update.metrics["L_k"], expected)


def test_ls_init_inf_leashes_round_one(data):
    cfg = _cfg(hooks=["fedwalk"], fedwalk__ls_init="inf", fedwalk__tau=-50.0, train__rounds=1)
    run = FLRun(cfg, dataset=data)
    metrics = run.step()
    assert float(metrics["LLR"]) == -math.inf and float(metrics["leashed"]) == 1.0
    assert math.isfinite(float(metrics["Ls"]))


# ------------------------------------------------------------------------ the leash head
def test_leash_head_is_never_in_a_client_message(data):
    """The separate head is server state: w (what is broadcast, trained and sent) is the model's
    own parameters only, a client's message does not depend on the head, and a leash step
    changes the head and the backbone but gives the FL head no gradient."""
    cfg = _cfg(hooks=["fedwalk"], fedwalk__tau=100.0, train__rounds=1)
    run = FLRun(cfg, dataset=data)
    hook = run.components.hooks[0]
    assert run.fm.dim == sum(p.numel() for p in run.fm.module.parameters())
    assert hook.task.head.numel() == (run.fm.module.feature_dim + 1) * hook.task.num_classes
    from fedsweep.core.messages import ClientTask, RoundContext

    ctx, w0 = RoundContext(1, 0.05, 1.0), run.w.clone()
    state = run.clients[0].schedule.state_dict()
    before = run.trainer.train(run.clients[0], ClientTask(0, 2, 0.05), w0, ctx)
    head0 = hook.task.head.clone()
    w1 = hook.task.step(w0, 0.1)
    assert not torch.equal(hook.task.head, head0) and not torch.equal(w1, w0)
    views0, views1 = run.fm.unflatten(w0), run.fm.unflatten(w1)
    for name in ("net.fc3.weight", "net.fc3.bias"):
        assert torch.equal(views0[name], views1[name])  # no leash gradient on the FL head
    run.clients[0].schedule.load_state_dict(state)
    after = run.trainer.train(run.clients[0], ClientTask(0, 2, 0.05), w0, ctx)
    assert torch.equal(before.delta, after.delta)  # the head changed; the message did not
    assert set(after.extras) == set() and before.delta.numel() == run.fm.dim


def test_mapped_head_uses_the_fl_head_and_is_refused_without_a_mapping():
    cfg = _cfg(hooks=["fedwalk"], fedwalk__head="mapped", train__rounds=1)
    run = FLRun(cfg, dataset=tiny_dataset())
    assert run.components.hooks[0].task.head is None
    run.step()
    with pytest.raises(ConfigError, match="no mapping"):
        _cfg(hooks=["fedwalk"], fedwalk__head="mapped", leash__task="HH")


# -------------------------------------------------------------------------- bad configs
@pytest.mark.parametrize(
    "kw, needle",
    [
        (dict(fedwalk__steps=-1), "fedwalk.steps"),
        (dict(fedwalk__batch_size=0), "fedwalk.batch_size"),
        (dict(fedwalk__beta=1.0), "fedwalk.beta"),
        (dict(fedwalk__beta=-0.1), "fedwalk.beta"),
        (dict(selector="bherd", algorithm="fedavg"), "hook 'fedwalk' is not defined with selector"),
        (dict(algorithm="centralized", sampler="full"), "not defined with algorithm"),
        (dict(cohort__size=7), "cohort"),
        (dict(model__name="svm"), "needs a model with features"),
        (dict(uniform__weighting="renorm"), "field `uniform.weighting`: got 'renorm'"),
        (dict(sampler="full", cohort__size=None), "field `sampler`: got 'full'"),
        (dict(sampler="divfl"), "field `divfl.weighting`: got 'data'"),
        (
            dict(
                data__dataset="cifar10",
                leash__source="imagenet32",
                leash__root="/nonexistent/leash",
            ),
            "/nonexistent/leash",
        ),
    ],
)
def test_bad_fedwalk_configs_are_refused(kw, needle):
    with pytest.raises(ConfigError) as err:
        _cfg(hooks=["fedwalk"], **kw)
    assert needle in str(err.value)


def test_non_finite_leash_loss_marks_the_run_diverged(data):
    """Leash images that make the leash loss NaN: the run ends as diverged at round 1 (it
    leashes), not with an exception."""
    cfg = _cfg(hooks=["fedwalk"], fedwalk__tau=100.0, train__rounds=4)
    run = FLRun(cfg, dataset=data)
    task = run.components.hooks[0].task
    task.x = torch.full_like(task.x, math.nan)
    result = run.run()
    assert result.status == "diverged" and result.rounds == 1
    assert math.isnan(result.final["Ls"])


# ------------------------------------------------------------------------ checkpoint/resume
@pytest.mark.parametrize("base", ["fedavg", "scaffold"])
def test_checkpoint_resume_is_exact_with_leash_state(data, base, tmp_path):
    kw = dict(BASES[base], hooks=["fedwalk"], fedwalk__tau=0.0, train__rounds=4)
    straight = run_rounds(_cfg(**kw), data)
    first = run_rounds(_cfg(**kw), data, rounds=2)
    torch.save(first.state_dict(), tmp_path / "s.pt")
    second = FLRun(_cfg(**kw), dataset=data)
    second.load_state_dict(torch.load(tmp_path / "s.pt", weights_only=True))
    second.step(), second.step()
    assert torch.equal(second.w, straight.w)
    a, b = second.components.hooks[0], straight.components.hooks[0]
    assert torch.equal(a.task.head, b.task.head) and torch.equal(a.lc, b.lc)
    assert torch.equal(a.ls, b.ls)


def test_pretraining_changes_only_the_start(data):
    """leash_pretrain: k leash steps from W_0 before round 1, then the base method alone."""
    kw = dict(BASES["fedavg"], train__rounds=1)
    plain = FLRun(_cfg(**kw), dataset=data)
    pre = FLRun(_cfg(hooks=["leash_pretrain"], leash_pretrain__steps=5, **kw), dataset=data)
    assert not torch.equal(pre.w, plain.w)
    none = FLRun(_cfg(hooks=["leash_pretrain"], leash_pretrain__steps=0, **kw), dataset=data)
    assert torch.equal(none.w, plain.w)


# ----------------------------------------------------------------- SCAFFOLD sparse state
class DenseScaffold(Scaffold):
    """The dense [N, d] c_i table SCAFFOLD had before sparse storage (the reference)."""

    def setup(self, w, num_clients):
        super().setup(w, num_clients)
        self.table = torch.zeros(num_clients, w.numel(), dtype=w.dtype)

    def client_variate(self, client):
        return self.table[client]

    def client_update(self, client, w, y, num_samples, num_steps, ctx, delta=None, **kw):
        update = super().client_update(client, w, y, num_samples, num_steps, ctx, delta, **kw)
        self.table[client] = self.ci.pop(client)
        return update


def test_sparse_client_state_equals_the_dense_table(data):
    """Uniform sampling, 5 rounds: only trained clients hold a c_i, and every number equals the
    dense table's bit for bit."""
    cfg = _cfg(algorithm="scaffold", train__rounds=5)
    sparse = run_rounds(cfg, data)
    dense = FLRun(cfg, dataset=data)
    dense.method = DenseScaffold(cfg)
    dense.method.setup(dense.w, len(dense.clients))
    dense.components.method = dense.method
    dense.trainer.method = dense.method
    for _ in range(5):
        dense.step()
    assert torch.equal(sparse.w, dense.w)
    assert torch.equal(sparse.method.dense_variates(), dense.method.table)
    assert 0 < len(sparse.method.ci) <= 6
    state = sparse.method.state_dict()
    assert set(state["ci"]["tensors"]) == set(sparse.method.ci)  # only clients that trained


# --------------------------------------------------------------------- BatchNorm per client
def test_batchnorm_statistics_are_averaged_with_the_cohort_weights():
    """Two clients of unequal size, one local step each, ResNet-18: each client starts from the
    global statistics (not the previous client's), and the new global statistics are
    p_1 b_1 + p_2 b_2 of what each client's step left."""
    data = tiny_dataset(n_train=60, n_test=20, side=32, channels=3)
    cfg = build_config(
        {
            "device": "cpu",
            "threads": 1,
            "data": {
                "dataset": "cifar10",
                "partition": "dirichlet",
                "dirichlet_alpha": 0.5,
                "num_clients": 2,
            },
            "model": {"name": "resnet18"},
            "step_policy": "fixed",
            "fixed_steps": {"steps": 1},
            "train": {"rounds": 1, "batch_size": 8, "lr": 0.01, "order": "fixed"},
            "eval": {"train_metrics": False},
            "tracking": {"enabled": False},
        }
    )
    run = FLRun(cfg, dataset=data)
    p = run.p
    assert p[0] != p[1]  # unequal sizes
    start = {k: v.clone() for k, v in run.fm.buffers.items()}
    # what each client's step leaves, from the global statistics, client by client
    expected_each = []
    for client in run.clients:
        probe = FLRun(cfg, dataset=data)
        for name, value in start.items():
            probe.fm.buffers[name].copy_(value)
        rows = client.indices[client.schedule.peek()]
        probe.fm.gradient(probe.w, data.x_train[rows], data.y_train[rows])
        expected_each.append({k: v.clone() for k, v in probe.fm.buffers.items()})
    run.step()
    name = "net.bn1.running_mean"
    assert not torch.equal(expected_each[0][name], expected_each[1][name])
    for key, live in run.fm.buffers.items():
        if live.is_floating_point():
            want = p[0] * expected_each[0][key].double() + p[1] * expected_each[1][key].double()
            torch.testing.assert_close(live.double(), want, rtol=1e-6, atol=1e-7)
        else:
            assert torch.equal(live, expected_each[0][key])


# ------------------------------------------------------ checkpoints proportional to change
def test_sweep_checkpoints_write_each_client_state_once_per_change(data, tmp_path):
    """A trial's checkpoints keep SCAFFOLD's c_i in one file per (client, change): a second
    checkpoint writes only the c_i that changed since the first, pruning drops files no kept
    state lists, and the restored state resumes exactly."""
    import json

    from ray import tune

    from fedsweep.engine.client_state import externalize
    from fedsweep.sweep import trial as trial_mod

    cfg = _cfg(algorithm="scaffold", train__rounds=4)
    straight = run_rounds(cfg, data)
    run = FLRun(cfg, dataset=data)
    side = tmp_path / trial_mod.CLIENT_STATE_DIR
    written, listed = [], []
    for rnd in (1, 2, 3):
        run.step()
        before = set(p.name for p in side.iterdir()) if side.is_dir() else set()
        state, files = externalize(run.state_dict(), side)
        written.append(set(p.name for p in side.iterdir()) - before)
        listed.append(files)
        folder = tmp_path / f"checkpoint_00000{rnd}"
        folder.mkdir()
        torch.save(state, folder / trial_mod.STATE_FILE)
        (folder / trial_mod.CLIENT_FILES).write_text(json.dumps(sorted(files)))
        (folder / trial_mod.META_FILE).write_text(json.dumps({"mlflow_run_id": "r"}))
        trial_mod.prune_states(tmp_path)
        assert files <= set(p.name for p in side.iterdir())
    # each checkpoint writes the c_i of this round's 3 clients only, while the table grows
    assert [len(w) for w in written] == [3, 3, 3]
    assert len(run.method.ci) > 3
    # the two kept states' files stay; round 1's versions that later rounds replaced are pruned
    assert set(p.name for p in side.iterdir()) == listed[1] | listed[2]
    assert listed[0] - listed[1] - listed[2]
    state, _ = trial_mod._restore(tune.Checkpoint.from_directory(tmp_path / "checkpoint_000003"))
    resumed = FLRun(cfg, dataset=data)
    resumed.load_state_dict(state)
    resumed.step()
    assert torch.equal(resumed.w, straight.w)
    assert torch.equal(resumed.method.dense_variates(), straight.method.dense_variates())
