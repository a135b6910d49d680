"""The introduction-to-FL slides' named measures and guards (registered in
:mod:`fedsweep.judge.measures`), for what is specific to the slides' figures: their claims
themselves are declared in ``sweeps/intro-*.yaml``.

* ``intro.train_loss_auc``: the run's mean training loss over the rounds (Li et al.'s schemes
  compare the global training loss); ``intro.early_train_loss``: the same over the early rounds
  t ≤ ⌈T/2⌉ (client selection's "faster at the earlier rounds");
* ``intro.cohort_gain_shrink``: Charles et al.'s diminishing returns of the cohort size M, the
  log2 speed-up per doubling of M between the two smallest cohorts minus between the two
  largest (rounds to the target per run, censored when not reached);
* ``intro.failures_per_doubling``: catastrophic training failures (a round whose training
  accuracy is at most half of the previous round's, from well above chance) per doubling of M;
* the guards ``intro.balanced_control`` (the balanced-clients panel of intro-sampling is a
  control, shown, not deciding), ``intro.grid_edge`` (a FedOpt grid point chosen on the edge of
  its method's grid: the best may lie outside) and ``intro.no_failures`` (no failure anywhere:
  nothing to relate to M).
"""

from __future__ import annotations

import math

import pandas as pd

from fedsweep.config.schema import RunConfig
from fedsweep.judge.evidence import grid_edge
from fedsweep.judge.measures import guard, measure
from fedsweep.judge.panels import Panel
from fedsweep.judge.runs import EPS, ClaimData, rounds_of, seed_reach
from fedsweep.specs.claims import Needs

#: server optimizer -> method name of the intro-fedopt figure
FEDOPT_METHODS = {"sgd": "FedAvg", "adagrad": "FedAdagrad", "adam": "FedAdam", "yogi": "FedYogi"}
FAILURE_DROP = 0.5  # a round whose training accuracy is ≤ this times the previous round's
#: a failure counts only from a training accuracy at least this far above chance (1/classes)
CHANCE_MARGIN = 0.3


# ---------------------------------------------------------------------------- losses
@measure(
    "intro.train_loss_auc",
    "training-loss AUC (the run's mean training loss over the rounds)",
    lower_is_better=True,
    relative=True,
    needs=Needs(train_metrics=True),
)
def train_loss_auc(data: ClaimData, panel: str, label: str, after: int = 0, mark: bool = True):
    """Per seed the run's mean training loss over the rounds (after ``after``)."""
    how = "mean" if not after else (lambda s: float(s[s.index > after].mean()))
    return data.per_seed(panel, label, "train_loss", how, mark=mark)


@measure(
    "intro.early_train_loss",
    "mean training loss over the early rounds t ≤ ⌈T/2⌉ (T: the figure's last round)",
    lower_is_better=True,
    relative=True,
    needs=Needs(train_metrics=True),
)
def early_train_loss(data: ClaimData, panel: str, label: str, after: int = 0, mark: bool = True):
    """Per seed the run's mean training loss over the rounds ``after`` < t ≤ ⌈T/2⌉."""
    early = math.ceil(rounds_of(data) / 2)

    def mean(s: pd.Series) -> float:
        head = s[(s.index <= early) & (s.index > after)]
        return float(head.mean()) if len(head) else math.nan

    return data.per_seed(panel, label, "train_loss", mean, mark=mark)


def _quantity_skew(data: ClaimData, panel: Panel, label: str) -> str:
    """The panel's client-size skew (``data.quantity_skew``; "none" = balanced clients): the
    panel's value, else the run config's of curve ``label`` (a field older configs lack)."""
    value = panel.values.get("data.quantity_skew")
    if value is None:
        curve = next(c for c in data.curves if c.label == label)
        value = getattr(data.config(curve).data, "quantity_skew", "none")
    return "none" if value in (None, False, "none") else str(value)


@guard("intro.balanced_control")
def balanced_control(data: ClaimData, panel: Panel | None, labels: list[str]) -> str | None:
    """A panel of balanced clients is the control when some panel of the figure has skewed
    client sizes (there the sampling schemes differ only by duplicate draws): left out of the
    verdict, shown. A figure without a skewed panel (older runs) is judged on its balanced ones."""
    if panel is None or not labels:
        return None
    skewed = [p for p in data.cases() if _quantity_skew(data, p, labels[0]) != "none"]
    if skewed and panel not in skewed:
        return "control: balanced clients, the schemes differ only by duplicate draws"
    return None


