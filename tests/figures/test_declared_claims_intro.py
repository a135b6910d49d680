"""Declared claims of the introduction-to-FL slides (issue 50): the claims declared in
``sweeps/intro-*.yaml``, judged by the generic judge (:mod:`fedsweep.judge.claim`) on synthetic
scenarios, give the verdict, the label and the evidence numbers (effect, 95% interval, seeds,
threshold, verdict per part, rounded to 12 digits) of the prose-keyed criteria they replace.

Those criteria (``dashboards/papers/intro/claims.py``) are gone; their outputs on the same
scenarios are frozen in ``golden/claims-intro.json``: the legacy criteria's outputs at commit
efc6b87, per claim id and scenario (``verdict``, ``label``, ``raw``: the criterion's own verdict
before the not-testable rules, ``rows``: the evidence rows). The scenarios reuse the builders of
``test_intro_figures.py``; a scenario's regime variants show that the declared claims keep the
legacy regime semantics (testable on paper and reconstructed panels, not on scaled ones)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fedsweep.judge import runs as JR
from fedsweep.judge import verdicts as JV
from fedsweep.judge.check import claim_problem
from fedsweep.judge.claim import judge_claim
from fedsweep.specs.claims import Claim
from fedsweep.specs.load import read_spec
from fedsweep.specs.model import Regime
from tests.figures import test_intro_figures as T
from tests.helpers import migrated_claim

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
GOLDEN = Path(__file__).resolve().parent / "golden" / "claims-intro.json"


declared = migrated_claim  # (figure, claim id) -> the claim as migrated


def rows(check) -> list[list]:
    """The evidence rows of a check, rounded to 12 digits, sorted (the part names aside)."""

    def r(x):
        return None if x is None else round(float(x), 12)

    return sorted(
        (
            [
                r(e["effect"]),
                r(e["ci_low"]),
                r(e["ci_high"]),
                list(e["seeds"]),
                e["threshold"],
                e["holds_when"],
                e["verdict"],
            ]
            for e in check.evidence
        ),
        key=json.dumps,
    )


def judged(claim: Claim, data: JR.ClaimData) -> dict:
    """What the golden file holds for one scenario, from the declared claim."""
    (check,) = JV.judge_claims([claim], dataclasses.replace(data, evidence=[]))
    raw = judge_claim(claim, dataclasses.replace(data, evidence=[]))[0]
    assert check.claim == claim.title and check.id == claim.id
    return {"verdict": check.verdict, "label": check.label, "raw": raw, "rows": rows(check)}


# ------------------------------------------------------------------------ the scenarios
def regime(data: JR.ClaimData, kind: str) -> JR.ClaimData:
    """``data`` with every panel in the regime ``kind``."""
    r = Regime(kind=kind, reason="" if kind == "paper" else f"a {kind} stand-in")
    return dataclasses.replace(data, panels=[dataclasses.replace(p, regime=r) for p in data.panels])


def _fedavg() -> dict[str, JR.ClaimData]:
    clear = {
        "FedSGD": [None] * 3,
        "B=50 E=1": [4, 5, 4],
        "B=10 E=1": [3, 3, 4],
        "B=10 E=5": [2, 2, 3],
    }
    slow = {"FedSGD": [6, 6, 7], "B=50 E=1": [5, 5, 6], "B=10 E=1": [2, 2, 2], "B=10 E=5": [2] * 3}
    noise = {"FedSGD": [8, 4], "B=50 E=1": [2, 4], "B=10 E=1": [2, 1], "B=10 E=5": [1, 1]}
    unknown = {**clear, "B=50 E=1": [None] * 3, "B=10 E=1": [3] * 3, "B=10 E=5": [2] * 3}
    grows = {**clear, "B=50 E=1": [8, 8, 9], "B=10 E=1": [4] * 3, "B=10 E=5": [2, 3, 2]}
    div = {(p.panel_id, "B=10 E=1"): [(1, 7)] for p in T.PARTITIONS}
    short = {k: [h if h is None else min(h, 3) for h in v] for k, v in clear.items()}
    return {
        "clear": T.fedavg(clear),
        "slow": T.fedavg(slow),
        "noise": T.fedavg(noise),
        "unknown": T.fedavg(unknown),
        "behind": T.fedavg({**unknown, "FedSGD": [10] * 3}),
        "grows": T.fedavg(grows),
        "shrinks": T.fedavg({**grows, "B=50 E=1": [3, 3, 3], "B=10 E=5": [6, 6, 7]}),
        "noise2": T.fedavg(
            {k: v[:2] for k, v in {**grows, "B=50 E=1": [3, 6], "B=10 E=5": [6, 3]}.items()}
        ),  # fmt: skip
        "late": T.fedavg({**grows, "B=50 E=1": [None] * 3, "B=10 E=5": [3] * 3}),
        "never": T.fedavg({**grows, "B=10 E=5": [None] * 3}),
        "no-target": T.fedavg(clear, target=None),
        "no-fedsgd": T.fedavg(clear, curves=T.FEDAVG_CURVES[1:]),
        "same-u": T.fedavg(grows, curves=[T.FEDAVG_CURVES[0], T.FEDAVG_CURVES[2]]),
        "diverged": dataclasses.replace(T.fedavg(grows), diverged=div),
        "short": T.seeded(
            T.FEDAVG_CURVES, T.reach_runs(short, T.PARTITIONS, T=3), T.PARTITIONS, target=0.8
        ),
        "scaled": regime(T.fedavg(grows), "scaled"),
        "reconstructed": regime(T.fedavg(grows), "reconstructed"),
    }


def _epochs() -> dict[str, JR.ClaimData]:
    clear = [[9, 10, 9], [6, 6, 7], [4, 4, 5], [4, 5, 4], [7, 8, 7]]
    return {
        "clear": T.epochs(clear),
        "large-fastest": T.epochs([[9, 10, 9], [6, 6, 7], [4, 4, 4], [5, 5, 5], [2, 2, 2]]),
        "tie": T.epochs([[9, 10, 9], [6, 6, 7], [5, 5, 6], [5, 6, 6], [5, 6, 5]]),
        "spike": T.epochs([[9, 9], [6, 6], [5, 5], [5, 6], [6, 4]]),
        "censored": T.epochs([[None] * 3, [6, 6, 7], [4, 4, 4], [5, 5, 5], [7, 8, 7]]),
        "censored-inner": T.epochs([[9, 10, 9], [None] * 3, [None, 4, 5], [4, 5, 4], [7, 8, 7]]),
        "none-reach": T.epochs([[None] * 3] * 5),
        "short": T.epochs([[3, 3], [2, 2], [1, 1], [1, 1], [3, 3]], T=3),
        "scaled": regime(T.epochs(clear), "scaled"),
        "reconstructed": regime(T.epochs(clear), "reconstructed"),
    }


def _sampling() -> dict[str, JR.ClaimData]:
    old = [T.Panel("p=iid", "IID", {}), T.Panel("p=shards", "Non-IID", {})]
    return {
        "skewed-faster": T.sampling(0.8, 1.2),
        "skewed-slower": T.sampling(1.1, 0.8),
        "no-gain": T.sampling(1.0, 0.8),
        "one-seed": T.sampling(0.8, 0.8, seeds=1),
        "control-diverged": T.sampling(0.8, 1.0, diverged={("q=none", "Scheme 1"): [(0, 5)]}),
        "skewed-diverged": T.sampling(0.8, 1.0, diverged={("q=powerlaw", "Scheme 1"): [(0, 5)]}),
        "balanced-only": T.sampling(0.8, 0.8, panels=old),
        "no-scheme": T.seeded(T.SCHEMES[:1], {}),
        "scaled": regime(T.sampling(0.8, 1.2), "scaled"),
        "reconstructed": regime(T.sampling(0.8, 1.2), "reconstructed"),
    }


def _fedopt() -> dict[str, JR.ClaimData]:
    best = T.BEST
    div = {("all", "FedAdam 1.0/1.0"): [(0, 5)]}
    return {
        "best": T.grid({**best, "FedAdam 1.0/1.0": 0.99}, diverged=div),
        "yogi-worse": T.grid({**best, "FedYogi 0.1/0.1": 0.75}),
        "yogi-within": T.grid({**best, "FedYogi 0.1/0.1": 0.805}),
        "one-seed": T.grid(best, seeds=1),
        "fedavg-edge": T.grid({**best, "FedAvg 0.1/1.0": 0.82}),
        "adam-edge": T.grid({**best, "FedAdam 0.01/0.1": 0.9}),
        "adam-edge-yogi-worse": T.grid({**best, "FedAdam 0.01/0.1": 0.9, "FedYogi 0.1/0.1": 0.7}),
        "no-yogi": T.grid(best, curves=[c for c in T.GRID if not c.label.startswith("FedYogi")]),
        "best-diverged": T.grid(  # the next best FedAdagrad point lies on its grid's edge
            {**best, "FedAdagrad 0.1/1.0": 0.83}, diverged={("all", "FedAdagrad 0.1/0.1"): [(1, 6)]}
        ),
        "scaled": regime(T.grid(best), "scaled"),
    }


def _selection() -> dict[str, JR.ClaimData]:
    slow = [2.0 - 0.1 * t for t in range(12)]
    fast = [1.5 - 0.1 * t for t in range(6)] + slow[6:]
    late = [v + 0.01 for v in slow[:6]] + [0.1] * 6
    noisy = T.seeded(
        T.SELECTION,
        {
            ("all", "Random", "train_loss"): {0: slow, 1: slow},
            ("all", "PoC", "train_loss"): {0: fast, 1: [v + 0.8 for v in slow]},
            ("all", "DivFL", "train_loss"): {0: fast, 1: fast},
        },
    )
    div = {("all", "DivFL"): [(2, 8)]}
    return {
        "fast": T.selection(fast, fast),
        "late": T.selection(fast, late),
        "noisy": noisy,
        "diverged": dataclasses.replace(T.selection(fast, fast), diverged=div),
        "missing": T.seeded(T.SELECTION[:2], {}),
        "scaled": regime(T.selection(fast, fast), "scaled"),
        "reconstructed": regime(T.selection(fast, fast), "reconstructed"),
    }


def _cohort() -> dict[str, JR.ClaimData]:
    clear = [[10, 11, 10], [5] * 3, [4] * 3, [4] * 3]
    return {
        "clear": T.cohort(clear),
        "grows": T.cohort([[6] * 3, [6] * 3, [8] * 3, [4] * 3]),
        "near": T.cohort([[33, 31], [31, 33], [29, 29], [27, 27]], T=40),
        "censored-small": T.cohort([[None] * 3, [5] * 3, [4] * 3, [4] * 3]),
        "censored-large": T.cohort([[10] * 3, [5] * 3, [4] * 3, [None] * 3]),
        "undecided": T.cohort([[None] * 3, [None] * 3, [4] * 3, [4] * 3]),
        "two-cohorts": T.seeded(
            T.M_CURVES[:2], T.reach_runs({"M=10": [6] * 3, "M=20": [4] * 3}), target=0.8
        ),
        "no-target": T.seeded(T.M_CURVES, T.reach_runs({"M=10": [6] * 3, "M=20": [4] * 3})),
        "scaled": regime(T.cohort(clear), "scaled"),
    }


def _failures() -> dict[str, JR.ClaimData]:
    smooth, crash_at = T.SMOOTH, T.crash_at
    high = crash_at(10, 0.25)
    early = crash_at(3, 0.1)
    more = {10: [smooth] * 3, 20: [smooth] * 3, 50: [high] * 3, 100: [high, high, crash_at(12, 0.3, high)]}  # fmt: skip
    return {
        "more-at-large": T.train_runs(more),
        "small-only": T.train_runs(
            {10: [high] * 3, 20: [smooth] * 3, 50: [smooth] * 3, 100: [smooth] * 3}
        ),  # fmt: skip
        "two-seeds": T.train_runs(
            {10: [high, smooth], 20: [smooth] * 2, 50: [smooth] * 2, 100: [smooth, high]}
        ),  # fmt: skip
        "near-chance": T.train_runs(
            {10: [early] * 3, 20: [smooth] * 3, 50: [smooth] * 3, 100: [smooth] * 3}
        ),  # fmt: skip
        "diverged": T.train_runs(
            {10: [smooth] * 3, 100: [high] * 3}, diverged={("all", "M=100"): [(0, 10)]}
        ),
        "no-train-acc": T.cohort([[10, 11, 10], [5] * 3, [4] * 3, [4] * 3]),
        "scaled": regime(T.train_runs(more), "scaled"),
        "reconstructed": regime(T.train_runs(more), "reconstructed"),
    }


#: (figure, claim id, scenarios): every declared claim of the slides' specs
SCENARIOS: list[tuple[str, str, Callable[[], dict[str, JR.ClaimData]]]] = [
    ("intro-fedavg", "fedavg-far-fewer-rounds", _fedavg),
    ("intro-fedavg", "fedavg-speedup-grows", _fedavg),
    ("intro-epochs", "e-interior-fastest", _epochs),
    ("intro-sampling", "replacement-faster", _sampling),
    ("intro-fedopt", "adaptive-outperform", _fedopt),
    ("intro-selection", "informed-early", _selection),
    ("intro-cohort", "cohort-diminishing", _cohort),
    ("intro-cohort", "failures-happen", _failures),
]


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize(("figure", "claim_id", "cases"), SCENARIOS, ids=[s[1] for s in SCENARIOS])
def test_declared_intro_claim_judges_as_the_legacy_criterion(figure, claim_id, cases, golden):
    claim = declared(figure, claim_id)
    want = golden[claim_id]
    got = {name: judged(claim, data) for name, data in cases().items()}
    assert set(got) == set(want)
    for name in want:
        assert got[name] == want[name], (claim_id, name)
    # the scenarios decide the claim somewhere, and show its regime semantics
    verdicts = {g["verdict"] for g in got.values()}
    assert {"supported", "contradicted"} <= verdicts or "inconclusive" in verdicts
    if "scaled" in got:
        assert got["scaled"]["verdict"] == "not-testable"
        assert got["scaled"]["raw"] != "n/a"


def test_every_intro_claim_is_declared_and_covered_by_the_golden_scenarios(golden):
    specs = [read_spec(p) for p in sorted(SWEEPS.glob("intro-*.yaml"))]
    assert len(specs) == 6
    ids = sorted((s.figure, c.id) for s in specs for c in s.claims)
    assert all(isinstance(c, Claim) and c.id and c.kind for s in specs for c in s.claims)
    assert ids == sorted((f, i) for f, i, _ in SCENARIOS)
    assert set(golden) == {i for _, i, _ in SCENARIOS}
    assert all(len(golden[i]) >= 4 for i in golden)
    for spec in specs:
        assert claim_problem(spec.claims) == ""
        for claim in spec.claims:  # the report reads the slides' words from the spec
            assert claim.where and claim.summary and claim.text


def test_best_of_a_grid_and_a_blocked_part_are_declared_semantics():
    """``best: true`` narrows a side to its best curve per panel (a failed curve is no
    candidate); a ``blocked_if`` guard makes only its own part inconclusive."""
    claim = declared("intro-fedopt", "adaptive-outperform")
    data = T.grid(
        {**T.BEST, "FedAdam 1.0/1.0": 0.99}, diverged={("all", "FedAdam 1.0/1.0"): [(0, 5)]}
    )
    verdict, numbers = judge_claim(claim, data)
    assert verdict == "supported", numbers
    assert "FedAdam 0.1/0.1 − FedAvg 0.1/0.1" in numbers and "FedAdam 1.0/1.0" not in numbers
    # FedAdam's best on its grid's edge: that part waits, FedYogi's contradicts
    data = T.grid({**T.BEST, "FedAdam 0.01/0.1": 0.9, "FedYogi 0.1/0.1": 0.7})
    verdict, numbers = judge_claim(claim, data)
    assert verdict == "contradicted", numbers
    assert "FedAdam: grid not converged: the chosen η_l=0.01 is the smallest" in numbers
    unguarded = claim.model_copy(update={"blocked_if": []})
    assert judge_claim(unguarded, T.grid({**T.BEST, "FedAdam 0.01/0.1": 0.9}))[0] == "supported"


def test_an_unknown_blocked_if_guard_is_refused_before_anything_runs():
    claim = declared("intro-fedopt", "adaptive-outperform")
    bad = claim.model_copy(update={"blocked_if": ["intro.grid_edeg"]})
    problem = claim_problem([bad])
    assert "(adaptive-outperform).blocked_if: unknown guard 'intro.grid_edeg'" in problem
    assert "did you mean 'intro.grid_edge'?" in problem and "\n" not in problem
