"""Declared claims (issue 50): FedVeca's eight claims, declared in ``sweeps/fedveca-fig3 … fig8.yaml``
and judged by the generic judge (:mod:`fedsweep.judge.claim`, the named measures and guards of
``fedsweep.judge.papers.fedveca``), give the verdicts, labels and evidence numbers of the
prose-keyed criteria they replace, on several hand-made scenarios each (the builders of
``test_fedveca_figures``).

The reference is frozen in ``golden/claims-fedveca.json``: per claim id and scenario, the legacy
criteria's outputs at commit efc6b87 (``dashboards/papers/fedveca/claims.py`` as it stood there,
before those criteria were deleted): per check (one per regime) its verdict, label and evidence
rows (effect, 95% interval rounded to 12 digits, seeds, threshold, its side, the row's verdict,
whether censored bounds decided it),
and the criterion's own verdict before the not-testable rules."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fedsweep.judge import runs as JR
from fedsweep.judge import verdicts as JV
from fedsweep.judge.check import claim_problem
from fedsweep.judge.claim import judge_claim
from fedsweep.judge.panels import Panel
from fedsweep.specs.claims import Claim
from fedsweep.specs.load import read_spec
from fedsweep.specs.model import Regime
from tests.figures import test_fedveca_figures as F
from tests.helpers import migrated_claim

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
GOLDEN = Path(__file__).parent / "golden" / "claims-fedveca.json"
PAPER = Regime(kind="paper")
SCALED = Regime(kind="scaled", reason="T=10 instead of 100, 2 seeds")

#: claim id -> the figure whose spec declares it
FIGURE = {
    "reaches-centralized-first": "fedveca-fig3",
    "premise-above-bound": "fedveca-fig4",
    "case1-overlap": "fedveca-fig5",
    "tau-k-steady": "fedveca-fig6",
    "w-change-shrinks": "fedveca-fig6",
    "phi-smooth-slow-fast-noisy": "fedveca-fig7",
    "more-clients-not-faster": "fedveca-fig8",
    "n50-beats-baselines": "fedveca-fig8",
}


def declared(claim_id: str) -> Claim:
    return migrated_claim(FIGURE[claim_id], claim_id)


# ------------------------------------------------------------------------ scenario helpers
def short(data: JR.ClaimData, rounds: int = 3) -> JR.ClaimData:
    """The figure's curves cut to ``rounds`` (< MIN_ROUNDS: not testable at this profile)."""
    data.agg = data.agg[data.agg["round"] <= rounds]
    return data


def diverged(data: JR.ClaimData, label: str, seeds=(0,)) -> JR.ClaimData:
    """``label``'s runs of ``seeds`` diverged (at round 5) in every panel."""
    data.diverged = {(p.panel_id, label): [(s, 5) for s in seeds] for p in data.panels}
    return data


def without(data: JR.ClaimData, label: str) -> JR.ClaimData:
    """The figure without the curve ``label`` (its runs stay in the store)."""
    data.curves = [c for c in data.curves if c.label != label]
    return data


def regimes(*kinds: Regime) -> list[Panel]:
    return [Panel(f"setting=p{i}", f"P{i}", {}, r) for i, r in enumerate(kinds)]


# ------------------------------------------------------------------------ fig 3
def _reach(veca, avg, nova, panels=F.SETTING) -> JR.ClaimData:
    return F.fig3_data({"FedAvg": avg, "FedNova": nova, "FedVeca": veca}, panels)


LEAD = ([3, 4, 4], [8, 9, 7], [None, 7, 8])
REACH = {
    "supported-a-baseline-censored": lambda: _reach(*LEAD),
    "contradicted-baselines-first": lambda: _reach([8, 9, 8], [3, 4, 4], [5, 5, 5]),
    "inconclusive-noise": lambda: _reach([4, 6, 5], [5, 4, 6], [6, 7, 5]),
    "inconclusive-two-seeds": lambda: _reach([3, 7], [8, 8], [9, 9]),
    "supported-only-fedveca-reaches": lambda: _reach([3, 4, 3], [None] * 3, [None] * 3),
    "inconclusive-fedveca-censored": lambda: _reach([3, 3, None], [8, 8, 8], [9, 9, 9]),
    "inconclusive-none-reaches": lambda: _reach([None] * 3, [None] * 3, [None] * 3),
    "contradicted-fedveca-never": lambda: _reach([None] * 3, [3, 4, 3], [5, 5, 5]),
    "not-testable-short": lambda: short(_reach(*LEAD)),
    "not-testable-diverged": lambda: diverged(_reach(*LEAD), "FedAvg"),
    "per-regime": lambda: _reach(*LEAD, panels=regimes(PAPER, SCALED)),
    "na-no-centralized": lambda: without(_reach(*LEAD), "Centralized SGD"),
}