# ---------------------------------------------------------------------------- FedOpt grid
def grid_rates(config: RunConfig) -> tuple[str, float, float] | None:
    """(server optimizer, η_l, η_s) of a grid point's run config; None for a server optimizer
    that is not one of the grid's methods."""
    opt = config.server_optimizer
    if opt not in FEDOPT_METHODS:
        return None
    eta_s = config.server_sgd.lr if opt == "sgd" else config.fedopt.lr
    return opt, float(config.train.lr), float(eta_s)


def grid_not_converged(data: ClaimData, label: str) -> str | None:
    """ "<method>: grid not converged: …" when grid point ``label`` lies on the edge of its
    method's grid in η_l or η_s (``grid_edge``), else None."""
    chosen = grid_rates(data.config(next(c for c in data.curves if c.label == label)))
    if chosen is None:
        return None
    points = [r for c in data.curves if (r := grid_rates(data.config(c))) and r[0] == chosen[0]]
    edges = [
        grid_edge([p[i] for p in points], chosen[i], name) for i, name in ((1, "η_l"), (2, "η_s"))
    ]
    reasons = [e for e in edges if e]
    return f"{FEDOPT_METHODS[chosen[0]]}: " + "; ".join(reasons) if reasons else None


@guard("intro.grid_edge")
def grid_edge_guard(data: ClaimData, panel: Panel | None, labels: list[str]) -> str | None:
    """A part whose chosen grid points (the compared one first) lie on the edge of their
    method's grid in η_l or η_s: "grid not converged: widen it" (the best may lie outside)."""
    reasons = [r for label in reversed(labels) if (r := grid_not_converged(data, label))]
    return "; ".join(reasons) or None


# ---------------------------------------------------------------------------- cohort size
def cohorts(data: ClaimData) -> list[tuple[float, str]]:
    """(M, label) of the curves whose run config gives a cohort size M (not a fraction), by M."""
    out = []
    for c in data.curves:
        v = data.config(c).cohort.size
        if isinstance(v, int | float) and v:
            out.append((float(v), c.label))
    return sorted(out, key=lambda x: x[0])


def _log2_ratio(a: float, b: float) -> float:
    x = math.inf if b == 0 else a / b
    return -math.inf if x <= 0 else math.log2(x)


@measure(
    "intro.cohort_gain_shrink",
    "log2 speed-up per doubling of M between the two smallest cohorts − the same between the "
    "two largest: log2(R(M1)/R(M2))/log2(M2/M1) − log2(R(Mk−1)/R(Mk))/log2(Mk/Mk−1), R the "
    "rounds to the target test accuracy",
    lower_is_better=False,
    scope="panel",
    needs=Needs(target=True),
)
def cohort_gain_shrink(data: ClaimData, panel: str, after: int = 0) -> dict[int, tuple]:
    """Per seed the bounds ``(low, high)`` of the gain per doubling of M between the two
    smallest cohorts minus between the two largest (a run not reaching the target within T:
    R > T, censored); {} without a target or three cohorts with runs."""
    if data.target is None:
        return {}
    reach = [(m, seed_reach(data, panel, label, data.target)) for m, label in cohorts(data)]
    reach = [(m, r) for m, r in reach if r]
    if len(reach) < 3:
        return {}
    (m1, r1), (m2, r2) = reach[0], reach[1]
    (ma, ra), (mb, rb) = reach[-2], reach[-1]
    k_small, k_large = 1 / math.log2(m2 / m1), 1 / math.log2(mb / ma)
    out = {}
    for s in sorted(set(r1) & set(r2) & set(ra) & set(rb)):
        small = (_log2_ratio(r1[s].low, r2[s].high), _log2_ratio(r1[s].high, r2[s].low))
        large = (_log2_ratio(ra[s].low, rb[s].high), _log2_ratio(ra[s].high, rb[s].low))
        out[s] = (small[0] * k_small - large[1] * k_large, small[1] * k_small - large[0] * k_large)
    return out


