"""Partitions of docs/algorithms.md §9 (Appendix B item 7) on synthetic and real MNIST labels."""

from __future__ import annotations

import gzip
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from fedsweep.data import partitions as P

MNIST_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
CASE_NS = (1, 5, 10, 15, 20)


# ----------------------------------------------------------------------------- fixtures/helpers


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    """3,000 labels 0..9 in a known shuffled order (every class present)."""
    y = np.repeat(np.arange(10), 300)
    return np.random.default_rng(12345).permutation(y).astype(np.int64)


def _check_cover(parts: list[np.ndarray], n: int) -> None:
    """Every index 0..n-1 exactly once; int64, ascending inside each client."""
    for part in parts:
        assert part.dtype == np.int64
        assert np.all(np.diff(part) > 0)
    allidx = np.concatenate(parts) if parts else np.empty(0, np.int64)
    assert allidx.size == n
    np.testing.assert_array_equal(np.sort(allidx), np.arange(n))


def _label_sets(parts: list[np.ndarray], y: np.ndarray) -> list[set[int]]:
    return [set(np.unique(y[p]).tolist()) for p in parts]


def _oracle(y: np.ndarray, n_nodes: int, case: int, num_labels: int = 10) -> list[list[int]]:
    """Literal per-sample re-statement of the reference rule (section 9.1), lists and loops."""
    nodes: list[list[int]] = [[] for _ in range(n_nodes)]
    l_min, l_max = 0, num_labels - 1
    h = math.ceil(min(n_nodes, num_labels) / 2)
    target = 0
    for j, label in enumerate(y.tolist()):
        if case == 1:
            target = j % n_nodes
        elif case == 2:
            target = (label - l_min) % n_nodes
        else:
            if label < (l_min + l_max) / 2:
                target = j % h
            elif n_nodes > 1:
                target = ((label - l_min) % (min(n_nodes, num_labels) - h)) + h
            else:
                target = 0
        if case in (2, 3) and n_nodes > num_labels:
            best, best_load = 0, math.inf
            for n in range(n_nodes):
                if n % num_labels == target and len(nodes[n]) < best_load:
                    best, best_load = n, len(nodes[n])
            target = best
        nodes[target].append(j)
    return nodes


# ----------------------------------------------------------------------------- coverage


@pytest.mark.parametrize("n_clients", CASE_NS)
@pytest.mark.parametrize("scheme", ["case1", "case2", "case3", "dirichlet", "iid"])
def test_every_index_exactly_once(labels: np.ndarray, scheme: str, n_clients: int) -> None:
    options = {"alpha": 0.5} if scheme == "dirichlet" else {}
    parts = P.make_partition(scheme, labels, n_clients, rng=np.random.default_rng(0), **options)
    assert len(parts) == n_clients
    _check_cover(parts, labels.size)


@pytest.mark.parametrize("scheme", ["case1", "case2", "case3"])
def test_cases_are_deterministic_and_seed_free(labels: np.ndarray, scheme: str) -> None:
    a = P.make_partition(scheme, labels, 15, rng=None)
    b = P.make_partition(scheme, labels, 15, rng=np.random.default_rng(99))
    assert P.partition_hash(a) == P.partition_hash(b)


@pytest.mark.parametrize("n_clients", CASE_NS)
@pytest.mark.parametrize("case", [1, 2, 3])
def test_cases_match_per_sample_oracle(case: int, n_clients: int) -> None:
    y = np.random.default_rng(7).integers(0, 10, size=2500)
    fn = {1: P.case1, 2: P.case2, 3: P.case3}[case]
    parts = fn(y, n_clients)
    expected = _oracle(y, n_clients, case)
    assert [p.tolist() for p in parts] == expected


def test_oracle_match_with_missing_classes() -> None:
    """num_classes fixes L = 10 even when the sample only has labels 0..7."""
    y = np.random.default_rng(3).integers(0, 8, size=1200)
    for n_clients in CASE_NS:
        assert [p.tolist() for p in P.case2(y, n_clients, num_classes=10)] == _oracle(
            y, n_clients, 2
        )
        assert [p.tolist() for p in P.case3(y, n_clients, num_classes=10)] == _oracle(
            y, n_clients, 3
        )


