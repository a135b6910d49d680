"""FedWalk's methods and learning-rate choice, shared by its figures: the
Table 2 method of a curve (its run config's ``algorithm`` and ``hooks``), each method's η_0 grid,
the chosen η_0 per panel (W4) and whether it lies on the grid's edge, the leash-task, τ and
Dir(a) curves, and how η_0 is printed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fedsweep.config.schema import RunConfig
from fedsweep.judge.evidence import grid_edge
from fedsweep.judge.panels import Panel
from fedsweep.judge.reducers import Stat
from fedsweep.judge.runs import ClaimData

#: algorithm -> method name of FedWalk's Table 2
WALK_BASES = {
    "fedavg": "FedAvg",
    "scaffold": "SCAFFOLD",
    "fedprox": "FedProx",
    "fednova": "FedNova",
}
#: the rows of Table 2, in the paper's order: the four passive methods, then their leashed forms
WALK_METHODS = (
    "FedAvg",
    "SCAFFOLD",
    "FedProx",
    "FedNova",
    "FedWalk",
    "SCAFFOLD+FedWalk",
    "FedProx+FedWalk",
    "FedNova+FedWalk",
)
#: leashed method -> its base method (the "+/−" of Table 2)
WALK_BASE_OF = {
    "FedWalk": "FedAvg",
    "SCAFFOLD+FedWalk": "SCAFFOLD",
    "FedProx+FedWalk": "FedProx",
    "FedNova+FedWalk": "FedNova",
}
#: a panel whose ``data.dirichlet_alpha`` is below this is non-IID (Dir(0.1), Dir(0.01));
#: the paper's "IID" panels are Dir(10) and Dir(100)
NON_IID_BELOW = 1.0
LEASH_TASKS = ("LH", "MH", "HH")


def walk_method(config: RunConfig) -> str | None:
    """The Table 2 method of a curve, from its run config (:meth:`ClaimData.config`):
    ``algorithm`` (fedavg, scaffold, fedprox, fednova) and whether ``hooks`` has ``fedwalk``:
    "FedAvg", "FedWalk" (FedAvg with the leash), "SCAFFOLD+FedWalk", ...; None for any other
    curve."""
    base = WALK_BASES.get(config.algorithm)
    hooks = config.hooks
    if base is None or "leash_pretrain" in hooks:
        return None
    if "fedwalk" not in hooks:
        return base
    return "FedWalk" if base == "FedAvg" else f"{base}+FedWalk"


def lr_grid(data: ClaimData, method: str) -> list[tuple[float, str]]:
    """(η_0 = ``train.lr`` of the run config, label) of the curves of ``method``, in spec
    order."""
    configs = [(data.config(c), c.label) for c in data.curves]
    return [(config.train.lr, label) for config, label in configs if walk_method(config) == method]


def eta_text(lr: float | None) -> str:
    """η_0 as the specs write it: 0.01 -> "1e-2", 0.003 -> "3e-3", 0.5 -> "0.5"."""
    if lr is None:
        return "—"
    if lr > 0:
        exp = math.floor(math.log10(lr))
        mant = lr / 10**exp
        if exp < -1 and math.isclose(mant, round(mant), rel_tol=1e-9):
            return f"{round(mant)}e{exp}"
    return f"{lr:g}"


@dataclass
class LrChoice:
    """One method's learning rate in one panel (W4): the grid point with the highest seed-mean
    best-over-rounds test accuracy among those without a diverged or blown-up seed."""

    method: str
    label: str | None = None
    lr: float | None = None
    stat: Stat | None = None
    #: every grid point: (η_0, label, its Stat or None, why it is no candidate, "" if it is)
    grid: list[tuple[float, str, Stat | None, str]] = field(default_factory=list)
    #: the other candidates with exactly the chosen accuracy (spec order decided: stated)
    tied: list[str] = field(default_factory=list)

    @property
    def eta(self) -> str:
        """ "η=1e-2" (+ " (tie with η=1e-3: first in spec order)"), or why none was chosen."""
        if self.label is None:
            return self.why_none
        text = f"η={eta_text(self.lr)}"
        if self.tied:
            etas = [f"η={eta_text(lr)}" for lr, lab, _, _ in self.grid if lab in self.tied]
            text += f" (tie with {', '.join(etas)}: first in spec order)"
        return text

    @property
    def why_none(self) -> str:
        whys = {why for _, _, _, why in self.grid}
        if not self.grid or whys == {"no runs"}:
            return "no runs"
        if self.label is None:
            some = " with runs" if "no runs" in whys else ""
            return f"every η{some} " + "/".join(sorted(w for w in whys if w != "no runs"))
        return ""

    @property
    def edge(self) -> str | None:
        """``"grid not converged: ..."`` (:func:`fedsweep.judge.evidence.grid_edge`) when the chosen η_0
        is the smallest or the largest of the grid points with runs (one that diverged or blew
        up counts: it shows that side is worse), None when it is inside or none was chosen."""
        if self.lr is None:
            return None
        points = [lr for lr, _, _, why in self.grid if why != "no runs"]
        return grid_edge(points, self.lr, f"η_0 of {self.method}")

    @property
    def excluded(self) -> list[str]:
        """ "η=1e-2 diverged" for every grid point with runs that was no candidate."""
        return [
            f"η={eta_text(lr)} {why}" for lr, _, _, why in self.grid if why not in ("", "no runs")
        ]


def choose_lr(data: ClaimData, pid: str, method: str, metric: str = "test_acc") -> LrChoice:
    """:class:`LrChoice` of ``method`` in panel ``pid``: per grid point the seed mean of each
    run's best ``metric`` over rounds (W11); grid points with a diverged or blown-up seed, or
    without runs, are no candidates; an exact tie goes to the first in spec order (stated in
    ``tied``). The candidates are read without marking them used; the chosen one is marked."""
    choice = LrChoice(method)
    for lr, label in lr_grid(data, method):
        stat = data.run_stat(pid, label, metric, mark=False)
        failed = data.failed_seeds(pid, label)
        why = ""
        if failed:
            why = (
                "diverged"
                if any(v.startswith("diverged") for v in failed.values())
                else ("blew up")
            )
        elif stat is None:
            why = "no runs"
        choice.grid.append((lr, label, stat, why))
        if why:
            continue
        if choice.stat is None or stat.mean > choice.stat.mean:
            choice.label, choice.lr, choice.stat, choice.tied = label, lr, stat, []
        elif stat.mean == choice.stat.mean:
            choice.tied.append(label)
    if choice.label is not None:
        data.run_stat(pid, choice.label, metric)  # the chosen curve is the evidence
    return choice


def non_iid(panel: Panel) -> bool:
    """A panel with ``data.dirichlet_alpha`` < 1 (``NON_IID_BELOW``)."""
    alpha = panel.values.get("data.dirichlet_alpha")
    return isinstance(alpha, int | float) and float(alpha) < NON_IID_BELOW


def tau_points(data: ClaimData, pid: str, *, mark: bool = True) -> list[tuple[float, Stat]]:
    """(τ, Stat of the best test accuracy) of the ``fedwalk.tau`` curves with data in ``pid``,
    sorted by τ."""
    out = []
    for tau, label in data.curves_with("fedwalk.tau"):
        stat = data.run_stat(pid, label, "test_acc", mark=mark)
        if stat is not None:
            out.append((float(tau), stat))
    return sorted(out, key=lambda p: p[0])


def leash_curves(data: ClaimData, hook: str) -> dict[str, str]:
    """Leash task -> label of the (first) curve with ``hook`` in its hooks and that
    ``leash.task`` (of its run config)."""
    out: dict[str, str] = {}
    for c in data.curves:
        config = data.config(c)
        if hook in config.hooks:
            out.setdefault(config.leash.task, c.label)
    return out


def fig5_curves(data: ClaimData) -> tuple[str | None, str | None]:
    """(FedAvg, FedWalk) labels of Fig. 5: the first curve without hooks and the first with the
    fedwalk hook."""
    avg = next((c.label for c in data.curves if not data.config(c).hooks), None)
    walk = next((c.label for c in data.curves if "fedwalk" in data.config(c).hooks), None)
    return avg, walk


def walk_gains(data: ClaimData, *, mark: bool = True) -> list[tuple[float, Panel, float]]:
    """(a, panel, FedWalk − FedAvg best test accuracy, seed means) of every panel with
    ``data.dirichlet_alpha`` and data for both, sorted by a."""
    avg, walk = fig5_curves(data)
    out = []
    if avg is None or walk is None:
        return out
    for p in data.panels:
        alpha = p.values.get("data.dirichlet_alpha")
        if not isinstance(alpha, int | float):
            continue
        a = data.run_stat(p.panel_id, avg, "test_acc", mark=mark)
        w = data.run_stat(p.panel_id, walk, "test_acc", mark=mark)
        if a is not None and w is not None:
            out.append((float(alpha), p, w.mean - a.mean))
    return sorted(out, key=lambda g: g[0])
