"""FedWalk's claims (docs/figures.md, "FedWalk"; sweeps/fedwalk-*.yaml): one criterion per
claim text, collected by ``dashboards.registry``; the rules every criterion follows are
:mod:`dashboards.claims`', the methods and the η_0 choice :mod:`.methods`."""

from __future__ import annotations

import math

from dashboards.claims import ClaimData, Criterion, Result, missing_curve, per_case
from dashboards.model import Panel
from dashboards.papers.fedwalk.methods import (
    LEASH_TASKS,
    MIN_TAUS,
    NON_IID_BELOW,
    WALK_BASE_OF,
    WALK_METHODS,
    choose_lr,
    compare_text,
    fig5_curves,
    fit_slope,
    leash_curves,
    lr_grid,
    non_iid,
    pct_pair,
    tau_points,
    walk_gains,
)
from dashboards.reducers import Stat


def _panel_name(p: Panel) -> str:
    return p.label or p.panel_id


def fedwalk_beats_baselines(data: ClaimData) -> Result:
    """In each non-IID panel (data.dirichlet_alpha < 1: Dir(0.1), Dir(0.01)) with data, FedWalk's
    best test accuracy is strictly higher than each of FedAvg, SCAFFOLD, FedProx and FedNova;
    every method at its chosen η_0 (the grid point with the highest seed-mean best-over-rounds
    test accuracy, grid points with a diverged or blown-up seed excluded), best = max over
    rounds per run, then the seed mean. A panel fails when a baseline with data ties or beats
    FedWalk, passes only when all four baselines have data and FedWalk beats each, and counts
    as without data otherwise (numbers: accuracies in %, chosen η)."""
    if data.long is None:
        return "n/a", "no per-run histories"
    if not lr_grid(data, "FedWalk"):
        return "n/a", "no FedWalk curve (algorithm fedavg + hooks fedwalk) in this profile"
    panels = [p for p in data.panels if non_iid(p)]
    if not panels:
        return "n/a", f"no non-IID panel (data.dirichlet_alpha < {NON_IID_BELOW:g})"

    def check(p: Panel):
        walk = choose_lr(data, p.panel_id, "FedWalk")
        if walk.stat is None:
            return None, f"FedWalk {walk.why_none}"
        oks, parts, missing = [], [], []
        for base in WALK_METHODS[:4]:
            ch = choose_lr(data, p.panel_id, base)
            if ch.stat is None:
                missing.append(f"{base} {ch.why_none}")
                continue
            oks.append(walk.stat.mean > ch.stat.mean)
            ta, tb = pct_pair(walk.stat.mean, ch.stat.mean)
            op = "=" if ta == tb else (">" if walk.stat.mean > ch.stat.mean else "<")
            tie = " (tie)" if walk.stat.mean == ch.stat.mean else ""
            parts.append(f"{op} {base} {tb}{tie} ({ch.eta})")
        text = f"best test acc (%): FedWalk {100 * walk.stat.mean:.2f} ({walk.eta})"
        text += (" " + ", ".join(parts)) if parts else ""
        text += ("; missing: " + ", ".join(missing)) if missing else ""
        if oks and not all(oks):
            return False, text
        if missing:
            return None, text + " (all four baselines needed)"
        return True, text

    return per_case(data, check, panels)


def _leash_pairs(data: ClaimData, panels: list[Panel]):
    """(panel, base method, its leashed form, base choice, leashed choice) of every panel and
    base of Table 2 whose curves the profile has."""
    out = []
    for p in panels:
        for walk, base in WALK_BASE_OF.items():
            if not lr_grid(data, walk) or not lr_grid(data, base):
                continue
            out.append((p, base, walk))
    return out


def _no_data_text(missing: list[tuple[str, str]]) -> str:
    """ "no data: CIFAR-100, Dir(0.01): FedAvg no runs, SCAFFOLD no runs; ..." from (panel name,
    what) pairs, grouped by panel in order."""
    by: dict[str, list[str]] = {}
    for panel, what in missing:
        by.setdefault(panel, []).append(what)
    return "no data: " + "; ".join(f"{p}: {', '.join(w)}" for p, w in by.items())


def fedwalk_helps_each_base(data: ClaimData) -> Result:
    """For each base method X in {FedAvg, SCAFFOLD, FedProx, FedNova} and each panel where both
    have data, X+FedWalk (FedAvg+FedWalk = FedWalk) has a strictly higher best test accuracy
    than X, each at its chosen η_0 (as in the Table 2 claim above). "yes" iff every such pair
    holds, "n/a" without any pair with data. Numbers: how many pairs hold, each pair's
    accuracies (%) and the pairs without data."""
    if data.long is None:
        return "n/a", "no per-run histories"
    pairs = _leash_pairs(data, data.panels)
    if not pairs:
        return "n/a", "no base method with its FedWalk form in this profile"
    held, parts, missing = 0, [], []
    for p, base, walk in pairs:
        b = choose_lr(data, p.panel_id, base)
        w = choose_lr(data, p.panel_id, walk)
        if b.stat is None or w.stat is None:
            whats = [f"{c.method} {c.why_none}" for c in (b, w) if c.stat is None]
            missing.append((_panel_name(p), " and ".join(whats)))
            continue
        held += w.stat.mean > b.stat.mean
        parts.append(f"{_panel_name(p)}: {compare_text(walk, w.stat.mean, base, b.stat.mean)}")
    return _pairs_verdict(held, parts, missing, "best test acc %")


