"""DivFL: diverse client selection by submodular facility location (docs/algorithms.md §7.3).

Choose ``S_t``, ``|S_t| = m``, minimising ``G(S) = Σ_k min_{j∈S} ||U_k − U_j||`` with the
(stochastic) greedy [P: slides Eq. 34–37, App. D.2; R: melodi-lab/divfl
``flearn/trainers/fedbase.py::stochastic_greedy``, ``flearn/trainers/fedavg.py``].

State (S2): ``U``, every client's last known full local gradient (``[N, d]``, in ``w``'s dtype),
and ``Dst[k, j] = ||U_k − U_j||₂`` (float64, zero diagonal), kept as its packed strict upper
triangle (below). Round 1 (or no table yet): every client reports ``∇F_k(w)`` (the one full
sweep) and ``Dst`` is built. Every round: ``S_t = greedy(Dst, m, s, rng)`` with ``rng`` the
round's ``divfl_greedy`` stream (§1.6); the selected clients report ``∇F_k(w_t)`` (at the model
they receive, before training), which replaces their rows of ``U`` and their rows and columns of
``Dst``; the others stay stale. In the sweep round those are the values just computed, so the
oracle is not asked twice.

``divfl.greedy`` (S1): ``stochastic`` (default, the paper) or ``exact`` (the code's lazy greedy
gives the same set up to ties). ``divfl.sample``: ``code`` ``s = max(m, ⌊0.1 N⌋)`` or ``theory``
``s = ⌈(N/m) ln(1/ε)⌉``. ``divfl.weighting`` (S3): ``data`` ``q_i = p_i / Σ_{S_t} p_j`` (the
code's ``aggregate``, default) or ``simple`` ``1/m`` (the slides). Clients train in ascending
index order (§7); ``Cohort.draws`` is ``S_t`` in greedy order.

Distances are explicit float64 difference norms ``torch.linalg.vector_norm(U_j − U_k)`` (not
``torch.cdist``, whose matrix-multiply path is not exact and whose direct path sums in another
order), so a recomputed row equals a freshly built one bit for bit. On the CPU they are computed
in blocks of rows × columns (:func:`packed_distance_table`, :func:`distance_table`,
:func:`distance_rows`): the kernel reduces each pair's ``d`` squares alone, in the same order
whatever the block, so the numbers are those of the one-row-at-a-time ``(U − U_k).norm(dim=1)``
computation of earlier versions, bit for bit (``tests/components/test_divfl_memory.py`` checks it), and
``Dst[j, k]`` is ``Dst[k, j]`` (``U_j − U_k = −(U_k − U_j)`` exactly), so a build computes one
triangle (and :func:`distance_table` mirrors it).

Packed table (issue 32, item 7): ``Dst`` is exactly symmetric with a zero diagonal, so only its
strict upper triangle is kept, row by row: ``N(N−1)/2`` float64 values (:func:`pack`;
``Dst[k, j]``, ``k < j``, at ``base[k] + j``, :func:`row_offsets`), the same values the
``[N, N]`` table held. The greedy gathers the candidate columns it needs from it
(:func:`columns`: the same ``[N, w]`` float64 blocks, so the same scores bit for bit), the
selected clients' refreshed rows are written into it (:func:`write_rows`), and checkpoints hold
it (``Dst_packed``); checkpoints of earlier versions, with the ``[N, N]`` table (``Dst``), are
packed when loaded. The full table is never built (:func:`unpack` is for tests).

Memory (issue 32): the state is ``U`` (``N·d`` in ``w``'s dtype: 63 MB at 20,000 × 785 in float32)
and the packed ``Dst`` (``4 N (N−1)`` bytes: 100 MB at ``N = 5,000``, 1.6 GB at ``N = 20,000``,
where the ``[N, N]`` table took 3.2 GB). Besides them, on the CPU, building ``Dst`` holds at most
``3 · max(BLOCK_ELEMENTS, d) + max(BLOCK_ELEMENTS, N)`` float64 elements
(:func:`build_scratch_elements`: the difference block, the float64 copies of its rows and
columns and a strip of rows; 16 MiB for ``d, N ≤ 2¹⁹``, never an ``N × d`` or ``N × N``
temporary); refreshing the selected rows holds those ``m × N`` float64 rows and the scratch of
:func:`distance_rows` (``3 · max(BLOCK_ELEMENTS, d)``); the greedy holds two buffers of
``max(BLOCK_ELEMENTS, N)`` elements, allocated once a call (a block of candidate columns, float64,
minimised with ``cmin`` in place, and their packed positions, int32 up to ``N = 65,536``, else
int64: at most 16 MiB together for ``N ≤ 2¹⁹``) and a few ``N``-vectors. In all, DivFL holds
at most ``4 N (N−1)`` + ``U`` + ``8 · (3 · max(BLOCK_ELEMENTS, d) + max(BLOCK_ELEMENTS, N))``
bytes (+ ``8 m N`` while it refreshes rows): at 20,000 clients × 785 float32 features
1,600 + 63 + 16 MB, measured (one thread, the engine's allocator setting) as a peak RSS of
1.99 GB for a sweep round and an update round (``m = 20``), of which 0.24 GB are the interpreter
and torch and 0.06 GB the test's own copy of the gradients. On other devices (CUDA) a block is
one row against all ``N`` columns, the shape earlier versions used, because a GPU reduction's
order can depend on how many outputs a kernel has: there the numbers stay bit for bit, and the
scratch is ``2 N d`` float64 elements. ``state_dict`` copies ``U`` and the packed table (as
every component's state is copied); loading an earlier version's ``[N, N]`` table allocates
only the packed copy besides it.

Ties (issue 32, §7.3): the greedy compares the exact sums ``Σ_k min(cmin_k, Dst[k, j])``, so two
candidates whose sums are equal (by construction, e.g. two columns holding the same distances in
other rows) tie exactly and the first in ``R``'s order wins; a float sum would round them apart
by its summation order. The float64 sums pick the candidates that can be the minimum (those
within the sums' rounding bound of the smallest); only where more than one can, their exact
differences decide (``math.fsum``), so the common case stays vectorised.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from fedsweep.components.samplers.base import CohortConfig, Sampler, cohort_size
from fedsweep.core.messages import Cohort
from fedsweep.core.registry import register
from fedsweep.core.section import Section
from fedsweep.core.seeding import numpy_rng


class DivFLConfig(Section):
    greedy: Literal["stochastic", "exact"] = Field(
        "stochastic", description="Stochastic greedy (the paper) or exact greedy (the code) (S1)."
    )
    sample: Literal["code", "theory"] = Field(
        "code", description="Stochastic sample size: max(m, 0.1 N) or ceil((N/m) ln(1/epsilon))."
    )
    epsilon: float = Field(0.01, gt=0, lt=1, description="epsilon of the 'theory' sample size.")
    weighting: Literal["data", "simple"] = Field(
        "data", description="q_i: p_i renormalised over S_t (the code), or 1/m (the slides) (S3)."
    )


def sample_size(section: DivFLConfig, m: int, num_clients: int) -> int | None:
    """``s``, the candidates per stochastic greedy step; ``None`` for the exact greedy."""
    if section.greedy == "exact":
        return None
    if section.sample == "code":
        return max(m, int(0.1 * num_clients))
    return math.ceil((num_clients / m) * math.log(1 / section.epsilon))


#: float64 elements of one block of pairwise differences (4 MiB); with its rows and columns in
#: float64 the scratch of a distance computation is at most ``3 · max(BLOCK_ELEMENTS, d)`` elements
BLOCK_ELEMENTS = 1 << 19
#: unit roundoff of float64 (round to nearest)
_U64 = 2.0**-53


def greedy(
    dist: torch.Tensor,
    m: int,
    sample_size: int | None,
    rng: np.random.Generator,
    block_elements: int | None = None,
) -> list[int]:
    """STOCHASTIC_GREEDY of §7.3 on ``dist``: ``m`` indices in pick order.

    ``dist`` is the table ``[N, N]`` or its packed strict upper triangle (``[N(N−1)/2]``,
    :func:`pack`); the picks are the same, and so is every score (a block of candidate columns
    is the same ``[N, w]`` float64 tensor, gathered from the packed triangle, :func:`columns`).
    ``V`` (remaining clients) stays ascending; ``R = V`` when ``sample_size`` is ``None`` or
    ``>= |V|`` (``rng`` untouched), else ``rng.choice(V, size=s, replace=False)`` in draw order.
    ``score_j = Σ_k min(cmin_k, dist[k, j])``, compared exactly: the first minimiser in ``R``'s
    order is picked (:func:`_first_exact_minimum`). The scores of ``max(1, block_elements // N)``
    candidates are computed at a time (default :data:`BLOCK_ELEMENTS`)."""
    n = dist.shape[0] if dist.dim() == 2 else packed_clients(dist.numel())
    block_elements = BLOCK_ELEMENTS if block_elements is None else block_elements
    width = max(1, block_elements // max(n, 1))
    read = _Columns(dist, n, width)
    remaining = list(range(n))
    cmin = torch.full((n,), math.inf, dtype=dist.dtype, device=dist.device)
    picked: list[int] = []
    for _ in range(m):
        if sample_size is None or sample_size >= len(remaining):
            cand = remaining
        else:
            cand = rng.choice(remaining, size=sample_size, replace=False).tolist()
        index = torch.tensor(cand, device=dist.device)
        scores = torch.cat(
            [
                _min_into(cmin, read(index[c : c + width])).sum(dim=0)
                for c in range(0, len(cand), width)
            ]
        )
        j = cand[_first_exact_minimum(read, cmin, index, scores)]
        picked.append(j)
        remaining.remove(j)
        cmin = torch.minimum(cmin, read(index.new_tensor([j]))[:, 0])
    return picked


def _min_into(cmin: torch.Tensor, block: torch.Tensor) -> torch.Tensor:
    """``block[k, b] = min(cmin[k], block[k, b])`` in place (the values of ``torch.minimum``)."""
    return torch.minimum(cmin[:, None], block, out=block)


def _first_exact_minimum(
    read: _Columns, cmin: torch.Tensor, index: torch.Tensor, scores: torch.Tensor
) -> int:
    """The position in ``index`` of the first candidate whose exact score is the smallest.

    ``scores`` are float64 sums of ``N`` terms ``≥ 0``: whatever the summation order, each is
    within ``γ_N = N u / (1 − N u)`` (relative) of its exact value (Higham, Accuracy and
    Stability, §4.2), so only candidates with ``score ≤ min · (1 + 4 (N + 1) u)`` can be the
    exact minimum. If that is one candidate, it is; otherwise the exact sign of each difference
    of exact sums, ``math.fsum`` of one column's terms and the other's negated terms (exactly
    rounded, so its sign is exact), keeps the first of the smallest in ``R``'s order."""
    n = read.n
    best_score = float(scores.min())
    if not math.isfinite(best_score):  # a diverged gradient: as the float sums say
        return int(torch.argmin(scores))
    near = torch.nonzero(scores <= best_score * (1 + 4 * (n + 1) * _U64)).flatten().tolist()
    if len(near) == 1:  # the only candidate that can be the exact minimum
        return near[0]
    if best_score == 0:  # a float sum of terms ≥ 0 is 0 only if every term is: exact ties
        return near[0]

    def terms(pos: int) -> np.ndarray:
        return _min_into(cmin, read(index[pos : pos + 1]))[:, 0].cpu().numpy().copy()

    best, best_terms = near[0], terms(near[0])
    for pos in near[1:]:
        cand_terms = terms(pos)
        if math.fsum(np.concatenate([cand_terms, -best_terms]).tolist()) < 0:
            best, best_terms = pos, cand_terms
    return best


# ------------------------------------------------------------------------ the packed table
def packed_size(n: int) -> int:
    """Entries of the packed strict upper triangle of an ``N × N`` table: ``N(N−1)/2``."""
    return n * (n - 1) // 2


def packed_clients(size: int) -> int:
    """``N`` of a packed triangle of ``size`` entries (``1`` for an empty one)."""
    n = (1 + math.isqrt(1 + 8 * size)) // 2
    if packed_size(n) != size:
        raise ValueError(f"{size} entries are no packed triangle N(N-1)/2")
    return n


def row_offsets(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``base`` ``[N]`` with ``Dst[k, j]`` (``k < j``) at ``packed[base[k] + j]``: the row-major
    strict upper triangle, ``base[k] = k N − k (k + 1) / 2 − k − 1``. int32 while every position
    fits (``N ≤ 65,536``; half the memory traffic of int64 in :func:`columns`), else int64."""
    k = torch.arange(n, dtype=torch.int64, device=device)
    base = k * n - k * (k + 1) // 2 - k - 1
    return base.to(torch.int32) if packed_size(n) <= 2**31 - 1 else base


def pack(table: torch.Tensor) -> torch.Tensor:
    """The strict upper triangle of ``table`` ``[N, N]``, row by row (a copy; nothing else is
    allocated, so an old ``N × N`` checkpoint's table is packed with only the packed copy)."""
    n = table.shape[0]
    packed = torch.empty(packed_size(n), dtype=table.dtype, device=table.device)
    at = 0
    for k in range(n - 1):
        packed[at : at + n - k - 1] = table[k, k + 1 :]
        at += n - k - 1
    return packed


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """The whole ``[N, N]`` table of a packed triangle (zero diagonal, mirrored): for tests and
    small ``N`` only; DivFL itself never builds it."""
    n = packed_clients(packed.numel())
    return columns(packed, torch.arange(n, device=packed.device))


def columns(packed: torch.Tensor, index: torch.Tensor, base: torch.Tensor | None = None):
    """``Dst[:, index]`` ``[N, len(index)]`` (contiguous float64, a new tensor) gathered from the
    packed triangle: ``Dst[k, j] = packed[base[min(k, j)] + max(k, j)]`` off the diagonal, ``0``
    on it. Besides the result it holds one ``[N, len(index)]`` block of positions (int32 or
    int64 as ``base``). ``base``: :func:`row_offsets` of ``N``, if already at hand."""
    n = packed_clients(packed.numel())
    base = row_offsets(n, packed.device) if base is None else base
    pos = torch.empty(n * len(index), dtype=base.dtype, device=packed.device)
    out = torch.empty(n * len(index), dtype=packed.dtype, device=packed.device)
    return _gather_columns(packed, index, base, pos, out)


def _gather_columns(
    packed: torch.Tensor, index: torch.Tensor, base: torch.Tensor, pos: torch.Tensor, out
) -> torch.Tensor:
    """:func:`columns` into the buffers ``pos`` (positions, ``base``'s dtype) and ``out``
    (the table's dtype), each of at least ``N · len(index)`` elements: the result is a view of
    ``out``. The minima and maxima of the row and column indices are computed in ``out``'s bytes
    before it is filled (a float64 ``out`` has room for them: 8 bytes an element)."""
    n, w = base.numel(), len(index)
    out = out[: n * w].view(n, w)
    if n == 1:
        return out.zero_()
    pos = pos[: n * w].view(n, w)
    k = torch.arange(n, dtype=base.dtype, device=packed.device)[:, None]
    j = index.to(base.dtype)[None, :]
    if out.element_size() >= base.element_size():  # out's bytes, reinterpreted
        lo = out.view(-1).view(base.dtype)[: n * w].view(n, w)
    else:  # a float32 table with int64 positions (N > 65,536): no room in out
        lo = torch.empty(n, w, dtype=base.dtype, device=packed.device)
    torch.minimum(k, j, out=lo)
    torch.index_select(base, 0, lo.view(-1), out=pos.view(-1))
    pos += torch.maximum(k, j, out=lo)
    # the diagonal (k = j) points at base[j] + j, the entry just before row j's (−1 for j = 0,
    # in row 0 only): any entry is read there, and the diagonal is zeroed after
    pos[0].clamp_(min=0)
    torch.index_select(packed, 0, pos.view(-1), out=out.view(-1))
    out[index, torch.arange(w, device=packed.device)] = 0
    return out


class _Columns:
    """Blocks of columns ``Dst[:, index]`` (at most ``width`` columns a block) of a table
    ``[N, N]`` (a new tensor each) or of its packed triangle (a view of one float64 buffer of
    ``N · width`` elements, valid until the next block, beside one buffer of positions: the
    greedy allocates them once, not once a block)."""

    def __init__(self, dist: torch.Tensor, n: int, width: int) -> None:
        self.n, self.dist = n, dist
        self.base = row_offsets(n, dist.device) if dist.dim() == 1 else None
        if self.base is not None:
            size = n * min(width, n)
            self.pos = torch.empty(size, dtype=self.base.dtype, device=dist.device)
            self.out = torch.empty(size, dtype=dist.dtype, device=dist.device)

    def __call__(self, index: torch.Tensor) -> torch.Tensor:
        if self.base is None:
            return self.dist[:, index]
        return _gather_columns(self.dist, index, self.base, self.pos, self.out)


def write_rows(packed: torch.Tensor, clients: list[int], rows: torch.Tensor) -> None:
    """``Dst[k, :] = Dst[:, k] = rows[a]`` for ``k = clients[a]``, in the packed triangle: for
    each client in ascending index order, its row part (``j > k``, one slice) and its column
    part (``j < k``, a gather of positions). A pair of two of the clients keeps the larger
    client's row's value (bit for bit that of the other: ``||U_j − U_k|| = ||U_k − U_j||``),
    as the ``[N, N]`` table's writes (rows, then columns) did."""
    n = packed_clients(packed.numel())
    base = row_offsets(n, packed.device)
    for a, k in sorted(enumerate(clients), key=lambda ak: ak[1]):
        start = int(base[k]) + k + 1 if k < n - 1 else 0
        packed[start : start + n - k - 1] = rows[a, k + 1 :]
        if k:
            packed[base[:k].to(torch.int64) + k] = rows[a, :k]


def _block_shape(rows: int, cols: int, d: int, block_elements: int) -> tuple[int, int]:
    """Rows and columns of a difference block of at most ``max(block_elements, d)`` elements."""
    pairs = max(1, block_elements // max(d, 1))
    bk = max(1, min(rows, math.isqrt(pairs)))
    return bk, max(1, min(cols, pairs // bk))


def _norms_into(
    out: torch.Tensor, cols64: torch.Tensor, rows64: torch.Tensor, scratch: torch.Tensor
) -> None:
    """``out[a, b] = ||cols64[b] − rows64[a]||₂`` through the difference block in ``scratch``."""
    diff = scratch[: rows64.shape[0] * cols64.numel()].view(rows64.shape[0], *cols64.shape)
    torch.sub(cols64[None], rows64[:, None], out=diff)
    torch.linalg.vector_norm(diff, dim=2, out=out)


def distance_rows(
    u: torch.Tensor, rows: list[int], block_elements: int | None = None
) -> torch.Tensor:
    """``[len(rows), N]`` float64: ``||u[k] − u[j]||₂`` for ``k`` in ``rows``, ``j`` in ``0..N−1``,
    from ``u`` ``[N, d]`` in any float dtype (its blocks are converted to float64 one at a time).
    Bit for bit the rows of :func:`distance_table`; scratch as in the module docstring (blocks of
    ``block_elements`` differences, default :data:`BLOCK_ELEMENTS`)."""
    n, d = u.shape
    block_elements = BLOCK_ELEMENTS if block_elements is None else block_elements
    out = torch.empty(len(rows), n, dtype=torch.float64, device=u.device)
    if not rows:
        return out
    if u.device.type != "cpu":  # one row against all columns: the shape of earlier versions
        u64 = u.to(torch.float64)
        for a, k in enumerate(rows):
            torch.linalg.vector_norm(u64 - u64[k], dim=1, out=out[a])
        return out
    index = torch.tensor(rows)
    bk, bj = _block_shape(len(rows), n, d, block_elements)
    scratch = torch.empty(bk * bj * d, dtype=torch.float64)
    for j0 in range(0, n, bj):
        j1 = min(j0 + bj, n)
        cols64 = u[j0:j1].to(torch.float64)
        for a0 in range(0, len(rows), bk):
            a1 = min(a0 + bk, len(rows))
            rows64 = u.index_select(0, index[a0:a1]).to(torch.float64)
            _norms_into(out[a0:a1, j0:j1], cols64, rows64, scratch)
    return out


def distance_table(u: torch.Tensor, block_elements: int | None = None) -> torch.Tensor:
    """``Dst`` ``[N, N]`` float64 of ``u`` ``[N, d]``: ``distance_rows(u, range(N))`` bit for bit,
    with each off-diagonal block computed once and mirrored (``Dst`` is exactly symmetric)."""
    n, d = u.shape
    block_elements = BLOCK_ELEMENTS if block_elements is None else block_elements
    if u.device.type != "cpu":
        return distance_rows(u, list(range(n)), block_elements)
    out = torch.empty(n, n, dtype=torch.float64)
    bk, bj = _block_shape(n, n, d, block_elements)
    scratch = torch.empty(bk * bj * d, dtype=torch.float64)
    for j0 in range(0, n, bj):
        j1 = min(j0 + bj, n)
        cols64 = u[j0:j1].to(torch.float64)
        for k0 in range(0, j1, bk):  # the rows above and through this block of columns
            k1 = min(k0 + bk, j1)
            _norms_into(out[k0:k1, j0:j1], cols64, u[k0:k1].to(torch.float64), scratch)
        if j0:
            out[j0:j1, :j0] = out[:j0, j0:j1].T
    return out


def build_scratch_elements(n: int, d: int, block_elements: int | None = None) -> int:
    """The bound on the float64 elements :func:`packed_distance_table` holds besides its result
    on the CPU: ``3 · max(block_elements, d) + max(block_elements, N)``."""
    block_elements = BLOCK_ELEMENTS if block_elements is None else block_elements
    return 3 * max(block_elements, d) + max(block_elements, n)


def packed_distance_table(u: torch.Tensor, block_elements: int | None = None) -> torch.Tensor:
    """``Dst`` of ``u`` ``[N, d]`` as its packed strict upper triangle ``[N(N−1)/2]`` float64
    (:func:`pack` of :func:`distance_table`, bit for bit), never holding the ``N × N`` table.

    On the CPU, strips of ``br = max(1, min(bk, block_elements // N))`` rows (``bk`` as in
    :func:`distance_table`) are computed from their first row's column on, in blocks of
    ``br × bj`` pairs (``bj = max(1, block_elements // d) // br``), into a ``br × N`` buffer, and
    each row's part right of the diagonal is copied into place: scratch besides the result is the
    difference block, its float64 rows and columns and the strip, at most
    ``3 · max(block_elements, d) + max(block_elements, N)`` float64 elements. On other devices
    one row against all columns at a time, as :func:`distance_rows` there."""
    n, d = u.shape
    block_elements = BLOCK_ELEMENTS if block_elements is None else block_elements
    packed = torch.empty(packed_size(n), dtype=torch.float64, device=u.device)
    if u.device.type != "cpu":
        u64 = u.to(torch.float64)
        row = torch.empty(n, dtype=torch.float64, device=u.device)
        at = 0
        for k in range(n - 1):
            torch.linalg.vector_norm(u64 - u64[k], dim=1, out=row)
            packed[at : at + n - k - 1] = row[k + 1 :]
            at += n - k - 1
        return packed
    bk, _ = _block_shape(n, n, d, block_elements)
    br = max(1, min(bk, block_elements // max(n, 1)))
    pairs = max(1, block_elements // max(d, 1))
    bj = max(1, min(n, pairs // br))
    strip = torch.empty(br, n, dtype=torch.float64)
    scratch = torch.empty(br * bj * d, dtype=torch.float64)
    at = 0
    for k0 in range(0, n - 1, br):
        k1 = min(k0 + br, n)
        rows64 = u[k0:k1].to(torch.float64)
        for j0 in range(k0, n, bj):  # from the strip's first row's column on
            j1 = min(j0 + bj, n)
            _norms_into(strip[: k1 - k0, j0:j1], u[j0:j1].to(torch.float64), rows64, scratch)
        for k in range(k0, k1):
            packed[at : at + n - k - 1] = strip[k - k0, k + 1 :]
            at += n - k - 1
    return packed


@register("sampler", "divfl", sections={"cohort": CohortConfig, "divfl": DivFLConfig})
class DivFL(Sampler):
    simple_mean = ("divfl.weighting", ("simple",))

    def __init__(self, config, p: torch.Tensor) -> None:
        super().__init__(config, p)
        n = self.num_clients
        self.m = cohort_size(config, n)
        self.section = config.divfl
        self.s = sample_size(self.section, self.m, n)
        self.U: torch.Tensor | None = None  # [N, d], w's dtype
        self.Dst: torch.Tensor | None = None  # [N(N-1)/2], float64: the packed triangle

    def sample(self, t, w, rng, oracle) -> Cohort:
        swept = t == 1 or self.U is None
        if swept:
            self.U = oracle.gradients(list(range(self.num_clients)), w)
            self.Dst = packed_distance_table(self.U)
        elif self.U.device != w.device:  # restored from a checkpoint (CPU)
            self.U, self.Dst = self.U.to(w.device), self.Dst.to(w.device)
        greedy_rng = numpy_rng(self.config.seed, "divfl_greedy", t)
        draws = greedy(self.Dst, self.m, self.s, greedy_rng)
        if not swept:
            self.U[draws] = oracle.gradients(draws, w)
            write_rows(self.Dst, draws, distance_rows(self.U, draws))
        clients = sorted(draws)
        if self.section.weighting == "data":
            p = self.p[clients]
            q = p / p.sum()
        else:
            q = torch.full((self.m,), 1.0 / self.m, dtype=torch.float64, device=self.p.device)
        return Cohort(clients, q, draws)

    def state_dict(self) -> dict:
        """``U`` and ``Dst_packed``, the packed triangle (half the ``[N, N]`` table's bytes)."""
        if self.U is None:
            return {}
        return {
            "U": self.U.detach().cpu().clone(),
            "Dst_packed": self.Dst.detach().cpu().clone(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Kept on the CPU; moved to the model's device at the next ``sample``. Reads the packed
        triangle (``Dst_packed``) or the ``[N, N]`` table (``Dst``) of checkpoints written before
        it was packed (its upper triangle: the table was exactly symmetric, zero on the
        diagonal)."""
        self.U = state["U"].clone() if "U" in state else None
        if "Dst_packed" in state:
            self.Dst = state["Dst_packed"].clone()
        elif "Dst" in state:
            self.Dst = pack(state["Dst"])
        else:
            self.Dst = None