# ---------------------------------------------------------------------------- failures
def halvings(s: pd.Series, floor: float = 0.0) -> pd.DataFrame:
    """The rounds of one run's training-accuracy history ``s`` (finite values, by round) whose
    value is at most half of the previous logged round's, that one being at least ``floor``
    (and > 0): rows (round, before, after)."""
    prev = s.shift(1)
    hit = ((prev > 0) & (prev >= floor - EPS) & (s <= FAILURE_DROP * prev + EPS)).to_numpy()
    return pd.DataFrame(
        {
            "round": s.index.to_numpy()[hit].astype(int),
            "before": prev.to_numpy()[hit],
            "after": s.to_numpy()[hit],
        }
    )


def training_failures(
    long: pd.DataFrame | None, metric: str = "train_acc", floor: float = 0.0
) -> pd.DataFrame:
    """Catastrophic training failures per run: rows (panel_id, curve, seed, round, before,
    after) of every round t whose training accuracy is at most half of round t−1's (consecutive
    logged rounds, finite values only), round t−1's being at least ``floor``."""
    cols = ["panel_id", "curve", "seed", "round", "before", "after"]
    if long is None or long.empty:
        return pd.DataFrame(columns=cols)
    sel = long[long["metric"] == metric].sort_values(["run_id", "round"])
    frames = []
    for (pid, curve, seed, _), g in sel.groupby(["panel_id", "curve", "seed", "run_id"]):
        s = g.set_index("round")["value"].astype(float)
        hit = halvings(s[s.map(math.isfinite)], floor)
        if len(hit):
            frames.append(hit.assign(panel_id=pid, curve=curve, seed=int(seed)))
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


def failure_counts(data: ClaimData, panel: str, mark: bool = True) -> dict[float, dict[int, int]]:
    """M -> seed -> the failures of that run (halvings from at least chance + 0.3, chance from
    the smallest cohort's data set); {} without training accuracy, two cohorts or a chance."""
    ms = cohorts(data)
    if data.long is None or "train_acc" not in set(data.long["metric"]) or len(ms) < 2:
        return {}
    chance = data.chance(ms[0][1])
    if chance is None:
        return {}
    counts = {}
    for m, label in ms:
        runs = data.seed_series(panel, label, "train_acc", mark=mark)
        if runs:
            counts[m] = {s: len(halvings(h, chance + CHANCE_MARGIN)) for s, h in runs.items()}
    return counts if len(counts) >= 2 else {}


def _slope(x: list[float], y: list[float]) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    return sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sum(
        (a - mx) ** 2 for a in x
    )


@measure(
    "intro.failures_per_doubling",
    "catastrophic training failures per doubling of M: the least-squares slope of the run's "
    "failure count (a halving of the training accuracy from at least chance + 0.3) against "
    "log2 M over the cohort sizes",
    lower_is_better=False,
    scope="panel",
)
def failures_per_doubling(data: ClaimData, panel: str, after: int = 0) -> dict[int, float]:
    """Per seed the slope of the failure counts against log2 M (the seeds every cohort has)."""
    counts = failure_counts(data, panel)
    if not counts:
        return {}
    xs = [math.log2(m) for m in counts]
    seeds = sorted(set.intersection(*(set(c) for c in counts.values())))
    return {s: _slope(xs, [float(counts[m][s]) for m in counts]) for s in seeds}


@guard("intro.no_failures")
def no_failures(data: ClaimData, panel: Panel | None, labels: list[str]) -> str | None:
    """No failure from well above chance in any run (of the seeds every cohort has): the
    slope is 0 by construction, nothing to relate to M."""
    for p in [panel] if panel is not None else data.cases():
        counts = failure_counts(data, p.panel_id, mark=False)
        seeds = set.intersection(*(set(c) for c in counts.values())) if counts else set()
        if any(counts[m][s] for m in counts for s in seeds):
            return None
    return "no failure from well above chance in any run"


__all__ = [
    "FEDOPT_METHODS",
    "balanced_control",
    "cohort_gain_shrink",
    "cohorts",
    "early_train_loss",
    "failures_per_doubling",
    "grid_edge_guard",
    "grid_rates",
    "halvings",
    "no_failures",
    "train_loss_auc",
    "training_failures",
]
