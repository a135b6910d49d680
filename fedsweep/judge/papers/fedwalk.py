"""FedWalk's named measures (registered in :mod:`fedsweep.judge.measures`), for what is specific to
the paper: its claims themselves are declared in ``sweeps/fedwalk-*.yaml``.

* Fig. 2's windows: the paper's "early guiding process (i.e., before 100 communication rounds)"
  of 300 is the first third of the rounds, "a later stage" the last third (:func:`windows`);
  ``fedwalk.early_train_loss`` / ``fedwalk.late_train_loss`` are a run's mean training loss
  over them (lower is better, compared relatively: ``(X − X+FedWalk) / X``);
* Fig. 3's HH trend: ``fedwalk.tau_slope``, per seed the least-squares slope of the best test
  accuracy against τ over the τ curves with runs (at least ``MIN_TAUS``);
* the guard ``fedwalk.fednova_tracks_fedprox`` (issue 51, item 5): a part with FedNova whose
  FedNova curves stayed within ``NOVA_NEAR`` of the FedProx curves with the same settings
  repeats the FedProx part of the same claim (:func:`fednova_tracks_fedprox`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from fedsweep.judge.degenerate import largest_difference
from fedsweep.judge.measures import guard, measure
from fedsweep.judge.panels import Panel
from fedsweep.judge.runs import ClaimData, rounds_of
from fedsweep.specs.claims import Needs

MIN_TAUS = 3  # τ values with data a Fig. 3 trend needs

#: the share of the rounds that makes the early and the late window
WINDOW_SHARE = 1 / 3


def windows(t: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The early and the late window of a run of ``t`` rounds: rounds 1..k and t−k+1..t with
    k = max(1, ⌊t · WINDOW_SHARE⌋) (t = 300: 1–100, the paper's "before 100 communication
    rounds", and 201–300; t = 30: 1–10 and 21–30)."""
    k = max(1, math.floor(t * WINDOW_SHARE + 1e-9))
    return (1, k), (max(1, t - k + 1), t)


def window_mean(first: int, last: int) -> Callable[[pd.Series], float]:
    """Per run the mean of a history (indexed by round) over rounds ``first``..``last``; NaN
    when the run has no finite value there."""

    def mean(s: pd.Series) -> float:
        w = s[(s.index >= first) & (s.index <= last)]
        return float(w.mean()) if len(w) else math.nan

    return mean


def _window_loss(late: bool):
    def fn(data: ClaimData, panel: str, label: str, after: int = 0, mark: bool = True):
        first, last = windows(rounds_of(data))[1 if late else 0]
        return data.per_seed(panel, label, "train_loss", window_mean(first, last), mark=mark)

    return fn


measure(
    "fedwalk.early_train_loss",
    "mean training loss over the first third of the rounds (Fig. 2's early window)",
    lower_is_better=True,
    relative=True,
    needs=Needs(train_metrics=True),
)(_window_loss(late=False))
measure(
    "fedwalk.late_train_loss",
    "mean training loss over the last third of the rounds (Fig. 2's late window)",
    lower_is_better=True,
    end_of_run=True,
    relative=True,
    needs=Needs(train_metrics=True),
)(_window_loss(late=True))


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` against ``xs`` (at least two distinct xs)."""
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    return math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


@measure(
    "fedwalk.tau_slope",
    "least-squares slope of the best-over-rounds test accuracy against τ (fraction per unit "
    "τ), over the τ curves with runs",
    lower_is_better=False,
    end_of_run=True,
    scope="panel",
)
def tau_slope(data: ClaimData, panel: str, after: int = 0) -> dict[int, float]:
    """Per seed (the seeds every τ curve with runs has) the slope of the best test accuracy
    against ``fedwalk.tau``; {} with fewer than ``MIN_TAUS`` τ with runs."""
    runs = [
        (float(tau), label)
        for tau, label in data.curves_with("fedwalk.tau")
        if data.per_seed(panel, label, "test_acc", "best", mark=False)
    ]
    if len(runs) < MIN_TAUS:
        return {}
    runs.sort(key=lambda r: r[0])
    taus = [t for t, _ in runs]
    values = [data.per_seed(panel, label, "test_acc", "best") for _, label in runs]
    seeds = sorted(set.intersection(*(set(v) for v in values)))
    return {s: slope(taus, [v[s] for v in values]) for s in seeds}


#: largest relative difference of a FedNova curve's test loss and accuracy from its FedProx
#: twin's, on every seed and round, at which the two count as one computation for a claim's
#: parts (:func:`fednova_tracks_fedprox`); as BHerd's GraB guard, 1%
NOVA_NEAR = 0.01


def _twin_key(data: ClaimData, curve) -> str:
    """A curve's typed run config without its base method and the methods' own sections: two
    curves with the same key differ only in being FedNova or FedProx."""
    dump = data.config(curve).model_dump(
        mode="json", exclude={"name", "seed", "algorithm", "fedprox", "fednova"}
    )
    return repr(sorted(dump.items()))


@guard("fedwalk.fednova_tracks_fedprox")
def fednova_tracks_fedprox(data: ClaimData, panel: Panel | None, labels: list[str]) -> str | None:
    """A part with FedNova curves each of which stayed within :data:`NOVA_NEAR` of the FedProx
    curve with the same settings (test loss and accuracy, every seed and round) repeats the
    claim's FedProx part (issue 51, item 5). FedWalk's methods take a fixed number of local
    steps (``step_policy: fixed``), so FedNova's normalised average is FedAvg with data weights
    (docs/algorithms.md §2.4), and FedProx's proximal term (μ = 0.01) keeps it near the same
    update: "FedWalk beats FedNova" and "FedWalk helps FedNova" then say what the FedProx part
    says, and counting both would count one comparison twice. A FedNova that departs from FedProx
    is its own evidence, and its part is judged."""
    if panel is None:
        return None
    curves = [c for c in data.curves if c.label in labels]
    nova = [c for c in curves if data.config(c).algorithm == "fednova"]
    if not nova:
        return None
    prox = {_twin_key(data, c): c for c in data.curves if data.config(c).algorithm == "fedprox"}
    found = []
    for n in nova:
        twin = prox.get(_twin_key(data, n))
        if twin is None:
            return None
        near = largest_difference(data, panel.panel_id, n.label, twin.label, NOVA_NEAR)
        if near is None:
            return None
        found.append((n.label, twin, *near))
    fixed = all(data.config(c).step_policy == "fixed" for c in nova)
    why = (
        "with a fixed number of local steps FedNova is FedAvg with data weights, and μ = "
        f"{data.config(found[0][1]).fedprox.mu:g} keeps FedProx near it"
        if fixed
        else "the two trained alike here"
    )
    shown = "; ".join(
        f"{n} stayed within {worst:.1g} (relative) of {t.label}'s test loss and accuracy on {seeds} "
        f"seeds, {values} values"
        for n, t, worst, seeds, values, _ in found
    )
    return f"{shown}: this part repeats the FedProx part ({why})"


__all__ = [
    "NOVA_NEAR",
    "WINDOW_SHARE",
    "fednova_tracks_fedprox",
    "slope",
    "tau_slope",
    "window_mean",
    "windows",
]