# ------------------------------------------------------------------------ fig 4
PAPER_LIKE = {s: [0.8] * 4 + [1.5 + 0.1 * s] * 7 for s in range(3)}


def _premise(runs, panels=None) -> JR.ClaimData:
    if panels is None:
        return F.premise_data(runs)
    series = {(p.panel_id, "FedVeca", s, "premise"): ys for p in panels for s, ys in runs.items()}
    return F.make([F.cv("FedVeca")], series, panels, start=2)


def _no_premise() -> JR.ClaimData:
    data = F.premise_data(PAPER_LIKE)
    data.long = data.long[data.long["metric"] != "premise"]
    return data


PREMISE = {
    "supported-below-early-only": lambda: _premise(PAPER_LIKE),
    "contradicted-below-everywhere": lambda: _premise(
        {s: [0.001 * 1.8**t for t in range(11)] for s in range(3)}
    ),
    "inconclusive-two-seeds": lambda: _premise(
        {0: [1.5] * 11, 1: [1.5] * 4 + [0.5, 1.5] * 3 + [0.5]}
    ),
    "non-finite-counts-below": lambda: _premise(
        {**PAPER_LIKE, 1: [0.8] * 4 + [1.5, float("nan")] + [1.5] * 5}
    ),
    "per-regime": lambda: _premise(PAPER_LIKE, regimes(PAPER, SCALED)),
    "not-testable-scaled": lambda: _premise(PAPER_LIKE, regimes(SCALED, SCALED)),
    "not-testable-diverged": lambda: diverged(_premise(PAPER_LIKE), "FedVeca"),
    "na-no-premise": _no_premise,
}

# ------------------------------------------------------------------------ fig 5
APART_ACC = {**F.OVERLAP, "FedNova": ([0.933, 0.932, 0.930], F.OVERLAP["FedNova"][1])}
FAST = {**F.OVERLAP, "FedVeca": (F.OVERLAP["FedVeca"][0], [0.27, 0.27, 0.27])}
TWO = {m: (accs[:2], aucs[:2]) for m, (accs, aucs) in F.OVERLAP.items()}
TWO["FedVeca"] = ([0.899, 0.923], TWO["FedVeca"][1])


def _case2_diverged() -> JR.ClaimData:
    data = F.case_data(F.OVERLAP, F.APART)
    data.diverged = {(F.CASES[1].panel_id, m): [(s, 5) for s in range(3)] for m in F.METHODS}
    return data


def _case1_only() -> JR.ClaimData:
    data = F.case_data(F.OVERLAP, F.APART)
    data.panels = F.CASES[:1]
    return data


OVERLAP = {
    "supported-apart-in-case2": lambda: F.case_data(F.OVERLAP, F.APART),
    "contradicted-accuracy-apart": lambda: F.case_data(APART_ACC, F.APART),
    "contradicted-fedveca-faster": lambda: F.case_data(FAST, F.APART),
    "inconclusive-two-seeds": lambda: F.case_data(TWO, F.APART),
    "inconclusive-overlap-everywhere": lambda: F.case_data(F.OVERLAP, F.OVERLAP),
    "contradicted-overlap-elsewhere": lambda: F.case_data(APART_ACC, F.OVERLAP),
    "inconclusive-case2-diverged": _case2_diverged,
    "inconclusive-no-case2": _case1_only,
    "not-testable-diverged-in-case1": lambda: diverged(F.case_data(F.OVERLAP, F.APART), "FedNova"),
}

