"""One declared claim (``fedsweep.specs.claims.Claim``) judged on one figure's data:
:func:`judge_claim` gives its verdict and numbers, the evidence rows and degenerate parts landing
in the :class:`~fedsweep.judge.runs.ClaimData` view it was given (``ClaimData.view``, one per
claim). Each comparison's parts in a panel come from its kind (:mod:`fedsweep.judge.kinds`);
each part is decided by its per-seed effects' interval (:func:`fedsweep.judge.evidence.
decide_panels`); the measures and guards are the registered ones
(:mod:`fedsweep.judge.measures`).

A part whose two sides are one computation (identical typed run configs, identical runs, a
rival that repeats another, a ``degenerate_if`` guard) is named in ``ClaimData.degenerate`` and
not counted; a claim all of whose parts are is "degenerate" (not testable, the reason in the
label), not judged.

A tuned comparison (``tune``) reads each side's grid at its chosen point
(:func:`fedsweep.judge.kinds.common.choose`); a chosen point on its grid's edge blocks its part
(inconclusive, the numbers shown). ``absent: inconclusive`` makes a pair without runs of both an
inconclusive part instead of a panel without data. A comparison with ``reading`` (a second
reading of the claim's words) is judged per panel and shown after the numbers, labelled and
never deciding. A censored measure (rounds to a target not reached within T) gives censored
effects (:class:`~fedsweep.judge.evidence.Bounds`, decided by
:func:`~fedsweep.judge.evidence.bounded`). A claim's ``vacuous_if`` guards turn a supported
verdict into an inconclusive one (:func:`_vacuous`), its ``inconclusive_if`` guards any
verdict; a ``best`` side is narrowed per panel to its best curve (:func:`_best_of`); a
comparison's ``blocked_if`` guards are asked per part with the part's curves.
"""

from __future__ import annotations

import math

from fedsweep.judge.degenerate import same_computation
from fedsweep.judge.evidence import (
    Bounds,
    Part,
    decide_panels,
    decide_part,
    evidence_row,
)
from fedsweep.judge.kinds import KINDS
from fedsweep.judge.kinds.common import ordered, ref_of, resolve
from fedsweep.judge.kinds.compare import two
from fedsweep.judge.measures import GUARDS, MEASURES, MeasureDef, regimes_that_test, step_of
from fedsweep.judge.panels import Panel
from fedsweep.judge.runs import ClaimData, Result
from fedsweep.judge.stats import Evidence, Measure, all_of, decide, interval
from fedsweep.specs.claims import Claim, Comparison, CurveRef

DEGENERATE = "degenerate"
_GREATER = {"above": "greater", "below": "less", "within": "within"}


def describe(claim: Claim) -> str:
    """The criterion in words (the index's and the report's "criterion")."""
    parts = []
    for comp in claim.comparisons:
        m = MEASURES.get(comp.measure)
        what = m.what if m else comp.measure
        side = {"above": ">", "below": "<", "within": "|effect| ≤"}[comp.side]
        tuned = ""
        if comp.tune is not None:
            over = ", ".join(comp.tune.over) or comp.over
            tuned = f" (each grid over {over} at its best seed mean of {comp.tune.by})"
        shown = f"{comp.reading} reading, shown, not deciding: " if comp.reading else ""
        parts.append(f"{shown}{comp.kind} on {what}{tuned}: effect {side} {_margin(claim, comp):g}")
    where = ", ".join(claim.panels) or "every case panel"
    return (
        f"Declared claim {claim.id} ({'; '.join(parts)}), per seed, paired by seed, in {where}; "
        f"at least {claim.min_seeds} seeds decide; testable in the regimes "
        f"{', '.join(regimes_that_test(claim))}."
    )


def _margin(claim: Claim, comp: Comparison) -> float:
    return max(comp.margin, claim.resolution) if claim.resolution else comp.margin


def measure_of(claim: Claim, comp: Comparison, text: str) -> Measure:
    """The comparison's threshold (its margin, at least the claim's resolution) and side; with
    ``fails_below``, the effect below which it fails (``Measure.against``: a practical tie
    between the two is inconclusive)."""
    margin = _margin(claim, comp)
    return Measure(text, margin, _GREATER[comp.side], comp.fails_below)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ values


# ------------------------------------------------------------------------------ the kinds


# ------------------------------------------------------------------------------ a claim
def _panel_matches(p: Panel, value: str) -> bool:
    key, _, want = value.partition("=")
    return key in p.values and str(p.values[key]) == want


