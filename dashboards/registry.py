"""The papers' figures and claims, collected: ``BUILDERS`` (figure id -> builder,
``BuildContext -> FigureResult``; every other spec is drawn by the generic layout,
``dashboards.generic.build``, see ``build.builder_for``), ``CRITERIA`` (normalized claim text ->
criterion, :func:`check_claims`), ``METRIC_KEYS`` (figure id -> how its spec's metric
names map to MLflow keys, ``build.check_metrics``) and ``REPORT_SECTIONS`` (name -> a paper's
extra block for ``fedsweep report``, called as ``add(results, rebuild, tracking_uri, profile,
sweeps_dir)``: it may append Markdown to its figures' ``report_tables``).

Each paper is a package of ``dashboards.papers`` exposing its ``BUILDERS`` and ``CRITERIA``; a
figure id or claim text given by two papers is an error at import.
"""

from __future__ import annotations

from collections.abc import Callable

from dashboards import claims
from dashboards.claims import ClaimData, Criterion, normalize
from dashboards.model import BuildContext, ClaimCheck, FigureResult

# The one import from the generic layer into the papers: the registry collects them. Every
# other module of dashboards/ is generic and imports no paper (the papers import it), so the
# imports stay one-way and circle-free.
from dashboards.papers import bherd, fedveca, fedwalk, intro

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


BUILDERS: dict[str, Builder] = _collect("BUILDERS")
CRITERIA: dict[str, Criterion] = _collect("CRITERIA")
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


def check_claims(texts: list[str], data: ClaimData | None) -> list[ClaimCheck]:
    """:func:`dashboards.claims.check_claims` with every paper's criteria (``CRITERIA``)."""
    return claims.check_claims(texts, data, CRITERIA)


def claim_problem(texts: list[str]) -> str:
    """What is wrong with a spec's ``claims`` (one line), "" if nothing: each must be a claim
    some paper's criteria judge (``CRITERIA``); any other text would read "n/a" in every
    figure, after the whole sweep ran."""
    from fedsweep.core.suggest import did_you_mean

    known = sorted(CRITERIA)
    for i, text in enumerate(texts):
        if normalize(text) not in CRITERIA:
            return (
                f"claims[{i}]: {text!r} is not a claim fedsweep can judge"
                f"{did_you_mean(normalize(text), known)}; allowed: the {len(known)} claims of "
                "docs/figures.md (e.g. 'alpha=1.0 matches FedAvg'), or `claims: []` for none"
            )
    return ""
