"""A claim's parts decided and recorded (issue 34, 51): each :class:`Part` is an effect per
seed (an :class:`~fedsweep.judge.stats.Evidence`, or censored :class:`Bounds` when rounds to a
target were not reached within T) against its measure's threshold.

* :func:`decide_part`: one part's verdict, its evidence row (:func:`evidence_row`, what the
  index, the report and the JSON show) and its text; a blocked part is inconclusive whatever
  its interval; censored bounds are decided by :func:`bounded`;
* :func:`decide_panels`: a claim per panel, holding where every part of every deciding panel
  holds; with ``family``, a contradicted part stands only after Holm's correction over the
  claim's parts;
* :func:`rank_margin`: "X is the best among ...": the margin of X over its best rival, per seed;
* :func:`grid_edge`: a chosen grid point on the grid's edge (widen the grid)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fedsweep.judge.panels import Panel
from fedsweep.judge.runs import ClaimData, Result
from fedsweep.judge.stats import (
    Evidence,
    Measure,
    Verdict,
    all_of,
    current_level,
    decide,
    holm,
    interval,
    interval_method,
    p_values,
    widen,
)


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


def decide_panels(
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
    panel holds (:func:`fedsweep.judge.stats.all_of`); "n/a" when no panel decides.

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
    """One decided part of a claim (:func:`decide_panels`): its verdict, evidence row and text, which
    Holm's correction may turn inconclusive."""

    part: Part
    verdict: str
    row: dict[str, Any] | None
    shown: str


def _holm(decided: list[_Decided]) -> str:
    """Holm's correction of the contradicted parts of one claim (:func:`decide_panels`'s ``family``):
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
