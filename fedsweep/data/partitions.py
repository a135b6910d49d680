"""Federated partitions of a training set (docs/algorithms.md §9). Pure numpy, deterministic.

Every function returns ``list[np.ndarray]``: one int64 array of *global* training indices per
client, in ascending file order. The order inside a client does not matter for training, since
the minibatch schedules of section 1.3 draw their own per-client permutation.

* ``case1`` / ``case2`` / ``case3``: BHerd/FedVeca cases [R: IBM ``util/utils.py::
  get_indices_each_node_case``; D1 numbering]. They do not depend on any seed (section 1.6),
  except ``case1(mode="shuffled")``.
* ``dirichlet``: NIID-Bench ``noniid-labeldir`` with the balance cap (section 9.2, D3).
* ``shards``: McMahan pathological shards with a stable sort (section 9.3, D4).
* ``iid``: ``array_split`` of a seeded permutation (section 9.4); with
  ``quantity_skew="powerlaw"`` the permutation is cut at power-law client sizes instead
  (``powerlaw_sizes``, section 9.5).

Seeded schemes take ``rng`` (a ``np.random.Generator``, or anything ``np.random.default_rng``
accepts, e.g. an int); pass the run's ``partition`` stream (section 1.6).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

PARTITIONS = ("case1", "case2", "case3", "dirichlet", "shards", "iid")
CASE1_MODES = ("roundrobin", "shuffled")
#: client-size (quantity) skews: ``none`` keeps the partition's own sizes
QUANTITY_SKEWS = ("none", "powerlaw")
#: the partitions a quantity skew other than ``none`` composes with
QUANTITY_SKEW_PARTITIONS = ("iid",)
#: the default tail exponent ``a`` of the power-law client sizes (Zipf's law, section 9.5)
POWERLAW_EXPONENT = 1.0
#: the smallest exponent ``a`` a config may set: the largest weight, ``(2N)^(1/a)``, stays a
#: finite float for every ``N`` up to 60,000 clients (below about 0.016 it overflows, and the
#: sizes with it, to negative numbers); at 0.05 one client already holds all but one sample
#: per other client, so a smaller ``a`` could not give more skew anyway
MIN_POWERLAW_EXPONENT = 0.05
#: every client's minimum number of samples under a quantity skew
QUANTITY_MIN_SIZE = 1

RngLike = np.random.Generator | np.random.SeedSequence | int


# ----------------------------------------------------------------------------- helpers


def _as_labels(labels: Any) -> np.ndarray:
    """Labels as a 1-D int64 array of non-negative class ids."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError("labels must be integer class ids")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError("labels must be >= 0")
    return arr


def _num_classes(labels: np.ndarray, num_classes: int | None) -> int:
    """``L``: the given number of classes, default ``labels.max() + 1`` (section 9.1)."""
    if num_classes is None:
        return int(labels.max()) + 1 if labels.size else 1
    num_classes = int(num_classes)
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    if labels.size and int(labels.max()) >= num_classes:
        raise ValueError(f"label {int(labels.max())} out of range for num_classes={num_classes}")
    return num_classes


def _check_clients(num_clients: int) -> int:
    if int(num_clients) != num_clients or num_clients < 1:
        raise ValueError(f"num_clients must be a positive integer, got {num_clients!r}")
    return int(num_clients)


def _as_rng(rng: RngLike | None, scheme: str) -> np.random.Generator:
    """A Generator from ``rng``; seeded schemes refuse ``None`` so every split is reproducible."""
    if rng is None:
        raise ValueError(
            f"partition {scheme!r} needs a seeded rng (the run's 'partition' stream, section 1.6)"
        )
    return np.random.default_rng(rng)


def _group(assign: np.ndarray, num_clients: int) -> list[np.ndarray]:
    """Client index lists from a per-sample client id (ascending within each client)."""
    order = np.argsort(assign, kind="stable").astype(np.int64)
    counts = np.bincount(assign, minlength=num_clients)
    return [part.copy() for part in np.split(order, np.cumsum(counts)[:-1])]