def _sides(
    comp: Comparison, data: ClaimData, p: Panel | None, after: int = 0
) -> tuple[list[str], list[str]]:
    """(claimed, other) labels of a comparison (in ``p``: its ``by_panel`` curves, and a
    ``best`` side's best curve only); a curve of one side is never on the other (``{others:
    true}``: every curve not on the other side)."""
    mine, theirs = _resolved(comp, data, p)
    if p is None:
        return mine, theirs
    refs = _claimed_refs(comp, p)
    return _narrow(comp, data, p, refs, mine, after), _narrow(
        comp, data, p, comp.versus, theirs, after
    )


def _claimed_refs(comp: Comparison, p: Panel | None) -> list[CurveRef]:
    if comp.by_panel and p is not None:
        return next((r for v, r in comp.by_panel.items() if _panel_matches(p, v)), [])
    if comp.by_panel:
        return [r for rs in comp.by_panel.values() for r in rs]
    return comp.curve


def _narrow(comp, data, p, refs, labels, after) -> list[str]:
    """``labels`` with each ``best`` reference's curves replaced by its best one in ``p``."""
    if not any(r.best for r in refs):
        return labels
    curves = {c.label: c for c in data.curves}
    out = [x for x in labels if not any(r.best and data.names(r, curves[x]) for r in refs)]
    for ref in refs:
        if ref.best:
            named = [x for x in labels if data.names(ref, curves[x])]
            chosen = _best_of(data, p.panel_id, comp, named, after)
            if chosen is not None and chosen not in out:
                out.append(chosen)
    return out


def _best_of(data: ClaimData, panel: str, comp: Comparison, labels: list[str], after: int = 0):
    """The curve of ``labels`` with the best seed mean of the comparison's measure in
    ``panel`` (read without marking; a curve with a failed seed there is no candidate; spec
    order breaks ties); None without a candidate."""
    m = MEASURES.get(comp.measure)
    best, best_mean = None, math.nan
    for label in labels:
        if m is None or data.failed_seeds(panel, label):
            continue
        got = m.fn(data, panel, label, after, mark=False).values()
        finite = [v for v in got if isinstance(v, float) and math.isfinite(v)]
        if not finite:
            continue
        mean = math.fsum(finite) / len(finite)
        if best is None or (mean < best_mean if m.lower_is_better else mean > best_mean):
            best, best_mean = label, mean
    return best


def _resolved(comp: Comparison, data: ClaimData, p: Panel | None) -> tuple[list[str], list[str]]:
    refs = _claimed_refs(comp, p)
    if any(r.others for r in refs):
        theirs = resolve(data, comp.versus)
        return resolve(data, refs, exclude=theirs), theirs
    mine = resolve(data, refs)
    return mine, resolve(data, comp.versus, exclude=mine)


def _labels(comp: Comparison, data: ClaimData, p: Panel | None) -> list[str]:
    """Every curve a comparison reads (a grid's curves in order)."""
    mine, theirs = _sides(comp, data, p)
    if KINDS[comp.kind].ordered:
        return [c for _, c in ordered(comp, data, mine)]
    return mine + theirs


def _missing(comp: Comparison, data: ClaimData) -> str | None:
    """Why a comparison cannot be made in this figure (a side without a curve)."""
    mine, theirs = _sides(comp, data, None)
    if KINDS[comp.kind].ordered:
        if len(ordered(comp, data, mine)) >= 2:
            return None
        return f"fewer than two curves set {comp.over}"
    if KINDS[comp.kind].one_sided:
        return None
    named = comp.curve or [r for rs in comp.by_panel.values() for r in rs]
    for got, refs, what in ((mine, named, "claimed"), (theirs, comp.versus, "compared")):
        if not got:
            return f"the spec has no {' or '.join(r.text() for r in refs)} curve ({what} side)"
    return None


def judge_claim(claim: Claim, data: ClaimData) -> Result:
    """The verdict and numbers of a declared claim on one figure's data."""
    comps = claim.comparisons
    for comp in comps:
        why = _missing(comp, data)
        if why:
            return "n/a", why
        if comp.measure not in MEASURES:
            return "n/a", f"no measure {comp.measure!r}"
    if comps[0].contrast is not None:
        verdict, numbers = _contrasts(claim, data)
    else:
        verdict, numbers = _per_panel(claim, data)
    if claim.factor is not None and verdict != "n/a":
        verdict, numbers = _factor(claim, data, verdict, numbers)
    if claim.vacuous_if and verdict != "n/a":
        verdict, numbers = _vacuous(claim, data, verdict, numbers)
    if verdict != "n/a":
        labels = [lab for comp in comps for lab in _labels(comp, data, None)]
        for name in claim.inconclusive_if:
            reason = GUARDS[name](data, None, labels)
            if reason:
                for row in data.evidence:
                    row["verdict"], row["note"] = "inconclusive", reason
                return "inconclusive", f"{numbers}; {reason}"
    return verdict, numbers


