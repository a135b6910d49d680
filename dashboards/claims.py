"""Check the papers' claims (docs/figures.md, ``spec.claims``) against the runs.

The generic machinery: :class:`ClaimData`, the helpers every criterion shares and
:func:`check_claims`. The criteria themselves live with their paper
(``dashboards.papers.<paper>.claims``); ``dashboards.registry.CRITERIA`` collects them.

Every criterion is a function of :class:`ClaimData` (the curves and per-run histories of one
figure) that returns ``(verdict, numbers)``, and every verdict is a statistical statement
(issue 34; :mod:`dashboards.verdicts`): the criterion computes its effect **per seed**, paired
by seed where the design pairs runs (:func:`paired_effect`: the same seed gives the same
partition and initial model), and a 95% Student-t interval over the seeds decides it against a
threshold declared once (a ``Measure``): *supported*, *contradicted* or *inconclusive*, "n/a"
without data. The shared forms:

* :func:`judge`: a claim per panel, made of :class:`Part` s (an effect and its measure); it
  holds where every part of every panel holds; a part can be *blocked* (inconclusive whatever
  its interval: a learning-rate grid whose chosen point is on its edge, :func:`grid_edge`), or
  *censored* (:class:`Bounds`: rounds to a target not reached within T are only known to be >
  T; :func:`bounded`); a panel can be a control (shown, not deciding);
* :func:`rank_margin`: "X is the best among ...": the margin of X over its best rival, > 0;
* the margins are symmetric across claims: an accuracy is higher above ``ACC_TOL`` (and differs
  little within it); a loss AUC (the mean test loss over the rounds) is faster more than
  ``AUC_TOL`` lower (and gains little within it).

:func:`check_claims` decides when a claim is **not testable** (the numbers still shown): the
panels' declared regime is ``scaled``; a run of a curve the criterion read (through
``per_seed``, ``seed_series``, ``series``) diverged (non-finite values, ``fedsweep.status``
diverged) or its loss blew up while staying finite (tag ``fedsweep.loss_blowup``): "not
testable: n of m runs diverged" (n and m over the (panel, curve) cells the criterion read); the
figure's curves are shorter than ``MIN_ROUNDS`` ("not testable at this profile (T=3)"). A claim
whose evidence *is* a divergence (α = 0.1 fails to converge) reads it explicitly
(:meth:`ClaimData.failed_seeds`), not through a curve.

Curves are identified by their overrides in the spec (e.g. ``bherd.alpha: 1.0``,
``selector: none``), not by their labels (:meth:`ClaimData.curve_where`, ``curve_matching``,
``curves_with``: what a curve *sets*, so a default or the base never makes a curve match); a
curve's parameters (its learning rate, server optimizer, hooks, ...) are read from its typed run
config (:meth:`ClaimData.config`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dashboards.model import ClaimCheck, Panel, Verdict, curve_config
from dashboards.reducers import Stat, per_run, stat_of
from dashboards.targets import Reach, rounds_to_target
from dashboards.verdicts import (
    VERDICTS,
    Evidence,
    Measure,
    all_of,
    current_level,
    decide,
    holm,
    interval,
    interval_method,
    p_values,
    widen,
)
from fedsweep.config.schema import RunConfig
from fedsweep.data.catalog import CLASS_COUNTS
from fedsweep.specs.claims import Claim, ClaimEntry
from fedsweep.specs.load import CurveSpec

ACC_TOL = 0.01  # an accuracy difference: "higher" above it, "matches" / "differs little" within it
AUC_TOL = 0.05  # a relative loss-AUC reduction: "faster" above it, "little or no gain" below it
#: fewest rounds (of the figure's longest curve) at which a claim is tested; shorter: not
#: testable. It keeps the smoke profile's 2–3 rounds out and coincides with no shipped profile's
#: length (3, 10, 25, 30, 40, 100, ...): a profile's length never decides a verdict by accident
MIN_ROUNDS = 5
EPS = 1e-12  # float representation slack at a threshold

Result = tuple[Verdict, str]


@dataclass
class ClaimData:
    """Seed-mean curves of one figure (``store.aggregate`` output) plus what names them."""

    agg: pd.DataFrame  # panel_id, curve, metric, round, mean, std, n
    curves: list[CurveSpec]
    panels: list[Panel]
    #: (panel_id, curve) -> [(seed, round)] of the runs that diverged (non-finite values)
    diverged: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)
    #: (panel_id, curve) -> [(seed, tag text)] of the finished runs whose loss blew up
    blowups: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    #: (panel_id, curve) -> runs found; a cell not given counts its largest seed count ``n``
    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    #: the (panel_id, curve) cells read since the last ``used.clear()`` (by ``series``)
    used: set[tuple[str, str]] = field(default_factory=set, repr=False, compare=False)
    #: the profile's ``target_acc`` (rounds-to-target figures), None when it has none
    target: float | None = None
    #: per-run histories (``store.load_metrics``: panel_id, curve, seed, run_id, round, metric,
    #: value), for criteria about single runs (catastrophic training failures); may be None
    long: pd.DataFrame | None = field(default=None, repr=False)
    #: per-run reductions of ``long`` by (metric, reducer), see :meth:`run_stat`
    reduced: dict[tuple[str, str], pd.DataFrame] = field(
        default_factory=dict, repr=False, compare=False
    )
    #: the statistics a statistical criterion computed (``evidence_row`` per panel), read by
    #: :func:`check_claims` after the criterion ran
    evidence: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)
    #: the parts a criterion left out as the same computation on both sides ("Case 1 · FedNova:
    #: why"), read by :func:`check_claims` after the criterion ran
    degenerate: list[str] = field(default_factory=list, repr=False, compare=False)
    #: the config tree the curves' overrides apply to (:func:`dashboards.model.run_base`: the
    #: spec's ``base`` under its first panel's overrides); {}: the config defaults
    base: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: the ``long`` the caches below were made from (:meth:`_memo`), ``long`` grouped by cell
    #: (:meth:`_indexed`; None: not grouped yet) and :meth:`per_seed`'s results
    _cached_of: Any = field(default=None, init=False, repr=False, compare=False)
    _index: dict | None = field(default=None, init=False, repr=False, compare=False)
    _memos: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def config(self, curve: CurveSpec) -> RunConfig:
        """The typed run config of ``curve`` (:func:`dashboards.model.curve_config`)."""
        return curve_config(curve, self.base)

    def chance(self, label: str) -> float | None:
        """Chance accuracy of curve ``label``'s runs: 1 / the classes of its data set
        (``fedsweep.data.catalog``); None for an unknown curve or data set."""
        curve = next((c for c in self.curves if c.label == label), None)
        if curve is None:
            return None
        counts = CLASS_COUNTS.get(self.config(curve).data.dataset)
        return 1.0 / len(counts) if counts else None

    def run_stat(
        self, panel: str, curve: str, metric: str, how: str = "best", *, mark: bool = True
    ) -> Stat | None:
        """Seed mean ± std of each run's ``metric`` reduced by ``how`` (``reducers``: "best" =
        max over rounds, "final" = last finite round), from the per-run histories ``long``;
        None without runs (or without ``long``). ``mark``: count the cell as read (as
        ``series`` does); False to compare candidates, e.g. a learning-rate grid."""
        if mark:
            self.used.add((panel, curve))
        if self.long is None:
            return None
        key = (metric, how)
        if key not in self.reduced:
            self.reduced[key] = per_run(self.long, metric, how)
        return stat_of(self.reduced[key], panel, curve)

    def per_seed(
        self,
        panel: str,
        curve: str,
        metric: str,
        how: str | Callable[[pd.Series], float] = "final",
        *,
        mark: bool = True,
    ) -> dict[int, float]:
        """Seed -> one number per run of the cell: ``how`` = "final" (the last finite round),
        "best" (max over rounds), "mean" (the mean over rounds: the per-run loss AUC / T),
        "first" (the first finite round), "rises" (round-to-round increases, :func:`rises`), or
        a function of the run's history (:meth:`seed_series`). ``mark``: count the cell as
        read (a diverged seed then makes the claim not testable)."""
        key = (panel, curve, metric, how) if isinstance(how, str) else None
        memo = self._memo()
        if key is not None and key in memo:  # the same cell read again (another part, pair)
            if mark:
                self.used.add((panel, curve))
            return dict(memo[key])
        sel = self._cell(panel, curve, metric, mark)
        if sel.empty:
            out: dict[int, float] = {}
        elif how == "mean":
            out = {int(s): float(v) for s, v in sel.groupby("seed")["value"].mean().items()}
        elif callable(how) or how in ("first", "rises"):
            fn = {"first": lambda s: float(s.iloc[0]), "rises": rises}.get(how, how)
            runs = self.seed_series(panel, curve, metric, mark=False)
            out = {seed: float(fn(s)) for seed, s in runs.items()}
        else:
            rows = per_run(sel, metric, how)
            out = {int(s): float(v) for s, v in zip(rows["seed"], rows["value"], strict=True)}
        if key is not None:
            memo[key] = dict(out)
        return out

    def seed_series(
        self, panel: str, curve: str, metric: str, *, mark: bool = True
    ) -> dict[int, pd.Series]:
        """Seed -> the run's ``metric`` history of one cell (indexed by round, finite values
        only; a run without a finite value has no entry). ``mark`` as in :meth:`per_seed`."""
        sel = self._cell(panel, curve, metric, mark)
        return {
            int(seed): g.set_index("round")["value"].astype(float).sort_index()
            for seed, g in sel.groupby("seed")
        }

    def _cell(self, panel: str, curve: str, metric: str, mark: bool) -> pd.DataFrame:
        """The finite per-run rows of one (panel, curve, metric) cell of ``long``; ``mark``:
        count the cell as read."""
        if mark:
            self.used.add((panel, curve))
        if self.long is None or self.long.empty:
            return pd.DataFrame(columns=["seed", "round", "value"])
        cells = self._indexed()
        if (panel, curve, metric) not in cells:
            return self.long.iloc[0:0]
        return cells[(panel, curve, metric)]

    def _indexed(self) -> dict[tuple[str, str, str], pd.DataFrame]:
        """``long``'s finite rows per (panel_id, curve, metric), in ``long``'s order: grouped
        once per ``long`` (a test or caller that sets another ``long`` gets a new index), so a
        cell is a lookup, not three masks over the whole table."""
        self._memo()  # (a new ``long``: both caches start empty)
        if self._index is None:
            long = self.long
            finite = long[np.isfinite(long["value"].to_numpy(dtype=float))]
            self._index = {
                key: group
                for key, group in finite.groupby(["panel_id", "curve", "metric"], sort=False)
            }
        return self._index

    def _memo(self) -> dict:
        """:meth:`per_seed`'s results by (panel, curve, metric, reducer) for this ``long``;
        a ``long`` set since empties this and :meth:`_indexed`'s cache."""
        if self._cached_of is not self.long:
            self._cached_of, self._index, self._memos = self.long, None, {}
        return self._memos

    def series(self, panel: str, curve: str, metric: str) -> pd.Series:
        self.used.add((panel, curve))
        a = self.agg
        sel = a[(a["panel_id"] == panel) & (a["curve"] == curve) & (a["metric"] == metric)]
        s = sel.set_index("round")["mean"].sort_index().astype(float)
        return s[s.map(math.isfinite)]

    def peek(self, panel: str, curve: str, metric: str) -> pd.Series:
        """``series`` without marking the cell as read (to choose among curves, e.g. the best
        grid point, before reading the chosen one)."""
        was_read = (panel, curve) in self.used
        s = self.series(panel, curve, metric)
        if not was_read:
            self.used.discard((panel, curve))
        return s

    def curve_where(self, key: str, value) -> str | None:
        """Label of the curve whose overrides set ``key`` to ``value``."""
        for c in self.curves:
            if key in c.set and same(c.set[key], value):
                return c.label
        return None

    def curve_matching(self, **conds) -> str | None:
        """Label of the first curve whose overrides set every dotted key (``__`` for ``.``)
        to the given value, e.g. ``curve_matching(algorithm="fedavg", selector="bherd")``."""
        want = {k.replace("__", "."): v for k, v in conds.items()}
        for c in self.curves:
            if all(k in c.set and same(c.set[k], v) for k, v in want.items()):
                return c.label
        return None

    def curves_with(self, key: str) -> list[tuple[object, str]]:
        """(value, label) of every curve that sets ``key``, sorted by value."""
        pairs = [(c.set[key], c.label) for c in self.curves if key in c.set]
        return sorted(pairs, key=lambda p: p[0])

    def cases(self) -> list[Panel]:
        return [p for p in self.panels if "data.partition" in p.values] or self.panels

    def failed_seeds(self, panel: str, curve: str) -> dict[int, str]:
        """Seed -> "diverged at round r" / "loss blew up: <tag>" of the cell's runs that are no
        evidence of convergence (read without marking the cell as used)."""
        out = {s: f"loss blew up ({text})" for s, text in self.blowups.get((panel, curve), [])}
        out.update({s: f"diverged at round {r}" for s, r in self.diverged.get((panel, curve), [])})
        return out

    def unusable(self, cells) -> tuple[int, int, int]:
        """(diverged, blown up, total) run counts over ``cells`` ((panel_id, curve) pairs); a
        seed both diverged and blown up counts as diverged."""
        div = blow = total = 0
        a = self.agg
        for key in sorted(cells):
            d = {s for s, _ in self.diverged.get(key, [])}
            b = {s for s, _ in self.blowups.get(key, [])} - d
            div, blow = div + len(d), blow + len(b)
            if key in self.runs:
                total += self.runs[key]
            else:
                sel = a[(a["panel_id"] == key[0]) & (a["curve"] == key[1])]
                total += max(int(sel["n"].max()) if len(sel) else 0, len(d | b))
        return div, blow, total


