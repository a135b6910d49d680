"""FedProx, FedNova, SCAFFOLD, BHerd compositions and GraB-FedAvg (docs/algorithms.md
§2.3–2.5, §3.7, §3.8, §4; Appendix B items 4, 5, 6). Hand checks replay a client's local
trajectory from its fixed batch order (E = 1: every round visits the same batches) with the
model's own gradient."""

from __future__ import annotations

import warnings

import pytest
import torch

from fedsweep.components.algorithms.base import RoundContext
from fedsweep.components.algorithms.fednova import FedNova, normaliser
from fedsweep.components.compose import valid_compositions
from fedsweep.components.selectors.bherd import keep_count
from fedsweep.components.selectors.herding import centred_gram, herd
from fedsweep.config.load import ConfigError, build_config
from fedsweep.experiment import FLRun
from tests.helpers import CASE3, F64, run_rounds, tiny_config, tiny_dataset


def client_batches(cfg, data):
    """Each client's rows per local step under the fixed order (the same in every round)."""
    ref = FLRun(cfg, dataset=data)
    return ref, [c.indices[c.schedule.take(c.num_steps)] for c in ref.clients]


def grad(run, y, rows):
    g, _ = run.fm.gradient(y, run.x_train.index_select(0, rows), run.y_train.index_select(0, rows))
    return g


# ------------------------------------------------------------------- FedProx
def test_fedprox_mu0_equals_fedavg_exactly():
    """Appendix B.4: μ = 0 ⇒ FedAvg (g + 0·(y − w) = g bit for bit)."""
    data = tiny_dataset()
    kw = dict(model__name="mlp", **CASE3)
    fedavg = run_rounds(tiny_config(**kw), data)
    prox = run_rounds(tiny_config(algorithm="fedprox", fedprox__mu=0.0, **kw), data)
    assert torch.equal(prox.w, fedavg.w)
    prox1 = run_rounds(tiny_config(algorithm="fedprox", fedprox__mu=0.1, **kw), data)
    assert not torch.allclose(prox1.w, fedavg.w)


def test_fedprox_local_steps_by_hand():
    """One client, τ = 2: y1 = w − η g(w);  y2 = y1 − η (g(y1) + μ (y1 − w)); w_new = y2."""
    data = tiny_dataset()
    mu, lr = 0.7, 0.05
    cfg = tiny_config(
        algorithm="fedprox",
        fedprox__mu=mu,
        data__num_clients=1,
        data__train_subset=40,
        model__name="mlp",
        train__rounds=1,
        **F64,
    )
    ref, rows = client_batches(cfg, data)
    assert ref.clients[0].num_steps == 2
    w = ref.w.clone()
    y1 = w - lr * grad(ref, w, rows[0][0])
    y2 = y1 - lr * (grad(ref, y1, rows[0][1]) + mu * (y1 - w))
    run = run_rounds(cfg, data)
    torch.testing.assert_close(run.w, y2, rtol=1e-12, atol=1e-15)


# -------------------------------------------------------------------- FedNova
def test_fednova_equal_tau_equals_fedavg():
    """Appendix B.4: equal τ_i (case 1, equal client sizes) ⇒ FedAvg (float64, rtol 1e-10)."""
    data = tiny_dataset()
    kw = dict(model__name="mlp", data__partition="case1", **F64)
    fedavg = run_rounds(tiny_config(**kw), data)
    nova = run_rounds(tiny_config(algorithm="fednova", **kw), data)
    assert len({c.num_steps for c in nova.clients}) == 1
    torch.testing.assert_close(nova.w, fedavg.w, rtol=1e-10, atol=1e-13)