# ------------------------------------------------------------------------ fig 6
STEADY = {s: F.steady(10 + s) for s in range(3)}
SHRINKING = {s: F.geometric(0.3 + 0.05 * s, 0.95) for s in range(3)}
RISING = {s: F.geometric(0.02 + 0.002 * s, 1.055) for s in range(3)}
TAU = {
    "contradicted-oscillating": lambda: F.fig6_data(
        {0: F.oscillating(5, 85), 1: F.oscillating(4, 80), 2: F.oscillating(6, 90)}, F.FLAT_W
    ),
    "supported-steady": lambda: F.fig6_data(STEADY, F.FLAT_W),
    "supported-oscillating-after-round-50": lambda: F.fig6_data(
        {s: F.steady(10 + s)[:50] + F.oscillating(5, 85)[50:] for s in range(3)}, F.FLAT_W
    ),
    "inconclusive-one-seed": lambda: F.fig6_data({0: F.steady(10)}, {0: F.FLAT_W[0]}),
    "inconclusive-two-seeds": lambda: F.fig6_data(
        {0: F.steady(10), 1: F.oscillating(5, 85)}, {s: F.FLAT_W[s] for s in (0, 1)}
    ),
    "not-testable-diverged": lambda: diverged(F.fig6_data(STEADY, F.FLAT_W), "FedVeca", (2,)),
    "na-no-tau-k": lambda: F.fig6_data({}, F.FLAT_W),
}
W = {
    "supported-shrinking": lambda: F.fig6_data(STEADY, SHRINKING),
    "contradicted-rising": lambda: F.fig6_data(STEADY, RISING),
    "contradicted-zigzag-rising": lambda: F.fig6_data(
        STEADY, {s: [v * (3 if k % 2 else 1) for k, v in enumerate(RISING[s])] for s in range(3)}
    ),
    "inconclusive-one-seed": lambda: F.fig6_data({0: STEADY[0]}, {0: SHRINKING[0]}),
    "not-testable-short": lambda: short(F.fig6_data(STEADY, SHRINKING)),
}

# ------------------------------------------------------------------------ fig 7
PHI_PAPER = {
    "φ=0.5": [F.SLOW] * 3,
    "φ=0.05": [F.loss_curve(4, 1), F.loss_curve(5, 1), F.loss_curve(4, 1)],
    "φ=0.005": [F.loss_curve(2, 3), F.loss_curve(2, 4), F.loss_curve(2, 3)],
}
PHI = {
    "supported": lambda: F.phi_data(PHI_PAPER),
    "contradicted-largest-phi-fastest": lambda: F.phi_data(
        {**PHI_PAPER, "φ=0.5": [F.loss_curve(2), F.loss_curve(2), F.loss_curve(1)]}
    ),
    "inconclusive-two-seeds": lambda: F.phi_data(
        {
            "φ=0.5": [F.SLOW] * 2,
            "φ=0.05": [F.loss_curve(4, 1), F.loss_curve(4, 3)],
            "φ=0.005": [F.loss_curve(2, 3), F.loss_curve(2, 1)],
        }
    ),
    "not-testable-diverged": lambda: diverged(F.phi_data(PHI_PAPER), "φ=0.05"),
    "na-no-smallest-phi": lambda: without(F.phi_data(PHI_PAPER), "φ=0.005"),
}

# ------------------------------------------------------------------------ fig 8
TWO_BASE = {"FedNova N=50": [7, 8], "FedAvg N=50": [8, 8]}
CLIENTS = {
    "supported": lambda: F.fig8_data(F.by_n([4, 4, 4], [5, 5, 6], [5, 5, 6])),
    "contradicted-n50-faster": lambda: F.fig8_data(F.by_n([4, 4, 5], [4, 4, 5], [1, 1, 1])),
    "inconclusive-two-seeds": lambda: F.fig8_data(F.by_n([4, 4], [4, 4], [1, 5]) | TWO_BASE),
    "not-testable-short": lambda: short(F.fig8_data(F.by_n([4, 4, 4], [5, 5, 6], [5, 5, 6]))),
    "na-no-n30": lambda: without(
        F.fig8_data(F.by_n([4, 4, 4], [5, 5, 6], [5, 5, 6])), "FedVeca N=30"
    ),
}
BEATS = {
    "supported": lambda: F.fig8_data(F.by_n([4, 4, 4], [5, 5, 5], [5, 5, 4])),
    "contradicted-fednova-faster": lambda: F.fig8_data(F.by_n([4, 4, 4], [5, 5, 5], [8, 9, 8])),
    "contradicted-tie-below-margin": lambda: F.fig8_data(
        F.by_n([4, 4, 4], [5, 5, 5], [7, 8, 7]) | {"FedNova N=50": [7, 8, 7]}
    ),
    "inconclusive-two-seeds": lambda: F.fig8_data(F.by_n([4, 4], [5, 5], [5, 9]) | TWO_BASE),
    "not-testable-diverged": lambda: diverged(
        F.fig8_data(F.by_n([4, 4, 4], [5, 5, 5], [5, 5, 4])), "FedAvg N=50", (1,)
    ),
}

