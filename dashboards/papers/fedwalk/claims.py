"""FedWalk's claims (docs/figures.md, "FedWalk"; sweeps/fedwalk-*.yaml): one criterion per
claim text, collected by ``dashboards.registry``; the rules every criterion follows are
:mod:`dashboards.claims`', the methods and the η_0 choice :mod:`.methods`.

Every criterion is a statistical statement (issue 34, :mod:`dashboards.verdicts`): an effect per
seed, paired by seed (the same seed gives the same partition and initial model in every method),
a two-sided 95% Student-t interval over the seeds against a threshold declared once per claim (a
``Measure`` below), and supported / contradicted / inconclusive ("n/a" without data; "not
testable" is the caller's). The margins are the symmetric ones of every claim: an accuracy is
"higher" when it is more than ``ACC_TOL`` = 0.01 higher, a training loss "lower" or "higher" when
it differs by more than ``AUC_TOL`` = 5% of the base method's; a ranking or a trend ("largest",
"falls") has threshold 0.

A method is compared at its chosen η_0 (:func:`.methods.choose_lr`: the grid point with the
highest seed-mean best-over-rounds test accuracy, a choice of configuration); when the chosen
η_0 is the smallest or the largest point of its grid the comparison is inconclusive ("grid not
converged: widen it"), its numbers still shown.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from dashboards.claims import (
    ACC_TOL,
    AUC_TOL,
    ClaimData,
    Criterion,
    Part,
    Result,
    evidence_row,
    judge,
    missing_curve,
    paired_effect,
    rank_margin,
    rounds_of,
)
from dashboards.model import Panel
from dashboards.papers.fedwalk.methods import (
    LEASH_TASKS,
    MIN_TAUS,
    NON_IID_BELOW,
    WALK_BASE_OF,
    WALK_METHODS,
    LrChoice,
    choose_lr,
    fig5_curves,
    leash_curves,
    lr_grid,
    non_iid,
)
from dashboards.verdicts import Measure, decide, interval

# ------------------------------------------------------------------------------ measures
#: Table 2: "FedWalk beats X" means a best-over-rounds test accuracy more than ACC_TOL higher
BEATS = Measure(
    "best-over-rounds test accuracy of FedWalk − the baseline's (fraction), each at its chosen "
    "η_0, per seed (paired)",
    ACC_TOL,
    "greater",
)
#: Table 2: "adding FedWalk helps X": X+FedWalk's accuracy more than ACC_TOL above X's
HELPS = Measure(
    "best-over-rounds test accuracy of X+FedWalk − X's (fraction), each at its chosen η_0, per "
    "seed (paired)",
    ACC_TOL,
    "greater",
)
#: Fig. 2: the share of the rounds that makes the early and the late window (the paper's "early
#: guiding process (i.e., before 100 communication rounds)" of 300: the first third; "a later
#: stage": the last third)
WINDOW_SHARE = 1 / 3
#: Fig. 2 early: the leash *slows* training: X+FedWalk's early training loss more than 5% above
#: X's, i.e. a relative reduction below −AUC_TOL (the mirror of every "faster")
SLOWER_EARLY = Measure(
    "relative reduction (X − X+FedWalk) / X of the mean training loss over the first third of "
    "the rounds, each at its chosen η_0, per seed (paired)",
    -AUC_TOL,
    "less",
)
#: Fig. 2 late: a training loss more than 5% lower over the last third of the rounds
LOWER_LATE = Measure(
    "relative reduction (X − X+FedWalk) / X of the mean training loss over the last third of "
    "the rounds, each at its chosen η_0, per seed (paired)",
    AUC_TOL,
    "greater",
)
#: Fig. 3 LH/MH: "rises then falls": the best interior τ's accuracy is *higher* (by more than
#: ACC_TOL, the margin of every "higher") than the smallest τ's and than the largest τ's
PEAK_ABOVE_EDGE = Measure(
    "best-over-rounds test accuracy at the best interior τ − at the edge τ (fraction), per seed "
    "(paired)",
    ACC_TOL,
    "greater",
)
#: Fig. 3 HH: "falls with τ": a negative least-squares trend (a trend: threshold 0) ...
TAU_SLOPE = Measure(
    "least-squares slope of the best-over-rounds test accuracy against τ (fraction per unit τ), "
    "per seed",
    0.0,
    "less",
)
#: ... and the smallest τ ranks first (a ranking: threshold 0)
SMALLEST_TAU_FIRST = Measure(
    "best-over-rounds test accuracy at the smallest τ − the best at any other τ (fraction), per "
    "seed (paired)",
    0.0,
    "greater",
)
#: Fig. 4: FedWalk beats pre-training: an accuracy more than ACC_TOL higher
BEATS_PRETRAINING = Measure(
    "best-over-rounds test accuracy of FedWalk − pre-training on the same leash task "
    "(fraction), per seed (paired)",
    ACC_TOL,
    "greater",
)
#: Fig. 5: "largest at Dir(0.1)" is a ranking: threshold 0
GAIN_LARGEST_AT_01 = Measure(
    "gain at Dir(0.1) − the largest gain at any other a, gain = FedWalk − FedAvg best-over-rounds "
    "test accuracy (fraction), per seed (paired)",
    0.0,
    "greater",
)

NO_SEEDS = interval([])


def _panel_name(p: Panel) -> str:
    return p.label or p.panel_id


def _acc_text(c: LrChoice) -> str:
    """ "FedWalk 27.25 ± 0.30 (η=1e-2)", or "FedProx no runs"."""
    if c.stat is None:
        return f"{c.method} {c.why_none}"
    return f"{c.method} {c.stat.text()} ({c.eta})"


def _versus(
    data: ClaimData,
    pid: str,
    base: LrChoice,
    other: LrChoice,
    measure: Measure,
    what: str,
    loss: Callable[[pd.Series], float] | None = None,
) -> Part:
    """``other`` against ``base``, each at its chosen η_0, paired by seed: ``other − base`` of
    the best-over-rounds test accuracy, or with ``loss`` (a reduction of a run's training-loss
    history, e.g. :func:`window_mean`) the relative reduction ``(base − other) / base`` of it. A
    method without a chosen η_0, or a chosen η_0 on its grid's edge, gives the part its reason
    (inconclusive)."""
    missing = [f"{c.method} {c.why_none}" for c in (base, other) if c.label is None]
    if missing:
        return Part(what, NO_SEEDS, measure, " and ".join(missing))
    if loss is not None:
        a = data.per_seed(pid, base.label, "train_loss", loss)
        b = data.per_seed(pid, other.label, "train_loss", loss)
        seeds = sorted(set(a) & set(b))
        effects = [(a[s] - b[s]) / a[s] if a[s] else math.nan for s in seeds]
        ev = interval(effects, seeds) if seeds else None
    else:
        ev = paired_effect(data, pid, base.label, other.label, "test_acc", "best")
    if ev is None:
        return Part(what, NO_SEEDS, measure, "no seed with runs of both")
    return Part(what, ev, measure, _edges_text([e for c in (base, other) if (e := c.edge)]))


def _edges_text(edges: list[str]) -> str:
    """One reason from the :func:`grid_edge` texts of the compared methods: "grid not
    converged: the chosen η_0 of FedAvg=0.001 is the smallest of the grid [0.001, 0.01]; the
    chosen η_0 of FedWalk=0.01 is the largest of the grid [0.001, 0.01]: widen it"."""
    if len(edges) < 2:
        return "".join(edges)
    head, tail = "grid not converged: ", ": widen it"
    inner = [e.removeprefix(head).removesuffix(tail) for e in edges]
    return head + "; ".join(inner) + tail


