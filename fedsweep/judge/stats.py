"""A verdict is a statistical statement: an effect per seed, a 95% interval over the seeds, and
one of four verdicts (issue 34).

A claim declares once *what* it measures and *where* it holds (:class:`Measure`): the effect (in
the claim's units, e.g. "final test accuracy of B − A, per seed") and a threshold with a
direction:

* ``greater``: the claim holds when the effect is above the threshold ("B is faster": the AUC
  reduction > 0);
* ``less``: it holds when the effect is below it ("few rounds below the bound": share < 0.05);
* ``within``: it holds when ``|effect| ≤ threshold`` ("α = 1 matches FedAvg": |Δ| ≤ 0.01, an
  equivalence test; the interval must lie inside ``[−threshold, threshold]``).

A measure may fail on another threshold than it holds (``against``: a claim's declared
``fails_below``): "first by 0.01, failing only when a rival is ahead by 0.01" leaves an interval
inside ``(−0.01, 0.01)`` a practical tie, inconclusive.

From the per-seed effects (paired by seed where the design pairs runs: the same seed gives the
same partition and initial model), :func:`interval` gives the mean and a two-sided 95% Student-t
interval over the seeds (``mean ± t_{0.975, n−1} s / √n``; one seed: no interval), and
:func:`decide` the verdict:

* **supported**: the interval lies where the claim holds;
* **contradicted**: it lies where the opposite holds;
* **inconclusive**: it straddles the threshold (or there is one seed);
* **not-testable**: the runs cannot test the claim at this profile (a scaled regime, too few
  rounds, diverged runs): decided by the caller, with the numbers still shown.

So no verdict is *supported* or *contradicted* while its interval contains its threshold; two
seeds rarely decide anything (t_{0.975, 1} = 12.7).

Beyond one interval (issue 51): :func:`p_values` gives the one-sided p-values of an effect on
either side of its threshold (the tests the 95% interval inverts: each side at 0.025),
:func:`holm` controls the family-wise error of a claim made of k parts ("contradicted if any
part is"), :func:`seeds_needed` says how many seeds would decide an inconclusive effect at the
spread observed, and :func:`look_level` is the sequential rule of ``sweep --until-decided``
(seeds added in batches: each look's interval at a level that keeps the stated error over all
the looks).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

Direction = Literal["greater", "less", "within"]
Verdict4 = Literal["supported", "contradicted", "inconclusive", "not-testable"]
VERDICTS: tuple[Verdict4, ...] = ("supported", "contradicted", "inconclusive", "not-testable")
#: "supported"/"contradicted"/"inconclusive": a 95% interval over seeds against a declared
#: threshold (:func:`decide`); "not-testable": these runs cannot test the claim (a
#: scaled regime, too few rounds, diverged runs); "n/a": no data or no criterion
Verdict = Literal["supported", "contradicted", "inconclusive", "not-testable", "n/a"]
LEVEL = 0.95
INTERVAL_METHOD = "two-sided 95% Student-t interval over seeds"
#: the level of the intervals judged now: 95% unless a caller says otherwise (:func:`confidence`)
_LEVEL: contextvars.ContextVar[float] = contextvars.ContextVar("level", default=LEVEL)


@contextlib.contextmanager
def confidence(level: float) -> Iterator[None]:
    """Judge at ``level`` inside the block (every :func:`interval` without its own level): the
    sequential rule of ``sweep --until-decided`` and ``report --level``."""
    if not 0 < level < 1:
        raise ValueError(f"a confidence level lies in (0, 1), got {level}")
    token = _LEVEL.set(level)
    try:
        yield
    finally:
        _LEVEL.reset(token)


def current_level() -> float:
    """The level intervals are judged at now (95% unless inside :func:`confidence`)."""
    return _LEVEL.get()


def interval_method() -> str:
    """The interval in words at the current level (:data:`INTERVAL_METHOD` at 95%)."""
    level = current_level()
    if level == LEVEL:
        return INTERVAL_METHOD
    return f"two-sided {100 * level:.4g}% Student-t interval over seeds"


#: t_{0.975, df} for df = 1..30 (beyond: the normal quantile), so no SciPy is needed
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip
_Z975 = 1.959964


def t_quantile(df: int, level: float | None = None) -> float:
    """``t_{(1+level)/2, df}`` (df ≥ 1; ``level`` None: :func:`current_level`): the table above
    at the 95% level (the numbers every report so far was computed with), SciPy's Student-t
    quantile at any other level."""
    level = current_level() if level is None else level
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if level == LEVEL:
        return _T975[df - 1] if df <= len(_T975) else _Z975
    if not 0 < level < 1:
        raise ValueError(f"a confidence level lies in (0, 1), got {level}")
    from scipy.stats import t

    return float(t.ppf((1 + level) / 2, df))


@dataclass(frozen=True)
class Measure:
    """What a claim measures, declared once: the effect's name (with its units and sign), the
    threshold and the side on which the claim holds."""

    effect: str
    threshold: float
    direction: Direction
    #: the threshold beyond which the claim is contradicted, when it is not ``threshold``: a
    #: ranking with margin m ("X is first") holds above +m and fails below −m (a rival ahead by
    #: a margin that matters); between the two it is a practical tie, inconclusive
    against: float | None = None

    def __post_init__(self) -> None:
        if self.direction == "within" and self.threshold < 0:
            raise ValueError("an equivalence margin is >= 0")
        if self.against is not None and self.direction == "within":
            raise ValueError("an equivalence has one margin")

    @property
    def contra(self) -> float:
        """The threshold the interval must clear to contradict the claim."""
        return self.threshold if self.against is None else self.against

    @property
    def holds_when(self) -> str:
        sign = {"greater": ">", "less": "<", "within": "|effect| ≤"}[self.direction]
        if self.direction == "within":
            return f"{sign} {self.threshold:g}"
        if self.against is not None and self.against != self.threshold:
            fails = "<" if self.direction == "greater" else ">"
            return f"effect {sign} {self.threshold:g} (fails: effect {fails} {self.against:g})"
        return f"effect {sign} {self.threshold:g}"


@dataclass(frozen=True)
class Evidence:
    """Per-seed effects of one claim and their interval."""

    seeds: tuple[int, ...]
    effects: tuple[float, ...]
    mean: float
    ci_low: float
    ci_high: float
    #: the interval's confidence level (``report --level``, ``sweep --until-decided``'s looks)
    level: float = LEVEL

    @property
    def n(self) -> int:
        return len(self.effects)

    def text(self, digits: int = 3) -> str:
        """``effect 0.012 [−0.004, 0.028] (95% CI, 3 seeds)`` (at its own level: ``98.3% CI``)."""
        if self.n == 0:
            return "no seeds"
        if self.n == 1:
            return f"effect {self.mean:.{digits}g} (1 seed: no interval)"
        return (
            f"effect {self.mean:.{digits}g} [{self.ci_low:.{digits}g}, "
            f"{self.ci_high:.{digits}g}] ({self.level * 100:.3g}% CI, {self.n} seeds)"
        )


def widen(evidence: Evidence, floor: float) -> Evidence:
    """``evidence`` with its interval at least ± ``floor`` around the mean (a measure's
    resolution: three seeds at one quantised value give no zero-width certainty); one seed or
    no floor: unchanged."""
    if floor <= 0 or evidence.n < 2 or not math.isfinite(evidence.mean):
        return evidence
    lo = min(evidence.ci_low, evidence.mean - floor)
    hi = max(evidence.ci_high, evidence.mean + floor)
    if (lo, hi) == (evidence.ci_low, evidence.ci_high):
        return evidence
    return Evidence(evidence.seeds, evidence.effects, evidence.mean, lo, hi, evidence.level)


def interval(
    effects: Sequence[float], seeds: Sequence[int] | None = None, level: float | None = None
) -> Evidence:
    """Mean and Student-t interval (at ``level``, else :func:`current_level`: 95% unless a
    caller set another) of per-seed ``effects``; one seed: ``(−inf, inf)``. A non-finite effect (a diverged seed) makes the
    interval ``(−inf, inf)`` too: such a seed is no evidence either way (the caller usually
    declares the claim not testable instead)."""
    values = tuple(float(e) for e in effects)
    ids = tuple(seeds) if seeds is not None else tuple(range(len(values)))
    if len(ids) != len(values):
        raise ValueError(f"{len(ids)} seeds for {len(values)} effects")
    n = len(values)
    level = current_level() if level is None else level
    if n == 0:
        return Evidence(ids, values, math.nan, -math.inf, math.inf, level)
    mean = math.fsum(values) / n
    if n == 1 or not all(math.isfinite(v) for v in values):
        return Evidence(ids, values, mean, -math.inf, math.inf, level)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_quantile(n - 1, level) * math.sqrt(var / n)
    return Evidence(ids, values, mean, mean - half, mean + half, level)


def decide(evidence: Evidence, measure: Measure) -> Verdict4:
    """supported / contradicted / inconclusive from the interval against the threshold (an
    interval touching the threshold does not clear it)."""
    lo, hi, t, c = evidence.ci_low, evidence.ci_high, measure.threshold, measure.contra
    if evidence.n < 2 or math.isnan(lo) or math.isnan(hi):
        return "inconclusive"
    if measure.direction == "greater":
        return "supported" if lo > t else "contradicted" if hi < c else "inconclusive"
    if measure.direction == "less":
        return "supported" if hi < t else "contradicted" if lo > c else "inconclusive"
    if -t < lo and hi < t:
        return "supported"
    return "contradicted" if lo > t or hi < -t else "inconclusive"


def paired(a: dict[int, float], b: dict[int, float]) -> tuple[list[int], list[float]]:
    """Seeds both ``a`` and ``b`` have (sorted) and the paired differences ``b − a``."""
    seeds = sorted(set(a) & set(b))
    return seeds, [b[s] - a[s] for s in seeds]


def all_of(verdicts: Sequence[str]) -> Verdict4:
    """A claim that holds only if every part (panel, measure) holds: supported when all are,
    contradicted when one is, else inconclusive (no parts: inconclusive)."""
    if verdicts and all(v == "supported" for v in verdicts):
        return "supported"
    return "contradicted" if "contradicted" in verdicts else "inconclusive"


# ------------------------------------------------------------------ several tests, more seeds
def _spread(evidence: Evidence) -> tuple[float, float] | None:
    """Mean and standard deviation of finite effects over ≥ 2 seeds, else None."""
    values = evidence.effects
    if len(values) < 2 or not all(math.isfinite(v) for v in values):
        return None
    mean = math.fsum(values) / len(values)
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def p_values(evidence: Evidence, measure: Measure) -> tuple[float, float]:
    """One-sided p-values ``(support, contradict)`` of the effect against the threshold: the
    Student-t tests the interval inverts (each side at (1 − LEVEL)/2 = 0.025 gives the 95%
    interval's verdict). ``support`` tests "the claim does not hold" (small: it holds);
    ``contradict`` tests "the claim holds" (small: it does not). ``within`` (an equivalence):
    support is the larger of the two one-sided tests inside ``[−t, t]`` (TOST), contradict the
    smaller of the tests outside it. Fewer than two seeds, or no spread: ``(1, 1)`` unless the
    seeds all lie strictly on one side (no spread, then 0 for that side)."""
    from scipy.stats import t as student

    spread = _spread(evidence)
    if spread is None:
        return 1.0, 1.0
    mean, sd = spread
    n = len(evidence.effects)
    se = sd / math.sqrt(n)

    def above(threshold: float) -> float:  # p of "effect ≤ threshold" (small: above it)
        if se == 0:
            return 0.0 if mean > threshold else 1.0
        return float(student.sf((mean - threshold) / se, n - 1))

    def below(threshold: float) -> float:  # p of "effect ≥ threshold" (small: below it)
        if se == 0:
            return 0.0 if mean < threshold else 1.0
        return float(student.cdf((mean - threshold) / se, n - 1))

    t, c = measure.threshold, measure.contra
    if measure.direction == "greater":
        return above(t), below(c)
    if measure.direction == "less":
        return below(t), above(c)
    return max(above(-t), below(t)), min(above(t), below(-t))


def holm(pvalues: Sequence[float], alpha: float | None = None) -> list[bool]:
    """Holm's step-down procedure: which of the k hypotheses are rejected at family-wise error
    ``alpha`` (None: one side of the current interval, (1 − level)/2; sorted ascending, the
    i-th smallest against ``alpha / (k − i)``, i from 0, stopping at the first that is not)."""
    alpha = (1 - current_level()) / 2 if alpha is None else alpha
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    rejected = [False] * len(pvalues)
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (len(pvalues) - rank):
            break
        rejected[i] = True
    return rejected


def seeds_needed(
    evidence: Evidence,
    measure: Measure,
    *,
    floor: float = 0.0,
    level: float | None = None,
    cap: int = 1000,
) -> int | None:
    """The fewest seeds whose interval would decide the claim if the mean and the spread stayed
    as observed (the planning estimate an FL paper's "n seeds" should come from): the current
    count when it already decides, None when no count up to ``cap`` would (the mean on the
    threshold, an equivalence whose mean lies outside its margin, fewer than two finite
    seeds). ``floor``: the measure's resolution; the interval is never narrower than ± it."""
    spread = _spread(evidence)
    if spread is None:
        return None
    mean, sd = spread
    return _needed(mean, sd, len(evidence.effects), measure, floor, level, cap)


def _needed(mean, sd, n, measure: Measure, floor, level, cap) -> int | None:
    t, c = measure.threshold, measure.contra
    for count in range(n, cap + 1):
        half = max(t_quantile(count - 1, level) * sd / math.sqrt(count), floor)
        lo, hi = mean - half, mean + half
        if measure.direction == "within":
            if -t < lo and hi < t or lo > t or hi < -t:
                return count
        elif measure.direction == "greater" and (lo > t or hi < c):
            return count
        elif measure.direction == "less" and (hi < t or lo > c):
            return count
    return None


def part_seeds_needed(row: dict, *, cap: int = 1000) -> int | None:
    """:func:`seeds_needed` of one part of a claim from its evidence row (effect, interval,
    seeds, threshold, direction: ``fedsweep.judge.evidence.evidence_row``), the spread recovered from
    the interval's width at the current level; None where the row cannot say (one seed, no
    interval, no direction)."""
    effect, lo, hi = row.get("effect"), row.get("ci_low"), row.get("ci_high")
    n, direction = len(row.get("seeds") or ()), row.get("direction")
    if None in (effect, lo, hi, direction) or n < 2:
        return None
    sd = (hi - lo) / 2 * math.sqrt(n) / t_quantile(n - 1)
    against = row.get("against")
    measure = Measure("", float(row["threshold"]), direction, against)
    return _needed(float(effect), sd, n, measure, 0.0, None, cap)


def claim_seeds_needed(rows: Sequence[dict], *, cap: int = 1000) -> int | None:
    """The seeds that would decide a claim whose parts are ``rows`` (it holds where every part
    does, fails where one fails): the fewer of the two ways, every undecided part supported or
    one part contradicted, at the spread observed; None when it is decided or no count up to
    ``cap`` decides it."""
    verdicts = [r.get("verdict") for r in rows]
    if not rows or "contradicted" in verdicts or all(v == "supported" for v in verdicts):
        return None
    support, against = [], []
    for row in rows:
        if row.get("verdict") != "inconclusive":
            continue
        needed = part_seeds_needed(row, cap=cap)
        side = _side(row)
        if side == "against" and needed is not None:
            against.append(needed)
        support.append(needed if side == "support" else None)
    ways = [min(against)] if against else []
    if support and None not in support:
        ways.append(max(support))
    return min(ways) if ways else None


def _side(row: dict) -> str | None:
    """Where an inconclusive part's mean lies: on the side the claim holds (``support``) or
    not (``against``)."""
    effect, t, direction = row.get("effect"), row.get("threshold"), row.get("direction")
    if effect is None or t is None or direction is None:
        return None
    c = row.get("against", t)
    holds = {
        "greater": effect > t,
        "less": effect < t,
        "within": abs(effect) < t,
    }[direction]
    fails = {"greater": effect < c, "less": effect > c, "within": not holds}[direction]
    return "support" if holds else "against" if fails else None


def look_level(looks: int, level: float = LEVEL) -> float:
    """The confidence level of each interval when a claim is looked at up to ``looks`` times as
    seeds are added (``sweep --until-decided``): the error ``1 − level`` split evenly over the
    looks (Bonferroni's alpha spending: conservative, and the stated error holds whatever the
    number of looks actually taken)."""
    if looks < 1:
        raise ValueError(f"looks: got {looks} (allowed: 1 or more)")
    return 1 - (1 - level) / looks
