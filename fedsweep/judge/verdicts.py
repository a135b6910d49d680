"""A claim's verdicts on one figure's runs: :func:`judge_claims` judges each declared claim
(:mod:`fedsweep.judge.claim`) per declared regime and says when the runs cannot test it; the
result is one frozen :class:`ClaimVerdict` per (claim, regime), collected with the figure and the
reading they were judged under in a :class:`FigureVerdicts`.

A claim is **not testable** (its numbers still shown) when the panels' regime is not one it can
be tested in (:func:`fedsweep.judge.measures.regimes_that_test`), when a run of a curve it read
diverged or its loss blew up ("not testable: n of m runs diverged", over the (panel, curve)
cells it read), when the figure's curves are shorter than :data:`MIN_ROUNDS`, or when every part
compares one computation with itself ("degenerate"); "n/a" without runs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import fedsweep.judge.papers  # noqa: F401 - the papers register their measures and guards
from fedsweep.judge.claim import describe, judge_claim
from fedsweep.judge.measures import LABELS, regimes_that_test
from fedsweep.judge.panels import Panel, panels_of
from fedsweep.judge.runs import ClaimData, RunTable, curve_configs, rounds_of
from fedsweep.judge.stats import VERDICTS, Verdict
from fedsweep.specs.claims import Claim
from fedsweep.specs.figure import FigurePlan

#: fewest rounds (of the figure's longest curve) at which a claim is tested; shorter: not
#: testable. It keeps the smoke profile's 2–3 rounds out and coincides with no shipped profile's
#: length (3, 10, 25, 30, 40, 100, ...): a profile's length never decides a verdict by accident
MIN_ROUNDS = 5


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


@dataclass(frozen=True)
class ClaimVerdict:
    """One declared claim judged on one figure's runs in one regime: the verdict, the numbers
    behind it, the criterion in words, the statistics of each part (``evidence``: one row per
    part, :func:`fedsweep.judge.evidence.evidence_row`) and the parts left out as one
    computation on both sides (``degenerate``)."""

    #: the claim as the report's tables show it (its ``summary``, else its text)
    claim: str
    verdict: Verdict
    numbers: str
    criterion: str = ""
    #: what the index shows instead of the bare verdict, e.g. "not testable at this profile (T=3)"
    label: str = ""
    #: the statistics behind a statistical verdict, one dict per part (``evidence_row``)
    evidence: tuple = ()
    #: the declared regime of the panels judged ("paper", "reconstructed: ...", "scaled: ...");
    #: "" when the profile declares none
    regime: str = ""
    #: the claim's id (``fedsweep.specs.claims.Claim.id``)
    id: str = ""
    #: the claim's words and where they stand
    words: str = ""
    #: the claim's ``paper_effect`` (``fedsweep.specs.claims.PaperEffect``), or None
    paper: Any = None
    #: the parts whose two sides are the same computation ("Case 1 · FedNova: ..."): named,
    #: not counted toward the verdict (issue 51, item 5)
    degenerate: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        return self.label or self.verdict


@dataclass(frozen=True)
class FigureVerdicts:
    """Every claim of one figure judged on its runs: ``verdicts`` in the spec's claim order (a
    claim judged per regime gives one per regime), under ``reading`` (the ``--set`` overrides
    of a labelled reading; {}: as configured)."""

    figure: str
    profile: str
    verdicts: tuple[ClaimVerdict, ...] = ()
    reading: Mapping[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[ClaimVerdict]:
        return iter(self.verdicts)

    def __len__(self) -> int:
        return len(self.verdicts)

    def of(self, claim_id: str) -> list[ClaimVerdict]:
        """The verdicts of the claim ``claim_id`` (one per regime)."""
        return [v for v in self.verdicts if v.id == claim_id]

    def get(self, claim_id: str, regime: str = "") -> ClaimVerdict | None:
        """The verdict keyed by (claim id, regime); the claim's only one when ``regime`` is ""."""
        mine = self.of(claim_id)
        if regime:
            mine = [v for v in mine if v.regime == regime]
        return mine[0] if len(mine) == 1 or (mine and regime) else None

    def keys(self) -> list[tuple[str, str, str, str]]:
        """(figure, claim id, reading, regime) of each verdict: how a verdict is found again."""
        reading = ", ".join(f"{k}={v}" for k, v in self.reading.items())
        return [(self.figure, v.id, reading, v.regime) for v in self.verdicts]