def _panels(claim: Claim, data: ClaimData) -> list[Panel]:
    if claim.panels:
        return [p for p in data.panels if any(_panel_matches(p, v) for v in claim.panels)]
    if claim.by_panel:
        return [p for p in data.cases() if any(_panel_matches(p, v) for v in claim.by_panel)]
    return data.cases()


def _per_panel(claim: Claim, data: ClaimData) -> Result:
    #: reading -> (its measure's name, "Case 1 B=10 first by effect ... → would be X" per part)
    readings: dict[str, tuple[str, list[str]]] = {}

    def check(p: Panel) -> tuple[list[Part] | None, str]:
        labels = [lab for comp in claim.comparisons for lab in _sides(comp, data, p)[0]]
        for name in claim.leave_out:
            reason = GUARDS[name](data, p, labels)
            if reason:
                return [], f"left out ({reason})"
        parts: list[Part] = []
        shown: list[str] = []
        pairs: list[tuple[str, str]] = []  # (claimed, compared) of this panel's pair parts
        for n, comp in enumerate(claim.comparisons):
            m = MEASURES[comp.measure]
            mine, theirs = _sides(comp, data, p, claim.after)
            got = KINDS[comp.kind].parts(claim, comp, data, p.panel_id, m, mine, theirs)
            empty = _no_candidate(comp, data, p, mine) if theirs else []
            if got is None and not empty:
                if n == 0:
                    return None, "a curve of the claim has no runs here"
                continue
            got = got or []
            if comp.reading:
                _read(claim, comp, p, m, mine, got, readings)
                continue
            if KINDS[comp.kind].ranks:
                shown.append(_means(data, p.panel_id, m, _labels(comp, data, p), claim.after))
            elif m.scope == "panel":
                shown.append(m.what)
            shown.append(_at_chance(comp, data, p.panel_id, mine, theirs))
            text = f"{comp.kind} on {m.what}: {', '.join(mine) or comp.over}"
            if theirs:
                text += f" against {', '.join(theirs)}"
            measure = measure_of(claim, comp, text)
            for name, effect, *rest in got:
                # (name, effect[, why blocked[, the part's curves]]): two gives all four
                why = rest[0] if rest else None
                curves = rest[1] if len(rest) > 1 else mine + theirs
                label = " · ".join(x for x in (comp.name, name) if x)
                same = _same_sides(claim, comp, data, p, curves)
                if not same and claim.strict and len(curves) == 2 and not KINDS[comp.kind].rivals:
                    same = _repeats(data, p, tuple(curves), pairs)
                    pairs.append(tuple(curves))
                if same:
                    data.degenerate.append(f"{p.label or p.panel_id} · {label}: {same}")
                    shown.append(f"{label} degenerate (not counted)")
                    continue
                blocked = why or _too_few(claim, effect) or _blocked(comp, data, p, curves)
                parts.append(Part(label, effect, measure, blocked, _floor(claim, m, data, curves)))
            for ref in empty:
                why = f"no curve of {ref.text()} with data here"
                parts.append(Part(ref.text(), interval([]), measure, why))
        return parts, "; ".join(x for x in shown if x)

    verdict, numbers = decide_panels(data, check, _panels(claim, data), family=claim.strict)
    if verdict == "n/a" and data.degenerate:
        return "not-testable", f"{DEGENERATE}: every part: " + "; ".join(data.degenerate)
    for reading, (name, texts) in readings.items():
        numbers += f"; {reading} reading ({name}; shown, not deciding): " + "; ".join(texts)
    return verdict, numbers


def _read(claim, comp, p: Panel, m: MeasureDef, mine, got, readings) -> None:
    """A reading's parts in panel ``p``, as text, each with the verdict it would give."""
    texts = readings.setdefault(comp.reading, (m.name, []))[1]
    for name, effect, *why in got:
        label = " · ".join(x for x in (comp.name, name) if x)
        blocked = (why[0] if why else None) or _too_few(claim, effect)
        part = Part(label, effect, measure_of(claim, comp, ""), blocked)
        shown = decide_part(part)[2].replace("→ ", "→ would be ", 1)
        what = " ".join(x for x in (", ".join(mine), label) if x)
        texts.append(f"{p.label or p.panel_id} {what} {shown}")