def _least_loaded(targets: np.ndarray, num_clients: int, num_labels: int) -> np.ndarray:
    """Reference ``N > L`` rule, vectorised [R: IBM ``get_indices_each_node_case``].

    Sample by sample in file order, a sample with target ``t`` goes to the currently least-loaded
    node ``n`` with ``n mod L = t`` (ties -> lowest ``n``). Nodes of different residues never
    compete and each group starts empty, so within the group ``t, t+L, t+2L, ...`` this is
    exactly round-robin over the group's samples in file order. (``tests/data/test_partitions.py``
    checks this against a literal per-sample oracle.)
    """
    out = np.empty_like(targets)
    for t in np.unique(targets):
        members = np.arange(t, num_clients, num_labels, dtype=np.int64)
        pos = np.flatnonzero(targets == t)
        out[pos] = members[np.arange(pos.size) % members.size]
    return out


# ----------------------------------------------------------------------------- section 9.1


def case1(
    labels: Any, num_clients: int, mode: str = "roundrobin", rng: RngLike | None = None
) -> list[np.ndarray]:
    """Case 1 (IID): ``node(j) = j mod N`` in file order [R]; ``"shuffled"`` permutes first (D2)."""
    y = _as_labels(labels)
    n_clients = _check_clients(num_clients)
    if mode not in CASE1_MODES:
        raise ValueError(f"case1 mode {mode!r} is not one of {CASE1_MODES}")
    assign = np.arange(y.size, dtype=np.int64) % n_clients
    if mode == "shuffled":
        # Position k of a seeded permutation goes to node k mod N (D2 option "shuffled").
        perm = _as_rng(rng, "case1/shuffled").permutation(y.size)
        shuffled = np.empty_like(assign)
        shuffled[perm] = assign
        assign = shuffled
    return _group(assign, n_clients)


def case2(labels: Any, num_clients: int, num_classes: int | None = None) -> list[np.ndarray]:
    """Case 2 (label per client): ``target = (label - l_min) mod N`` [R], section 9.1.

    ``l_min = 0``, ``L = num_classes`` (default ``labels.max() + 1``). If ``N > L`` the sample
    goes to the least-loaded node with ``n mod L = target`` (ties -> lowest ``n``), evaluated in
    file order [R]. ``N = 5``: client ``c`` holds ``{c, c+5}`` (B5); ``N = 10``: one label each.
    """
    y = _as_labels(labels)
    n_clients = _check_clients(num_clients)
    n_labels = _num_classes(y, num_classes)
    target = y % n_clients
    if n_clients > n_labels:
        target = _least_loaded(target, n_clients, n_labels)
    return _group(target, n_clients)


def case3(labels: Any, num_clients: int, num_classes: int | None = None) -> list[np.ndarray]:
    """Case 3 (= Wang et al.'s Case 4, D1): half IID, half by label [R], section 9.1.

    ``h = ceil(min(N, L)/2)`` IID clients (B6). A sample with global index ``j`` and label
    ``< (l_min + l_max)/2`` goes to ``j mod h``; otherwise (``N > 1``) to
    ``((label - l_min) mod (min(N, L) - h)) + h``. If ``N > L``: least-loaded node with
    ``n mod L = target``. ``N = 1``: everything on node 0 [R].
    """
    y = _as_labels(labels)
    n_clients = _check_clients(num_clients)
    n_labels = _num_classes(y, num_classes)
    if n_clients == 1:
        return [np.arange(y.size, dtype=np.int64)]
    if n_labels < 2:
        # [I] the reference divides by min(N, L) - h = 0 here; refuse instead.
        raise ValueError("case3 with num_clients > 1 needs num_classes >= 2")
    m = min(n_clients, n_labels)
    h = math.ceil(m / 2)
    l_min, l_max = 0, n_labels - 1
    j = np.arange(y.size, dtype=np.int64)
    first_half = y < (l_min + l_max) / 2
    target = np.where(first_half, j % h, ((y - l_min) % (m - h)) + h)
    if n_clients > n_labels:
        target = _least_loaded(target, n_clients, n_labels)
    return _group(target, n_clients)