def test_fednova_unequal_tau_normalises_by_hand():
    """Case 3 (τ_i differ): w_1 = w_0 − τ_eff Σ p_i Δ_i/τ_i with Δ_i the FedAvg client updates."""
    data = tiny_dataset()
    kw = dict(model__name="mlp", **CASE3)
    nova = run_rounds(tiny_config(algorithm="fednova", **kw), data, rounds=1)
    fedavg = run_rounds(tiny_config(**kw), data, rounds=1)
    assert len({c.num_steps for c in nova.clients}) > 1
    assert not torch.allclose(nova.w, fedavg.w, rtol=1e-6)

    ref = FLRun(tiny_config(**kw), dataset=data)  # round-1 FedAvg client updates from w_0
    ctx = RoundContext(1, 0.05, 1.0)
    deltas = [ref.local_train(c, ctx).delta for c in ref.clients]
    tau = [float(c.num_steps) for c in ref.clients]
    p = ref.p.tolist()
    tau_eff = sum(pi * ti for pi, ti in zip(p, tau, strict=True))
    expected = ref.w - sum(pi * tau_eff / ti * d for pi, ti, d in zip(p, tau, deltas, strict=True))
    torch.testing.assert_close(nova.w, expected, rtol=1e-10, atol=1e-13)


def _jywa_counter(tau, lr, momentum, mu):
    """JYWa/FedNova's running normaliser (``local_counter`` / ``a ← a(1 − ημ) + 1``)."""
    a, counter = 0.0, 0.0
    for _ in range(tau):
        if momentum != 0:
            counter = counter * momentum + 1
            a += counter
        elif mu != 0:
            a = a * (1 - lr * mu) + 1
        else:
            a += 1
    return a


@pytest.mark.parametrize(
    ("momentum", "mu"), [(0.0, 0.0), (0.5, 0.0), (0.9, 0.0), (0.0, 0.1), (0.0, 3.0)]
)
@pytest.mark.parametrize("tau", [1, 2, 7, 40])
def test_fednova_normaliser_matches_the_local_solver(momentum, mu, tau):
    """§2.4 table: ``a_i`` equals (i) the coefficient sum of the method's own local solver run
    on the constant gradient g ≡ 1 (Δ = η Σ_λ a_λ g_λ, so −(y − w)/η = ||a||_1) and (ii) the JYWa
    running counter."""
    lr = 0.05
    cfg = tiny_config(algorithm="fednova", fednova__momentum=momentum, fednova__mu=mu)
    method = FedNova(cfg)
    w = torch.zeros(1, dtype=torch.float64)
    method.setup(w, 1)
    method.begin_client(0, None)
    y = w.clone()
    for _ in range(tau):
        y = y - lr * method.local_direction(0, torch.ones(1, dtype=torch.float64), y, w)
    direct = float((w - y) / lr)
    a = normaliser(tau, lr, momentum, mu)
    assert a == pytest.approx(direct, rel=1e-12)
    assert a == pytest.approx(_jywa_counter(tau, lr, momentum, mu), rel=1e-12)
    if momentum == 0 and mu == 0:
        assert a == tau


def test_fednova_local_momentum_by_hand():
    """Two clients, τ = (1, 2), ρ = 0.9: each client's buffer starts afresh (buf_1 = g_1,
    buf_2 = ρ buf_1 + g_2), a = (1, 2 + ρ), w_1 = w_0 − τ_eff Σ p_i Δ_i/a_i, τ_eff = Σ p_i a_i."""
    data = tiny_dataset()
    rho, lr = 0.9, 0.05
    cfg = tiny_config(
        algorithm="fednova",
        fednova__momentum=rho,
        data__partition="case2",
        data__num_clients=2,
        data__train_subset=90,
        model__name="mlp",
        **F64,
    )
    ref, rows = client_batches(cfg, data)
    assert [c.num_steps for c in ref.clients] == [1, 2]
    w = ref.w.clone()
    deltas = []
    for c in ref.clients:
        y, buf = w.clone(), None
        for lam in range(c.num_steps):
            g = grad(ref, y, rows[c.index][lam])
            buf = g if buf is None else rho * buf + g
            y = y - lr * buf
        deltas.append(w - y)
    a = [1.0, 2.0 + rho]
    p = ref.p.tolist()
    tau_eff = p[0] * a[0] + p[1] * a[1]
    expected = w - tau_eff * (p[0] * deltas[0] / a[0] + p[1] * deltas[1] / a[1])
    run = run_rounds(cfg, data, rounds=1)
    torch.testing.assert_close(run.w, expected, rtol=1e-10, atol=1e-13)