# ------------------------------------------------------------------------------ Table 2
def fedwalk_beats_baselines(data: ClaimData) -> Result:
    """Per non-IID panel (data.dirichlet_alpha < 1: Dir(0.1), Dir(0.01)), one part per
    baseline X in {FedAvg, SCAFFOLD, FedProx, FedNova}: per seed, paired by seed, FedWalk's
    best-over-rounds test accuracy minus X's, each method at its chosen η_0 (the grid point
    with the highest seed-mean best test accuracy; grid points with a diverged or blown-up seed
    excluded); a part holds when the 95% t interval over the seeds lies above +0.01 (ACC_TOL,
    the margin of every "higher"). A part whose method has no runs, or whose chosen η_0 is the
    smallest or largest of its grid ("grid not converged: widen it"), is inconclusive, its
    numbers still shown. Supported when every part of every non-IID panel with data is,
    contradicted when one is. Numbers: per panel each method's best test accuracy (%, seed mean
    ± std) and η_0, then each part's effect and interval."""
    if data.long is None:
        return "n/a", "no per-run histories"
    if not lr_grid(data, "FedWalk"):
        return "n/a", "no FedWalk curve (algorithm fedavg + hooks fedwalk) in this profile"
    panels = [p for p in data.panels if non_iid(p)]
    if not panels:
        return "n/a", f"no non-IID panel (data.dirichlet_alpha < {NON_IID_BELOW:g})"

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        walk = choose_lr(data, p.panel_id, "FedWalk")
        if walk.label is None:
            return None, f"FedWalk {walk.why_none}"
        bases = [choose_lr(data, p.panel_id, m) for m in WALK_METHODS[:4]]
        if all(b.label is None for b in bases):
            return None, "no baseline with runs"
        parts = [_versus(data, p.panel_id, b, walk, BEATS, f"FedWalk − {b.method}") for b in bases]
        return parts, "best test acc (%): " + ", ".join(_acc_text(c) for c in (walk, *bases))

    return judge(data, check, panels)


