"""DivFL: diverse client selection by submodular facility location (docs/algorithms.md §7.3).

Choose ``S_t``, ``|S_t| = m``, minimising ``G(S) = Σ_k min_{j∈S} ||U_k − U_j||`` with the
(stochastic) greedy [P: slides Eq. 34–37, App. D.2; R: melodi-lab/divfl
``flearn/trainers/fedbase.py::stochastic_greedy``, ``flearn/trainers/fedavg.py``].

State (S2): ``U``, every client's last known full local gradient (``[N, d]``, in ``w``'s dtype),
and ``Dst[k, j] = ||U_k − U_j||₂`` (float64, zero diagonal). Round 1 (or no table yet): every
client reports ``∇F_k(w)`` (the one full sweep) and ``Dst`` is built. Every round:
``S_t = greedy(Dst, m, s, rng)`` with ``rng`` the round's ``divfl_greedy`` stream (§1.6); the
selected clients report ``∇F_k(w_t)`` (at the model they receive, before training), which
replaces their rows of ``U`` and their rows and columns of ``Dst``; the others stay stale. In
the sweep round those are the values just computed, so the oracle is not asked twice.

``divfl.greedy`` (S1): ``stochastic`` (default, the paper) or ``exact`` (the code's lazy greedy
gives the same set up to ties). ``divfl.sample``: ``code`` ``s = max(m, ⌊0.1 N⌋)`` or ``theory``
``s = ⌈(N/m) ln(1/ε)⌉``. ``divfl.weighting`` (S3): ``data`` ``q_i = p_i / Σ_{S_t} p_j`` (the
code's ``aggregate``, default) or ``simple`` ``1/m`` (the slides). Clients train in ascending
index order (§7); ``Cohort.draws`` is ``S_t`` in greedy order.

Distances are computed row by row with an explicit difference norm (not ``torch.cdist``, whose
matrix-multiply path is not exact), so a recomputed row equals a freshly built one bit for bit.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from fedsweep.config.section import Section
from fedsweep.engine.messages import Cohort
from fedsweep.engine.seeding import numpy_rng
from fedsweep.samplers.base import Sampler, cohort_size


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


def greedy(
    dist: torch.Tensor, m: int, sample_size: int | None, rng: np.random.Generator
) -> list[int]:
    """STOCHASTIC_GREEDY of §7.3 on ``dist`` ``[N, N]``: ``m`` indices in pick order.

    ``V`` (remaining clients) stays ascending; ``R = V`` when ``sample_size`` is ``None`` or
    ``>= |V|`` (``rng`` untouched), else ``rng.choice(V, size=s, replace=False)`` in draw order.
    ``score_j = Σ_k min(cmin_k, dist[k, j])``; the first minimiser in ``R``'s order is picked."""
    n = dist.shape[0]
    remaining = list(range(n))
    cmin = torch.full((n,), math.inf, dtype=dist.dtype, device=dist.device)
    picked: list[int] = []
    for _ in range(m):
        if sample_size is None or sample_size >= len(remaining):
            cand = remaining
        else:
            cand = rng.choice(remaining, size=sample_size, replace=False).tolist()
        cols = dist[:, torch.tensor(cand, device=dist.device)]
        scores = torch.minimum(cmin[:, None], cols).sum(dim=0)
        j = cand[int(torch.argmin(scores))]  # argmin returns the first minimiser
        picked.append(j)
        remaining.remove(j)
        cmin = torch.minimum(cmin, dist[:, j])
    return picked


def distance_rows(u64: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """``[len(rows), N]``: ``||u64[k] − u64[j]||₂`` for ``k`` in ``rows``, one row at a time."""
    return torch.stack([(u64 - u64[k]).norm(dim=1) for k in rows])


class DivFL(Sampler):
    name = "divfl"

    def __init__(self, config, p: torch.Tensor) -> None:
        super().__init__(config, p)
        n = self.num_clients
        self.m = cohort_size(config, n)
        self.section = config.divfl
        self.s = sample_size(self.section, self.m, n)
        self.U: torch.Tensor | None = None  # [N, d], w's dtype
        self.Dst: torch.Tensor | None = None  # [N, N], float64

    def sample(self, t, w, rng, oracle) -> Cohort:
        swept = t == 1 or self.U is None
        if swept:
            self.U = oracle.gradients(list(range(self.num_clients)), w)
            self.Dst = distance_rows(self.U.to(torch.float64), list(range(self.num_clients)))
        elif self.U.device != w.device:  # restored from a checkpoint (CPU)
            self.U, self.Dst = self.U.to(w.device), self.Dst.to(w.device)
        greedy_rng = numpy_rng(self.config.seed, "divfl_greedy", t)
        draws = greedy(self.Dst, self.m, self.s, greedy_rng)
        if not swept:
            self.U[draws] = oracle.gradients(draws, w)
            rows = distance_rows(self.U.to(torch.float64), draws)
            self.Dst[draws, :] = rows
            self.Dst[:, draws] = rows.T
        clients = sorted(draws)
        if self.section.weighting == "data":
            p = self.p[clients]
            q = p / p.sum()
        else:
            q = torch.full((self.m,), 1.0 / self.m, dtype=torch.float64, device=self.p.device)
        return Cohort(clients, q, draws)

    def state_dict(self) -> dict:
        if self.U is None:
            return {}
        return {"U": self.U.detach().cpu().clone(), "Dst": self.Dst.detach().cpu().clone()}

    def load_state_dict(self, state: dict) -> None:
        """Kept on the CPU; moved to the model's device at the next ``sample``."""
        self.U = state["U"].clone() if "U" in state else None
        self.Dst = state["Dst"].clone() if "Dst" in state else None
