"""The introduction-to-FL claims (docs/figures.md, "Introduction-to-FL slides";
sweeps/intro-*.yaml): one criterion per claim text, collected by ``dashboards.registry``; the
rules every criterion follows are :mod:`dashboards.claims`'.

Every criterion is statistical (issue 34, :mod:`dashboards.verdicts`): an effect per seed,
paired by seed (the same seed gives the same partition and initial model in every curve of a
figure), a two-sided 95% Student-t interval over the seeds, and supported / contradicted /
inconclusive against a threshold declared once per claim (the ``Measure`` constants below).
Rounds to the profile's target are read per run (``seed_reach``), never on the seed mean; a run
that does not reach the target within its T rounds is censored (its rounds are only known to
be > T) and its effect enters as bounds (:func:`dashboards.claims.bounded`)."""

from __future__ import annotations

import math

import pandas as pd

from dashboards.claims import (
    ACC_TOL,
    AUC_TOL,
    EPS,
    Bounds,
    ClaimData,
    Criterion,
    Part,
    Result,
    grid_edge,
    judge,
    missing_curve,
    paired_effect,
    rounds_of,
    seed_reach,
)
from dashboards.model import Panel
from dashboards.targets import Reach, speedup
from dashboards.verdicts import Measure, decide, interval
from fedsweep.config.schema import RunConfig
from fedsweep.specs.load import CurveSpec


# ------------------------------------------------------------------------- the machinery
def _log2(x: float) -> float:
    return -math.inf if x <= 0 else math.log2(x)


def _ratio(a: float, b: float) -> float:
    """``a / b`` for rounds bounds (``a`` finite or infinite, ``b`` ≥ 0)."""
    if b == 0:
        return math.inf
    return a / b


def log_ratio_bounds(num: dict[int, Reach], den: dict[int, Reach]) -> Bounds | None:
    """Per seed both have, the bounds of ``log2(R_num / R_den)`` (R: rounds to the target; a
    run not reached within T has R in (T, ∞)): the lowest from ``num``'s fewest and ``den``'s
    most rounds, the highest the other way round. None without a common seed."""
    seeds = sorted(set(num) & set(den))
    if not seeds:
        return None
    low = {s: _log2(_ratio(num[s].low, den[s].high)) for s in seeds}
    high = {s: _log2(_ratio(num[s].high, den[s].low)) for s in seeds}
    return Bounds(low, high)


def rounds_text(reach: dict[int, Reach]) -> str:
    """``"[12, > 40]"``: the per-seed rounds to the target, in seed order."""
    return "[" + ", ".join(reach[s].short for s in sorted(reach)) + "]"


def _no_target(data: ClaimData) -> str | None:
    return None if data.target is not None else "the profile sets no target_acc"


def _label_of(data: ClaimData, label: str) -> CurveSpec:
    return next(c for c in data.curves if c.label == label)


# ------------------------------------------------------------------------------ intro-fedavg
FAR_SPEEDUP = 2.0  # "far fewer rounds": a speed-up over FedSGD of more than this factor
FEWER_ROUNDS = Measure(
    "log2 of the speed-up over FedSGD, log2(R_FedSGD / R_FedAvg) with R the rounds to the "
    "target test accuracy, per seed (paired)",
    math.log2(FAR_SPEEDUP),
    "greater",
)
MORE_LOCAL = Measure(
    "log2 of the speed-up of the FedAvg curve with the most local computation u = E·n/(K·B) "
    "over the one with the least, log2(R_least / R_most) with R the rounds to the target test "
    "accuracy, per seed (paired)",
    0.0,
    "greater",
)


def _fedavg_curves(data: ClaimData) -> list[tuple[float, str]]:
    """(E/B, label) of the FedAvg curves (a numeric B), in spec order; E/B is McMahan's local
    computation u = E·n/(K·B) up to the client size n/K, the same for every curve."""
    out = []
    for c in data.curves:
        train = data.config(c).train
        if isinstance(train.batch_size, int):
            out.append((float(train.local_epochs) / train.batch_size, c.label))
    return out