def _leash_pairs(data: ClaimData) -> list[tuple[str, str]]:
    """(base method, its leashed form) of every pair of Table 2 whose curves the profile has."""
    return [
        (base, walk)
        for walk, base in WALK_BASE_OF.items()
        if lr_grid(data, walk) and lr_grid(data, base)
    ]


def _pair_choices(
    data: ClaimData, pid: str, pairs: list[tuple[str, str]]
) -> list[tuple[LrChoice, LrChoice]]:
    return [(choose_lr(data, pid, base), choose_lr(data, pid, walk)) for base, walk in pairs]


def _no_pair(choices: list[tuple[LrChoice, LrChoice]]) -> bool:
    """No (X, X+FedWalk) pair has runs of both (the panel has no data for the claim)."""
    return all(b.label is None or w.label is None for b, w in choices)


def fedwalk_helps_each_base(data: ClaimData) -> Result:
    """Per panel (every setting, IID ones too) and base X in {FedAvg, SCAFFOLD, FedProx,
    FedNova} whose X and X+FedWalk curves the profile has (FedAvg+FedWalk = FedWalk), one part:
    per seed, paired by seed, X+FedWalk's best-over-rounds test accuracy minus X's, each at its
    chosen η_0 (as in the claim above); a part holds when the 95% t interval over the seeds lies
    above +0.01 (ACC_TOL). A part with a method without runs (in a panel where another pair has
    runs of both), or with a chosen η_0 on its grid's edge ("grid not converged: widen it"), is
    inconclusive. Supported when every part of every panel with data is, contradicted when one
    is; a panel where no pair has runs of both is left out."""
    if data.long is None:
        return "n/a", "no per-run histories"
    pairs = _leash_pairs(data)
    if not pairs:
        return "n/a", "no base method with its FedWalk form in this profile"

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        choices = _pair_choices(data, p.panel_id, pairs)
        if _no_pair(choices):
            return None, "no pair with runs of both"
        parts = [
            _versus(data, p.panel_id, b, w, HELPS, f"{w.method} − {b.method}") for b, w in choices
        ]
        accs = "; ".join(f"{_acc_text(w)} vs {_acc_text(b)}" for b, w in choices)
        return parts, f"best test acc (%): {accs}"

    return judge(data, check, data.panels)


# ------------------------------------------------------------------------------ Fig. 2
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


