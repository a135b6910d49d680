"""The introduction-to-FL claims (docs/figures.md, "Introduction-to-FL slides";
sweeps/intro-*.yaml): one criterion per claim text, collected by ``dashboards.registry``; the
rules every criterion follows are :mod:`dashboards.claims`'."""

from __future__ import annotations

import math

import pandas as pd

from dashboards.claims import (
    EPS,
    ClaimData,
    Criterion,
    Result,
    fmt,
    missing_curve,
    per_case,
    rel_gain,
    rounds_of,
    within,
)
from dashboards.model import Panel
from dashboards.targets import Reach, rounds_to_target, speedup
from fedsweep.sweep.spec import CurveSpec

FAR_SPEEDUP = 2.0  # "far fewer rounds": speed-up over FedSGD of at least this factor


def _reach(data: ClaimData, pid: str, curve: str, metric: str = "test_acc") -> Reach | None:
    """When the seed-mean ``metric`` curve reaches the figure's target (None: no data)."""
    return rounds_to_target(data.series(pid, curve, metric), data.target or 0.0)


def _no_target(data: ClaimData) -> str | None:
    return None if data.target is not None else "the profile sets no target_acc"


def fedavg_fewer_rounds(data: ClaimData) -> Result:
    """Per panel every FedAvg curve (a numeric B) reaches the target test accuracy within T, with
    a speed-up over FedSGD (B = full) of at least 2: rounds(FedSGD) / rounds(FedAvg), where a
    FedSGD that does not reach the target within T counts as T + 1 rounds (a lower bound)."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    sgd = data.curve_where("train.batch_size", "full")
    avg = [c.label for c in data.curves if isinstance(data.config(c).train.batch_size, int)]
    if sgd is None or not avg:
        return "n/a", missing_curve((sgd, "FedSGD (B=full)")) or "the spec has no FedAvg curve"

    def check(p: Panel):
        base = _reach(data, p.panel_id, sgd)
        if base is None:
            return None, "FedSGD missing"
        oks, parts = [], [f"FedSGD {base.short}"]
        for label in avg:
            r = _reach(data, p.panel_id, label)
            if r is None:
                continue
            up = speedup(base, r)
            ok = up.value is not None and within(FAR_SPEEDUP, up.value)
            oks.append(ok)
            parts.append(f"{label} {r.short} ({up.text})")
        if not oks:
            return None, "no FedAvg curve with data"
        return all(oks), "rounds to target: " + ", ".join(parts)

    return per_case(data, check)


def _reached(data: ClaimData, panel_id: str, curves) -> list:
    """``(value, rounds to target)`` for each ``(value, curve label)`` with data in the panel."""
    reach = [(v, _reach(data, panel_id, label)) for v, label in curves]
    return [(v, r) for v, r in reach if r is not None]


def e_interior_fastest(data: ClaimData) -> Result:
    """Per panel, over the E curves, the fewest rounds to the target test accuracy (seed mean;
    not reached within T counts as T + 1) are strictly fewer than both the smallest E's and the
    largest E's rounds (an intermediate E is fastest); "no" also when no E curve reaches it."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    es = data.curves_with("train.local_epochs")
    if len(es) < 3:
        return "n/a", "fewer than three E curves"

    def check(p: Panel):
        reach = _reached(data, p.panel_id, es)
        if len(reach) < 3:
            return None, "fewer than three E curves with data"
        best = min(r.low for _, r in reach)
        ends = (reach[0][1], reach[-1][1])
        any_reached = any(r.reached for _, r in reach)
        ok = any_reached and all(r.low > best for r in ends)
        return ok, "rounds to target " + ", ".join(f"E={v:g}: {r.short}" for v, r in reach)

    return per_case(data, check)


def replacement_faster(data: ClaimData) -> Result:
    """Per panel scheme 1 (sampler replacement) has a lower training-loss AUC (mean of the
    seed-mean training loss over the rounds) than scheme 2 (sampler uniform, weighting
    scheme2)."""
    s1 = data.curve_where("sampler", "replacement")
    s2 = data.curve_matching(sampler="uniform", uniform__weighting="scheme2")
    if (why := missing_curve((s1, "scheme 1 (replacement)"), (s2, "scheme 2"))) is not None:
        return "n/a", why

    def check(p: Panel):
        a1, a2 = data.auc(p.panel_id, s1, "train_loss"), data.auc(p.panel_id, s2, "train_loss")
        if a1 is None or a2 is None:
            return None, "scheme 1 or scheme 2 missing (train_loss)"
        return a1 < a2, (
            f"train-loss AUC scheme 1 {fmt(a1, 4)} vs scheme 2 {fmt(a2, 4)} "
            f"(gain {100 * rel_gain(a2, a1):+.1f}%)"
        )

    return per_case(data, check)


