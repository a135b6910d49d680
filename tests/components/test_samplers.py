"""Client samplers (docs/algorithms.md §7): uniform, replacement, Power-of-Choice, DivFL.

Exact and deterministic: losses and distances are small integers stored as float64, so no float
tie decides an assertion. The oracle is a test double of ``samplers.base.ClientOracle``.
"""

from __future__ import annotations

import itertools
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fedsweep.components.samplers.base import CohortConfig
from fedsweep.components.samplers.divfl import (
    DivFL,
    DivFLConfig,
    distance_rows,
    distance_table,
    greedy,
    pack,
    packed_size,
    sample_size,
    unpack,
)
from fedsweep.components.samplers.full import FullParticipation
from fedsweep.components.samplers.poc import PocConfig, PowerOfChoice
from fedsweep.components.samplers.replacement import ReplacementSampler
from fedsweep.components.samplers.uniform import UniformConfig, UniformSampler
from fedsweep.core.seeding import numpy_rng

F64 = torch.float64


def make_config(n: int, m: int, seed: int = 0, **sections):
    return SimpleNamespace(
        seed=seed,
        cohort=CohortConfig(size=m),
        data=SimpleNamespace(num_clients=n),
        uniform=sections.get("uniform", UniformConfig()),
        poc=sections.get("poc", PocConfig()),
        divfl=sections.get("divfl", DivFLConfig()),
    )


def weights_of(sizes: list[int]) -> torch.Tensor:
    s = torch.tensor(sizes, dtype=F64)
    return s / s.sum()


class FakeOracle:
    """Losses from a fixed table; gradient ``∇F_k(w) = base_k + (k + 1) w``; records calls."""

    def __init__(self, losses: torch.Tensor, base: torch.Tensor | None = None) -> None:
        self.table = losses
        self.base = base
        self.num_clients = len(losses)
        self.calls: list[tuple[str, list[int]]] = []

    def losses(self, clients, w):
        self.calls.append(("losses", list(clients)))
        return self.table[clients]

    def batch_losses(self, clients, w, rng):
        self.calls.append(("batch_losses", list(clients)))
        rng.random(len(clients))  # a batch draw per client, from the stream it was given
        return self.table[clients]

    def gradients(self, clients, w):
        self.calls.append(("gradients", list(clients)))
        scale = torch.tensor([k + 1.0 for k in clients], dtype=w.dtype)[:, None]
        return self.base[clients].to(w.dtype) + scale * w


def selection(seed: int, t: int) -> np.random.Generator:
    return numpy_rng(seed, "selection", t)


W = torch.zeros(3, dtype=F64)
NO_ORACLE = FakeOracle(torch.zeros(1, dtype=F64))


# --------------------------------------------------------------------------------------- uniform
def test_uniform_draws_m_distinct_clients_with_renorm_weights() -> None:
    p = weights_of([5, 1, 3, 8, 2, 7, 4, 6])
    cohort = UniformSampler(make_config(8, 3, seed=4), p).sample(2, W, selection(4, 2), NO_ORACLE)
    drawn = selection(4, 2).choice(8, size=3, replace=False).tolist()
    assert cohort.draws == drawn
    assert cohort.clients == sorted(drawn) and len(set(cohort.clients)) == 3
    assert all(type(i) is int for i in cohort.clients + cohort.draws)
    expected = p[cohort.clients] / p[cohort.clients].sum()
    assert cohort.weights.dtype == F64 and torch.equal(cohort.weights, expected)
    assert abs(float(cohort.weights.sum()) - 1.0) < 1e-15
    assert NO_ORACLE.calls == [] and cohort.metrics == {}