def fedavg_fewer_rounds(data: ClaimData) -> Result:
    """Per panel and per FedAvg curve (a numeric B), per seed (paired with FedSGD, B = full, of
    the same seed): the log2 speed-up log2(R_FedSGD / R_FedAvg), R = the run's own rounds to
    the target test accuracy; "far fewer" = a speed-up above 2 (log2 > 1). A run not reaching
    the target within T has R > T (censored): supported only if the bounds least favourable to
    the claim clear 1 (a FedAvg run that never reaches the target cannot support it),
    contradicted only if the most favourable ones lie below it. Supported when every FedAvg
    curve of every panel is, contradicted when one is (95% t intervals over the seeds)."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    target = float(data.target or 0.0)
    sgd = data.curve_where("train.batch_size", "full")
    avg = [label for _, label in _fedavg_curves(data)]
    if sgd is None or not avg:
        return "n/a", missing_curve((sgd, "FedSGD (B=full)")) or "the spec has no FedAvg curve"

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        base = seed_reach(data, p.panel_id, sgd, target)
        if not base:
            return None, "FedSGD missing"
        parts, shown = [], [f"FedSGD {rounds_text(base)}"]
        for label in avg:
            reach = seed_reach(data, p.panel_id, label, target)
            bounds = log_ratio_bounds(base, reach)
            if bounds is None:
                continue
            parts.append(Part(label, bounds, FEWER_ROUNDS))
            ups = ", ".join(speedup(base[s], reach[s]).text for s in sorted(bounds.low))
            shown.append(f"{label} {rounds_text(reach)} (speed-up {ups})")
        if not parts:
            return None, "no FedAvg curve with data"
        return parts, "rounds to target per seed: " + ", ".join(shown)

    return judge(data, check)


def speedup_grows(data: ClaimData) -> Result:
    """McMahan et al.'s Table 2: FedAvg's speed-up over FedSGD grows with the local computation
    per round u = E·n/(K·B) (more epochs E, smaller B). Per panel, per seed (paired), the FedAvg
    curve with the largest u against the one with the smallest (the extremes of E/B; FedSGD
    cancels out of the ratio of their speed-ups): log2(R_least / R_most) > 0, R = the run's
    rounds to the target test accuracy; a run not reaching it within T is censored (bounds:
    supported only if the least favourable ones clear 0, contradicted only if the most
    favourable ones lie below it). Supported when every panel is, contradicted when one is (95%
    t intervals over the seeds)."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    target = float(data.target or 0.0)
    curves = sorted(_fedavg_curves(data), key=lambda x: x[0])  # stable: spec order on ties
    if len(curves) < 2 or math.isclose(curves[0][0], curves[-1][0]):
        return "n/a", "the spec has no two FedAvg curves with different local computation E/B"
    (u_least, least), (u_most, most) = curves[0], curves[-1]

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        r_least = seed_reach(data, p.panel_id, least, target)
        r_most = seed_reach(data, p.panel_id, most, target)
        bounds = log_ratio_bounds(r_least, r_most)
        if bounds is None:
            return None, f"{least} or {most} missing"
        text = (
            f"rounds to target per seed: {least} {rounds_text(r_least)}, {most} "
            f"{rounds_text(r_most)} (u {u_most / u_least:g}× larger)"
        )
        return [Part(f"{most} over {least}", bounds, MORE_LOCAL)], text

    return judge(data, check)


# ------------------------------------------------------------------------------ intro-epochs
SLOWER_END = Measure(
    "rounds to the target test accuracy of the end E (smallest or largest) − the fewest rounds "
    "of an interior E (per seed the fastest of them), per seed (paired)",
    0.0,
    "greater",
)