def test_fednova_variants_run_and_server_momentum_resumes(tmp_path):
    data = tiny_dataset()
    kw = dict(algorithm="fednova", model__name="mlp", train__rounds=4, **CASE3)
    plain = run_rounds(tiny_config(**kw), data)
    mom = run_rounds(tiny_config(fednova__momentum=0.5, **kw), data)
    prox = run_rounds(tiny_config(fednova__mu=0.5, **kw), data)
    steps = run_rounds(tiny_config(fednova__mu=0.5, fednova__taueff="steps", **kw), data)
    for other in (mom, prox, steps):
        assert not torch.allclose(other.w, plain.w)
    assert not torch.allclose(steps.w, prox.w)  # N1: Σ q_i a_i vs Σ q_i τ_i

    cfg = tiny_config(fednova__gmf=0.5, **kw)
    straight = run_rounds(cfg, data)
    assert not torch.allclose(straight.w, plain.w)
    first = run_rounds(cfg, data, rounds=2)
    torch.save(first.state_dict(), tmp_path / "s.pt")
    second = FLRun(cfg, dataset=data)
    second.load_state_dict(torch.load(tmp_path / "s.pt"))
    second.step(), second.step()
    assert torch.equal(second.w, straight.w)


# ------------------------------------------------------------------- SCAFFOLD
def test_scaffold_round1_equals_fedavg_round1():
    """Appendix B.4: c = c_i = 0 in round 1 ⇒ FedAvg; later rounds differ (case 3)."""
    data = tiny_dataset()
    kw = dict(model__name="mlp", **CASE3)
    for dtype in ("float32", "float64"):
        sc = run_rounds(tiny_config(algorithm="scaffold", **{**kw, "train__dtype": dtype}), data, 1)
        fa = run_rounds(tiny_config(**{**kw, "train__dtype": dtype}), data, 1)
        assert torch.equal(sc.w, fa.w)
    sc.step(), fa.step()
    assert not torch.allclose(sc.w, fa.w)


@pytest.mark.parametrize(
    ("weights", "partition", "subset"), [("data", "case1", 80), ("uniform", "case2", 90)]
)
def test_scaffold_control_variates_by_hand(weights, partition, subset):
    """Two clients, τ_i ≤ 2 steps, float64 SVM. Option II with the actual step count makes
    ``c_i_new = c_i − c + (1/(τ_i η)) η Σ_λ (g_λ + c − c_i) = mean of the round's raw g`` and
    ``c ← c + (|S|/N) Σ q_i Δc_i``; ``w ← w − Σ q_i η Σ_λ v_λ``. Case 1: τ = (2, 2), q = p; case 2:
    τ = (1, 2), |D_i| = (39, 51), uniform q = 1/2."""
    data = tiny_dataset()
    lr = 0.05
    cfg = tiny_config(
        algorithm="scaffold",
        scaffold__weights=weights,
        data__partition=partition,
        data__num_clients=2,
        data__train_subset=subset,
        train__rounds=2,
        **F64,
    )
    ref, rows = client_batches(cfg, data)
    taus = [c.num_steps for c in ref.clients]
    assert taus == ([2, 2] if partition == "case1" else [1, 2])
    q = ref.p.tolist() if weights == "data" else [0.5, 0.5]
    if weights == "uniform":
        assert ref.p.tolist() != [0.5, 0.5]  # the two weightings really differ here
    run = FLRun(cfg, dataset=data)

    w = ref.w.clone()
    c = torch.zeros_like(w)
    ci = [torch.zeros_like(w), torch.zeros_like(w)]
    for _round in range(2):
        new_ci, steps = [], []
        for i in range(2):
            y, gs = w.clone(), []
            for lam in range(taus[i]):
                g = grad(ref, y, rows[i][lam])
                gs.append(g)
                y = y - lr * (g + c - ci[i])  # v = g + c − c_i
            new_ci.append(sum(gs) / taus[i])  # c_i_new = mean raw gradient of the round
            steps.append(w - y)  # Δ_i = η Σ v
        w = w - (q[0] * steps[0] + q[1] * steps[1])
        c = c + (2 / 2) * (q[0] * (new_ci[0] - ci[0]) + q[1] * (new_ci[1] - ci[1]))
        ci = new_ci

        run.step()
        torch.testing.assert_close(run.w, w, rtol=1e-12, atol=1e-15)
        torch.testing.assert_close(run.method.c, c, rtol=1e-12, atol=1e-15)
        for i in range(2):
            torch.testing.assert_close(run.method.ci[i], ci[i], rtol=1e-12, atol=1e-15)
    assert c.abs().sum() > 0 and not torch.allclose(ci[0], ci[1])
    if weights == "data":  # q = p under full participation keeps c = Σ p_i c_i (§2.5)
        torch.testing.assert_close(run.method.c, q[0] * ci[0] + q[1] * ci[1])