def test_uniform_simple_and_scheme2_weights() -> None:
    p = weights_of([1] * 8)  # 1/8, exact
    simple = make_config(8, 4, uniform=UniformConfig(weighting="simple"))
    cohort = UniformSampler(simple, weights_of([5, 1, 3, 8, 2, 7, 4, 6])).sample(
        1, W, selection(0, 1), NO_ORACLE
    )
    assert torch.equal(cohort.weights, torch.full((4,), 0.25, dtype=F64))
    scheme2 = make_config(8, 4, uniform=UniformConfig(weighting="scheme2"))
    cohort = UniformSampler(scheme2, p).sample(1, W, selection(0, 1), NO_ORACLE)
    assert torch.equal(cohort.weights, torch.full((4,), 0.25, dtype=F64))  # (1/8) * 8 / 4 = 1/m
    sizes = [5, 1, 3, 8, 2, 7, 4, 6]
    cohort = UniformSampler(scheme2, weights_of(sizes)).sample(1, W, selection(0, 1), NO_ORACLE)
    assert torch.equal(cohort.weights, weights_of(sizes)[cohort.clients] * 8 / 4)


def test_li_et_al_schemes_on_unequal_client_sizes() -> None:
    """Li et al. 2020 Sec. 3.3 with unequal p_k (N = 5, K = 2): scheme 2 is accepted, its
    weights are p_k N/K (not summing to 1), and over all C(5, 2) cohorts it is unbiased,
    E[Σ q_i v_i] = Σ p_i v_i; scheme 1 draws ∝ p_k and averages simply (c_i/K)."""
    sizes = [1, 2, 3, 4, 10]  # sums to 20: p_k are multiples of 1/20
    p = weights_of(sizes)
    config = make_config(5, 2, uniform=UniformConfig(weighting="scheme2"))
    assert UniformSampler.partition_errors(config, sizes) == []  # no longer refused
    sampler = UniformSampler(config, p)
    v = torch.tensor([3.0, -1.0, 7.0, 2.0, 5.0], dtype=F64)  # one number per client
    for seed in range(10):
        cohort = sampler.sample(1, W, selection(seed, 1), NO_ORACLE)
        assert torch.equal(cohort.weights, p[cohort.clients] * 5 / 2)  # p_k N/K
    totals, means = [], []
    for pair in itertools.combinations(range(5), 2):  # every cohort, each of chance 1/10
        q = p[list(pair)] * 5 / 2
        totals.append(float(q.sum()))
        means.append(float((q * v[list(pair)]).sum()))
    assert abs(min(totals) - 3 / 8) < 1e-12 and abs(max(totals) - 14 / 8) < 1e-12  # not 1
    assert abs(sum(means) / len(means) - float((p * v).sum())) < 1e-12  # unbiased
    rep = ReplacementSampler(make_config(5, 2, seed=4), p)
    cohort = rep.sample(3, W, selection(4, 3), NO_ORACLE)
    drawn = selection(4, 3).choice(5, size=2, replace=True, p=p.numpy()).tolist()
    assert cohort.draws == drawn
    assert cohort.weights.tolist() == [Counter(drawn)[i] / 2 for i in cohort.clients]


def test_uniform_same_round_same_cohort_other_round_other_cohort() -> None:
    sampler = UniformSampler(make_config(20, 5, seed=7), weights_of([1] * 20))
    first = sampler.sample(3, W, selection(7, 3), NO_ORACLE)
    again = sampler.sample(3, W, selection(7, 3), NO_ORACLE)
    other = sampler.sample(4, W, selection(7, 4), NO_ORACLE)
    assert first.draws == again.draws and torch.equal(first.weights, again.weights)
    assert set(first.clients) != set(other.clients)


def test_uniform_with_m_equal_n_is_full_participation_bit_for_bit() -> None:
    p = weights_of([3, 11, 7, 5, 13, 2, 9])
    config = make_config(7, 7)
    full = FullParticipation(config, p).sample(1, W, selection(0, 1), NO_ORACLE)
    uni = UniformSampler(config, p).sample(1, W, selection(0, 1), NO_ORACLE)
    assert uni.clients == full.clients and torch.equal(uni.weights, full.weights)
    assert uni.draws != uni.clients  # drawn in another order, trained in index order


# ----------------------------------------------------------------------------------- replacement
def test_replacement_duplicates_train_once_with_count_weights() -> None:
    p = torch.tensor([0.5, 0.25, 0.25], dtype=F64)
    cohort = ReplacementSampler(make_config(3, 8, seed=1), p).sample(
        5, W, selection(1, 5), NO_ORACLE
    )
    drawn = selection(1, 5).choice(3, size=8, replace=True, p=p.numpy()).tolist()
    assert cohort.draws == drawn and len(cohort.draws) == 8
    counts = Counter(drawn)
    assert max(counts.values()) > 1  # 8 draws of 3 clients: a repeat is certain
    assert cohort.clients == sorted(counts)
    assert cohort.weights.tolist() == [counts[i] / 8 for i in cohort.clients]
    assert float(cohort.weights.sum()) == 1.0  # multiples of 1/8: exact