#: a paper's criterion of one claim (``dashboards.papers.<paper>.claims``)
Criterion = Callable[[ClaimData], Result]


# ------------------------------------------------------------------------------ helpers
def same(a, b) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b))
    return a == b


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    return "inf (diverged)" if math.isinf(x) else f"{x:.{digits}f}"


def missing_curve(*named: tuple[str | None, str]) -> str | None:
    """The description of the first curve that the spec does not define, if any."""
    for label, what in named:
        if label is None:
            return f"the spec has no {what} curve"
    return None


def rises(s: pd.Series) -> int:
    """Number of round-to-round increases of a curve."""
    return int((s.diff().dropna() > 0).sum())


def rounds_of(data: ClaimData) -> int:
    """T of a figure: the last round of its longest curve."""
    return int(data.agg["round"].max()) if len(data.agg) else 0


def paired_effect(
    data: ClaimData,
    panel: str,
    base: str,
    other: str,
    metric: str,
    how: str = "final",
    *,
    relative: bool = False,
    mark: bool = True,
) -> Evidence | None:
    """Per seed ``other − base`` of the cell values (``ClaimData.per_seed``), paired by seed
    (the same seed: the same partition and initial model), with its 95% interval; with
    ``relative``, ``(base − other) / base`` (a relative reduction, e.g. of the loss AUC). None
    when the two curves share no seed."""
    a = data.per_seed(panel, base, metric, how, mark=mark)
    b = data.per_seed(panel, other, metric, how, mark=mark)
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    if relative:
        effects = [(a[s] - b[s]) / a[s] if a[s] else math.nan for s in seeds]
    else:
        effects = [b[s] - a[s] for s in seeds]
    return interval(effects, seeds)