#: server optimizer -> method name of the intro-fedopt figure
FEDOPT_METHODS = {"sgd": "FedAvg", "adagrad": "FedAdagrad", "adam": "FedAdam", "yogi": "FedYogi"}


def best_of_grid(data: ClaimData, pid: str, optimizer: str) -> tuple[str | None, float | None]:
    """The grid point (curve) of ``server_optimizer = optimizer`` with the highest seed-mean
    final test accuracy in panel ``pid``, and that accuracy; grid points with a diverged or
    blown-up seed, or without data, are not candidates (spec order breaks exact ties). The
    candidates are read without marking them used; the caller reads the chosen one."""
    best, best_acc = None, None
    for c in data.curves:
        if data.config(c).server_optimizer != optimizer or data.failed_seeds(pid, c.label):
            continue
        s = data.peek(pid, c.label, "test_acc")
        if len(s) and (best_acc is None or float(s.iloc[-1]) > best_acc):
            best, best_acc = c.label, float(s.iloc[-1])
    return best, best_acc


def adaptive_outperform(data: ClaimData) -> Result:
    """Per panel FedAdagrad, FedAdam and FedYogi, each at its best grid point (highest seed-mean
    final test accuracy over the (η_l, η_s) curves without a diverged or blown-up seed), reach a
    higher final test accuracy than FedAvg (server_optimizer sgd) at its best grid point."""

    def check(p: Panel):
        best = {o: best_of_grid(data, p.panel_id, o) for o in FEDOPT_METHODS}
        if best["sgd"][0] is None:
            return None, "FedAvg missing"
        for label, _ in best.values():
            if label is not None:
                data.final(p.panel_id, label, "test_acc")  # the chosen curves are the evidence
        base = best["sgd"][1]
        oks, parts = [], [f"FedAvg {fmt(base, 4)} ({best['sgd'][0]})"]
        for o in ("adagrad", "adam", "yogi"):
            label, acc = best[o]
            if label is None:
                parts.append(f"{FEDOPT_METHODS[o]} no grid point with data")
                continue
            oks.append(acc > base)
            parts.append(f"{FEDOPT_METHODS[o]} {fmt(acc, 4)} ({label})")
        if not oks:
            return None, "no adaptive method with data"
        return all(oks) and len(oks) == 3, "best final test acc: " + ", ".join(parts)

    if not any(data.config(c).server_optimizer == "sgd" for c in data.curves):
        return "n/a", "the spec has no FedAvg (server_optimizer sgd) curve"
    return per_case(data, check)


def informed_early(data: ClaimData) -> Result:
    """Per panel Power-of-Choice (sampler poc) and DivFL (sampler divfl) each have a lower mean
    training loss than random selection (sampler uniform) over the early rounds t ≤ ⌈T/2⌉ (the
    mean of the seed-mean training-loss curve over those rounds, T = the figure's last round)."""
    rnd = data.curve_where("sampler", "uniform")
    informed = [
        (n, data.curve_where("sampler", s)) for n, s in (("PoC", "poc"), ("DivFL", "divfl"))
    ]
    if (
        why := missing_curve((rnd, "random (uniform)"), *((c, n) for n, c in informed))
    ) is not None:
        return "n/a", why
    early = math.ceil(rounds_of(data) / 2)

    def early_mean(pid: str, label: str) -> float | None:
        s = data.series(pid, label, "train_loss")
        s = s[s.index <= early]
        return float(s.mean()) if len(s) else None

    def check(p: Panel):
        base = early_mean(p.panel_id, rnd)
        if base is None:
            return None, "random missing (train_loss)"
        oks, parts = [], [f"random {fmt(base, 4)}"]
        for name, label in informed:
            v = early_mean(p.panel_id, label)
            if v is None:
                return None, f"{name} missing (train_loss)"
            oks.append(v < base)
            parts.append(f"{name} {fmt(v, 4)}")
        return all(oks), f"mean train loss over t ≤ {early}: " + ", ".join(parts)

    return per_case(data, check)


def _cohort_size(data: ClaimData, c: CurveSpec) -> float | None:
    """M of a curve: its run config's ``cohort.size`` (None: a cohort given as a fraction)."""
    v = data.config(c).cohort.size
    return float(v) if isinstance(v, int | float) else None


def _gain_per_doubling(small: Reach, large: Reach, m_small: float, m_large: float):
    """(lowest, highest) possible speed-up per doubling of M, rounds(small)/rounds(large) to the
    power 1/log2(m_large/m_small), from the rounds' bounds (not reached: more than T)."""
    k = 1 / math.log2(m_large / m_small)

    def ratio(a: float, b: float) -> float:
        if math.isinf(a) and math.isinf(b):
            return math.nan
        return a / b

    lo, hi = ratio(small.low, large.high), ratio(small.high, large.low)
    return (0.0 if math.isnan(lo) else lo) ** k, (math.inf if math.isnan(hi) else hi) ** k