# ----------------------------------------------------------------------------- section 9.2


def _dirichlet_attempt(
    by_class: list[np.ndarray], n: int, num_clients: int, alpha: float, rng: np.random.Generator
) -> np.ndarray:
    """One pass of NIID-Bench ``noniid-labeldir``: returns the per-sample client id."""
    assign = np.empty(n, dtype=np.int64)
    sizes = np.zeros(num_clients, dtype=np.int64)
    cap = n / num_clients
    for idx in by_class:
        idx_c = rng.permutation(idx)
        q = rng.dirichlet(np.full(num_clients, alpha))
        q = np.where(sizes < cap, q, 0.0)  # balance cap: full clients get nothing more
        total = q.sum()
        if not np.isfinite(total) or total <= 0:
            # [I] tiny alpha can underflow every open client's share to 0 (NIID-Bench would
            # divide by zero); spread this class evenly over the open clients instead.
            q = (sizes < cap).astype(np.float64)
            total = q.sum()
        q = q / total
        cuts = np.minimum((np.cumsum(q) * idx_c.size).astype(np.int64)[:-1], idx_c.size)
        bounds = np.concatenate(([0], cuts, [idx_c.size]))
        owner = np.repeat(np.arange(num_clients, dtype=np.int64), np.diff(bounds))
        assign[idx_c] = owner
        sizes += np.bincount(owner, minlength=num_clients)
    return assign


def dirichlet(
    labels: Any,
    num_clients: int,
    alpha: float,
    rng: RngLike,
    min_size: int = 10,
    max_attempts: int = 1000,
    num_classes: int | None = None,
) -> list[np.ndarray]:
    """Dirichlet(alpha) label skew with the balance cap [R: NIID-Bench ``partition_data``].

    For each class (in order 0..C-1) shuffle its indices, draw ``q ~ Dir(alpha 1_N)``, zero
    ``q_n`` for clients already holding ``>= |D|/N`` samples, renormalise and cut at
    ``floor(cumsum(q) |I_c|)``. Repeat until every client has ``>= min_size`` samples. After
    ``max_attempts`` keep the attempt with the largest minimum client and warn (D3).
    """
    y = _as_labels(labels)
    n_clients = _check_clients(num_clients)
    if not alpha > 0:
        raise ValueError(f"dirichlet alpha must be > 0, got {alpha!r}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts!r}")
    gen = _as_rng(rng, "dirichlet")
    n_labels = _num_classes(y, num_classes)
    by_class = [np.flatnonzero(y == c) for c in range(n_labels)]
    best, best_min = None, -1
    for _ in range(max_attempts):
        assign = _dirichlet_attempt(by_class, y.size, n_clients, float(alpha), gen)
        smallest = int(np.bincount(assign, minlength=n_clients).min())
        if smallest > best_min:
            best, best_min = assign, smallest
        if smallest >= min_size:
            break
    else:
        warnings.warn(
            f"dirichlet(alpha={alpha}, N={n_clients}): no split with every client >= {min_size} "
            f"samples in {max_attempts} attempts; keeping the best (smallest client "
            f"{best_min}) (D3)",
            RuntimeWarning,
            stacklevel=2,
        )
    return _group(best, n_clients)


# ----------------------------------------------------------------------------- 9.3 / 9.4