def judge_claims(claims: Sequence[Claim], data: ClaimData | None) -> list[ClaimVerdict]:
    """One :class:`ClaimVerdict` per claim and declared regime (a figure whose panels mix
    regimes is judged per regime; a claim ``across_regimes`` once, in the most removed one):
    "n/a" without runs; not testable (the numbers still given) when the panels' regime is not
    one the claim can be tested in, when a curve it read has a diverged (or blown-up) run, or
    when the figure's curves are shorter than :data:`MIN_ROUNDS`."""
    out = []
    groups = regime_groups(data.panels) if data is not None else [("", [])]
    for claim in claims:
        words = f"“{claim.text}” ({claim.where})" if claim.where else claim.text
        about = {"id": claim.id, "words": words, "paper": claim.paper_effect}
        criterion = f"{describe(claim)} {TESTABLE_RULE}"
        if data is None or data.agg.empty:
            out.append(ClaimVerdict(claim.title, "n/a", "no runs", criterion, **about))
            continue
        testable = regimes_that_test(claim)
        mine = groups
        if claim.across_regimes and len(groups) > 1:
            # a claim comparing panels of different regimes (SVM against CNN) is judged once,
            # on all of them, and is testable only where none is scaled
            mine = [(max((k for k, _ in groups), key=_REGIME_ORDER.index), data.panels)]
        for kind, panels in mine:
            view = data.view(panels if len(mine) > 1 else None)
            verdict = _judge_one(claim, view, criterion, about)
            if kind:
                changes: dict[str, Any] = {"regime": _regime_text(panels)}
                if len(mine) > 1:
                    names = ", ".join(p.label or p.panel_id for p in panels)
                    changes["numbers"] = f"[{kind} regime: {names}] {verdict.numbers}"
                if kind not in testable and verdict.verdict != "n/a":
                    reason = f"not testable at this profile: {kind} regime ({changes['regime']})"
                    changes["verdict"] = "not-testable"
                    changes["label"] = f"{reason}; {verdict.label}" if verdict.label else reason
                verdict = replace(verdict, **changes)
            out.append(verdict)
    return out


def _judge_one(
    claim: Claim, data: ClaimData, criterion: str, about: dict[str, Any]
) -> ClaimVerdict:
    verdict, numbers = judge_claim(claim, data)
    div, blow, total = data.unusable(data.used)
    t = rounds_of(data)
    if verdict not in (*VERDICTS, "n/a"):
        raise ValueError(f"claim {claim.id!r} judged {verdict!r}: not one of {VERDICTS}")
    label = ""
    if verdict == "not-testable" and numbers.startswith("degenerate"):
        label = numbers.split(":", 1)[0] + ": the two sides are the same computation"
    elif div + blow:
        verdict, label = "not-testable", diverged_label(div, blow, total)
        if t < MIN_ROUNDS:
            label += f"; T={t} < {MIN_ROUNDS} rounds"
    elif verdict != "n/a" and t < MIN_ROUNDS:
        verdict, label = "not-testable", NOT_TESTABLE.format(t=t)
    return ClaimVerdict(
        claim.title,
        verdict,
        numbers,
        criterion,
        label,
        tuple(data.evidence),
        degenerate=tuple(data.degenerate),
        **about,
    )


def judge(plan: FigurePlan, runs: RunTable | None) -> FigureVerdicts:
    """Every claim of ``plan``'s figure judged on ``runs`` (its finished runs; None or empty:
    every claim "n/a", no runs): the curves the profile runs, the figure's panels and their
    regimes, the profile's target accuracy, all from the plan; nothing is drawn. The numbers of
    every claim end with the reconstructions the runs depend on (:data:`LABELS`)."""
    spec, profile = plan.spec, plan.profile
    data = None
    if runs is not None and not runs.empty:
        data = ClaimData(
            runs.agg,
            list(plan.curves),
            panels_of(spec, profile),
            dict(runs.diverged),
            dict(runs.blowups),
            dict(runs.runs),
            target=spec.profiles[profile].target_acc,
            long=runs.long,
            configs=curve_configs(plan),
        )
    verdicts = judge_claims(list(spec.claims), data)
    configs = [t.config for t in plan.trials]
    labels = [text for fn in LABELS.values() if (text := fn(configs))]
    if labels:
        tail = "".join(f" [{text}]" for text in labels)
        verdicts = [replace(v, numbers=v.numbers + tail) for v in verdicts]
    return FigureVerdicts(spec.figure, profile, tuple(verdicts), dict(plan.extra))