# ----------------------------------------------------------------------------- case 1/2/3


def test_case1_roundrobin_and_shuffled(labels: np.ndarray) -> None:
    rr = P.case1(labels, 5)
    for c, part in enumerate(rr):
        np.testing.assert_array_equal(part, np.arange(c, labels.size, 5))
    sh1 = P.case1(labels, 5, mode="shuffled", rng=np.random.default_rng(1))
    sh2 = P.case1(labels, 5, mode="shuffled", rng=np.random.default_rng(1))
    sh3 = P.case1(labels, 5, mode="shuffled", rng=np.random.default_rng(2))
    _check_cover(sh1, labels.size)
    assert [p.size for p in sh1] == [p.size for p in rr]
    assert P.partition_hash(sh1) == P.partition_hash(sh2)
    assert P.partition_hash(sh1) != P.partition_hash(sh3)
    assert P.partition_hash(sh1) != P.partition_hash(rr)
    with pytest.raises(ValueError, match="seeded rng"):
        P.case1(labels, 5, mode="shuffled")
    with pytest.raises(ValueError, match="bogus"):
        P.case1(labels, 5, mode="bogus")


def test_case2_structure(labels: np.ndarray) -> None:
    assert _label_sets(P.case2(labels, 5), labels) == [{c, c + 5} for c in range(5)]
    assert _label_sets(P.case2(labels, 10), labels) == [{c} for c in range(10)]
    assert _label_sets(P.case2(labels, 1), labels) == [set(range(10))]
    parts20 = P.case2(labels, 20)
    assert _label_sets(parts20, labels) == [{c % 10} for c in range(20)]
    for lab in range(10):  # split alternately between l and l+10
        assert parts20[lab].size == 150 and parts20[lab + 10].size == 150
    parts15 = P.case2(labels, 15)
    assert _label_sets(parts15, labels) == [{c % 10} for c in range(15)]
    assert [p.size for p in parts15] == [150] * 5 + [300] * 5 + [150] * 5


def test_case3_structure(labels: np.ndarray) -> None:
    first = set(range(5))
    parts5 = P.case3(labels, 5)
    sets5 = _label_sets(parts5, labels)
    assert sets5 == [first, first, first, {6, 8}, {5, 7, 9}]
    j = np.arange(labels.size)
    for c in range(3):  # IID share is j mod 3 over labels 0-4
        np.testing.assert_array_equal(parts5[c], j[(labels < 5) & (j % 3 == c)])
    assert _label_sets(P.case3(labels, 10), labels) == [first] * 5 + [{5}, {6}, {7}, {8}, {9}]
    assert _label_sets(P.case3(labels, 15), labels) == (
        [first] * 5 + [{5}, {6}, {7}, {8}, {9}] + [first] * 5
    )
    parts20 = P.case3(labels, 20)
    assert _label_sets(parts20, labels) == (
        [first] * 5 + [{5}, {6}, {7}, {8}, {9}] + [first] * 5 + [{5}, {6}, {7}, {8}, {9}]
    )
    assert all(parts20[lab].size == parts20[lab + 10].size == 150 for lab in range(5, 10))
    (single,) = P.case3(labels, 1)
    np.testing.assert_array_equal(single, np.arange(labels.size))


def test_case3_odd_num_classes_midpoint() -> None:
    """L = 9: (l_min + l_max)/2 = 4, so labels 0-3 are the first half and 4 the second."""
    y = np.random.default_rng(0).permutation(np.arange(9 * 20) % 9)
    parts = P.case3(y, 5, num_classes=9)
    assert _label_sets(parts, y)[:3] == [{0, 1, 2, 3}] * 3
    assert set().union(*_label_sets(parts, y)[3:]) == {4, 5, 6, 7, 8}
    assert [p.tolist() for p in parts] == _oracle(y, 5, 3, num_labels=9)