def fedwalk_lowers_training_loss(data: ClaimData) -> Result:
    """In each non-IID panel (data.dirichlet_alpha < 1), for each base X in {FedAvg, SCAFFOLD,
    FedProx, FedNova} with data for X and X+FedWalk (FedAvg+FedWalk = FedWalk), each at the η_0
    Table 2 chose (best seed-mean best-over-rounds test accuracy), X+FedWalk's mean training
    loss over the rounds (the mean of the seed-mean train_loss curve: area under it / T) is
    strictly lower than X's. "yes" iff every such pair holds, "n/a" without any."""
    if data.long is None:
        return "n/a", "no per-run histories"
    panels = [p for p in data.panels if non_iid(p)]
    if not panels:
        return "n/a", f"no non-IID panel (data.dirichlet_alpha < {NON_IID_BELOW:g})"
    pairs = _leash_pairs(data, panels)
    if not pairs:
        return "n/a", "no base method with its FedWalk form in this profile"
    held, parts, missing = 0, [], []
    for p, base, walk in pairs:
        b = choose_lr(data, p.panel_id, base)
        w = choose_lr(data, p.panel_id, walk)
        lb = data.auc(p.panel_id, b.label, "train_loss") if b.label else None
        lw = data.auc(p.panel_id, w.label, "train_loss") if w.label else None
        if lb is None or lw is None:
            whats = [
                f"{c.method} {c.why_none or 'no training loss'}"
                for c, loss in ((b, lb), (w, lw))
                if loss is None
            ]
            missing.append((_panel_name(p), " and ".join(whats)))
            continue
        held += lw < lb
        text = compare_text(f"{walk} ({w.eta})", lw, f"{base} ({b.eta})", lb, lower=True)
        parts.append(f"{_panel_name(p)}: {text}")
    return _pairs_verdict(held, parts, missing, "mean training loss over rounds")


def _pairs_verdict(held: int, parts: list[str], missing: list, what: str) -> Result:
    """The verdict of a (base, base + FedWalk) pair claim: "yes" iff all ``parts`` (pairs with
    data) hold, "n/a" without any; the numbers say how many hold, each pair, and what had no
    data (``missing``)."""
    if not parts:
        return "n/a", "no pair with data; " + _no_data_text(missing)
    n = len(parts)
    text = f"{held} of {n} pairs hold ({what}): " + "; ".join(parts)
    if missing:
        text += "; " + _no_data_text(missing)
    return ("yes" if held == n else "no"), text


def _taus_text(points: list[tuple[float, Stat]]) -> str:
    return ", ".join(f"{t:g}: {100 * s.mean:.2f}" for t, s in points)


def _task_panels(data: ClaimData, tasks: tuple[str, ...]) -> list[Panel]:
    return [p for p in data.panels if p.values.get("leash.task") in tasks]


def _best_taus(points: list[tuple[float, Stat]]) -> list[float]:
    top = max(s.mean for _, s in points)
    return [t for t, s in points if s.mean == top]


def _tie_text(best: list[float]) -> str:
    """`` (tie: τ=0.5, 1)`` when several τ share the best accuracy, else ``""``."""
    return f" (tie: τ={', '.join(f'{t:g}' for t in best)})" if len(best) > 1 else ""


def tau_rises_then_falls(data: ClaimData) -> Result:
    """For the LH and MH leash tasks (panels leash.task LH, MH), over the τ curves
    (fedwalk.tau) with data (at least 3), the τ with the highest seed-mean best test accuracy
    lies strictly inside the τ range drawn (neither the smallest nor the largest τ: the
    accuracy rises, then falls); an exact tie for the best counts only if every tied τ is
    inside. "yes" iff every task with data passes."""
    if data.long is None:
        return "n/a", "no per-run histories"
    panels = _task_panels(data, ("LH", "MH"))
    if not panels:
        return "n/a", "no LH or MH panel (leash.task) in this profile"

    def check(p: Panel):
        points = tau_points(data, p.panel_id)
        if len(points) < MIN_TAUS:
            return None, f"{len(points)} τ value(s) with runs, {MIN_TAUS} needed"
        best = _best_taus(points)
        lo, hi = points[0][0], points[-1][0]
        inside = all(lo < t < hi for t in best)
        tie = _tie_text(best)
        where = "inside" if inside else "at the edge of"
        top = 100 * max(s.mean for _, s in points)
        return inside, (
            f"best τ={best[0]:g} ({top:.2f}%){tie} {where} [{lo:g}, {hi:g}]; "
            f"best test acc (%) per τ: {_taus_text(points)}"
        )

    return per_case(data, check, panels)