def e_interior_fastest(data: ClaimData) -> Result:
    """Per panel, per seed (paired), over the E curves E_1 < … < E_k (k ≥ 3): two parts, the
    rounds to the target test accuracy (read per run) of the smallest E minus the fewest rounds
    of an interior E (E_2 … E_k−1, per seed the fastest), and the same for the largest E; both
    must be > 0 (an interior E is fastest). A run not reaching the target within T is censored
    (rounds > T): supported only if the least favourable bounds clear 0, contradicted only if
    the most favourable ones lie below it. Supported when both parts of every panel are,
    contradicted when one is (95% t intervals over the seeds)."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    target = float(data.target or 0.0)
    es = data.curves_with("train.local_epochs")
    if len(es) < 3:
        return "n/a", "fewer than three E curves"

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        reach = [(float(v), seed_reach(data, p.panel_id, label, target)) for v, label in es]
        reach = [(v, r) for v, r in reach if r]
        if len(reach) < 3:
            return None, "fewer than three E curves with data"
        seeds = sorted(set.intersection(*(set(r) for _, r in reach)))
        if not seeds:
            return None, "no seed common to the E curves"
        inner = [r for _, r in reach[1:-1]]
        best_low = {s: min(r[s].low for r in inner) for s in seeds}
        best_high = {s: min(r[s].high for r in inner) for s in seeds}
        parts = []
        for v, r in (reach[0], reach[-1]):
            low = {s: r[s].low - best_high[s] for s in seeds}
            high = {s: r[s].high - best_low[s] for s in seeds}
            parts.append(
                Part(f"E={v:g} slower than the fastest interior E", Bounds(low, high), SLOWER_END)
            )
        text = "rounds to target per seed " + ", ".join(
            f"E={v:g}: {rounds_text(r)}" for v, r in reach
        )
        return parts, text

    return judge(data, check)


# ---------------------------------------------------------------------------- intro-sampling
SCHEME1_FASTER = Measure(
    "relative training-loss AUC reduction of scheme 1 against scheme 2, (AUC_2 − AUC_1) / "
    "AUC_2 with AUC the run's mean training loss over the rounds, per seed (paired)",
    AUC_TOL,
    "greater",
)
BALANCED_ONLY = "balanced clients only: the schemes differ only by duplicate draws"


def _quantity_skew(data: ClaimData, panel: Panel, curve: CurveSpec) -> str:
    """The panel's client-size skew (``data.quantity_skew``; "none" = balanced clients): the
    panel's value, else the run config's (a field older configs lack: "none")."""
    value = panel.values.get("data.quantity_skew")
    if value is None:
        value = getattr(data.config(curve).data, "quantity_skew", "none")
    return "none" if value in (None, False, "none") else str(value)


def replacement_faster(data: ClaimData) -> Result:
    """Li et al.'s schemes on unbalanced clients: per panel whose client sizes are skewed
    (``data.quantity_skew`` not "none"), per seed (paired), scheme 1's (sampler replacement)
    training-loss AUC (the run's mean training loss over the rounds) is more than 5% below
    scheme 2's (sampler uniform, weighting scheme2): (AUC_2 − AUC_1) / AUC_2 > 0.05, the margin
    of every "faster". The balanced panels are the control (there the schemes differ only by
    duplicate draws): shown, not deciding. A figure without a skewed panel (older runs) is
    judged on its balanced panels, and says so. Supported when every deciding panel is,
    contradicted when one is (95% t intervals over the seeds)."""
    s1 = data.curve_where("sampler", "replacement")
    s2 = data.curve_matching(sampler="uniform", uniform__weighting="scheme2")
    if (why := missing_curve((s1, "scheme 1 (replacement)"), (s2, "scheme 2"))) is not None:
        return "n/a", why
    assert s1 is not None and s2 is not None
    curve = _label_of(data, s1)
    panels = data.cases()
    skewed = [p for p in panels if _quantity_skew(data, p, curve) != "none"]

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        control = bool(skewed) and p not in skewed
        ev = paired_effect(
            data, p.panel_id, s2, s1, "train_loss", "mean", relative=True, mark=not control
        )
        if ev is None:
            return None, "scheme 1 or scheme 2 missing (train_loss)"
        if control:
            return [], (
                f"control (balanced clients, not deciding): AUC reduction {ev.text()} → "
                f"{decide(ev, SCHEME1_FASTER)}"
            )
        skew = _quantity_skew(data, p, curve)
        return [Part("AUC reduction", ev, SCHEME1_FASTER)], (
            f"quantity skew {skew}" if skew != "none" else ""
        )

    verdict, numbers = judge(data, check, panels)
    if not skewed and verdict != "n/a":
        numbers = f"{BALANCED_ONLY}; {numbers}"
    return verdict, numbers


# ------------------------------------------------------------------------------ intro-fedopt
#: server optimizer -> method name of the intro-fedopt figure
FEDOPT_METHODS = {"sgd": "FedAvg", "adagrad": "FedAdagrad", "adam": "FedAdam", "yogi": "FedYogi"}
OUTPERFORM = Measure(
    "final test accuracy of the adaptive method at its best grid point − FedAvg's at its best, "
    "per seed (paired)",
    ACC_TOL,
    "greater",
)


def grid_rates(config: RunConfig) -> tuple[str, float, float] | None:
    """(server optimizer, η_l, η_s) of a grid point's run config; None for a server optimizer
    that is not one of the grid's methods."""
    opt = config.server_optimizer
    if opt not in FEDOPT_METHODS:
        return None
    eta_s = config.server_sgd.lr if opt == "sgd" else config.fedopt.lr
    return opt, float(config.train.lr), float(eta_s)


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


def grid_not_converged(data: ClaimData, optimizer: str, label: str) -> str | None:
    """ "<method>: grid not converged: …" when the chosen grid point ``label`` of ``optimizer``
    lies on the edge of that method's grid in η_l or η_s (``grid_edge``), else None."""
    points = [r for c in data.curves if (r := grid_rates(data.config(c))) and r[0] == optimizer]
    chosen = grid_rates(data.config(_label_of(data, label)))
    if chosen is None:
        return None
    edges = [
        grid_edge([p[i] for p in points], chosen[i], name) for i, name in ((1, "η_l"), (2, "η_s"))
    ]
    reasons = [e for e in edges if e]
    return f"{FEDOPT_METHODS[optimizer]}: " + "; ".join(reasons) if reasons else None


def adaptive_outperform(data: ClaimData) -> Result:
    """Per panel FedAdagrad, FedAdam and FedYogi, each at its best grid point (the (η_l, η_s)
    of the highest seed-mean final test accuracy, grid points with a diverged or blown-up seed
    excluded), against FedAvg (server_optimizer sgd) at its best, per seed (paired): the final
    test accuracy difference > 0.01 (the margin of every "higher"), one part per method. A part
    whose method's or FedAvg's chosen point lies on the edge of its grid in η_l or η_s is
    inconclusive ("grid not converged: widen it": the best may lie outside); a method without a
    grid point with data too. Supported when every part is, contradicted when one is (95% t
    intervals over the seeds)."""
    if not any(data.config(c).server_optimizer == "sgd" for c in data.curves):
        return "n/a", "the spec has no FedAvg (server_optimizer sgd) curve"

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        best = {o: best_of_grid(data, p.panel_id, o) for o in FEDOPT_METHODS}
        base, base_acc = best["sgd"]
        if base is None:
            return None, "FedAvg missing"
        base_edge = grid_not_converged(data, "sgd", base)
        parts, shown = [], [f"FedAvg {base_acc:.4f} ({base})"]
        for o in ("adagrad", "adam", "yogi"):
            name, (label, acc) = FEDOPT_METHODS[o], best[o]
            if label is None:
                parts.append(Part(name, interval([]), OUTPERFORM, "no grid point with data"))
                continue
            ev = paired_effect(data, p.panel_id, base, label, "test_acc", "final")
            edge = "; ".join(e for e in (base_edge, grid_not_converged(data, o, label)) if e)
            parts.append(Part(name, ev or interval([]), OUTPERFORM, edge or None))
            shown.append(f"{name} {acc:.4f} ({label})")
        return parts, "best grid point (seed-mean final test acc): " + ", ".join(shown)

    return judge(data, check)


# --------------------------------------------------------------------------- intro-selection
EARLY_FASTER = Measure(
    "relative reduction of the run's mean training loss over the early rounds t ≤ ⌈T/2⌉ against "
    "random selection, (L_random − L_sampler) / L_random, per seed (paired)",
    AUC_TOL,
    "greater",
)


def informed_early(data: ClaimData) -> Result:
    """Per panel, per seed (paired), Power-of-Choice (sampler poc) and DivFL (sampler divfl) each
    against random selection (sampler uniform): the relative reduction of the run's mean
    training loss over the early rounds t ≤ ⌈T/2⌉ (T = the figure's last round), (L_random −
    L_sampler) / L_random > 0.05, the margin of every "faster"; two parts. Supported when both
    parts of every panel are, contradicted when one is (95% t intervals over the seeds)."""
    rnd = data.curve_where("sampler", "uniform")
    informed = [
        (n, data.curve_where("sampler", s)) for n, s in (("PoC", "poc"), ("DivFL", "divfl"))
    ]
    if (
        why := missing_curve((rnd, "random (uniform)"), *((c, n) for n, c in informed))
    ) is not None:
        return "n/a", why
    assert rnd is not None
    early = math.ceil(rounds_of(data) / 2)

    def early_mean(s: pd.Series) -> float:
        head = s[s.index <= early]
        return float(head.mean()) if len(head) else math.nan

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        parts, shown = [], []
        for name, label in informed:
            assert label is not None
            ev = paired_effect(
                data, p.panel_id, rnd, label, "train_loss", early_mean, relative=True
            )
            if ev is None:
                return None, f"random or {name} missing (train_loss)"
            parts.append(Part(f"{name} vs random", ev, EARLY_FASTER))
        base = data.per_seed(p.panel_id, rnd, "train_loss", early_mean)
        shown.append(f"random {_values(base)}")
        return parts, f"mean train loss over t ≤ {early} per seed: " + ", ".join(shown)

    return judge(data, check)


def _values(per_seed: dict[int, float]) -> str:
    return "[" + ", ".join(f"{per_seed[s]:.4f}" for s in sorted(per_seed)) + "]"


# ------------------------------------------------------------------------------ intro-cohort
DIMINISHING = Measure(
    "log2 speed-up per doubling of M between the two smallest cohorts − the same between the "
    "two largest: log2(R(M1)/R(M2))/log2(M2/M1) − log2(R(Mk−1)/R(Mk))/log2(Mk/Mk−1), R the "
    "rounds to the target test accuracy, per seed (paired)",
    0.0,
    "greater",
)


def _cohort_size(data: ClaimData, c: CurveSpec) -> float | None:
    """M of a curve: its run config's ``cohort.size`` (None: a cohort given as a fraction)."""
    v = data.config(c).cohort.size
    return float(v) if isinstance(v, int | float) else None


def _cohorts(data: ClaimData) -> list[tuple[float, str]]:
    return sorted(
        ((m, c.label) for c in data.curves if (m := _cohort_size(data, c))), key=lambda x: x[0]
    )


def cohort_diminishing(data: ClaimData) -> Result:
    """Per panel, per seed (paired), with R(M) the run's rounds to the target test accuracy for the
    cohort sizes M1 < M2 < … < Mk: the log2 speed-up per doubling of M between the two smallest
    cohorts, log2(R(M1)/R(M2)) / log2(M2/M1), minus the one between the two largest,
    log2(R(Mk−1)/R(Mk)) / log2(Mk/Mk−1), is > 0 (the gain per doubling shrinks). A run not
    reaching the target within T is censored (R > T): supported only if the least favourable
    bounds clear 0, contradicted only if the most favourable ones lie below it. Supported when
    every panel is, contradicted when one is (95% t intervals over the seeds)."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    target = float(data.target or 0.0)
    ms = _cohorts(data)
    if len(ms) < 3:
        return "n/a", "fewer than three cohort-size (cohort.size) curves"

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        reach = [(m, seed_reach(data, p.panel_id, label, target)) for m, label in ms]
        reach = [(m, r) for m, r in reach if r]
        if len(reach) < 3:
            return None, "fewer than three M curves with data"
        (m1, r1), (m2, r2) = reach[0], reach[1]
        (ma, ra), (mb, rb) = reach[-2], reach[-1]
        small, large = log_ratio_bounds(r1, r2), log_ratio_bounds(ra, rb)
        if small is None or large is None:
            return None, "no seed common to the M curves"
        k_small, k_large = 1 / math.log2(m2 / m1), 1 / math.log2(mb / ma)
        seeds = sorted(set(small.low) & set(large.low))
        low = {s: small.low[s] * k_small - large.high[s] * k_large for s in seeds}
        high = {s: small.high[s] * k_small - large.low[s] * k_large for s in seeds}
        rounds = ", ".join(f"M={m:g}: {rounds_text(r)}" for m, r in reach)
        text = (
            f"rounds to target per seed {rounds}; speed-up per doubling per seed "
            f"M={m1:g}→{m2:g} {_gains(small, k_small)}, M={ma:g}→{mb:g} {_gains(large, k_large)}"
        )
        return [Part(f"M={m1:g}→{m2:g} vs M={ma:g}→{mb:g}", Bounds(low, high), DIMINISHING)], text

    return judge(data, check)


def _gains(b: Bounds, k: float) -> str:
    """Per-seed speed-ups per doubling, 2^(k·log2 ratio): "1.06×" or "1.2…∞×" (censored)."""

    def x(v: float) -> str:
        return "∞" if v == math.inf else f"{2 ** (k * v):.2f}"

    texts = []
    for s in sorted(b.low):
        lo, hi = x(b.low[s]), x(b.high[s])
        texts.append(f"{lo}×" if lo == hi else f"{lo}…{hi}×")
    return "[" + ", ".join(texts) + "]"


FAILURE_DROP = 0.5  # a round whose training accuracy is ≤ this times the previous round's
#: a failure counts only from a training accuracy at least this far above chance (1/classes)
CHANCE_MARGIN = 0.3
FAILURES_RISE = Measure(
    "catastrophic training failures per doubling of M: the least-squares slope of the run's "
    "failure count (a halving of the training accuracy from at least chance + 0.3) against "
    "log2 M over the cohort sizes, per seed (paired)",
    0.0,
    "greater",
)


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


def _chance(data: ClaimData, c: CurveSpec) -> float | None:
    return data.chance(c.label)


def _slope(x: list[float], y: list[float]) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    return sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sum(
        (a - mx) ** 2 for a in x
    )


def failures_happen(data: ClaimData) -> Result:
    """The slides' "catastrophic training failures (for large M)": a failure is a round whose
    training accuracy (read per run) is at most half of the previous round's, that one being
    well above chance: ≥ 1/classes + 0.3 (40% on MNIST; a halving of a near-chance accuracy is
    noise of an untrained model, not a failure). Per panel, per seed, the failures of the run
    at each cohort size M are counted and their least-squares slope against log2 M (failures
    per doubling of M) must be > 0, paired by seed over the M curves (failures happen, and more
    at large M). Supported when every panel is, contradicted when one is (95% t intervals over
    the seeds); no failure in any run: inconclusive (nothing to relate to M)."""
    if data.long is None or "train_acc" not in set(data.long["metric"]):
        return "n/a", "no training accuracy logged (eval.train_metrics)"
    ms = _cohorts(data)
    if len(ms) < 2:
        return "n/a", "fewer than two cohort-size (cohort.size) curves"
    chance = _chance(data, _label_of(data, ms[0][1]))
    if chance is None:
        return "n/a", "unknown number of classes: no chance level"
    floor = chance + CHANCE_MARGIN

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        counts: dict[float, dict[int, int]] = {}
        shown = []
        for m, label in ms:
            runs = data.seed_series(p.panel_id, label, "train_acc")
            if not runs:
                continue
            found = {s: halvings(h, floor) for s, h in runs.items()}
            near = sum(len(halvings(h)) for h in runs.values()) - sum(map(len, found.values()))
            counts[m] = {s: len(f) for s, f in found.items()}
            where = ", ".join(
                f"seed {s} t={r} from {b:.2f}"
                for s, f in sorted(found.items())
                for r, b in zip(f["round"], f["before"], strict=True)
            )
            hit = sum(n > 0 for n in counts[m].values())
            shown.append(
                f"M={m:g}: {sum(counts[m].values())} in {hit} of {len(runs)} runs"
                + (f" ({where})" if where else "")
                + (f", {near} halving(s) from below {floor:.0%} not counted" if near else "")
            )
        if len(counts) < 2:
            return None, "fewer than two M curves with training accuracy"
        seeds = sorted(set.intersection(*(set(c) for c in counts.values())))
        if not seeds:
            return None, "no seed common to the M curves"
        xs = [math.log2(m) for m in counts]
        slopes = [_slope(xs, [float(counts[m][s]) for m in counts]) for s in seeds]
        none = (
            "no failure from well above chance in any run"
            if not any(counts[m][s] for m in counts for s in seeds)
            else None
        )
        text = (
            f"failures (train acc ≤ ½ of the previous round's, from ≥ {floor:.0%}): "
            + "; ".join(shown)
        )
        ev = interval(slopes, seeds)
        return [Part("failures per doubling of M", ev, FAILURES_RISE, none)], text

    return judge(data, check)


CRITERIA: dict[str, Criterion] = {
    "fedavg needs far fewer rounds than fedsgd": fedavg_fewer_rounds,
    "fedavg's speed-up grows with more local computation": speedup_grows,
    "too small and too large e both slow convergence": e_interior_fastest,
    "sampling with replacement converges faster": replacement_faster,
    "the adaptive server optimizers outperform fedavg": adaptive_outperform,
    "the informed samplers converge faster in early rounds": informed_early,
    "larger cohorts give diminishing gains": cohort_diminishing,
    "catastrophic training failures happen": failures_happen,
}

#: the slides' words for each claim (intro_to_fl_slides.txt, “…” verbatim), printed by the report
PAPER_WORDS: dict[str, str] = {
    "fedavg needs far fewer rounds than fedsgd": (
        "FedSGD & FedAVG, Experiments (Appendix A): “Test set accuracy over communication rounds "
        "( $C = 0.1$ ) of FedSGD ( $B = \\infty$ ) and FedAVG ( $B < \\infty$ ).” The rounds "
        "and speed-ups to a target are McMahan et al.'s [2] Table 2."
    ),
    "fedavg's speed-up grows with more local computation": (
        "FedSGD & FedAVG, Summary: “Empirical results show that the FL performance depends on "
        "various **hyperparameters**: number of participation clients, number of local epochs "
        "and batch size.” The growth with u = E·n/(K·B) is McMahan et al.'s [2] Table 2."
    ),
    "too small and too large e both slow convergence": (
        "Convergence Analysis of FedAvg, Fig. 11: “Too large or small number of local updates "
        "$E$ leads to slow convergence.”"
    ),
    "sampling with replacement converges faster": (
        "Convergence Analysis of FedAvg, Fig. 12: “Compared to two different random sampline "
        "schemes (1: w/ replacement, 2: w/o replacement), sampling with replacement performs "
        "faster convergence.”"
    ),
    "the adaptive server optimizers outperform fedavg": (
        "FedOpt, Experiments (Fig. 15): “FedOpt (FedAdagrad, FedAdam, FedYogi) outperforms "
        "other FL algorithms.”"
    ),
    "the informed samplers converge faster in early rounds": (
        "§3.2 Client Selection, Problem Statement: “Client selection problem aims to select "
        "some **informative clients** from all to show faster convergence at the earlier "
        "communication round to reduce communication cost of Federated Learning.”"
    ),
    "larger cohorts give diminishing gains": (
        "§3.1 On Large-Cohort Training, Key findings: “Increasing the cohort size may not lead "
        "to significant convergence improvements in practice.”"
    ),
    "catastrophic training failures happen": (
        "§3.1, Challenges 1) and Fig. 16: “Catastrophic training failures (for large $M$ ) … "
        "Training accuracy decreased by a factor of at least 1/2 in a single round due to data "
        "heterogeneity. … Catastrophic training failures ( $M=10$ )”"
    ),
}