def _window_text(data: ClaimData, pid: str, c: LrChoice, fn) -> str:
    if c.label is None:
        return f"{c.method} {c.why_none}"
    values = list(data.per_seed(pid, c.label, "train_loss", fn, mark=False).values())
    if not values:
        return f"{c.method} no training loss"
    return f"{c.method} {math.fsum(values) / len(values):.4f}"


def _fig2(data: ClaimData, measure: Measure, late: bool) -> Result:
    """Per non-IID panel and pair (X, X+FedWalk), each at its chosen η_0: the relative
    reduction of the mean training loss over the early (or ``late``) window, per seed."""
    if data.long is None:
        return "n/a", "no per-run histories"
    panels = [p for p in data.panels if non_iid(p)]
    if not panels:
        return "n/a", f"no non-IID panel (data.dirichlet_alpha < {NON_IID_BELOW:g})"
    pairs = _leash_pairs(data)
    if not pairs:
        return "n/a", "no base method with its FedWalk form in this profile"
    first, last = windows(rounds_of(data))[1 if late else 0]
    fn = window_mean(first, last)

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        pid = p.panel_id
        choices = _pair_choices(data, pid, pairs)
        if _no_pair(choices):
            return None, "no pair with runs of both"
        parts = [
            _versus(data, pid, b, w, measure, f"{w.method} vs {b.method}", fn) for b, w in choices
        ]
        losses = "; ".join(
            f"{_window_text(data, pid, w, fn)} vs {_window_text(data, pid, b, fn)}"
            for b, w in choices
        )
        etas = ", ".join(f"{c.method} {c.eta}" for pair in choices for c in pair if c.label)
        return (
            parts,
            f"mean training loss over rounds {first}–{last} (seed mean): {losses} ({etas})",
        )

    return judge(data, check, panels)


def leash_slows_early(data: ClaimData) -> Result:
    """Per non-IID panel (data.dirichlet_alpha < 1) and base X in {FedAvg, SCAFFOLD, FedProx,
    FedNova} with X and X+FedWalk in the profile, each at the η_0 Table 2 chose: per seed,
    paired by seed, the relative reduction (X − X+FedWalk) / X of the run's mean training loss
    over the early window, the first third of the rounds (rounds 1..⌊T/3⌋: the paper's "before
    100 communication rounds" of 300). The leash slows training when the 95% t interval over
    the seeds lies below −0.05 (X+FedWalk's early loss more than 5% above X's: the mirror of
    every "faster", AUC_TOL). A pair with a method without runs, or with a chosen η_0 on its
    grid's edge ("grid not converged: widen it"), is inconclusive. Supported when every pair of
    every non-IID panel with runs is, contradicted when one is."""
    return _fig2(data, SLOWER_EARLY, late=False)


def lower_loss_later(data: ClaimData) -> Result:
    """Per non-IID panel (data.dirichlet_alpha < 1) and base X in {FedAvg, SCAFFOLD, FedProx,
    FedNova} with X and X+FedWalk in the profile, each at the η_0 Table 2 chose: per seed,
    paired by seed, the relative reduction (X − X+FedWalk) / X of the run's mean training loss
    over the late window, the last third of the rounds (rounds T−⌊T/3⌋+1..T). X+FedWalk reaches
    a lower training loss later when the 95% t interval over the seeds lies above +0.05 (more
    than 5% lower: the margin of every "faster", AUC_TOL). A pair with a method without runs, or
    with a chosen η_0 on its grid's edge ("grid not converged: widen it"), is inconclusive.
    Supported when every pair of every non-IID panel with runs is, contradicted when one is."""
    return _fig2(data, LOWER_LATE, late=True)


# ------------------------------------------------------------------------------ Fig. 3
def _task_panels(data: ClaimData, tasks: tuple[str, ...]) -> list[Panel]:
    return [p for p in data.panels if p.values.get("leash.task") in tasks]


def _tau_runs(data: ClaimData, pid: str) -> list[tuple[float, str, dict[int, float]]]:
    """(τ, label, seed -> best test accuracy) of the ``fedwalk.tau`` curves with runs in
    ``pid``, sorted by τ (read without marking: the criterion marks what it compares)."""
    out = []
    for tau, label in data.curves_with("fedwalk.tau"):
        values = data.per_seed(pid, label, "test_acc", "best", mark=False)
        if values:
            out.append((float(tau), label, values))
    return sorted(out, key=lambda x: x[0])


