"""The papers' figures and claims, collected: ``BUILDERS`` (figure id -> builder,
``BuildContext -> FigureResult``; every other spec is drawn by the generic layout,
``dashboards.generic.build``, see ``build.builder_for``), ``CRITERIA`` (normalized claim text ->
criterion, :func:`check_claims`), ``METRIC_KEYS`` (figure id -> how its spec's metric
names map to MLflow keys, ``build.check_metrics``) and ``REPORT_SECTIONS`` (name -> a paper's
extra block for ``fedsweep report``, called as ``add(results, rebuild, tracking_uri, profile,
sweeps_dir)``: it may append Markdown to its figures' ``report_tables``).

Each paper is a package of ``dashboards.papers`` exposing its ``BUILDERS`` and ``CRITERIA``; a
figure id or claim text given by two papers is an error at import. A declared claim
(``fedsweep.specs.claims.Claim``) needs no criterion of its own: ``CRITERIA.get(claim)`` is the
generic judge's (:func:`dashboards.judge.criterion`), its measures and guards the registered
ones (:mod:`dashboards.measures`, a paper's own registered on import).
"""

from __future__ import annotations

from collections.abc import Callable

from dashboards import claims
from dashboards.claims import ClaimData, Criterion, normalize
from dashboards.judge import criterion
from dashboards.measures import GUARDS, MEASURES
from dashboards.model import BuildContext, ClaimCheck, FigureResult

# The one import from the generic layer into the papers: the registry collects them. Every
# other module of dashboards/ is generic and imports no paper (the papers import it), so the
# imports stay one-way and circle-free.
from dashboards.papers import bherd, fedveca, fedwalk, intro
from fedsweep.specs.claims import Claim, ClaimEntry

Builder = Callable[[BuildContext], FigureResult]

PAPERS = (bherd, intro, fedveca, fedwalk)


def _collect(table: str) -> dict:
    out: dict = {}
    for paper in PAPERS:
        for key, value in getattr(paper, table, {}).items():
            if key in out:
                raise ValueError(f"{paper.__name__}: {table} {key!r} is another paper's too")
            out[key] = value
    return out


class Criteria(dict):
    """Normalized claim text -> a paper's criterion; a declared claim -> the generic judge's."""

    def get(self, key, default=None):
        if isinstance(key, Claim):
            return criterion(key)
        return super().get(key, default)


BUILDERS: dict[str, Builder] = _collect("BUILDERS")
CRITERIA: dict[str, Criterion] = Criteria(_collect("CRITERIA"))
METRIC_KEYS: dict[str, Callable[[str], str]] = _collect("METRIC_KEYS")
REPORT_SECTIONS: dict[str, Callable[..., object]] = _collect("REPORT_SECTIONS")

#: normalized claim text -> the paper's own words (each paper's ``claims.PAPER_WORDS``)
PAPER_WORDS: dict[str, str] = {}
for _paper in PAPERS:
    for _claim, _words in getattr(getattr(_paper, "claims", None), "PAPER_WORDS", {}).items():
        PAPER_WORDS[normalize(_claim)] = _words

for _claim in CRITERIA:  # the keys are looked up normalized
    if normalize(_claim) != _claim:
        raise ValueError(f"CRITERIA key {_claim!r} is not normalized ({normalize(_claim)!r})")


def check_claims(entries: list[ClaimEntry], data: ClaimData | None) -> list[ClaimCheck]:
    """:func:`dashboards.claims.check_claims` with every paper's criteria (``CRITERIA``)."""
    return claims.check_claims(entries, data, CRITERIA)


def claim_problem(entries: list[ClaimEntry]) -> str:
    """What is wrong with a spec's ``claims`` (one line), "" if nothing: a legacy text must be a
    claim some paper's criteria judge (``CRITERIA``; any other text would read "n/a" in every
    figure, after the whole sweep ran); a declared claim's measures and guards must be
    registered and fit its kinds (the rest is checked when the spec loads,
    :func:`fedsweep.specs.claims.claim_problems`)."""
    from fedsweep.core.suggest import did_you_mean

    known = sorted(CRITERIA)
    for i, entry in enumerate(entries):
        if isinstance(entry, Claim):
            problem = declared_problem(entry, f"claims[{i}] ({entry.id})")
            if problem:
                return problem
            continue
        if normalize(entry) not in CRITERIA:
            prose = f", the {len(known)} prose claims of docs/figures.md" if known else ""
            return (
                f"claims[{i}]: {entry!r} is not a claim fedsweep can judge"
                f"{did_you_mean(normalize(entry), known)}; allowed: a declared claim "
                f"(docs/how-to/own-claims.md){prose}, or `claims: []` for none"
            )
    return ""


def declared_problem(claim: Claim, at: str) -> str:
    """The first problem of a declared claim's measures and guards, "" if none."""
    from fedsweep.core.suggest import did_you_mean

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