def test_scaffold_state_survives_checkpoint(tmp_path):
    """4 rounds straight == 2 rounds + state_dict round trip (through torch.save) + 2 rounds."""
    data = tiny_dataset()
    cfg = tiny_config(algorithm="scaffold", model__name="mlp", train__rounds=4, **CASE3)
    straight = run_rounds(cfg, data)
    first = run_rounds(cfg, data, rounds=2)
    assert first.method.dense_variates().abs().sum() > 0
    torch.save(first.state_dict(), tmp_path / "s.pt")
    second = FLRun(cfg, dataset=data)
    second.load_state_dict(torch.load(tmp_path / "s.pt"))
    second.step(), second.step()
    assert torch.equal(second.w, straight.w)
    assert torch.equal(second.method.c, straight.method.c)
    assert torch.equal(second.method.dense_variates(), straight.method.dense_variates())


# ------------------------------------------------------- BHerd compositions
@pytest.mark.parametrize("base", ["fednova", "scaffold"])
def test_bherd_alpha1_equals_base_float64(base):
    """§3.7/§3.8 invariants: α = 1, E = 1, same (fixed) order ⇒ the plain base (rtol 1e-10)."""
    data = tiny_dataset()
    kw = dict(algorithm=base, model__name="mlp", train__rounds=4, **CASE3)
    plain = run_rounds(tiny_config(**kw), data)
    bherd = run_rounds(tiny_config(selector="bherd", bherd__alpha=1.0, **kw), data)
    torch.testing.assert_close(bherd.w, plain.w, rtol=1e-10, atol=1e-13)
    if base == "scaffold":
        torch.testing.assert_close(
            bherd.method.dense_variates(), plain.method.dense_variates(), rtol=1e-10, atol=1e-12
        )
        torch.testing.assert_close(bherd.method.c, plain.method.c, rtol=1e-10, atol=1e-12)
        assert bherd.method.c.abs().sum() > 0
    half = run_rounds(tiny_config(selector="bherd", bherd__alpha=0.5, **kw), data)
    assert not torch.allclose(half.w, plain.w)


def test_bherd_fednova_uploads_the_herd_mean_by_hand():
    """§3.7: Δ_i = η (τ_i/k_i) g_sel,i, a_i = τ_i; w_1 = w_0 − η τ_eff Σ p_i g_sel,i/k_i with
    τ_eff = Σ p_i τ_i. ``η g_sel,i`` is read off BHerd-FedAvg's round-1 upload ``η (E/α) g_sel``."""
    data = tiny_dataset()
    alpha = 0.5
    kw = dict(selector="bherd", bherd__alpha=alpha, model__name="mlp", **CASE3)
    nova = run_rounds(tiny_config(algorithm="fednova", **kw), data, rounds=1)
    ref = FLRun(tiny_config(**kw), dataset=data)  # BHerd-FedAvg, same herd in round 1
    ctx = RoundContext(1, 0.05, 1.0)
    eta_gsel = [ref.local_train(c, ctx).delta * alpha for c in ref.clients]
    tau = [c.num_steps for c in ref.clients]
    k = [keep_count(alpha, t) for t in tau]
    assert any(t % 2 for t in tau)  # some α τ_i are not integers
    p = ref.p.tolist()
    tau_eff = sum(pi * ti for pi, ti in zip(p, tau, strict=True))
    expected = ref.w - tau_eff * sum(pi * e / ki for pi, e, ki in zip(p, eta_gsel, k, strict=True))
    torch.testing.assert_close(nova.w, expected, rtol=1e-10, atol=1e-13)