def _repeats(data: ClaimData, p: Panel, pair: tuple[str, str], earlier: list) -> str | None:
    """Why the part ``pair`` (claimed, compared) repeats an earlier part of its panel: the same
    claimed curve against a rival that computed the same (FedNova with FedAvg's local steps is
    FedAvg: "FedVeca vs FedNova" then says what "FedVeca vs FedAvg" said); None otherwise."""
    for mine, theirs in earlier:
        if mine == pair[0] and theirs != pair[1]:
            same = same_computation(data, p.panel_id, pair[1], theirs)
            if same:
                return f"it repeats {mine} − {theirs}: {same}"
    return None


def _floor(claim: Claim, m: MeasureDef, data: ClaimData, curves: list[str]) -> float:
    """The interval floor of a part: the measure's resolution over its curves (an accuracy's
    1 / test images, a count's 1) or the claim's declared ``resolution``, the larger; 0 with
    ``strict: false``."""
    if not claim.strict:
        return 0.0
    return max(step_of(m, data, curves), claim.resolution or 0.0)


def _same_sides(
    claim: Claim, comp: Comparison, data: ClaimData, p: Panel, curves: list[str]
) -> str | None:
    """Why a part of two curves compares a computation with itself (identical typed configs,
    identical test-loss histories on every seed and round: :func:`fedsweep.judge.degenerate.
    same_computation`, unless the claim is not ``strict``; a ``degenerate_if`` guard's reason),
    None when it does not."""
    for name in comp.degenerate_if:
        reason = GUARDS[name](data, p, curves)
        if reason:
            return reason
    if not KINDS[comp.kind].paired or len(curves) != 2:
        return None
    a, b = curves
    by_label = {c.label: c for c in data.curves}
    if a in by_label and b in by_label and data.config(by_label[a]) == data.config(by_label[b]):
        return f"{a!r} and {b!r} have identical typed run configs"
    return same_computation(data, p.panel_id, a, b) if claim.strict else None


def _blocked(comp: Comparison, data: ClaimData, p: Panel, curves: list[str]) -> str | None:
    """The first reason a ``blocked_if`` guard gives for a part's curves."""
    for name in comp.blocked_if:
        reason = GUARDS[name](data, p, curves)
        if reason:
            return reason
    return None


def _no_candidate(comp: Comparison, data: ClaimData, p: Panel, mine: list[str]) -> list[CurveRef]:
    """The claimed ``best`` references without a candidate curve in ``p``."""
    curves = [c for c in data.curves if c.label in mine]
    refs = _claimed_refs(comp, p)
    return [r for r in refs if r.best and not any(data.names(r, c) for c in curves)]


def _means(data: ClaimData, panel: str, m: MeasureDef, labels: list[str], after: int) -> str:
    """``"loss_auc α=0.1 0.312, α=0.3 0.298"``: each curve's seed mean, for the reader (not
    marked, not deciding)."""
    shown = []
    for label in labels:
        got = [v for v in m.fn(data, panel, label, after, mark=False).values()]
        finite = [v for v in got if isinstance(v, float) and math.isfinite(v)]
        if finite:
            shown.append(f"{label} {math.fsum(finite) / len(finite):.4g}")
    return f"{m.name} " + ", ".join(shown) if shown else ""


def _at_chance(comp: Comparison, data: ClaimData, panel: str, mine, theirs) -> str:
    """``"seed 0 diverged at round 5 (counted at chance 0.1), ..."``: the failed seeds of a
    side whose failure counts at chance (``failed: chance``: the claim's evidence)."""
    out = []
    for labels, refs in ((mine, comp.curve), (theirs, comp.versus)):
        for label in labels:
            ref = ref_of(label, refs, data)
            if ref is None or ref.failed != "chance":
                continue
            chance = data.chance(label)
            chance = 0.1 if chance is None else chance
            failed = sorted(data.failed_seeds(panel, label).items())
            out += [f"seed {s} {why} (counted at chance {chance:g})" for s, why in failed]
    return ", ".join(out)


def _too_few(claim: Claim, effect: Evidence | Bounds) -> str | None:
    n = effect.n if isinstance(effect, Evidence) else len(set(effect.low) & set(effect.high))
    if 2 <= n < claim.min_seeds:
        return f"{n} seeds, fewer than the {claim.min_seeds} this claim needs"
    return None