def _mean(values: dict[int, float]) -> float:
    return math.fsum(values.values()) / len(values)


def _taus_text(runs: list[tuple[float, str, dict[int, float]]]) -> str:
    return "best test acc (%, seed mean) per τ: " + ", ".join(
        f"{t:g}: {100 * _mean(v):.2f}" for t, _, v in runs
    )


def tau_rises_then_falls(data: ClaimData) -> Result:
    """Per LH and MH panel (leash.task), over the τ curves (fedwalk.tau) with runs (at least
    3): the best interior τ (neither the smallest nor the largest drawn; chosen on the seed-mean
    best test accuracy, a choice as η_0 is) against each edge, two parts: per seed, paired by
    seed, the best-over-rounds test accuracy at that τ minus at the smallest τ (it rises) and
    minus at the largest τ (it falls). A part holds when the 95% t interval over the seeds lies
    above +0.01 (ACC_TOL, the margin of every "higher"). Supported when all four parts of the
    two tasks with data are, contradicted when one is; a task with fewer than 3 τ with runs is
    listed as without data."""
    if data.long is None:
        return "n/a", "no per-run histories"
    panels = _task_panels(data, ("LH", "MH"))
    if not panels:
        return "n/a", "no LH or MH panel (leash.task) in this profile"

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        pid = p.panel_id
        runs = _tau_runs(data, pid)
        if len(runs) < MIN_TAUS:
            return None, f"{len(runs)} τ value(s) with runs, {MIN_TAUS} needed"
        (t_lo, lo, _), (t_hi, hi, _) = runs[0], runs[-1]
        t_peak, peak, _ = max(runs[1:-1], key=lambda x: _mean(x[2]))
        parts: list[Part] = []
        for t_edge, edge, side in ((t_lo, lo, "smallest"), (t_hi, hi, "largest")):
            ev = paired_effect(data, pid, edge, peak, "test_acc", "best")
            what = f"τ={t_peak:g} − τ={t_edge:g} ({side})"
            parts.append(
                Part(what, ev or NO_SEEDS, PEAK_ABOVE_EDGE, "" if ev else "no common seed")
            )
        return parts, f"best interior τ={t_peak:g} (on the seed means); {_taus_text(runs)}"

    return judge(data, check, panels)


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` against ``xs`` (at least two distinct xs)."""
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    return math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def tau_falls(data: ClaimData) -> Result:
    """For the HH panel (leash.task HH), over the τ curves (fedwalk.tau) with runs (at least
    3), two parts over the seeds every such τ has: per seed the least-squares slope of the
    best-over-rounds test accuracy against τ, which holds when its 95% t interval lies below 0
    (a trend: threshold 0); and per seed the margin by which the smallest τ's accuracy beats
    the best of the other τ (a ranking, ``rank_margin``), which holds when its interval lies
    above 0. Supported when both are, contradicted when one is."""
    if data.long is None:
        return "n/a", "no per-run histories"
    panels = _task_panels(data, ("HH",))
    if not panels:
        return "n/a", "no HH panel (leash.task) in this profile"

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        pid = p.panel_id
        runs = _tau_runs(data, pid)
        if len(runs) < MIN_TAUS:
            return None, f"{len(runs)} τ value(s) with runs, {MIN_TAUS} needed"
        taus = [t for t, _, _ in runs]
        values = [data.per_seed(pid, label, "test_acc", "best") for _, label, _ in runs]
        seeds = sorted(set.intersection(*(set(v) for v in values)))
        if not seeds:
            return [Part("slope per unit τ", NO_SEEDS, TAU_SLOPE, "no seed has every τ")], ""
        slopes = interval([slope(taus, [v[s] for v in values]) for s in seeds], seeds)
        rivals = [label for _, label, _ in runs[1:]]
        first = rank_margin(
            data, pid, [runs[0][1]], rivals, "test_acc", "best", lower_is_better=False
        )
        parts: list[Part] = [
            Part("slope per unit τ", slopes, TAU_SLOPE),
            Part(f"τ={taus[0]:g} − the best other τ", first or NO_SEEDS, SMALLEST_TAU_FIRST),
        ]
        return parts, _taus_text(runs)

    return judge(data, check, panels)


# ------------------------------------------------------------------------------ Fig. 4
def fedwalk_beats_pretraining(data: ClaimData) -> Result:
    """Per setting panel and leash task with both curves in the profile, one part: per seed,
    paired by seed, FedWalk's best-over-rounds test accuracy with that leash task (hooks
    fedwalk, leash.task) minus pre-training's on the same task then FedAvg (hooks
    leash_pretrain); a part holds when the 95% t interval over the seeds lies above +0.01
    (ACC_TOL, the margin of every "higher"). A task without runs of both in a panel where
    another task has them is inconclusive. Supported when every part of every panel with runs
    is, contradicted when one is."""
    if data.long is None:
        return "n/a", "no per-run histories"
    walk, pre = leash_curves(data, "fedwalk"), leash_curves(data, "leash_pretrain")
    tasks = [t for t in (*LEASH_TASKS, *sorted(walk)) if t in walk and t in pre]
    tasks = list(dict.fromkeys(tasks))
    if not tasks:
        return "n/a", "no leash task with both a FedWalk and a Pre-training curve in this profile"

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        pid = p.panel_id
        stats = {
            (t, name): data.run_stat(pid, label, "test_acc", mark=False)
            for t in tasks
            for name, label in (("FedWalk", walk[t]), ("Pre-training", pre[t]))
        }
        evs = {t: paired_effect(data, pid, pre[t], walk[t], "test_acc", "best") for t in tasks}
        if all(ev is None for ev in evs.values()):
            return None, "no leash task with runs of both"
        parts: list[Part] = [
            Part(t, ev or NO_SEEDS, BEATS_PRETRAINING, "" if ev else "no runs of both")
            for t, ev in evs.items()
        ]

        def acc(t: str, name: str) -> str:
            s = stats[(t, name)]
            return f"{name} {s.text() if s else 'no runs'}"

        accs = "; ".join(f"{t} {acc(t, 'FedWalk')} vs {acc(t, 'Pre-training')}" for t in tasks)
        return parts, f"best test acc (%): {accs}"

    return judge(data, check, data.panels)


# ------------------------------------------------------------------------------ Fig. 5
def gain_largest_at_01(data: ClaimData) -> Result:
    """Over the Dir(a) panels (data.dirichlet_alpha), per seed (the seeds every panel with runs
    of both curves has): the gain at a = 0.1 minus the largest gain at any other a, gain =
    FedWalk's best-over-rounds test accuracy − FedAvg's in that panel, paired by seed. A ranking
    ("largest"): supported when the 95% t interval over the seeds lies above 0, contradicted
    when below. "n/a" when Dir(0.1) or every other a lacks runs of both curves. Numbers: the
    gain per a (points, seed mean) and the effect."""
    if data.long is None:
        return "n/a", "no per-run histories"
    avg, walk = fig5_curves(data)
    if (
        why := missing_curve((avg, "FedAvg (no hooks)"), (walk, "FedWalk (hooks fedwalk)"))
    ) is not None:
        return "n/a", why
    gains: list[tuple[float, dict[int, float]]] = []
    for p in data.panels:
        alpha = p.values.get("data.dirichlet_alpha")
        if not isinstance(alpha, int | float):
            continue
        a = data.per_seed(p.panel_id, avg, "test_acc", "best")
        w = data.per_seed(p.panel_id, walk, "test_acc", "best")
        seeds = sorted(set(a) & set(w))
        if seeds:
            gains.append((float(alpha), {s: w[s] - a[s] for s in seeds}))
    gains.sort(key=lambda g: g[0])
    text = "gain FedWalk − FedAvg (points of best test acc, seed mean): " + ", ".join(
        f"Dir({a:g}) {100 * _mean(g):+.2f}" for a, g in gains
    )
    at = [g for a, g in gains if math.isclose(a, 0.1)]
    others = [g for a, g in gains if not math.isclose(a, 0.1)]
    if not at or not others:
        have = "no Dir(0.1) panel with data" if not at else "no other Dir(a) panel with data"
        return "n/a", have + (f"; {text}" if gains else "")
    seeds = sorted(set(at[0]).intersection(*(set(g) for g in others)))
    if not seeds:
        return "n/a", f"no seed with runs in every panel; {text}"
    effects = [at[0][s] - max(g[s] for g in others) for s in seeds]
    ev = interval(effects, seeds)
    verdict = decide(ev, GAIN_LARGEST_AT_01)
    data.evidence.append(evidence_row("Dir(0.1) vs the other a", ev, GAIN_LARGEST_AT_01))
    return verdict, f"{text}; Dir(0.1) − the largest other gain {ev.text()} → {verdict}"


CRITERIA: dict[str, Criterion] = {
    "fedwalk beats every baseline under non-iid": fedwalk_beats_baselines,
    "adding fedwalk helps each base method (scaffold, fedprox, fednova, and fedavg itself)": (
        fedwalk_helps_each_base
    ),
    "under non-iid the leash slows training in the early rounds": leash_slows_early,
    "under non-iid fedwalk and its compositions reach a lower training loss later": (
        lower_loss_later
    ),
    "accuracy rises then falls with τ for lh and mh": tau_rises_then_falls,
    "accuracy falls with τ for hh": tau_falls,
    "fedwalk beats pre-training on the same leash task": fedwalk_beats_pretraining,
    "fedwalk's gain over fedavg is largest at dir(0.1)": gain_largest_at_01,
}

#: the paper's own words for each claim (fedwalk.txt, verbatim; " … " marks text left out: the
#: figure captions that interrupt Sec. 5.3 (3))
PAPER_WORDS: dict[str, str] = {
    "fedwalk beats every baseline under non-iid": (
        "Sec. 5.2 (Table 2): “FedWalk achieves a considerable performance improvement over the "
        "baselines, surpassing the best baseline by at least 3.39 % and 1.24% test accuracy on "
        "CIFAR-10 and CIFAR-100 dataset under the non-IID Dir(0.1) setting.”"
    ),
    "adding fedwalk helps each base method (scaffold, fedprox, fednova, and fedavg itself)": (
        "Sec. 5.2 (Table 2): “When combined with the baselines, FedWalk can boost their test "
        "accuracy consistently across different scenarios.”"
    ),
    "under non-iid the leash slows training in the early rounds": (
        "Sec. 5.2 (Fig. 2): “under the non-IID setting, the leash task appears to hinder the "
        "convergence of the FL task during an early guiding process (i.e., before 100 "
        "communication rounds).”"
    ),
    "under non-iid fedwalk and its compositions reach a lower training loss later": (
        "Sec. 5.2 (Fig. 2): “Such a tension turns out to benefit the convergence at a later "
        "stage as indicated by the lower training loss.”"
    ),
    "accuracy rises then falls with τ for lh and mh": (
        "Sec. 5.3 (1), Fig. 3: “With the increase of τ from -1.5 to 3, the performance with the "
        "LH and MH leash tasks first increases and then decreases”"
    ),
    "accuracy falls with τ for hh": (
        "Sec. 5.3 (1), Fig. 3: “while the performance with the HH leash task decreases "
        "monotonically.”"
    ),
    "fedwalk beats pre-training on the same leash task": (
        "Sec. 5.3 (2), Fig. 4: “Figure 4 illustrates the results where it shows that FedWalk "
        "(red bars) outperforms the pre-training (blue bars), especially under the non-IID "
        "setting.”"
    ),
    "fedwalk's gain over fedavg is largest at dir(0.1)": (
        "Sec. 5.3 (3), Fig. 5: “while FedWalk demonstrates a consistent improvement over "
        "FedAvg, the superiority of … FedWalk is more pronounced under higher levels of data "
        "heterogeneity, i.e., $\\alpha = 0.1$.”"
    ),
}