def shards(
    labels: Any, num_clients: int, rng: RngLike, shards_per_client: int = 2
) -> list[np.ndarray]:
    """McMahan pathological shards [R: shaoxiongji ``mnist_noniid``], section 9.3.

    Stable-sort the indices by label (D4), cut ``s N`` shards of ``floor(|D| / (s N))``
    consecutive samples, deal each client ``s`` distinct shards uniformly without replacement.
    [I] when ``s N`` does not divide ``|D|`` the last ``|D| mod (s N)`` label-sorted samples
    belong to no client (the reference hard-codes sizes that divide exactly).
    """
    y = _as_labels(labels)
    n_clients = _check_clients(num_clients)
    if shards_per_client < 1:
        raise ValueError(f"shards_per_client must be >= 1, got {shards_per_client!r}")
    gen = _as_rng(rng, "shards")
    num_shards = n_clients * int(shards_per_client)
    shard_size = y.size // num_shards
    if shard_size == 0:
        raise ValueError(f"{y.size} samples cannot fill {num_shards} shards")
    order = np.argsort(y, kind="stable").astype(np.int64)
    shard_rows = order[: num_shards * shard_size].reshape(num_shards, shard_size)
    dealt = gen.permutation(num_shards).reshape(n_clients, int(shards_per_client))
    return [np.sort(shard_rows[row].ravel()) for row in dealt]


def iid(
    labels: Any,
    num_clients: int,
    rng: RngLike,
    quantity_skew: str = "none",
    exponent: float = POWERLAW_EXPONENT,
) -> list[np.ndarray]:
    """Plain IID: ``array_split`` of a seeded permutation [R: NIID-Bench ``homo``], 9.4.

    ``quantity_skew="powerlaw"`` (section 9.5): the same permutation (drawn first, so it is the
    balanced split's) cut at ``powerlaw_sizes(|D|, N, exponent)`` drawn next from the same
    generator: every client still holds an IID sample of the data, of a power-law size.
    """
    y = _as_labels(labels)
    n_clients = _check_clients(num_clients)
    _check_skew(quantity_skew, "iid")
    gen = _as_rng(rng, "iid")
    perm = gen.permutation(y.size).astype(np.int64)
    if quantity_skew == "none":
        return [np.sort(part) for part in np.array_split(perm, n_clients)]
    sizes = powerlaw_sizes(y.size, n_clients, exponent, gen)
    return [np.sort(part) for part in np.split(perm, np.cumsum(sizes)[:-1])]


# ----------------------------------------------------------------------------- 9.5


def _check_skew(quantity_skew: str, scheme: str) -> None:
    if quantity_skew not in QUANTITY_SKEWS:
        raise ValueError(
            f"unknown quantity_skew {quantity_skew!r}; allowed: {', '.join(QUANTITY_SKEWS)}"
        )
    if quantity_skew != "none" and scheme not in QUANTITY_SKEW_PARTITIONS:
        raise ValueError(
            f"quantity_skew {quantity_skew!r} does not compose with partition {scheme!r} "
            f"(allowed: {', '.join(QUANTITY_SKEW_PARTITIONS)}; every partition takes 'none')"
        )


def powerlaw_sizes(
    total: int,
    num_clients: int,
    exponent: float,
    rng: RngLike,
    min_size: int = QUANTITY_MIN_SIZE,
) -> np.ndarray:
    """Client sizes ``n_1..n_N`` (int64) following a power law, summing to ``total`` (9.5).

    The sizes are the ``N`` midpoint quantiles of a Pareto(``a``) law, ``P(x > s) = s^{-a}``
    for ``s >= 1`` (``a = exponent``): the ``r``-th largest client's weight is
    ``((r - 1/2) / N)^{-1/a}`` (rank-size form; ``a = 1`` is Zipf's law, ``n_(r) ∝ 1/(r - 1/2)``;
    the smaller ``a``, the more skew). Every client gets ``min_size`` samples and the remaining
    ``total - N min_size`` are shared in proportion to the weights by largest remainder (ties
    to the larger weight), so the sizes sum to ``total`` and ``n_i >= min_size``. ``rng`` deals
    the sizes to the clients (a permutation): every seed has the same set of sizes, so the
    skew does not vary from seed to seed, while who holds which size (and which samples) does.
    """
    n_clients = _check_clients(num_clients)
    if not exponent > 0 or not math.isfinite(exponent):
        raise ValueError(f"powerlaw exponent must be a finite number > 0, got {exponent!r}")
    if min_size < 0:
        raise ValueError(f"min_size must be >= 0, got {min_size!r}")
    free = int(total) - n_clients * int(min_size)
    if free < 0:
        raise ValueError(
            f"{total} samples cannot give {n_clients} clients {min_size} sample(s) each"
        )
    gen = _as_rng(rng, "powerlaw")
    ranks = np.arange(1, n_clients + 1, dtype=np.float64)
    with np.errstate(over="ignore"):  # a tiny exponent: inf, refused below (not negative sizes)
        weights = ((ranks - 0.5) / n_clients) ** (-1.0 / float(exponent))  # descending
        weight_sum = weights.sum()
    if not np.isfinite(weight_sum):
        raise ValueError(
            f"powerlaw exponent {exponent!r} is too small for {n_clients} clients: the sizes' "
            f"weights overflow (allowed: >= {MIN_POWERLAW_EXPONENT})"
        )
    share = weights / weight_sum * free
    sizes = np.floor(share).astype(np.int64)
    left = free - int(sizes.sum())
    order = np.argsort(-(share - sizes), kind="stable")
    sizes[order[:left]] += 1
    return (sizes + int(min_size))[gen.permutation(n_clients)]