# ----------------------------------------------------------------------------- Power-of-Choice
def test_poc_with_d_equal_m_is_sampling_proportional_to_p_without_replacement() -> None:
    p = weights_of([5, 1, 3, 8, 2, 7, 4, 6, 9, 1])
    oracle = FakeOracle(torch.arange(10, dtype=F64))
    config = make_config(10, 4, seed=3, poc=PocConfig(d=4))
    cohort = PowerOfChoice(config, p).sample(2, W, selection(3, 2), oracle)
    drawn = selection(3, 2).choice(10, size=4, replace=False, p=p.numpy()).tolist()
    assert set(cohort.clients) == set(drawn) and cohort.clients == sorted(drawn)
    assert oracle.calls == [("losses", drawn)]
    assert torch.equal(cohort.weights, torch.full((4,), 0.25, dtype=F64))


def test_poc_picks_the_m_largest_candidate_losses() -> None:
    losses = torch.tensor([4, 9, 0, 7, 2, 8, 1, 6, 3, 5], dtype=F64)  # distinct integers
    p = weights_of([1] * 10)
    oracle = FakeOracle(losses)
    cohort = PowerOfChoice(make_config(10, 3, seed=2), p).sample(1, W, selection(2, 1), oracle)
    cand = selection(2, 1).choice(10, size=6, replace=False, p=p.numpy()).tolist()  # d = 2m
    assert oracle.calls == [("losses", cand)]  # only the d candidates are asked
    expected = sorted(cand, key=lambda k: -losses[k].item())[:3]
    assert cohort.draws == expected and cohort.clients == sorted(expected)


def test_poc_equal_losses_keep_the_draw_order() -> None:
    p = weights_of([1] * 10)
    losses = torch.tensor([1, 0, 1, 0, 1, 1, 0, 1, 0, 1], dtype=F64)  # exact ties
    config = make_config(10, 3, seed=5, poc=PocConfig(d=8))
    for table, t in ((torch.ones(10, dtype=F64), 1), (losses, 2)):
        cohort = PowerOfChoice(config, p).sample(t, W, selection(5, t), FakeOracle(table))
        cand = selection(5, t).choice(10, size=8, replace=False, p=p.numpy()).tolist()
        ones = [k for k in cand if table[k] == 1]
        zeros = [k for k in cand if table[k] == 0]
        assert cohort.draws == (ones + zeros)[:3]
    assert len([k for k in cand if losses[k] == 1]) > 3  # the ties decided the second cohort


def test_poc_uniform_first_round_asks_nothing() -> None:
    p = weights_of([5, 1, 3, 8, 2, 7, 4, 6, 9, 1])
    oracle = FakeOracle(torch.arange(10, dtype=F64))
    sampler = PowerOfChoice(make_config(10, 4, seed=6, poc=PocConfig(first_round="uniform")), p)
    cohort = sampler.sample(1, W, selection(6, 1), oracle)
    assert oracle.calls == []
    assert cohort.draws == selection(6, 1).choice(10, size=4, replace=False).tolist()
    assert torch.equal(cohort.weights, torch.full((4,), 0.25, dtype=F64))
    sampler.sample(2, W, selection(6, 2), oracle)
    assert [name for name, _ in oracle.calls] == ["losses"]


def test_poc_cpow_d_asks_batch_losses_from_the_selection_stream() -> None:
    p = weights_of([1] * 10)
    oracle = FakeOracle(torch.tensor([4, 9, 0, 7, 2, 8, 1, 6, 3, 5], dtype=F64))
    rng = selection(8, 3)
    PowerOfChoice(make_config(10, 2, seed=8, poc=PocConfig(variant="cpow-d")), p).sample(
        3, W, rng, oracle
    )
    replica = selection(8, 3)
    cand = replica.choice(10, size=4, replace=False, p=p.numpy()).tolist()
    replica.random(4)
    assert oracle.calls == [("batch_losses", cand)]
    assert rng.bit_generator.state == replica.bit_generator.state