def test_label_validation() -> None:
    with pytest.raises(ValueError, match="out of range"):
        P.case2(np.array([0, 1, 12]), 5, num_classes=10)
    with pytest.raises(ValueError, match=">= 0"):
        P.case2(np.array([0, -1]), 2)
    with pytest.raises(ValueError, match="positive integer"):
        P.case1(np.array([0, 1]), 0)


# ----------------------------------------------------------------------------- dirichlet


def _cap_respected(parts: list[np.ndarray], y: np.ndarray, n_clients: int) -> bool:
    """Classes are dealt in order 0..C-1 and a client at >= |D|/N gets nothing more (9.2)."""
    cap = y.size / n_clients
    for part in parts:
        ly = y[part]
        for c in np.unique(ly):
            if np.count_nonzero(ly < c) >= cap:
                return False
    return True


def test_dirichlet_properties(labels: np.ndarray) -> None:
    parts = P.dirichlet(labels, 10, alpha=0.1, rng=np.random.default_rng(5))
    sizes = np.array([p.size for p in parts])
    assert sizes.sum() == labels.size
    assert sizes.min() >= 10
    _check_cover(parts, labels.size)
    assert _cap_respected(parts, labels, 10)
    # alpha = 0.1 really skews: most clients miss some labels
    assert sum(len(s) < 10 for s in _label_sets(parts, labels)) >= 5


def test_cap_checker_can_fail(labels: np.ndarray) -> None:
    """Client 0 holds all of class 0 and 1 (1/5 of |D| after class 0 is past the cap of 1/10)."""
    parts = (
        [np.flatnonzero(labels <= 1)]
        + [np.flatnonzero(labels == c) for c in range(2, 10)]
        + [np.empty(0, np.int64)]
    )
    assert not _cap_respected(parts, labels, 10)


def test_dirichlet_seeded(labels: np.ndarray) -> None:
    def run(seed: int) -> str:
        return P.partition_hash(P.dirichlet(labels, 8, 0.5, np.random.default_rng(seed)))

    assert run(1) == run(1)
    assert run(1) != run(2)
    assert P.partition_hash(P.dirichlet(labels, 8, 0.5, 1)) == run(1)  # int seed accepted
    with pytest.raises(ValueError, match="seeded rng"):
        P.dirichlet(labels, 8, 0.5, None)
    with pytest.raises(ValueError, match="alpha"):
        P.dirichlet(labels, 8, 0.0, 1)


def test_dirichlet_attempt_cap_warns_and_keeps_best(labels: np.ndarray) -> None:
    with pytest.warns(RuntimeWarning, match="D3"):
        parts = P.dirichlet(labels, 10, 0.5, np.random.default_rng(0), min_size=301, max_attempts=5)
    _check_cover(parts, labels.size)  # 301 * 10 > 3000: impossible, still a full split
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P.dirichlet(labels, 10, 100.0, np.random.default_rng(0), max_attempts=5)


def test_dirichlet_tiny_alpha_never_nan() -> None:
    y = np.arange(2000) % 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        parts = P.dirichlet(y, 20, 0.001, np.random.default_rng(0), max_attempts=3)
    _check_cover(parts, y.size)


# ----------------------------------------------------------------------------- shards / iid