SCENARIOS = {
    "reaches-centralized-first": REACH,
    "premise-above-bound": PREMISE,
    "case1-overlap": OVERLAP,
    "tau-k-steady": TAU,
    "w-change-shrinks": W,
    "phi-smooth-slow-fast-noisy": PHI,
    "more-clients-not-faster": CLIENTS,
    "n50-beats-baselines": BEATS,
}
CASES = [(claim_id, name) for claim_id, cases in SCENARIOS.items() for name in cases]


# ------------------------------------------------------------------------ outcomes
def _r(x):
    return None if x is None else round(float(x), 12)


def rows(check) -> list[dict]:
    """A check's evidence rows, the numbers rounded to 12 digits."""
    keys = ("threshold", "holds_when", "verdict")
    return [
        {
            "effect": _r(e["effect"]),
            "ci_low": _r(e["ci_low"]),
            "ci_high": _r(e["ci_high"]),
            "seeds": list(e["seeds"]),
            **{k: e[k] for k in keys},
            "censored": "censored" in e,
        }
        for e in check.evidence
    ]


def outcome(checks, raw: str) -> dict:
    """What the golden file records of one claim on one scenario."""
    return {
        "raw": raw,
        "checks": [
            {"regime": c.regime, "verdict": c.verdict, "label": c.label, "evidence": rows(c)}
            for c in checks
        ],
    }


def judged(claim: Claim, data: JR.ClaimData) -> dict:
    """The declared claim judged on ``data`` (as the report does)."""
    checks = JV.judge_claims([claim], data)
    assert all(c.claim == claim.title and c.id == claim.id for c in checks)
    raw = judge_claim(claim, dataclasses.replace(data, evidence=[]))[0]
    return outcome(checks, raw)


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize(("claim_id", "scenario"), CASES, ids=[f"{c}/{s}" for c, s in CASES])
def test_declared_fedveca_claim_judges_as_its_legacy_criterion(golden, claim_id, scenario):
    got = judged(declared(claim_id), SCENARIOS[claim_id][scenario]())
    assert got == golden[claim_id][scenario]


def test_every_fedveca_claim_is_declared_and_covered():
    specs = [read_spec(SWEEPS / f"fedveca-fig{i}.yaml") for i in range(3, 9)]
    claims = [(s.figure, c) for s in specs for c in s.claims]
    assert all(isinstance(c, Claim) and c.id and c.kind for _, c in claims)
    assert sorted((f, c.id) for f, c in claims) == sorted((f, i) for i, f in FIGURE.items())
    assert all(claim_problem(s.claims) == "" for s in specs)
    golden = json.loads(GOLDEN.read_text())
    assert set(golden) - {"_note"} == set(SCENARIOS)
    for claim_id, cases in SCENARIOS.items():
        assert set(golden[claim_id]) == set(cases), claim_id
        verdicts = {c["verdict"] for o in golden[claim_id].values() for c in o["checks"]}
        # every claim's scenarios decide it both ways, and reach the not-testable rules
        assert {"supported", "contradicted"} <= verdicts, (claim_id, verdicts)
        assert {"inconclusive", "not-testable"} & verdicts, (claim_id, verdicts)


def test_an_unknown_vacuous_if_guard_is_refused_before_anything_runs():
    bad = declared("case1-overlap").model_copy(update={"vacuous_if": ["fedveca.methods_differ"]})
    problem = claim_problem([bad])
    assert problem.startswith("claims[0] (case1-overlap).vacuous_if: unknown guard")
    assert "did you mean 'fedveca.methods_never_differ'?" in problem and "\n" not in problem