def test_poc_config_errors_on_d_outside_m_to_n() -> None:
    assert PowerOfChoice.config_errors(make_config(10, 4, poc=PocConfig(d=4))) == []
    for d in (3, 11):
        (msg,) = PowerOfChoice.config_errors(make_config(10, 4, poc=PocConfig(d=d)))
        assert "poc.d" in msg and "4..10" in msg


# ---------------------------------------------------------------------------------- DivFL greedy
def reference_greedy(dist: list[list[int]], m: int, s: int | None, rng) -> list[int]:
    """§7.3's pseudo-code in plain Python, on integer distances (exact sums)."""
    n = len(dist)
    remaining, cmin, picked = list(range(n)), [float("inf")] * n, []
    for _ in range(m):
        cand = (
            remaining
            if s is None or s >= len(remaining)
            else list(rng.choice(remaining, size=s, replace=False))
        )
        scores = [sum(min(cmin[k], dist[k][j]) for k in range(n)) for j in cand]
        j = cand[scores.index(min(scores))]
        picked.append(int(j))
        remaining.remove(j)
        cmin = [min(cmin[k], dist[k][j]) for k in range(n)]
    return picked


def integer_distances(n: int, seed: int) -> torch.Tensor:
    a = torch.tensor(np.random.default_rng(seed).integers(1, 20, size=(n, n)), dtype=F64)
    d = a + a.T
    d.fill_diagonal_(0)
    return d


def test_greedy_with_m_1_returns_the_medoid() -> None:
    dist = integer_distances(9, seed=0)
    sums = dist.sum(dim=0)
    medoid = int(torch.argmin(sums))
    assert (sums == sums[medoid]).sum() == 1  # a unique medoid: no tie decides this
    assert greedy(dist, 1, None, np.random.default_rng(0)) == [medoid]


def test_greedy_two_clusters_finds_the_known_optimum() -> None:
    # cluster A: centre 4, members 0, 2, 6; cluster B: centre 1, members 3, 5.
    # centre-member 1, member-member 2, across clusters 10.
    cluster = {4: "A", 0: "A", 2: "A", 6: "A", 1: "B", 3: "B", 5: "B"}
    centres = {4, 1}
    dist = torch.zeros(7, 7, dtype=F64)
    for k, j in itertools.product(range(7), repeat=2):
        if k != j:
            same = cluster[k] == cluster[j]
            dist[k, j] = (1 if k in centres or j in centres else 2) if same else 10
    assert greedy(dist, 2, None, np.random.default_rng(0)) == [4, 1]

    def cost(s):
        return float(dist[:, list(s)].min(dim=1).values.sum())

    best = min(cost(s) for s in itertools.combinations(range(7), 2))
    assert [set(s) for s in itertools.combinations(range(7), 2) if cost(s) == best] == [{1, 4}]


def test_greedy_stochastic_with_the_whole_ground_set_is_exact() -> None:
    dist = integer_distances(12, seed=1)
    exact = greedy(dist, 5, None, np.random.default_rng(0))
    assert exact == reference_greedy(dist.long().tolist(), 5, None, None)
    for s in (12, 20):
        rng = np.random.default_rng(3)
        before = rng.bit_generator.state
        assert greedy(dist, 5, s, rng) == exact
        assert rng.bit_generator.state == before  # R = V: no draw


def test_greedy_stochastic_subsample_is_reproducible_and_follows_the_spec() -> None:
    dist = integer_distances(15, seed=2)  # integer ties are resolved as in the pseudo-code
    runs = [greedy(dist, 4, 3, np.random.default_rng(11)) for _ in range(2)]
    assert runs[0] == runs[1] and len(set(runs[0])) == 4
    ref = reference_greedy(dist.long().tolist(), 4, 3, np.random.default_rng(11))
    assert runs[0] == ref