# ----------------------------------------------------------------------------- dispatch / info


def make_partition(
    scheme: str,
    labels: Any,
    num_clients: int,
    *,
    rng: RngLike | None,
    num_classes: int | None = None,
    quantity_skew: str = "none",
    quantity_skew_exponent: float = POWERLAW_EXPONENT,
    **options: Any,
) -> list[np.ndarray]:
    """Dispatch on ``scheme`` (one of ``PARTITIONS``); ``options`` go to that function.

    ``rng`` is used by ``dirichlet``, ``shards``, ``iid`` and ``case1(mode="shuffled")``;
    cases 1/2/3 (round-robin) ignore it (section 1.6). ``quantity_skew`` (one of
    ``QUANTITY_SKEWS``; not ``none`` only for ``QUANTITY_SKEW_PARTITIONS``) and its exponent
    set the client sizes (section 9.5).
    """
    if scheme in PARTITIONS:
        _check_skew(quantity_skew, scheme)
    if quantity_skew != "none":
        options = {**options, "quantity_skew": quantity_skew, "exponent": quantity_skew_exponent}
    if scheme == "case1":
        return case1(labels, num_clients, rng=rng, **options)
    if scheme == "case2":
        return case2(labels, num_clients, num_classes=num_classes, **options)
    if scheme == "case3":
        return case3(labels, num_clients, num_classes=num_classes, **options)
    if scheme == "dirichlet":
        return dirichlet(labels, num_clients, rng=rng, num_classes=num_classes, **options)
    if scheme == "shards":
        return shards(labels, num_clients, rng=rng, **options)
    if scheme == "iid":
        return iid(labels, num_clients, rng=rng, **options)
    raise ValueError(f"unknown partition scheme {scheme!r}; allowed: {', '.join(PARTITIONS)}")


def partition_hash(parts: Sequence[np.ndarray]) -> str:
    """16-hex sha256 over the client count and each client's size and int64 indices.

    Each client's size is hashed too, so moving a boundary (``[[0, 1], [2]]`` vs
    ``[[0], [1, 2]]``) changes the hash.
    """
    digest = hashlib.sha256()
    digest.update(np.int64(len(parts)).astype("<i8").tobytes())
    for part in parts:
        arr = np.asarray(part, dtype="<i8")
        digest.update(np.int64(arr.size).astype("<i8").tobytes())
        digest.update(np.ascontiguousarray(arr).tobytes())
    return digest.hexdigest()[:16]


def partition_summary(parts: Sequence[np.ndarray], labels: Any) -> list[dict[str, Any]]:
    """Per client: ``{"client", "size", "labels"}`` (sorted distinct labels), for logging."""
    y = _as_labels(labels)
    return [
        {
            "client": c,
            "size": int(np.asarray(part).size),
            "labels": [int(v) for v in np.unique(y[np.asarray(part, dtype=np.int64)])],
        }
        for c, part in enumerate(parts)
    ]