def test_bherd_scaffold_uploads_selected_v_and_herds_g():
    """§3.8 in round 2 (c − c_i ≠ 0): the herd order of g equals that of v = g + c − c_i
    (Appendix B.5); Δ_i = η (E/α) Σ_π v_λ = η (E/α) (g_sel + k (c − c_i)); with
    ``scaffold_ci = "selected"``, Δc_i = −c + Δ_i/(τ_i η)."""
    data = tiny_dataset()
    alpha, lr = 0.5, 0.05
    kw = dict(algorithm="scaffold", selector="bherd", bherd__alpha=alpha, model__name="mlp")
    cfg = tiny_config(**kw, **CASE3)
    run = run_rounds(cfg, data, rounds=1)
    ctx = RoundContext(2, lr, 1.0)
    client = run.clients[4]
    c, ci_old = run.method.c.clone(), run.method.ci[4].clone()
    assert not torch.allclose(c, ci_old)
    update = run.local_train(client, ctx)
    tau, k = client.num_steps, keep_count(alpha, client.num_steps)
    g = run.selector._buffer[:tau].clone()
    v = run.selector._vbuffer[:tau].clone()
    torch.testing.assert_close(v, g + (c - ci_old), rtol=0, atol=1e-12)
    assert torch.equal(herd(g, tau).order, herd(v, tau).order)  # B.5, full order
    mask = update.records["selected"]
    assert int(mask.sum()) == k
    expected = lr / alpha * (g[mask].sum(0) + k * (c - ci_old))
    torch.testing.assert_close(update.delta, expected, rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(update.extras["dc"], -c + expected / (tau * lr))

    full = run_rounds(tiny_config(bherd__scaffold_ci="full", **kw, **CASE3), data, 3)
    sel = run_rounds(cfg, data, 3)
    assert not torch.allclose(full.method.c, sel.method.c)


def _greedy_margins(z: torch.Tensor) -> torch.Tensor:
    """Per greedy pick, the gap between the best and the second-best key (inf for the last)."""
    gram = centred_gram(z)
    tau = gram.shape[0]
    r = torch.zeros(tau, dtype=torch.float64)
    taken = torch.zeros(tau, dtype=torch.bool)
    margins = []
    for _ in range(tau):
        key = torch.where(taken, torch.inf, 2.0 * r + torch.diagonal(gram))
        best = torch.sort(key).values
        margins.append(best[1] - best[0] if tau - int(taken.sum()) > 1 else torch.tensor(torch.inf))
        p = torch.argmin(key)
        taken[p] = True
        r += gram[p]
    return torch.stack(margins)


def _prefix_norms(z: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """The herding objective along an order: ||Σ_{j<=m} ẑ_order[j]|| for every m."""
    zc = z - z.mean(dim=0, keepdim=True)
    return torch.linalg.norm(torch.cumsum(zc[order], dim=0), dim=1)


def test_herding_order_is_shift_invariant_without_ties():
    """Appendix B.5 on random float64 data: herd(g) == herd(g + const), index for index.

    Only inputs whose every greedy pick wins by a clear margin count: an exact tie is decided
    by float rounding, which a shift (and the CPU) may change; ties are the next test's."""
    gen = torch.Generator().manual_seed(1)
    checked = 0
    for _ in range(60):
        tau, dim = int(torch.randint(3, 30, (1,), generator=gen)), 20
        g = torch.randn(tau, dim, generator=gen, dtype=torch.float64)
        shift = torch.randn(dim, generator=gen, dtype=torch.float64)
        if _greedy_margins(g).min() < 1e-6:
            continue
        assert torch.equal(herd(g, tau).order, herd(g + shift, tau).order)
        checked += 1
    assert checked >= 40  # the margin filter must not empty the test


def test_herding_objective_is_shift_invariant_with_ties():
    """With exact ties (tau = 2: the centred rows are z and -z; duplicated rows) the picked
    index may differ after a shift, but the herding objective along the order may not."""
    gen = torch.Generator().manual_seed(2)
    for trial in range(40):
        dim = 20
        if trial % 2 == 0:
            g = torch.randn(2, dim, generator=gen, dtype=torch.float64)
        else:
            base = torch.randn(int(torch.randint(2, 10, (1,), generator=gen)), dim, generator=gen)
            g = torch.cat([base, base]).to(torch.float64)  # every row twice: tied pairs
        shift = 3.0 * torch.randn(dim, generator=gen, dtype=torch.float64)
        tau = g.shape[0]
        assert _greedy_margins(g).min() < 1e-9  # the input really has a tie
        a, b = herd(g, tau), herd(g + shift, tau)
        torch.testing.assert_close(
            _prefix_norms(g, a.order), _prefix_norms(g, b.order), rtol=1e-9, atol=1e-9
        )
        torch.testing.assert_close(a.sum_sq, b.sum_sq, rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------- GraB
def _literal_alg4(gs):
    """BHerd Alg. 4 as written: m += g/τ; z = g − m; select iff ||s+z|| < ||s−z||."""
    tau = len(gs)
    m, s, acc = torch.zeros_like(gs[0]), torch.zeros_like(gs[0]), torch.zeros_like(gs[0])
    mask = []
    for g in gs:
        m = m + g / tau
        z = g - m
        take = bool(torch.linalg.norm(s + z) < torch.linalg.norm(s - z))
        s = s + z if take else s - z
        acc = acc + g if take else acc
        mask.append(take)
    return torch.tensor(mask), acc


def test_grab_literal_by_hand_and_first_gradient_never_selected():
    """Appendix B.6 and Alg. 4 lines 17–19: w_1 = w_0 − (η/α_t) Σ p_i g_acc,i."""
    data = tiny_dataset()
    lr = 0.05
    cfg = tiny_config(selector="grab", model__name="mlp", **CASE3)
    ref, rows = client_batches(cfg, data)
    w0 = ref.w.clone()
    masks, accs, alphas = [], [], []
    for c in ref.clients:
        y, gs = w0.clone(), []
        for lam in range(c.num_steps):
            gs.append(grad(ref, y, rows[c.index][lam]))
            y = y - lr * gs[-1]
        mask, acc = _literal_alg4(gs)
        masks.append(mask), accs.append(acc), alphas.append(mask.sum().item() / c.num_steps)
    p = ref.p.tolist()
    alpha_t = sum(pi * a for pi, a in zip(p, alphas, strict=True))
    expected = w0 - lr / alpha_t * sum(pi * a for pi, a in zip(p, accs, strict=True))

    run = FLRun(cfg, dataset=data)
    metrics = run.step()
    torch.testing.assert_close(run.w, expected, rtol=1e-10, atol=1e-13)
    for c in run.clients:
        assert torch.equal(run.records[f"selected_client{c.index}"][0], masks[c.index])
        assert metrics[f"client/{c.index}/alpha"].item() == pytest.approx(alphas[c.index])
    run.step(), run.step()
    for c in run.clients:
        sel = run.record_arrays()[f"selected_client{c.index}"]
        assert sel.shape == (3, c.num_steps) and not sel[:, 0].any()  # first never selected
        alpha = sel.sum(axis=1) / c.num_steps
        assert ((alpha >= 0) & (alpha < 1)).all() and alpha.max() > 0


def test_grab_stale_mean_differs_and_carries_state(tmp_path):
    """B13 variant: centre with the client's previous-round mean gradient (zero in round 1),
    ties to the + side (so the round-1 first gradient, at s = 0, is selected)."""
    data = tiny_dataset()
    lr = 0.05
    kw = dict(selector="grab", model__name="mlp", train__rounds=3, **CASE3)
    cfg = tiny_config(grab__variant="grab_stale_mean", **kw)
    literal = run_rounds(tiny_config(**kw), data)
    stale = run_rounds(cfg, data, rounds=1)
    ref, rows = client_batches(cfg, data)
    for c in ref.clients:  # state after round 1: the mean of the round's raw gradients
        y, total = ref.w.clone(), torch.zeros_like(ref.w)
        for lam in range(c.num_steps):
            g = grad(ref, y, rows[c.index][lam])
            total += g
            y = y - lr * g
        prev = stale.selector.state_dict()["prev_mean"][c.index]
        torch.testing.assert_close(prev, total / c.num_steps, rtol=1e-10, atol=1e-13)
        assert stale.records[f"selected_client{c.index}"][0][0]  # s = 0: tie -> selected
    stale.step(), stale.step()
    assert not torch.allclose(stale.w, literal.w)

    first = run_rounds(cfg, data, rounds=2)
    torch.save(first.state_dict(), tmp_path / "s.pt")
    second = FLRun(cfg, dataset=data)
    second.load_state_dict(torch.load(tmp_path / "s.pt"))
    second.step()
    assert torch.equal(second.w, stale.w)
    fresh = FLRun(cfg, dataset=data)  # without the stale means round 3 would differ
    fresh.load_state_dict({**first.state_dict(), "selector": {"prev_mean": {}}})
    fresh.step()
    assert not torch.equal(fresh.w, stale.w)


def test_grab_alpha_t_zero_skips_the_update_with_a_warning():
    """B14: τ_i = 1 for every client ⇒ literal GraB selects nothing ⇒ w unchanged, warned."""
    data = tiny_dataset()
    kw = dict(selector="grab", model__name="mlp", train__batch_size=200, **F64)
    run = FLRun(tiny_config(**kw), dataset=data)
    assert {c.num_steps for c in run.clients} == {1}
    w0 = run.w.clone()
    with pytest.warns(UserWarning, match="alpha_t = 0"):
        run.step()
    assert torch.equal(run.w, w0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stale = FLRun(tiny_config(grab__variant="grab_stale_mean", **kw), dataset=data)
        stale.step()  # the stale-mean variant selects at s = 0: no skip
    assert not torch.equal(stale.w, w0)


# -------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("selector", "algorithm"),
    [
        ("bherd", "fedprox"),
        ("bherd", "centralized"),
        ("grab", "scaffold"),
        ("grab", "fednova"),
        ("grab", "fedprox"),
        ("grab", "centralized"),
    ],
)
def test_invalid_compositions_list_the_valid_ones(selector, algorithm):
    with pytest.raises(ConfigError) as err:
        build_config({"algorithm": algorithm, "selector": selector})
    msg = str(err.value)
    assert f"{selector!r} cannot be composed with algorithm {algorithm!r}" in msg
    for combo in ("bherd-fedavg", "bherd-fednova", "bherd-scaffold", "grab-fedavg"):
        assert combo in msg


def test_valid_compositions_and_new_sections():
    assert set(valid_compositions()) >= {
        "fedprox (no selector)",
        "fednova (no selector)",
        "scaffold (no selector)",
        "bherd-fedavg",
        "bherd-fednova",
        "bherd-scaffold",
        "grab-fedavg",
    }
    for sel, alg in [("bherd", "fednova"), ("bherd", "scaffold"), ("grab", "fedavg")]:
        build_config({"algorithm": alg, "selector": sel})
    cfg = build_config({})
    assert (cfg.fedprox.mu, cfg.fednova.momentum, cfg.fednova.mu, cfg.server_sgd.momentum) == (
        0.01,
        0.0,
        0.0,
        0.0,
    )
    assert (cfg.fednova.taueff, cfg.scaffold.weights, cfg.server_sgd.lr) == ("a", "data", 1.0)
    assert (cfg.sampler, cfg.server_optimizer, cfg.step_policy, cfg.lr_schedule) == (
        "full",
        "sgd",
        "epochs",
        "constant",
    )
    assert (cfg.grab.variant, cfg.bherd.scaffold_ci) == ("bherd_alg4", "selected")
    assert cfg.model_dump(exclude_defaults=True) == {}  # new fields add nothing to old configs


@pytest.mark.parametrize(
    ("tree", "pattern"),
    [
        ({"fedprox": {"mu": -0.1}}, r"fedprox\.mu"),
        ({"fednova": {"momentum": 1.0}}, r"fednova\.momentum"),
        ({"fednova": {"taueff": "tau"}}, r"fednova\.taueff.*'a'.*'steps'"),
        ({"fednova": {"momentum": 0.5, "mu": 0.1}}, r"cannot both be non-zero"),
        ({"scaffold": {"weights": "equal"}}, r"scaffold\.weights.*'data'.*'uniform'"),
        ({"grab": {"variant": "grab"}}, r"grab\.variant.*'bherd_alg4'"),
        ({"bherd": {"scaffold_ci": "all"}}, r"bherd\.scaffold_ci.*'selected'.*'full'"),
        ({"algorithm": "fednova", "selector": "bherd", "fednova": {"mu": 0.1}}, r"§3\.7"),
    ],
)
def test_new_sections_are_validated(tree, pattern):
    with pytest.raises(ConfigError, match=pattern):
        build_config(tree)