def test_divfl_sample_sizes() -> None:
    assert sample_size(DivFLConfig(), 3, 50) == 5
    assert sample_size(DivFLConfig(), 8, 50) == 8
    assert sample_size(DivFLConfig(sample="theory"), 5, 50) == 47  # ceil(10 ln 100)
    assert sample_size(DivFLConfig(greedy="exact"), 5, 50) is None


# --------------------------------------------------------------------------------- DivFL sampler
N_DIV, D_DIV = 10, 4


def divfl_oracle() -> FakeOracle:
    base = torch.tensor(np.random.default_rng(0).normal(size=(N_DIV, D_DIV)))
    return FakeOracle(torch.zeros(N_DIV, dtype=F64), base)


def model(t: int, dtype=F64) -> torch.Tensor:
    return torch.tensor(np.random.default_rng(100 + t).normal(size=D_DIV)).to(dtype)


def test_divfl_sweeps_once_then_asks_only_the_selected() -> None:
    p = weights_of([5, 1, 3, 8, 2, 7, 4, 6, 9, 1])
    config = make_config(N_DIV, 3, seed=9)
    oracle = divfl_oracle()
    sampler = DivFL(config, p)
    sel_rng = selection(9, 1)
    first = sampler.sample(1, model(1), sel_rng, oracle)
    assert oracle.calls == [("gradients", list(range(N_DIV)))]
    assert sel_rng.bit_generator.state == selection(9, 1).bit_generator.state  # unused
    u1 = sampler.U.clone()
    assert sampler.Dst.shape == (packed_size(N_DIV),)  # the packed triangle, not [N, N]
    dst1 = unpack(sampler.Dst)
    assert torch.equal(dst1, distance_rows(u1, list(range(N_DIV))))
    assert first.draws == greedy(dst1, 3, 3, numpy_rng(9, "divfl_greedy", 1))
    assert torch.equal(first.weights, p[first.clients] / p[first.clients].sum())

    second = sampler.sample(2, model(2), selection(9, 2), oracle)
    assert second.draws == greedy(dst1, 3, 3, numpy_rng(9, "divfl_greedy", 2))
    assert oracle.calls[1:] == [("gradients", second.draws)]
    fresh = oracle.gradients(second.draws, model(2))
    for k in range(N_DIV):
        row = fresh[second.draws.index(k)] if k in second.draws else u1[k]
        assert torch.equal(sampler.U[k], row)  # selected: at w_2; the others stale
    dst2 = unpack(sampler.Dst)
    assert torch.equal(dst2, distance_rows(sampler.U, list(range(N_DIV))))
    assert torch.equal(dst2, dst2.T) and bool((dst2.diagonal() == 0).all())
    stale = [k for k in range(N_DIV) if k not in second.draws]
    assert torch.equal(dst2[stale][:, stale], dst1[stale][:, stale])


def test_divfl_state_dict_resumes_identically() -> None:
    p = weights_of([1] * N_DIV)
    config = make_config(N_DIV, 3, seed=5, divfl=DivFLConfig(weighting="simple"))
    sampler, oracle = DivFL(config, p), divfl_oracle()
    for t in (1, 2):
        sampler.sample(t, model(t, torch.float32), selection(5, t), oracle)
    state = sampler.state_dict()
    assert state["U"].dtype == torch.float32 and state["Dst_packed"].dtype == F64
    assert state["Dst_packed"].shape == (packed_size(N_DIV),) and "Dst" not in state
    resumed, resumed_oracle = DivFL(config, p), divfl_oracle()
    resumed.load_state_dict(state)
    a = sampler.sample(3, model(3, torch.float32), selection(5, 3), oracle)
    b = resumed.sample(3, model(3, torch.float32), selection(5, 3), resumed_oracle)
    assert resumed_oracle.calls == [("gradients", b.draws)]  # no second sweep
    assert a.draws == b.draws and torch.equal(a.weights, b.weights)
    assert torch.equal(a.weights, torch.full((3,), 1 / 3, dtype=F64))
    assert torch.equal(sampler.Dst, resumed.Dst) and torch.equal(sampler.U, resumed.U)
    fresh = DivFL(config, p)
    fresh.load_state_dict({})
    assert fresh.U is None and fresh.state_dict() == {}