def _contrasts(claim: Claim, data: ClaimData) -> Result:
    """Each comparison's effect averaged over its ``above`` panels minus over its ``below``
    panels, per seed (the seeds pair by number across panels), judged once."""
    verdicts, texts = [], []
    for comp in claim.comparisons:
        m = MEASURES[comp.measure]
        mine, theirs = _sides(comp, data, None)
        sides: dict[str, dict[int, float]] = {}
        for side in ("above", "below"):
            chosen = [
                p for p in data.panels if any(_panel_matches(p, v) for v in comp.contrast[side])
            ]
            cells = []
            for p in chosen:
                got = two(claim, comp, data, p.panel_id, m, mine, theirs)
                if got and isinstance(got[0][1], Evidence):
                    ev = got[0][1]
                    cells.append(dict(zip(ev.seeds, ev.effects, strict=True)))
            if cells:
                seeds = sorted(set.intersection(*(set(c) for c in cells)))
                if side == "below" and comp.contrast_below == "largest":
                    sides[side] = {s: max(c[s] for c in cells) for s in seeds}
                else:
                    sides[side] = {s: math.fsum(c[s] for c in cells) / len(cells) for s in seeds}
        name = comp.name or ", ".join(mine)
        shown = " − ".join(" / ".join(comp.contrast[s]) for s in ("above", "below"))
        if len(sides) < 2 or not sides["above"] or not sides["below"]:
            texts.append(f"{name}: no panel of one side has runs of both curves")
            continue
        seeds = sorted(set(sides["above"]) & set(sides["below"]))
        if not seeds:
            texts.append(f"{name}: no seed with data on both sides")
            continue
        ev = interval([sides["above"][s] - sides["below"][s] for s in seeds], seeds)
        text = f"{comp.kind} on {m.what} of {', '.join(mine)} against {', '.join(theirs)}: {shown}"
        measure = measure_of(claim, comp, text)
        verdict = decide(ev, measure)
        verdicts.append(verdict)
        data.evidence.append(evidence_row(f"{name} · {shown}", ev, measure))
        texts.append(f"{name}: {shown} {ev.text()} → {verdict}")
    if not verdicts:
        return "n/a", "; ".join(texts)
    return all_of(verdicts), "; ".join(texts)


def _factor(claim: Claim, data: ClaimData, verdict: str, numbers: str) -> Result:
    """``equivalent`` + ``factor``: supported only if some other value of the factor differs
    from ``versus`` beyond the margin somewhere (else matching it shows nothing)."""
    m = MEASURES[claim.measure]
    mine, theirs = _sides(claim, data, None)
    others = [c.label for c in data.curves if claim.factor in c.set and c.label not in mine]
    differs = []
    measure = measure_of(claim, claim, "")
    for p in _panels(claim, data):
        for other in others:
            for v in theirs:
                a = m.fn(data, p.panel_id, v, claim.after, mark=False)
                b = m.fn(data, p.panel_id, other, claim.after, mark=False)
                seeds = sorted(set(a) & set(b))
                if not seeds:
                    continue
                ev = interval([b[s] - a[s] for s in seeds], seeds)
                if decide(ev, measure) == "contradicted":
                    differs.append(f"{other} in {p.label or p.panel_id}")
    if differs:
        return verdict, f"{numbers}; {claim.factor} matters: {', '.join(differs[:3])} differ(s)"
    if verdict == "supported":
        return "inconclusive", (
            f"{numbers}; no other {claim.factor} differs from {', '.join(theirs)} anywhere in "
            f"this figure, so matching it shows nothing about {claim.factor} (inconclusive)"
        )
    return verdict, numbers


def _vacuous(claim: Claim, data: ClaimData, verdict: str, numbers: str) -> Result:
    """``vacuous_if``: the first of the named guards that gives a reason (the claim could not
    have failed here, e.g. the methods overlap in every panel) makes a supported verdict
    inconclusive; any other verdict stands. The reason joins the numbers; the evidence rows
    stay as decided."""
    labels = [lab for comp in claim.comparisons for lab in _labels(comp, data, None)]
    for name in claim.vacuous_if:
        reason = GUARDS[name](data, None, labels)
        if reason and verdict == "supported":
            return "inconclusive", f"{numbers}; {reason} (inconclusive)"
        if reason:
            return verdict, f"{numbers}; {reason}"
    return verdict, numbers