def evidence_row(panel: str, ev: Evidence, measure: Measure) -> dict[str, Any]:
    """One panel's statistics for the index and the report: the effect (seed mean), its 95%
    interval, the threshold and its side, the seeds."""

    def num(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None

    row = {
        "panel": panel,
        "measure": measure.effect,
        "effect": num(ev.mean),
        "ci_low": num(ev.ci_low),
        "ci_high": num(ev.ci_high),
        "interval": interval_method(),
        "threshold": measure.threshold,
        "holds_when": measure.holds_when,
        "direction": measure.direction,
        "seeds": list(ev.seeds),
        "verdict": decide(ev, measure),
    }
    if measure.against is not None and measure.against != measure.threshold:
        row["against"] = measure.against  # a ranking's other side (verdicts.Measure)
    return row


@dataclass(frozen=True)
class Bounds:
    """Censored per-seed effects: seed -> the smallest and the largest effect the seed can have
    (rounds to a target not reached within T are only known to be > T)."""

    low: Mapping[int, float]
    high: Mapping[int, float]


@dataclass(frozen=True)
class Part:
    """One part of a statistical verdict: its name in the numbers, the per-seed effects (an
    :class:`Evidence`, or censored :class:`Bounds`), the measure, and why it cannot decide
    whatever its interval (``blocked``: e.g. "grid not converged: widen it"; the part is then
    inconclusive). A ``(name, evidence, measure[, blocked])`` tuple is read as a Part."""

    name: str
    effect: Evidence | Bounds
    measure: Measure
    blocked: str | None = None
    #: the measure's resolution: the interval is never narrower than ± it (``verdicts.widen``)
    floor: float = 0.0


def decide_part(part: Part) -> tuple[Verdict, dict[str, Any] | None, str]:
    """(verdict, evidence row or None without seeds, text "effect → verdict (why)") of one
    part: an interval decided by
    :func:`decide`; censored bounds by :func:`bounded` (the row then shows the interval of the
    least favourable bounds when supported, of the most favourable ones when contradicted, and
    the span of both when inconclusive, so no row is decided while its interval contains the
    threshold); a blocked part is inconclusive, its row saying why."""
    if isinstance(part.effect, Evidence):
        ev = widen(part.effect, part.floor)
        verdict, text = decide(ev, part.measure), ev.text()
        row = evidence_row(part.name, ev, part.measure) if ev.n else None
        if row is not None and ev is not part.effect:
            row["floor"] = part.floor  # the interval widened to the measure's resolution
            text += f" (widened to ±{part.floor:g}, the measure's resolution)"
    else:
        verdict, lo, hi = bounded(part.effect.low, part.effect.high, part.measure, part.floor)
        if lo.effects == hi.effects:  # no seed censored
            row, text = evidence_row(part.name, lo, part.measure), lo.text()
        else:
            row, text = _censored_row(part.name, verdict, lo, hi, part.measure)
    note = ""
    if part.blocked:
        alone = verdict
        verdict = "inconclusive"
        note = f" ({part.blocked}; the interval alone: {alone})" if row else f" ({part.blocked})"
        if row is not None:
            row["verdict"], row["why"] = verdict, part.blocked
    effect = "" if row is None else f"{text} "
    return verdict, row, f"{effect}→ {verdict}{note}"


def _censored_row(
    name: str, verdict: str, lo: Evidence, hi: Evidence, measure: Measure
) -> tuple[dict[str, Any], str]:
    against, favour = (lo, hi) if measure.direction == "greater" else (hi, lo)
    if verdict == "supported":
        row = evidence_row(name, against, measure)
    elif verdict == "contradicted":
        row = evidence_row(name, favour, measure)
    else:
        low, high = min(lo.ci_low, hi.ci_low), max(lo.ci_high, hi.ci_high)
        span = Evidence(against.seeds, against.effects, against.mean, low, high, against.level)
        row = evidence_row(name, span, measure)
    row["verdict"] = verdict
    row["censored"] = "a seed did not reach the target within T: the effect is bounded"
    text = f"censored: least favourable bounds {against.text()}, most favourable {favour.text()}"
    return row, text


def judge(
    data: ClaimData,
    check: Callable[[Panel], tuple[list[Part] | None, str]],
    panels: list[Panel] | None = None,
    *,
    family: bool = False,
) -> Result:
    """The statistical form of a per-panel claim: ``check(panel)`` returns the panel's parts
    (:class:`Part`) and a text, ``(None, why)`` when the panel has no data, or ``([], text)``
    for a panel shown but not deciding (a control). Each part is decided (:func:`decide_part`)
    and recorded (:func:`evidence_row`); the claim holds where every part of every deciding
    panel holds (:func:`dashboards.verdicts.all_of`); "n/a" when no panel decides.

    ``family``: a claim of k parts is k tests, and "contradicted if any part is" would err k
    times as often as one test: a contradicted part then stands only if Holm's step-down
    procedure over the k parts' one-sided p-values rejects it at the interval's error on that
    side (2.5%: :func:`holm`), else it is inconclusive, and the numbers say so. (Supported
    needs every part supported: an intersection-union test, at 2.5% as it is.)"""
    decided: list[_Decided] = []
    panel_texts: list[tuple[str, str, list[_Decided]] | str] = []
    for panel in panels if panels is not None else data.cases():
        name = panel.label or panel.panel_id
        parts, text = check(panel)
        if parts is None:
            panel_texts.append(f"{name}: no data ({text})")
            continue
        mine = []
        for item in parts:
            part = item if isinstance(item, Part) else Part(*item)
            verdict, row, effect = decide_part(part)
            if row is not None:
                row["panel"] = f"{name} · {part.name}" if part.name else name
                data.evidence.append(row)
            mine.append(
                _Decided(part, verdict, row, f"{part.name + ' ' if part.name else ''}{effect}")
            )
        decided += mine
        panel_texts.append((name, text, mine))
    note = _holm(decided) if family else ""
    texts = [
        t
        if isinstance(t, str)
        else f"{t[0]}: " + "; ".join(x for x in (t[1], *(d.shown for d in t[2])) if x)
        for t in panel_texts
    ]
    if not decided:
        return "n/a", "; ".join(texts) or "no panels"
    return all_of([d.verdict for d in decided]), "; ".join(texts) + note


@dataclass
class _Decided:
    """One decided part of a claim (:func:`judge`): its verdict, evidence row and text, which
    Holm's correction may turn inconclusive."""

    part: Part
    verdict: str
    row: dict[str, Any] | None
    shown: str


def _holm(decided: list[_Decided]) -> str:
    """Holm's correction of the contradicted parts of one claim (:func:`judge`'s ``family``):
    a part whose contradiction Holm does not keep becomes inconclusive (its row and its text
    say why); returns the note for the numbers ("" for a claim of one part or without a
    contradicted part)."""
    live = [d for d in decided if not d.part.blocked]
    against = [d for d in live if d.verdict == "contradicted"]
    if len(live) < 2 or not against:
        return ""
    pvalues = [_contradict_p(d.part) for d in live]
    keep = holm(pvalues)
    dropped = 0
    for d, p, kept in zip(live, pvalues, keep, strict=True):
        if d.verdict != "contradicted" or kept:
            continue
        dropped += 1
        why = (
            f"contradicted alone (p = {p:.2g}), not after Holm's correction over {len(live)} parts"
        )
        d.verdict = "inconclusive"
        d.shown = d.shown.replace("→ contradicted", f"→ inconclusive ({why})", 1)
        if d.row is not None:
            d.row["verdict"], d.row["why"] = "inconclusive", why
    stand = len(against) - dropped
    return (
        f"; Holm over {len(live)} parts: {stand} of {len(against)} contradicted part"
        f"{'s' if len(against) != 1 else ''} stand{'s' if stand == 1 else ''} (family-wise "
        f"error ≤ {(1 - current_level()) / 2:.3g} on that side)"
    )


def _contradict_p(part: Part) -> float:
    """The one-sided p-value of "the part holds" (small: it does not)."""
    if isinstance(part.effect, Evidence):
        return p_values(part.effect, part.measure)[1]
    low, high = part.effect.low, part.effect.high
    seeds = sorted(set(low) & set(high))
    # the bounds most favourable to the claim: a contradiction must hold even for them
    favour = high if part.measure.direction == "greater" else low
    return p_values(interval([favour[s] for s in seeds], seeds), part.measure)[1]


def rank_margin(
    data: ClaimData,
    panel: str,
    claimed: list[str],
    rivals: list[str],
    metric: str,
    how: str = "final",
    *,
    lower_is_better: bool,
    relative: bool = False,
    failed_rivals_lose: bool = False,
) -> Evidence | None:
    """The margin, per seed, by which the best of the ``claimed`` curves beats the best of the
    ``rivals`` (a ranking claim: "α 0.3–0.5 is fastest", "B = 10 is best"): ``best rival −
    best claimed`` for a loss (``lower_is_better``), ``best claimed − best rival`` for an
    accuracy; ``relative``: divided by the best rival's |value|. Positive = the claimed curve
    ranks first on that seed. Over the seeds every curve has (paired by seed); None when there
    is no such seed. Every curve is read (a diverged seed makes the claim not testable), except
    with ``failed_rivals_lose``: a rival's diverged or blown-up seed then ranks last on that seed
    (a run that failed to converge is no faster than any other), read without making the claim
    not testable."""
    worst = math.inf if lower_is_better else -math.inf
    values = [data.per_seed(panel, c, metric, how) for c in claimed]
    for c in rivals:
        if failed_rivals_lose:
            mine = data.per_seed(panel, c, metric, how, mark=False)
            mine.update(dict.fromkeys(data.failed_seeds(panel, c), worst))
            if not data.failed_seeds(panel, c):
                data.used.add((panel, c))
        else:
            mine = data.per_seed(panel, c, metric, how)
        values.append(mine)
    seeds = sorted(set.intersection(*(set(v) for v in values))) if values else []
    if not seeds or not claimed or not rivals:
        return None
    mine, theirs = values[: len(claimed)], values[len(claimed) :]
    pick = min if lower_is_better else max
    effects = []
    for s in seeds:
        a, b = pick(v[s] for v in mine), pick(v[s] for v in theirs)
        margin = (b - a) if lower_is_better else (a - b)
        if relative and b and math.isfinite(b):
            margin /= abs(b)
        effects.append(margin)
    return interval(effects, seeds)


def bounded(
    low: Mapping[int, float], high: Mapping[int, float], measure: Measure, floor: float = 0.0
) -> tuple[Verdict, Evidence, Evidence]:
    """A verdict from censored per-seed effects (rounds to a target not reached within T are
    only known to be > T): ``low``/``high`` are the smallest/largest effect each seed can have.
    Supported when the interval of the bounds least favourable to the claim clears the
    threshold, contradicted when the interval of the bounds most favourable to it clears the
    opposite side, else inconclusive (an infinite bound gives an unbounded interval). Returns
    (verdict, evidence of ``low``, evidence of ``high``)."""
    seeds = sorted(set(low) & set(high))
    lo = widen(interval([low[s] for s in seeds], seeds), floor)
    hi = widen(interval([high[s] for s in seeds], seeds), floor)
    if measure.direction == "within":
        raise ValueError("bounded() decides one-sided claims")
    against, favour = (lo, hi) if measure.direction == "greater" else (hi, lo)
    if decide(against, measure) == "supported":
        return "supported", lo, hi
    if decide(favour, measure) == "contradicted":
        return "contradicted", lo, hi
    return "inconclusive", lo, hi


def seed_reach(
    data: ClaimData, panel: str, curve: str, target: float, metric: str = "test_acc"
) -> dict[int, Reach]:
    """Seed -> when that run's ``metric`` first reached ``target`` (a run that never does: not
    reached within its last round, :class:`dashboards.targets.Reach`)."""
    out = {}
    for seed, s in data.seed_series(panel, curve, metric).items():
        reach = rounds_to_target(s, target)
        if reach is not None:
            out[seed] = reach
    return out


def grid_edge(grid: list[float], chosen: float, name: str = "η") -> str | None:
    """``"grid not converged: ..."`` when ``chosen`` is the smallest or the largest point of a
    learning-rate ``grid`` with more than one point (the best may lie outside it: widen it),
    else None."""
    points = sorted(set(float(g) for g in grid))
    if len(points) < 2:
        return None
    if math.isclose(chosen, points[0]) or math.isclose(chosen, points[-1]):
        side = "smallest" if math.isclose(chosen, points[0]) else "largest"
        return (
            f"grid not converged: the chosen {name}={chosen:g} is the {side} of the grid "
            f"[{points[0]:g}, {points[-1]:g}]: widen it"
        )
    return None


# ------------------------------------------------------------------------------ checking
def normalize(claim: str) -> str:
    return " ".join(claim.lower().replace("–", "-").replace("—", "-").split())


def criterion_text(fn: Callable) -> str:
    return " ".join((fn.__doc__ or "").replace("``", "").split())


NOT_TESTABLE = "not testable at this profile (T={t})"
NOT_TESTABLE_DIVERGED = "not testable: {n} of {m} runs diverged"
TESTABLE_RULE = (
    f"95% Student-t interval over seeds. Tested from T ≥ {MIN_ROUNDS} rounds and on panels not "
    "declared scaled; otherwise not testable, with the numbers. A diverged run (or one whose "
    "loss blew up) in a curve the criterion reads makes it not testable too."
)


def diverged_label(div: int, blow: int, total: int) -> str:
    """ "not testable: 2 of 6 runs diverged" (+ " (1 of them a finite loss blow-up)")."""
    text = NOT_TESTABLE_DIVERGED.format(n=div + blow, m=total)
    if blow:
        text += (
            f" ({blow} of them {'a ' if blow == 1 else ''}finite loss blow-up{'s' * (blow > 1)})"
        )
    return text


def regime_groups(panels: list[Panel]) -> list[tuple[str, list[Panel]]]:
    """The panels grouped by their declared regime kind, in first-seen order: one group per
    kind (a figure mixing the paper's regime and a scaled one is judged per regime), ``""`` for
    panels whose profile declares none."""
    groups: dict[str, list[Panel]] = {}
    for p in panels:
        groups.setdefault(p.regime.kind if p.regime is not None else "", []).append(p)
    return list(groups.items())


#: regime kinds from the least to the most removed from the paper's (a claim spanning panels
#: of several regimes takes the most removed)
_REGIME_ORDER = ("", "paper", "reconstructed", "truncated", "scaled")


def _regime_text(panels: list[Panel]) -> str:
    texts = dict.fromkeys(p.regime.text for p in panels if p.regime is not None)
    return "; ".join(texts)


def check_claims(
    claims: list[ClaimEntry], data: ClaimData | None, criteria: Mapping[Any, Criterion]
) -> list[ClaimCheck]:
    """One :class:`ClaimCheck` per claim and declared regime (a figure whose panels mix
    regimes is judged per regime): a legacy claim text by its criterion in ``criteria``
    (normalized claim text -> criterion: ``dashboards.registry.CRITERIA``), a declared claim
    (:class:`fedsweep.specs.claims.Claim`) by the criterion ``criteria.get(claim)`` gives
    (the registry's: :func:`dashboards.judge.criterion`); "n/a" without data or without a
    criterion, not testable (the numbers still given) when the panels' regime is not one the
    claim can be tested on (``scaled`` for a legacy claim), when a curve the criterion read has
    a diverged (or blown-up) run, or when the figure's curves are shorter than
    ``MIN_ROUNDS``."""
    out = []
    groups = regime_groups(data.panels) if data is not None else [("", [])]
    for entry in claims:
        declared = isinstance(entry, Claim)
        claim = entry.title if declared else entry
        fn = criteria.get(entry if declared else normalize(entry))
        # what every check of the claim says of it, judged or not
        about = {"id": "", "words": "", "paper": None}
        if declared:
            words = f"“{entry.text}” ({entry.where})" if entry.where else entry.text
            about = {"id": entry.id, "words": words, "paper": entry.paper_effect}
        if fn is None:
            out.append(ClaimCheck(claim, "n/a", "no criterion defined for this claim", **about))
            continue
        criterion = f"{criterion_text(fn)} {TESTABLE_RULE}"
        if data is None or data.agg.empty:
            out.append(ClaimCheck(claim, "n/a", "no runs", criterion, **about))
            continue
        testable = getattr(fn, "regimes", ("paper", "reconstructed"))
        mine = groups
        if getattr(fn, "spans_regimes", False) and len(groups) > 1:
            # a claim comparing panels of different regimes (SVM against CNN) is judged once,
            # on all of them, and is testable only where none is scaled
            mine = [(max((k for k, _ in groups), key=_REGIME_ORDER.index), data.panels)]
        for kind, panels in mine:
            part = data if len(mine) == 1 else dataclasses.replace(data, panels=panels)
            check = _check_one(claim, fn, part, criterion, about)
            if kind:
                check.regime = _regime_text(panels)
                if len(mine) > 1:
                    names = ", ".join(p.label or p.panel_id for p in panels)
                    check.numbers = f"[{kind} regime: {names}] {check.numbers}"
            if kind and kind not in testable and check.verdict != "n/a":
                reason = f"not testable at this profile: {kind} regime ({check.regime})"
                check.verdict = "not-testable"
                check.label = reason if not check.label else f"{reason}; {check.label}"
            out.append(check)
    return out


def _check_one(
    claim: str, fn: Criterion, data: ClaimData, criterion: str, about: dict[str, Any]
) -> ClaimCheck:
    data.used.clear()
    data.evidence = []
    data.degenerate = []
    verdict, numbers = fn(data)
    div, blow, total = data.unusable(data.used)
    t = rounds_of(data)
    if verdict not in (*VERDICTS, "n/a"):
        raise ValueError(f"criterion of {claim!r} returned {verdict!r}: not one of {VERDICTS}")
    label = ""
    if verdict == "not-testable" and numbers.startswith("degenerate"):
        label = numbers.split(":", 1)[0] + ": the two sides are the same computation"
    elif div + blow:
        verdict, label = "not-testable", diverged_label(div, blow, total)
        if t < MIN_ROUNDS:
            label += f"; T={t} < {MIN_ROUNDS} rounds"
    elif verdict != "n/a" and t < MIN_ROUNDS:
        verdict, label = "not-testable", NOT_TESTABLE.format(t=t)
    check = ClaimCheck(claim, verdict, numbers, criterion, label, tuple(data.evidence), **about)
    check.degenerate = tuple(data.degenerate)
    return check
