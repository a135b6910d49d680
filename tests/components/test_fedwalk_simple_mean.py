"""FedWalk-FedAvg aggregates with the simple mean 1/m (FedWalk Eq. 4, docs/algorithms.md §6.1,
W6), issue 32 item 17: a sampler that weights by data size is refused, and three rounds computed
by hand from the spec on clients of unequal sizes equal the engine's."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import yaml
from torch.func import functional_call
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.config.load import ConfigError
from fedsweep.core.seeding import numpy_rng
from fedsweep.experiment import FLRun
from tests.helpers import F64, tiny_config, tiny_dataset

#: FedWalk on a 2NN, 5 clients of a Dirichlet(0.5) split, a stand-in leash task (held-out rows)
WALK = dict(
    model__name="mlp",
    data__partition="dirichlet",
    data__dirichlet_alpha=0.5,
    data__num_clients=5,
    data__holdout=100,
    leash__source="standin",
    leash__task="LH",
    hooks=["fedwalk"],
    **F64,
)
COHORT = dict(sampler="uniform", cohort__size=3)


# ------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "kw, field, bad",
    [
        ({}, "sampler", "'full'"),  # a hand-written config: the default sampler
        (COHORT, "uniform.weighting", "'renorm'"),  # the uniform sampler's default
        (dict(COHORT, uniform__weighting="scheme2"), "uniform.weighting", "'scheme2'"),
        (dict(sampler="divfl", cohort__size=3), "divfl.weighting", "'data'"),
    ],
)
def test_fedwalk_fedavg_with_data_size_weights_is_refused(kw, field, bad):
    with pytest.raises(ConfigError) as err:
        tiny_config(**WALK, **kw)
    text = str(err.value)
    assert f"field `{field}`: got {bad}" in text
    assert "simple mean 1/m of FedWalk's Eq. 4" in text and "W6" in text
    assert "simple" in text.split("allowed:")[1]  # the allowed values are named


@pytest.mark.parametrize(
    "kw",
    [
        dict(COHORT, uniform__weighting="simple"),
        dict(sampler="replacement", cohort__size=3),
        dict(sampler="poc", cohort__size=3),
        dict(sampler="divfl", cohort__size=3, divfl__weighting="simple"),
        # composed methods keep their own weights (§6.5): data-weighted, full or renormalised
        dict(algorithm="fedprox"),
        dict(algorithm="scaffold", **COHORT),
        dict(algorithm="fednova", **COHORT),
    ],
)
def test_fedwalk_simple_mean_samplers_and_compositions_are_accepted(kw):
    assert tiny_config(**WALK, **kw).hooks == ["fedwalk"]


def test_pretraining_baseline_and_plain_fedavg_keep_any_weights():
    kw = {k: v for k, v in WALK.items() if k != "hooks"}
    assert tiny_config(**kw, hooks=["leash_pretrain"]).sampler == "full"
    assert tiny_config(**kw, **COHORT).uniform.weighting == "renorm"


def test_cli_refuses_a_hand_written_fedwalk_config_with_exit_2(tmp_path):
    path = tmp_path / "walk.yaml"
    config = {
        "algorithm": "fedavg",
        "hooks": ["fedwalk"],
        "data": {
            "dataset": "mnist-5k",
            "partition": "dirichlet",
            "num_clients": 10,
            "holdout": 500,
        },
        "model": {"name": "mlp"},
        "leash": {"source": "standin"},
        "train": {"rounds": 1},
    }
    path.write_text(yaml.safe_dump(config))
    res = CliRunner().invoke(app, ["run", str(path), "--no-track", "-q"])
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())  # the message may be wrapped
    assert "field `sampler`: got 'full'" in out and "Eq. 4" in out
    assert "uniform with uniform.weighting simple" in out
    assert out.count("field `") == 1  # the config is valid but for that


# ------------------------------------------------------------------- the rounds by hand
def test_three_fedwalk_rounds_by_hand_use_the_simple_mean():
    """§6.1 in plain torch: each sampled client takes T_c = 2 full-batch SGD steps; W̄ = (1/m)
    Σ V_k (Eq. 4); L^c = β L^c + (1 − β) mean L_k; leash if log2(L^c / L^s) < τ, then L^s =
    L_leash(W̄). The engine's model, L_k, L^c, LLR and leash decisions equal the hand computation
    (float64, up to the summation order inside a batch) and differ from the same rounds
    aggregated by data size by far more (the clients' sizes differ)."""
    lr, steps, beta, tau, m = 0.05, 2, 0.5, -0.5, 3
    cfg = tiny_config(
        **WALK,
        **COHORT,
        uniform__weighting="simple",
        step_policy="fixed",
        fixed_steps__steps=steps,
        train__batch_size=10_000,  # a batch is the client's whole local set
        train__lr=lr,
        train__rounds=3,
        fedwalk__head="mapped",  # the FL head: the leash loss is the task's cross-entropy
        fedwalk__batch_size=10_000,  # a leash step uses the whole leash set
        fedwalk__beta=beta,
        fedwalk__tau=tau,
    )
    run = FLRun(cfg, dataset=tiny_dataset(n_train=600, n_test=100))
    sizes = [len(c.indices) for c in run.clients]
    assert max(sizes) > 1.5 * min(sizes)  # unequal clients: p_i ≠ 1/N

    module = run.model
    shapes = {name: p.shape for name, p in module.named_parameters()}
    w0 = torch.cat([p.detach().reshape(-1) for p in module.parameters()])
    assert torch.equal(w0, run.w)  # the flat vector is the parameters in order

    def loss(w, x, y):
        params, start = {}, 0
        for name, shape in shapes.items():
            params[name] = w[start : start + shape.numel()].view(shape)
            start += shape.numel()
        return F.cross_entropy(functional_call(module, params, (x,)), y)

    def sgd_step(w, x, y):
        leaf = w.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(loss(leaf, x, y), leaf)
        return (w - lr * g).detach()

    local = [(run.x_train[c.indices], run.y_train[c.indices]) for c in run.clients]
    leash = run.components.hooks[0].task
    xs, ys = leash.x, leash.y  # the leash set, labels mapped to the FL classes
    with torch.no_grad():
        ls = float(loss(w0, xs, ys))
    assert float(run.components.hooks[0].ls) == pytest.approx(ls, rel=1e-12)  # §6.3

    w_simple, w_data, lc = w0.clone(), w0.clone(), 0.0
    for t in (1, 2, 3):
        cohort = numpy_rng(cfg.seed, "selection", t).choice(5, size=m, replace=False).tolist()
        ends = {}
        for base, which in ((w_simple, "simple"), (w_data, "data")):
            models, lks = [], []
            for k in cohort:
                v = base
                for _ in range(steps):
                    v = sgd_step(v, *local[k])
                models.append(v)
                with torch.no_grad():
                    lks.append(float(loss(v, *local[k])))
            if which == "simple":
                bar = sum(models) / m  # Eq. 4
                lks_simple = lks
            else:
                total = sum(sizes[k] for k in cohort)
                bar = sum(sizes[k] / total * v for k, v in zip(cohort, models, strict=True))
            ends[which] = bar
        lc = beta * lc + (1 - beta) * sum(lks_simple) / m  # Eq. 5
        llr = math.log2(max(lc, 1e-12) / max(ls, 1e-12))  # Eq. 7
        leashed = llr < tau
        if leashed:
            for which in ends:
                ends[which] = sgd_step(ends[which], xs, ys)  # T_s = 1, γ_t = η_t
            with torch.no_grad():
                ls = float(loss(ends["simple"], xs, ys))
        w_simple, w_data = ends["simple"], ends["data"]

        metrics = run.step()
        got_lk = [float(metrics[f"client/{k}/L_k"]) for k in sorted(cohort)]
        assert got_lk == pytest.approx([lks_simple[cohort.index(k)] for k in sorted(cohort)])
        assert float(metrics["Lc"]) == pytest.approx(lc, rel=1e-10)
        assert float(metrics["LLR"]) == pytest.approx(llr, rel=1e-10)
        assert float(metrics["leashed"]) == float(leashed)
        assert float(metrics["Ls"]) == pytest.approx(ls, rel=1e-10)
        torch.testing.assert_close(run.w, w_simple, rtol=1e-10, atol=1e-12)
        assert float((run.w - w_data).abs().max()) > 1e-4  # not the data-size weights