def cohort_diminishing(data: ClaimData) -> Result:
    """Per panel, with R(M) the rounds to the target test accuracy (seed mean) of the cohort-size
    curves M1 < M2 < … < Mk: the speed-up per doubling of M between the two smallest cohorts,
    (R(M1)/R(M2))^(1/log2(M2/M1)), exceeds the one between the two largest,
    (R(Mk−1)/R(Mk))^(1/log2(Mk/Mk−1)). A curve not reached within T has R > T: the verdict is
    "yes"/"no" only when the bounds decide it, else "n/a"."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    ms = sorted(
        ((m, c.label) for c in data.curves if (m := _cohort_size(data, c))), key=lambda x: x[0]
    )
    if len(ms) < 3:
        return "n/a", "fewer than three cohort-size (cohort.size) curves"

    def check(p: Panel):
        reach = _reached(data, p.panel_id, ms)
        if len(reach) < 3:
            return None, "fewer than three M curves with data"
        (m1, r1), (m2, r2) = reach[0], reach[1]
        (ma, ra), (mb, rb) = reach[-2], reach[-1]
        lo_small, hi_small = _gain_per_doubling(r1, r2, m1, m2)
        lo_large, hi_large = _gain_per_doubling(ra, rb, ma, mb)
        rounds = ", ".join(f"M={m:g}: {r.short}" for m, r in reach)
        text = (
            f"rounds to target {rounds}; speed-up per doubling M={m1:g}→{m2:g} "
            f"{_interval(lo_small, hi_small)}, M={ma:g}→{mb:g} {_interval(lo_large, hi_large)}"
        )
        if lo_small > hi_large:
            return True, text
        if hi_small <= lo_large:
            return False, text
        return None, text + " (undecided: a cohort did not reach the target within T)"

    return per_case(data, check)


def _interval(lo: float, hi: float) -> str:
    if math.isclose(lo, hi):
        return f"{lo:.2f}×"
    return f"{lo:.2f}…{'∞' if math.isinf(hi) else f'{hi:.2f}'}×"


FAILURE_DROP = 0.5  # a round whose training accuracy is ≤ this times the previous round's


def training_failures(long: pd.DataFrame | None, metric: str = "train_acc") -> pd.DataFrame:
    """Catastrophic training failures per run: rows (panel_id, curve, seed, round, before,
    after) of every round t whose training accuracy is at most half of round t−1's (consecutive
    logged rounds, finite values only)."""
    cols = ["panel_id", "curve", "seed", "round", "before", "after"]
    if long is None or long.empty:
        return pd.DataFrame(columns=cols)
    sel = long[long["metric"] == metric].sort_values(["run_id", "round"])
    rows = []
    for (pid, curve, seed, _), g in sel.groupby(["panel_id", "curve", "seed", "run_id"]):
        v = g[g["value"].map(math.isfinite)]
        prev = v["value"].shift(1)
        hit = v[(prev > 0) & (v["value"] <= FAILURE_DROP * prev + EPS)]
        for r, after, before in zip(hit["round"], hit["value"], prev[hit.index], strict=True):
            rows.append((pid, curve, int(seed), int(r), float(before), float(after)))
    return pd.DataFrame(rows, columns=cols)


def failures_happen(data: ClaimData) -> Result:
    """At least one catastrophic training failure in a run of any cohort-size curve: a round
    whose training accuracy is at most half of the previous round's (read per run, not on the
    seed mean; counted over the runs without a diverged or blown-up seed)."""
    if data.long is None or "train_acc" not in set(data.long["metric"]):
        return "n/a", "no training accuracy logged (eval.train_metrics)"
    fails = training_failures(data.long)
    labels = [c.label for c in data.curves]
    parts, total = [], 0
    for p in data.panels:
        for label in labels:
            if not len(data.series(p.panel_id, label, "train_acc")):
                continue
            bad = set(data.failed_seeds(p.panel_id, label))
            f = fails[(fails["panel_id"] == p.panel_id) & (fails["curve"] == label)]
            f = f[~f["seed"].isin(bad)]
            total += len(f)
            parts.append(f"{label}: {len(f)} in {f['seed'].nunique()} run(s)")
    if not parts:
        return "n/a", "no training accuracy with data"
    return ("yes" if total > 0 else "no"), f"{total} failure(s): " + ", ".join(parts)


CRITERIA: dict[str, Criterion] = {
    "fedavg needs far fewer rounds than fedsgd": fedavg_fewer_rounds,
    "too small and too large e both slow convergence": e_interior_fastest,
    "sampling with replacement converges faster": replacement_faster,
    "the adaptive server optimizers outperform fedavg": adaptive_outperform,
    "the informed samplers converge faster in early rounds": informed_early,
    "larger cohorts give diminishing gains": cohort_diminishing,
    "catastrophic training failures happen": failures_happen,
}