def test_divfl_resumes_identically_from_a_checkpoint_with_the_whole_table() -> None:
    """A checkpoint written before the table was packed holds ``Dst`` ``[N, N]`` (the table of
    the current ``U``, as every version kept it): it is packed when loaded and the run goes on
    exactly as the uninterrupted one, draws, weights, ``U`` and table, for two more rounds."""
    p = weights_of([5, 1, 3, 8, 2, 7, 4, 6, 9, 1])
    config = make_config(N_DIV, 3, seed=4)
    sampler, oracle = DivFL(config, p), divfl_oracle()
    for t in (1, 2):
        sampler.sample(t, model(t, torch.float32), selection(4, t), oracle)
    u = sampler.U.clone()
    old = {"U": u, "Dst": distance_table(u)}  # what the [N, N] version's state_dict returned
    assert old["Dst"].shape == (N_DIV, N_DIV) and torch.equal(pack(old["Dst"]), sampler.Dst)
    resumed, resumed_oracle = DivFL(config, p), divfl_oracle()
    resumed.load_state_dict(old)
    assert resumed.Dst.shape == (packed_size(N_DIV),)
    for t in (3, 4):
        a = sampler.sample(t, model(t, torch.float32), selection(4, t), oracle)
        b = resumed.sample(t, model(t, torch.float32), selection(4, t), resumed_oracle)
        assert a.draws == b.draws and a.clients == b.clients and torch.equal(a.weights, b.weights)
    assert resumed_oracle.calls == oracle.calls[2:]  # rounds 3 and 4: no second sweep
    assert torch.equal(sampler.U, resumed.U) and torch.equal(sampler.Dst, resumed.Dst)
    assert set(resumed.state_dict()) == {"U", "Dst_packed"}  # written back packed


# ------------------------------------------------------------------------------------- streams
@pytest.mark.parametrize("kind", ["uniform", "replacement", "poc", "divfl"])
def test_samplers_use_only_their_streams(kind: str) -> None:
    cls = {
        "uniform": UniformSampler,
        "replacement": ReplacementSampler,
        "poc": PowerOfChoice,
        "divfl": DivFL,
    }[kind]
    p = weights_of([5, 1, 3, 8, 2, 7, 4, 6, 9, 1])
    sampler = cls(make_config(N_DIV, 3, seed=2), p)
    oracle = divfl_oracle()
    oracle.table = torch.tensor([4, 9, 0, 7, 2, 8, 1, 6, 3, 5], dtype=F64)
    torch_state, np_state = torch.random.get_rng_state(), np.random.get_state()
    cohorts = [sampler.sample(t, model(t), selection(2, t), oracle).draws for t in (1, 2, 3)]
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert all(np.array_equal(a, b) for a, b in zip(np.random.get_state(), np_state, strict=True))
    assert len({tuple(c) for c in cohorts}) > 1


def test_fedavg_averages_models_when_scheme2_weights_do_not_sum_to_one():
    """Li et al.'s scheme 2 is an average of models, w_{t+1} = Σ q_i w_i with Σ q_i ≠ 1 on
    unequal client sizes; with normalised weights FedAvg's direction is Σ q_i Δ_i bit for bit."""
    from fedsweep.components.algorithms.base import weighted_sum
    from fedsweep.components.algorithms.fedavg import FedAvg

    gen = torch.Generator().manual_seed(0)
    w = torch.randn(7, generator=gen, dtype=torch.float64)
    deltas = [torch.randn(7, generator=gen, dtype=torch.float64) for _ in range(3)]
    updates = [SimpleNamespace(delta=d) for d in deltas]
    method = FedAvg.__new__(FedAvg)  # aggregate reads no state
    q = torch.tensor([0.5, 0.25, 0.125], dtype=torch.float64)  # Σ q = 0.875
    w_next = w - method.aggregate(w, updates, q, None)
    models = sum(qi * (w - d) for qi, d in zip(q.tolist(), deltas, strict=True))
    assert torch.allclose(w_next, models, rtol=0, atol=1e-12)
    # normalised weights (float rounding only): exactly the weighted sum of the updates
    q = torch.tensor([0.1, 0.7, 0.2], dtype=torch.float64)
    assert torch.equal(method.aggregate(w, updates, q, None), weighted_sum(deltas, q))