def test_shards(labels: np.ndarray) -> None:
    n_clients = 10
    parts = P.shards(labels, n_clients, np.random.default_rng(0))
    shard_size = labels.size // (2 * n_clients)  # 150
    assert [p.size for p in parts] == [2 * shard_size] * n_clients
    # shard id of every sample = its rank in the STABLE label sort // shard size
    rank = np.empty(labels.size, np.int64)
    rank[np.argsort(labels, kind="stable")] = np.arange(labels.size)
    used: list[int] = []
    for part in parts:
        ids, counts = np.unique(rank[part] // shard_size, return_counts=True)
        assert ids.size == 2 and np.all(counts == shard_size)
        used += ids.tolist()
    assert sorted(used) == list(range(2 * n_clients))
    same = P.shards(labels, n_clients, np.random.default_rng(0))
    other = P.shards(labels, n_clients, np.random.default_rng(1))
    assert P.partition_hash(parts) == P.partition_hash(same) != P.partition_hash(other)


def test_shards_remainder_and_spc(labels: np.ndarray) -> None:
    parts = P.shards(labels[:2999], 7, 3, shards_per_client=3)  # 21 shards of 142, 17 dropped
    assert [p.size for p in parts] == [3 * 142] * 7
    assert np.unique(np.concatenate(parts)).size == 21 * 142


def test_iid(labels: np.ndarray) -> None:
    parts = P.iid(labels[:2999], 7, np.random.default_rng(0))
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1
    _check_cover(parts, 2999)
    again = P.iid(labels[:2999], 7, np.random.default_rng(0))
    assert P.partition_hash(parts) == P.partition_hash(again)
    assert P.partition_hash(parts) != P.partition_hash(P.iid(labels[:2999], 7, 1))


# ----------------------------------------------------------------------------- hash / dispatch


def test_partition_hash() -> None:
    a = [np.array([0, 1], np.int64), np.array([2], np.int64)]
    h = P.partition_hash(a)
    assert len(h) == 16 and int(h, 16) >= 0
    assert P.partition_hash([np.array([0, 1]), np.array([2])]) == h  # dtype-independent
    assert P.partition_hash([np.array([0]), np.array([1, 2])]) != h  # moved boundary
    assert P.partition_hash([np.array([2]), np.array([0, 1])]) != h  # swapped clients
    assert P.partition_hash(a + [np.empty(0, np.int64)]) != h  # extra empty client


def test_make_partition_dispatch_and_errors(labels: np.ndarray) -> None:
    with pytest.raises(ValueError) as info:
        P.make_partition("case4", labels, 5, rng=None)
    msg = str(info.value)
    assert "case4" in msg and all(s in msg for s in P.PARTITIONS)
    via = P.make_partition("shards", labels, 5, rng=4, shards_per_client=3)
    assert P.partition_hash(via) == P.partition_hash(P.shards(labels, 5, 4, 3))
    via = P.make_partition("case1", labels, 5, rng=4, mode="shuffled")
    assert P.partition_hash(via) == P.partition_hash(P.case1(labels, 5, "shuffled", 4))
    with pytest.raises(TypeError):
        P.make_partition("iid", labels, 5, rng=1, alpha=0.3)


def test_partition_summary(labels: np.ndarray) -> None:
    summary = P.partition_summary(P.case2(labels, 5), labels)
    assert summary[2] == {"client": 2, "size": 600, "labels": [2, 7]}


# ----------------------------------------------------------------------------- real MNIST


def _read_idx_labels(raw: Path) -> np.ndarray:
    path = raw / "train-labels-idx1-ubyte"
    data = (
        path.read_bytes()
        if path.exists()
        else gzip.decompress(path.with_suffix(".gz").read_bytes())
    )
    assert int.from_bytes(data[:4], "big") == 2049
    return np.frombuffer(data, dtype=np.uint8, offset=8).astype(np.int64)


@pytest.fixture(scope="module")
def mnist_y(real_data_dir: Path) -> np.ndarray:
    return _read_idx_labels(real_data_dir / "MNIST" / "raw")


def _expected_case_sizes(case: int, n_clients: int, y: np.ndarray) -> list[int]:
    """Section 9.1 sizes written out from the class counts (and j for the IID shares)."""
    cnt = np.bincount(y, minlength=10)
    j = np.arange(y.size)
    half = lambda k: [math.ceil(k / 2), k // 2]  # noqa: E731  (alternating split: l, l+10)
    if n_clients == 1:
        return [y.size]
    if case == 1:
        return [y.size // n_clients] * n_clients
    if case == 2:
        if n_clients == 5:
            return [int(cnt[c] + cnt[c + 5]) for c in range(5)]
        if n_clients == 10:
            return cnt.tolist()
        lo, hi = zip(*(half(int(cnt[c])) for c in range(10)), strict=True)
        if n_clients == 15:
            return list(lo[:5]) + cnt[5:].tolist() + list(hi[:5])
        return list(lo) + list(hi)
    h = math.ceil(min(n_clients, 10) / 2)
    iid = [int(np.count_nonzero((y < 5) & (j % h == c))) for c in range(h)]
    if n_clients == 5:
        return iid + [int(cnt[6] + cnt[8]), int(cnt[5] + cnt[7] + cnt[9])]
    if n_clients == 10:
        return iid + cnt[5:].tolist()
    lo_iid, hi_iid = zip(*(half(k) for k in iid), strict=True)
    if n_clients == 15:
        return list(lo_iid) + cnt[5:].tolist() + list(hi_iid)
    lo, hi = zip(*(half(int(cnt[c])) for c in range(5, 10)), strict=True)
    return list(lo_iid) + list(lo) + list(hi_iid) + list(hi)


def _expected_label_sets(case: int, n_clients: int) -> list[set[int]]:
    every, first = set(range(10)), set(range(5))
    if n_clients == 1 or case == 1:
        return [every] * n_clients
    if case == 2:
        if n_clients == 5:
            return [{c, c + 5} for c in range(5)]
        return [{c % 10} for c in range(n_clients)]
    if n_clients == 5:
        return [first] * 3 + [{6, 8}, {5, 7, 9}]
    second = [{5}, {6}, {7}, {8}, {9}]
    if n_clients == 10:
        return [first] * 5 + second
    if n_clients == 15:
        return [first] * 5 + second + [first] * 5
    return ([first] * 5 + second) * 2


@pytest.mark.realdata
def test_mnist_class_counts(mnist_y: np.ndarray) -> None:
    assert mnist_y.size == 60000
    assert np.bincount(mnist_y).tolist() == MNIST_COUNTS


@pytest.mark.realdata
def test_mnist_paper_sizes(mnist_y: np.ndarray) -> None:
    assert [p.size for p in P.case1(mnist_y, 5)] == [12000] * 5
    c2 = P.case2(mnist_y, 5)
    assert [p.size for p in c2] == [11344, 12660, 12223, 11982, 11791]
    assert _label_sets(c2, mnist_y) == [{c, c + 5} for c in range(5)]
    assert [p.size // 100 for p in c2] == [113, 126, 122, 119, 117]
    c3 = P.case3(mnist_y, 5)
    sizes = [p.size for p in c3]
    # Section 9.1 gives "≈10,199 each" (their mean); the exact j mod 3 shares are these.
    assert sizes == [10247, 10187, 10162, 11769, 17635]
    assert sum(sizes[:3]) == 30596
    assert _label_sets(c3, mnist_y) == [set(range(5))] * 3 + [{6, 8}, {5, 7, 9}]
    assert [s // 100 for s in sizes] == [102, 101, 101, 117, 176]  # spec "τ ≈ 101, 101, 101, ..."


@pytest.mark.realdata
@pytest.mark.parametrize("n_clients", CASE_NS)
@pytest.mark.parametrize("case", [1, 2, 3])
def test_mnist_case_tables(mnist_y: np.ndarray, case: int, n_clients: int) -> None:
    parts = P.make_partition(f"case{case}", mnist_y, n_clients, rng=None, num_classes=10)
    _check_cover(parts, mnist_y.size)
    assert [p.size for p in parts] == _expected_case_sizes(case, n_clients, mnist_y)
    assert _label_sets(parts, mnist_y) == _expected_label_sets(case, n_clients)


@pytest.mark.realdata
@pytest.mark.parametrize("n_clients", CASE_NS)
def test_mnist_cases_match_oracle(mnist_y: np.ndarray, n_clients: int) -> None:
    """Production rule against the literal per-sample loop on the real file order."""
    for case, fn in ((1, P.case1), (2, P.case2), (3, P.case3)):
        assert [p.tolist() for p in fn(mnist_y, n_clients)] == _oracle(mnist_y, n_clients, case)
