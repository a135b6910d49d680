"""Whether a spec's claims can be judged, before anything runs: every measure and guard a
claim names is registered (:mod:`fedsweep.judge.measures`, the papers' own included) and fits
its kind. The rest (curves, panels, margins, kinds) is checked when the spec loads
(:func:`fedsweep.specs.claims.claim_problems`). Imports no figure code: ``fedsweep sweep`` asks
it before Ray or MLflow start."""

from __future__ import annotations

from collections.abc import Sequence

import fedsweep.judge.papers  # noqa: F401 - the papers register their measures and guards
from fedsweep.core.suggest import did_you_mean
from fedsweep.judge.measures import GUARDS, MEASURES
from fedsweep.specs.claims import Claim


def claim_problem(claims: Sequence[Claim]) -> str:
    """The first problem of a spec's declared claims' measures and guards (one line), "" if
    none."""
    for i, claim in enumerate(claims):
        problem = declared_problem(claim, f"claims[{i}] ({claim.id})")
        if problem:
            return problem
    return ""


def declared_problem(claim: Claim, at: str) -> str:
    """The first problem of a declared claim's measures and guards, "" if none."""
    names = sorted(MEASURES)
    for n, comp in enumerate(claim.comparisons):
        where = at if n == 0 else f"{at}.and[{n - 1}]"
        m = MEASURES.get(comp.measure)
        if m is None:
            return (
                f"{where}.measure: unknown measure {comp.measure!r}"
                f"{did_you_mean(comp.measure, names)}; allowed: {', '.join(names)}"
            )
        if comp.tune is not None and comp.tune.by not in MEASURES:
            return (
                f"{where}.tune.by: unknown measure {comp.tune.by!r}"
                f"{did_you_mean(comp.tune.by, names)}; allowed: {', '.join(names)}"
            )
        if comp.kind == "faster" and not m.lower_is_better:
            speed = [k for k, v in MEASURES.items() if v.lower_is_better and v.scope == "curve"]
            return (
                f"{where}.measure: {comp.measure!r} is not a speed measure (higher is better): "
                f"kind 'faster' reads one of {', '.join(speed)}; or use kind 'higher'"
            )
        if m.scope == "panel" and comp.kind != "bound":
            return (
                f"{where}.measure: {comp.measure!r} measures a panel, not a curve; allowed with "
                "kind 'bound' only"
            )
    named = [(at, f, getattr(claim, f)) for f in ("leave_out", "inconclusive_if", "vacuous_if")]
    named += [
        (at if n == 0 else f"{at}.and[{n - 1}]", field, getattr(comp, field))
        for n, comp in enumerate(claim.comparisons)
        for field in ("blocked_if", "degenerate_if")
    ]
    for where, field, names in named:
        for name in names:
            if name not in GUARDS:
                return (
                    f"{where}.{field}: unknown guard {name!r}{did_you_mean(name, sorted(GUARDS))}; "
                    f"allowed: {', '.join(sorted(GUARDS))}"
                )
    return ""