def tau_falls(data: ClaimData) -> Result:
    """For the HH leash task (panel leash.task HH), over the τ curves (fedwalk.tau) with data
    (at least 3): the least-squares slope of the seed-mean best test accuracy against τ is
    negative (< 0) and the highest accuracy is at the smallest τ alone (an exact tie with
    another τ fails, stated)."""
    if data.long is None:
        return "n/a", "no per-run histories"
    panels = _task_panels(data, ("HH",))
    if not panels:
        return "n/a", "no HH panel (leash.task) in this profile"

    def check(p: Panel):
        points = tau_points(data, p.panel_id)
        if len(points) < MIN_TAUS:
            return None, f"{len(points)} τ value(s) with runs, {MIN_TAUS} needed"
        slope = fit_slope(points)
        best = _best_taus(points)
        at_min = best == [points[0][0]]
        tie = _tie_text(best)
        return slope < 0 and at_min, (
            f"slope {100 * slope:+.3f} points per unit τ ({'< 0' if slope < 0 else '≥ 0'}); "
            f"best at τ={best[0]:g}{tie}, smallest τ {points[0][0]:g}; "
            f"best test acc (%) per τ: {_taus_text(points)}"
        )

    return per_case(data, check, panels)


def fedwalk_beats_pretraining(data: ClaimData) -> Result:
    """For every (setting panel, leash task) where both have data, FedWalk with that leash task
    (hooks fedwalk, leash.task) has a strictly higher best test accuracy (max over rounds per
    run, seed mean) than pre-training on the same leash task then FedAvg (hooks
    leash_pretrain). "yes" iff every such pair holds, "n/a" without any. Numbers: how many
    pairs hold, and each pair's accuracies (%)."""
    if data.long is None:
        return "n/a", "no per-run histories"
    walk, pre = leash_curves(data, "fedwalk"), leash_curves(data, "leash_pretrain")
    tasks = [t for t in (*LEASH_TASKS, *sorted(walk)) if t in walk and t in pre]
    tasks = list(dict.fromkeys(tasks))
    if not tasks:
        return "n/a", "no leash task with both a FedWalk and a Pre-training curve in this profile"
    held, parts, missing = 0, [], []
    for p in data.panels:
        for task in tasks:
            w = data.run_stat(p.panel_id, walk[task], "test_acc")
            b = data.run_stat(p.panel_id, pre[task], "test_acc")
            if w is None or b is None:
                missing.append(f"{_panel_name(p)} {task}")
                continue
            held += w.mean > b.mean
            text = compare_text("FedWalk", w.mean, "Pre-training", b.mean)
            parts.append(f"{_panel_name(p)} {task}: {text}")
    if not parts:
        return "n/a", "no (setting, task) pair with data"
    n = len(parts)
    text = f"{held} of {n} (setting, task) pairs hold (best test acc %): " + "; ".join(parts)
    if missing:
        text += "; no runs: " + ", ".join(missing)
    return ("yes" if held == n else "no"), text


def gain_largest_at_01(data: ClaimData) -> Result:
    """Over the Dir(a) panels (data.dirichlet_alpha) with data for both, the gain = FedWalk's
    best test accuracy − FedAvg's (seed means of the max over rounds per run) is largest at
    a = 0.1, strictly larger than at every other a (an exact tie fails, stated). "n/a" when
    a = 0.1 or every other a lacks data."""
    if data.long is None:
        return "n/a", "no per-run histories"
    avg, walk = fig5_curves(data)
    if (
        why := missing_curve((avg, "FedAvg (no hooks)"), (walk, "FedWalk (hooks fedwalk)"))
    ) is not None:
        return "n/a", why
    gains = walk_gains(data)
    text = "gain FedWalk − FedAvg (points of best test acc): " + ", ".join(
        f"Dir({a:g}) {100 * g:+.2f}" for a, _, g in gains
    )
    at = [g for a, _, g in gains if math.isclose(a, 0.1)]
    if not at or len(gains) < 2:
        have = "no Dir(0.1) panel with data" if not at else "no other Dir(a) panel with data"
        return "n/a", f"{have}" + (f"; {text}" if gains else "")
    top = max(g for _, _, g in gains)
    argmax = [a for a, _, g in gains if g == top]
    tie = f" (tie: a={', '.join(f'{a:g}' for a in argmax)})" if len(argmax) > 1 else ""
    ok = argmax == [0.1] or (len(argmax) == 1 and math.isclose(argmax[0], 0.1))
    return ("yes" if ok else "no"), f"{text}; largest at a={argmax[0]:g}{tie}"


CRITERIA: dict[str, Criterion] = {
    "fedwalk beats every baseline under non-iid": fedwalk_beats_baselines,
    "adding fedwalk helps each base method (scaffold, fedprox, fednova, and fedavg itself)": (
        fedwalk_helps_each_base
    ),
    "fedwalk and its compositions lower the training loss faster than their base methods "
    "under non-iid": fedwalk_lowers_training_loss,
    "accuracy rises then falls with τ for lh and mh": tau_rises_then_falls,
    "accuracy falls with τ for hh": tau_falls,
    "fedwalk beats pre-training on the same leash task": fedwalk_beats_pretraining,
    "fedwalk's gain over fedavg is largest at dir(0.1)": gain_largest_at_01,
}
