"""DivFL (docs/algorithms.md §7.3), issue 32: the distance table in bounded memory, bit for bit
the row-by-row difference norms of earlier versions, kept as its packed upper triangle (item 7),
and the greedy's exact ties: the first candidate in the sampled order wins, whatever order a
float sum adds the terms in (item 18).
"""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from fedsweep.components.samplers import divfl
from fedsweep.components.samplers.base import CohortConfig
from fedsweep.components.samplers.divfl import (
    DivFL,
    DivFLConfig,
    columns,
    distance_rows,
    distance_table,
    greedy,
    pack,
    packed_distance_table,
    packed_size,
    unpack,
    write_rows,
)

F64 = torch.float64


def row_by_row(u: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """The distances as earlier versions computed them: one ``N × d`` difference per row."""
    u64 = u.to(F64)
    return torch.stack([(u64 - u64[k]).norm(dim=1) for k in rows])


# ----------------------------------------------------------------------- item 7: bit for bit
@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("n, d", [(1, 3), (2, 1), (37, 785), (64, 33), (25, 4099)])
@pytest.mark.parametrize("block", [7, 500, divfl.BLOCK_ELEMENTS])
def test_blocked_distances_equal_the_row_by_row_norms_bit_for_bit(dtype, n, d, block):
    """Rows of widely different scales (1e-3 .. 1e3), every block shape from one pair per block
    to the whole table in one: the table, its packed triangle, a subset of its rows and the
    symmetry are exact."""
    g = torch.Generator().manual_seed(n * 1000 + d)
    scale = torch.logspace(-3, 3, n, dtype=F64)[:, None]
    u = (torch.randn(n, d, generator=g, dtype=F64) * scale).to(dtype)
    expected = row_by_row(u, list(range(n)))
    table = distance_table(u, block)
    assert table.dtype == F64 and torch.equal(table, expected)
    assert torch.equal(table, table.T) and bool((table.diagonal() == 0).all())
    rows = torch.randperm(n, generator=g)[: max(1, n // 3)].tolist()
    assert torch.equal(distance_rows(u, rows, block), expected[rows])
    packed = packed_distance_table(u, block)
    assert packed.shape == (packed_size(n),) and torch.equal(packed, pack(expected))
    assert torch.equal(unpack(packed), expected)


def test_packed_columns_and_row_writes_are_those_of_the_whole_table():
    """Columns gathered from the packed triangle (any order, repeats, the diagonal; int32 or
    int64 positions; float64 or float32) are the table's; writing refreshed rows of clients (in
    any order, adjacent ones, the first and the last) into the packed triangle gives the table's
    row-and-column writes, packed."""
    g = torch.Generator().manual_seed(3)
    for n in (1, 2, 3, 17):
        u = torch.randn(n, 6, generator=g)
        table = distance_table(u)
        packed = packed_distance_table(u)
        index = torch.randint(0, n, (2 * n,), generator=g)
        block = columns(packed, index)
        assert block.is_contiguous() and torch.equal(block, table[:, index])
        wide = divfl.row_offsets(n).to(torch.int64)  # the positions of N > 65,536
        assert torch.equal(columns(packed, index, wide), block)
        assert torch.equal(columns(packed.float(), index, wide), block.float())
        draws = list(dict.fromkeys([n - 1, 0, n // 2, max(0, n // 2 - 1)]))  # unordered
        u[draws] = torch.randn(len(draws), 6, generator=g)
        rows = distance_rows(u, draws)
        table[draws, :] = rows
        table[:, draws] = rows.T
        write_rows(packed, draws, rows)
        assert torch.equal(packed, pack(table)) and torch.equal(packed, packed_distance_table(u))


def test_greedy_on_the_packed_triangle_picks_and_scores_as_on_the_whole_table(monkeypatch):
    """Random tables of float32 gradients, rings (ties everywhere) and equal gradients, exact
    and stochastic greedy, narrow and wide blocks: the same picks; and every block of scores the
    greedy computes is the whole table's, bit for bit."""
    seen: dict[str, list[torch.Tensor]] = {"dense": [], "packed": []}
    real = divfl._first_exact_minimum

    def spy(read, cmin, index, scores):
        seen["packed" if read.base is not None else "dense"].append(scores.clone())
        return real(read, cmin, index, scores)

    monkeypatch.setattr(divfl, "_first_exact_minimum", spy)
    for seed in range(30):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 40))
        if seed % 3 == 0:
            dist = ring(n, rng)
        elif seed % 3 == 1:
            dist = distance_table(torch.tensor(rng.normal(size=(n, 7)), dtype=torch.float32))
        else:
            groups = torch.tensor(rng.normal(size=(3, 5)))
            dist = distance_table(groups[torch.tensor(rng.integers(0, 3, size=n))])
        packed = pack(dist)
        for s in (None, max(1, n // 4)):
            for block in (n, 10 * n, divfl.BLOCK_ELEMENTS):
                want = greedy(dist, min(n, 6), s, np.random.default_rng(seed), block)
                got = greedy(packed, min(n, 6), s, np.random.default_rng(seed), block)
                assert got == want, (seed, s, block)
    assert len(seen["packed"]) == len(seen["dense"]) > 0
    for a, b in zip(seen["dense"], seen["packed"], strict=True):
        assert torch.equal(a, b)


# ----------------------------------------------------------------------- item 7: the memory
class Allocations(TorchDispatchMode):
    """Every storage an op creates (an output sharing memory with none of its inputs): views and
    ``out=`` results are not allocations. Kernel-internal scratch is not seen."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[int, int, str]] = []  # (data_ptr, nbytes, op)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = {
            t.untyped_storage().data_ptr()
            for t in tree_flatten((args, kwargs))[0]
            if isinstance(t, torch.Tensor)
        }
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                if storage.data_ptr() not in inputs:
                    self.events.append((storage.data_ptr(), storage.nbytes(), str(func)))
        return out

    def largest(self, *state: torch.Tensor) -> tuple[int, str]:
        """The largest allocation that is not one of the tensors ``state`` (bytes, op)."""
        keep = {(s.untyped_storage().data_ptr(), s.untyped_storage().nbytes()) for s in state}
        rest = [(b, op) for ptr, b, op in self.events if (ptr, b) not in keep]
        return max(rest, default=(0, ""))


class TableOracle:
    """Gradients from a fixed ``[N, d]`` table."""

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table

    def gradients(self, clients, w):
        return self.table[clients].to(w.dtype)


def test_divfl_holds_its_state_and_blocks_of_bounded_size(monkeypatch):
    """A DivFL sweep round (the whole table) and an update round (the selected rows) with a
    4,000-byte block: besides U ``[N, d]`` and the packed Dst ``[N(N−1)/2]`` no op allocates more
    than the block, where the row-by-row computation allocated ``N × d`` float64 (48,000 bytes)
    per row, and nothing holds the ``[N, N]`` table (180,000 bytes)."""
    n, d, m, block = 150, 40, 3, 500
    monkeypatch.setattr(divfl, "BLOCK_ELEMENTS", block, raising=False)
    config = SimpleNamespace(
        seed=0,
        cohort=CohortConfig(size=m),
        data=SimpleNamespace(num_clients=n),
        divfl=DivFLConfig(greedy="exact"),
    )
    u = torch.randn(n, d, generator=torch.Generator().manual_seed(1), dtype=torch.float32)
    sampler = DivFL(config, torch.full((n,), 1 / n, dtype=F64))
    oracle, rng = TableOracle(u), np.random.default_rng(0)
    for t, w in ((1, torch.zeros(d)), (2, torch.ones(d))):
        with Allocations() as seen:
            sampler.sample(t, w, rng, oracle)
        assert (packed_size(n),) == tuple(sampler.Dst.shape)
        size, op = seen.largest(sampler.U, sampler.Dst)
        assert size <= 8 * max(block, d, n), f"round {t}: {op} allocated {size} bytes"
    assert torch.equal(unpack(sampler.Dst), row_by_row(sampler.U, list(range(n))))


@pytest.mark.slow
def test_distance_scratch_is_bounded_by_the_block_not_by_n():
    """The table of 300 clients × 50 features with a 1,000-element block: the largest
    allocation besides the table is 8,000 bytes (a 300 × 50 difference would be 120,000), for
    the packed table and the greedy on it too."""
    u = torch.randn(300, 50, generator=torch.Generator().manual_seed(2))
    with Allocations() as seen:
        table = distance_table(u, 1000)
    assert seen.largest(table)[0] <= 8 * 1000
    with Allocations() as seen:
        rows = distance_rows(u, [3, 299, 0], 1000)
    assert seen.largest(rows)[0] <= 8 * 1000
    with Allocations() as seen:
        greedy(table, 5, None, np.random.default_rng(0), 1000)
    assert seen.largest()[0] <= 8 * 1000
    with Allocations() as seen:
        packed = packed_distance_table(u, 1000)
    assert seen.largest(packed)[0] <= 8 * 1000
    with Allocations() as seen:
        picks = greedy(packed, 5, None, np.random.default_rng(0), 1000)
    assert seen.largest()[0] <= 8 * 1000
    assert picks == greedy(table, 5, None, np.random.default_rng(0), 1000)


@pytest.mark.slow
def test_bench_row_measures_the_build_in_a_fresh_process():
    """``make bench``'s DivFL row (600 clients x 785 features, one thread): the build's peak RSS
    above the RSS before it is the 1.4 MB packed table plus at most the scratch bound (and 8 MiB
    of allocator slack), where the row-by-row build took about 100 MB at 1,000 clients."""
    from fedsweep.bench import bench_divfl

    row = bench_divfl(600, 785, threads=1)
    assert row["clients"] == 600 and row["features"] == 785 and row["threads"] == 1
    assert row["table_bytes"] == 600 * 599 // 2 * 8
    assert row["scratch_bound_bytes"] == 4 * divfl.BLOCK_ELEMENTS * 8
    assert 0 <= row["build_bytes"] <= row["table_bytes"] + row["scratch_bound_bytes"] + (8 << 20)


# ------------------------------------------------------------------------- item 18: the ties
def exact_greedy(dist: torch.Tensor, m: int, s: int | None, rng) -> list[int]:
    """§7.3's STOCHASTIC_GREEDY in plain Python on the exact values of ``dist`` (Fractions):
    the first minimiser in R's order."""
    n = dist.shape[0]
    exact = [[Fraction(x) for x in row] for row in dist.tolist()]
    remaining, cmin, picked = list(range(n)), [None] * n, []  # None: +inf
    for _ in range(m):
        if s is None or s >= len(remaining):
            cand = remaining
        else:
            cand = rng.choice(remaining, size=s, replace=False).tolist()
        scores = [
            sum(exact[k][j] if cmin[k] is None else min(cmin[k], exact[k][j]) for k in range(n))
            for j in cand
        ]
        j = cand[scores.index(min(scores))]
        picked.append(j)
        remaining.remove(j)
        cmin = [exact[k][j] if cmin[k] is None else min(cmin[k], exact[k][j]) for k in range(n)]
    return picked


def ring(n: int, rng: np.random.Generator) -> torch.Tensor:
    """Clients evenly spaced on a ring: ``Dst[k, j] = c[(k − j) mod N]`` with ``c`` symmetric,
    ``c_0 = 0`` and random float64 values over six orders of magnitude. Every column holds the
    same distances in another order (equal first-pick scores), and after a pick the candidates
    at equal distance on either side of it tie again."""
    half = rng.uniform(0.1, 10, size=n // 2 + 1) * np.exp(rng.uniform(-7, 7, size=n // 2 + 1))
    c = np.array([0.0] + [half[min(i, n - i)] for i in range(1, n)])
    return torch.tensor(c[(np.arange(n)[:, None] - np.arange(n)[None, :]) % n])


def float_scores(dist: torch.Tensor, cand: list[int]) -> torch.Tensor:
    """First-pick scores as a plain float64 sum over the rows (what the greedy compared)."""
    return dist[:, torch.tensor(cand)].sum(dim=0)


def test_an_exact_tie_goes_to_the_first_candidate_not_to_the_float_rounding():
    """A ring of 11 clients: the eleven column sums are equal exactly, but the float sums round
    them apart and put client 9 first; the greedy picks client 0 (the first of R = V),
    and, from a sampled R, R's first client."""
    dist = ring(11, np.random.default_rng(5))
    exact_sums = {sum(Fraction(x) for x in dist[:, j].tolist()) for j in range(11)}
    assert len(exact_sums) == 1  # one score: every client ties
    naive = float_scores(dist, list(range(11)))
    assert int(torch.argmin(naive)) == 9  # the float sum prefers a later client
    assert greedy(dist, 1, None, np.random.default_rng(0)) == [0]
    rng = np.random.default_rng(7)
    drawn = np.random.default_rng(7).choice(list(range(11)), size=4, replace=False).tolist()
    assert greedy(dist, 1, 4, rng) == [drawn[0]]


def test_greedy_agrees_with_the_exact_reference_on_rings_and_random_tables():
    """120 rings (ties at every step), 40 random symmetric tables (no ties) and 20 tables of
    clients with equal gradients (scores of exactly 0 once every group has a pick), exact and
    stochastic greedy, against the Fraction reference: the same picks in the same order."""
    for seed in range(180):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(4, 16))
        m = min(n, 4)
        if seed < 120:
            dist = ring(n, rng)
        elif seed < 160:
            a = torch.tensor(rng.uniform(0, 1, size=(n, n)) * np.exp(rng.uniform(-5, 5, (n, n))))
            dist = (a + a.T).fill_diagonal_(0)
        else:
            groups = torch.tensor(rng.normal(size=(3, 5)))
            dist = distance_table(groups[torch.tensor(rng.integers(0, 3, size=n))])
            m = n
        for s in (None, max(1, n // 3)):
            got = greedy(dist, m, s, np.random.default_rng(seed))
            assert got == exact_greedy(dist, m, s, np.random.default_rng(seed)), (seed, s)


def test_near_ties_that_are_not_ties_keep_the_exact_order():
    """Two candidates whose exact sums differ by less than the float sums can resolve (6 + 2⁻⁶⁰
    and 6 + 2⁻⁵¹ + 2⁻⁶⁰ both round to about 6): the exactly smaller one wins."""
    big, tiny = 1.0, 2.0**-60
    dist = torch.tensor(
        [
            [0.0, big, big + 2 * 2.0**-52, 5.0],
            [big, 0.0, tiny, 5.0],
            [big + 2 * 2.0**-52, tiny, 0.0, 5.0],
            [5.0, 5.0, 5.0, 0.0],
        ],
        dtype=F64,
    )
    # column 1: 1 + 0 + 2^-60 + 5; column 2: (1 + 2^-51) + 2^-60 + 0 + 5: 1 is smaller exactly
    assert greedy(dist, 1, None, np.random.default_rng(0)) == exact_greedy(dist, 1, None, None)
    assert exact_greedy(dist, 1, None, None) == [1]
