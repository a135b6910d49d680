"""Declared claims of FedWalk (issue 50): its eight claims, declared in ``sweeps/fedwalk-*.yaml``,
judged by the generic judge (:mod:`fedsweep.judge.claim`) on synthetic scenarios give the verdicts,
labels and evidence numbers the legacy prose-keyed criteria gave.

``golden/claims-fedwalk.json`` holds, per claim id and scenario, the outputs of the legacy
criteria of ``dashboards/papers/fedwalk/claims.py`` at commit efc6b87 (before they were
removed): the verdict and label of ``check_claims``, the criterion's own verdict before the
not-testable rules (``raw``) and the evidence rows (effect, interval, seeds, threshold, side,
verdict; numbers rounded to 12 digits). They were checked equal to the declared judge's while
the legacy code still existed; the declared judge is now compared with them."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from fedsweep.judge import runs as JR
from fedsweep.judge import verdicts as JV
from fedsweep.judge.check import claim_problem
from fedsweep.judge.claim import judge_claim
from fedsweep.specs.claims import Claim
from fedsweep.specs.load import read_spec
from tests.figures import test_fedwalk_figures as F
from tests.helpers import migrated_claim

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
GOLDEN = Path(__file__).parent / "golden" / "claims-fedwalk.json"


declared = migrated_claim  # (figure, claim id) -> the claim as migrated


def _num(x) -> float | str | None:
    if x is None:
        return None
    x = float(x)
    return round(x, 12) if math.isfinite(x) else str(x)


def rows(check) -> list[list]:
    """The evidence rows of a check, as the golden file stores them (sorted)."""
    out = [
        [
            _num(e["effect"]),
            _num(e["ci_low"]),
            _num(e["ci_high"]),
            list(e["seeds"]),
            _num(e["threshold"]),
            e["holds_when"],
            e["verdict"],
        ]
        for e in check.evidence
    ]
    return sorted(out, key=json.dumps)


def outputs(checked: JV.ClaimVerdict, raw: str) -> dict:
    return {"verdict": checked.verdict, "label": checked.label, "raw": raw, "rows": rows(checked)}


def judged(claim: Claim, data: JR.ClaimData) -> dict:
    """The declared claim judged on ``data``: ``check_claims``'s verdict, label and rows, and
    the criterion's own verdict (before the not-testable rules)."""
    (check,) = JV.judge_claims([claim], dataclasses.replace(data, evidence=[]))
    assert check.claim == claim.title and check.id == claim.id
    raw = judge_claim(claim, dataclasses.replace(data, evidence=[]))[0]
    return outputs(check, raw)


# ------------------------------------------------------------------------ the scenarios
def short(data: JR.ClaimData) -> JR.ClaimData:
    """A smoke-length figure (T=3): not testable, the numbers still given."""
    data.agg = data.agg[data.agg["round"] <= 3]
    return data


def without(data: JR.ClaimData, curve: str, panel: str | None = None) -> JR.ClaimData:
    """``data`` without the runs of ``curve`` (in ``panel``, or everywhere)."""
    drop = data.long["curve"] == curve
    if panel is not None:
        drop &= data.long["panel_id"] == panel
    data.long = data.long[~drop]
    data.reduced.clear()
    return data


def diverged(data: JR.ClaimData, cells: dict) -> JR.ClaimData:
    data.diverged = cells
    return data


EDGE = {"FedAvg η=1e-3": 0.80, "FedAvg η=1e-2": 0.70, "FedAvg η=1e-4": 0.60,
        "FedWalk η=1e-2": 0.86, "FedWalk η=1e-3": 0.85, "FedWalk η=1e-4": 0.60}  # fmt: skip
INSIDE = EDGE | {"FedWalk η=1e-2": 0.84}
LRS3 = (0.01, 0.001, 0.0001)
PAIR = ["FedAvg", "FedWalk"]
D01 = F.DIR01.panel_id


def _grid(levels, **kw):
    return F.table_data(levels, methods=PAIR, lrs=LRS3, **kw)


def _table_cases():
    full = F.BASES | F.LEASHED
    return {
        "all-leashed-higher": lambda: F.table_data(full),
        "fednova-higher": lambda: F.table_data(full | {"FedNova": 0.90}),
        "inside-margin": lambda: F.table_data(full | {"FedProx": 0.845}),
        "two-seeds-noise": lambda: F.table_data(
            F.BASES | {"FedWalk": 0.82}, seeds=(0, 1), noise=F.NOISE2
        ),
        "two-noisy-seeds-all": lambda: F.table_data(full, seeds=(0, 1), noise=F.NOISE2),
        "some-without-runs": lambda: F.table_data(
            {"FedAvg": 0.8, "SCAFFOLD": 0.7, "FedWalk": 0.85}
        ),
        "some-loses": lambda: F.table_data({"FedAvg": 0.9, "FedWalk": 0.85}),
        "a-pair-without-runs": lambda: F.table_data(
            {"FedAvg": 0.8, "FedWalk": 0.85, "SCAFFOLD+FedWalk": 0.9}
        ),
        "scaffold-worse": lambda: F.table_data(full | {"SCAFFOLD+FedWalk": 0.75}),
        "no-pair": lambda: F.table_data({"SCAFFOLD+FedWalk": 0.9}),
        "iid-only": lambda: F.table_data(full, panels=(F.IID,)),
        "no-leashed-curve": lambda: F.table_data(F.BASES, methods=list(F.BASES)),
        "fedavg-only": lambda: F.table_data({}, methods=["FedAvg"]),
        "one-pair": lambda: F.table_data({"FedAvg": 0.8, "FedWalk": 0.85}, methods=PAIR),
        "grid-edge": lambda: _grid(EDGE),
        "grid-inside": lambda: _grid(INSIDE),
        "grid-edge-low": lambda: _grid(INSIDE | {"FedAvg η=1e-4": 0.81}),
        "grid-point-diverged": lambda: diverged(_grid(EDGE), {(D01, "FedWalk η=1e-2"): [(1, 9)]}),
        "grid-point-without-runs": lambda: without(
            diverged(_grid(EDGE), {(D01, "FedWalk η=1e-2"): [(1, 9)]}), "FedWalk η=1e-4"
        ),
        "every-point-diverged": lambda: diverged(
            F.table_data({"FedAvg": 0.8, "FedWalk": 0.85}, methods=PAIR),
            {(p.panel_id, "FedWalk η=1e-2"): [(0, 5)] for p in (F.DIR01, F.IID)},
        ),
        "smoke-length": lambda: short(F.table_data(full)),
        "no-histories": lambda: dataclasses.replace(F.table_data(full), long=None),
    }


def _fig2_grid():
    data = F.loss_data(1.3, 0.7, lrs=(0.01, 0.001))
    extra = {(D01, "FedWalk η=1e-3", s, "test_acc"): F.acc_curve(0.5) for s in F.SEEDS5}
    data.long = pd.concat([data.long, F.long_rows(extra)], ignore_index=True)
    data.reduced.clear()
    return data


def _fig2_cases():
    def iid_only():
        data = F.loss_data(1.3, 0.7)
        data.panels = [F.IID]
        return data

    return {
        "slower-early-lower-late": lambda: F.loss_data(1.3, 0.7),
        "lower-throughout": lambda: F.loss_data(0.7, 0.7),
        "higher-throughout": lambda: F.loss_data(1.3, 1.2),
        "inside-margin": lambda: F.loss_data(1.03, 0.97),
        "two-seeds-noise": lambda: F.loss_data(1.1, 0.9, seeds=(0, 1), noise=(0.02, -0.03)),
        "iid-only": iid_only,
        "grid-single-point": lambda: F.loss_data(1.3, 0.7, lrs=(0.01, 0.001)),
        "grid-edge": _fig2_grid,
        "no-training-loss": lambda: F.table_data(F.BASES | F.LEASHED),
        "smoke-length": lambda: short(F.loss_data(1.3, 0.7)),
    }


def _tau_cases():
    peak, fall, rise = F.PEAK, F.FALL, F.RISE
    small = [0.80, 0.81, 0.82, 0.81, 0.80]

    def only_hh():
        data = F.tau_data({"HH": fall})
        data.panels = F.TASKS[2:]
        return data

    def mh_one_tau():
        data = F.tau_data({"LH": peak, "MH": peak, "HH": fall})
        long = data.long
        data.long = long[~((long["panel_id"] == "leash.task=MH") & (long["curve"] != "τ=0.5"))]
        data.reduced.clear()
        return data

    def no_hh():
        data = F.tau_data({"LH": peak, "MH": peak})
        data.panels = F.TASKS[:2]
        return data

    return {
        "peak-peak-fall": lambda: F.tau_data({"LH": peak, "MH": peak, "HH": fall}),
        "mh-rises": lambda: F.tau_data({"LH": peak, "MH": rise, "HH": fall}),
        "lh-plateau": lambda: F.tau_data({"LH": [0.845, 0.85, 0.849, 0.84, 0.78], "MH": peak}),
        "two-seeds-noise": lambda: F.tau_data({"LH": small, "MH": small}, seeds=(0, 1), noisy=True),
        "hh-peak": lambda: F.tau_data({"HH": peak}),
        "hh-rises": lambda: F.tau_data({"HH": rise}),
        "hh-falls-best-inside": lambda: F.tau_data({"HH": [0.80, 0.83, 0.79, 0.78, 0.74]}),
        "hh-flat-noise": lambda: F.tau_data({"HH": [0.80] * 5}, seeds=(0, 1), noisy=True),
        "interior-tie": lambda: F.tau_data({"LH": [0.80, 0.85, 0.85, 0.85, 0.78], "HH": fall}),
        "mh-one-tau": mh_one_tau,
        "only-hh": only_hh,
        "no-hh": no_hh,
        "a-tau-diverged": lambda: diverged(
            F.tau_data({"LH": peak, "MH": peak, "HH": fall}),
            {("leash.task=LH", "τ=0.5"): [(2, 7)], ("leash.task=HH", "τ=3"): [(1, 4)]},
        ),
        "smoke-length": lambda: short(F.tau_data({"LH": peak, "MH": peak, "HH": fall})),
    }


def _fig4_cases():
    walk, pre = {"LH": 0.85, "MH": 0.84, "HH": 0.82}, {"LH": 0.80, "MH": 0.81, "HH": 0.80}
    return {
        "walk-higher": lambda: F.fig4_data(walk, pre),
        "hh-pretraining-higher": lambda: F.fig4_data(walk, pre | {"HH": 0.83}),
        "two-seeds-noise": lambda: F.fig4_data(walk, pre, seeds=(0, 1), noise=(0.02, -0.05)),
        "lh-only": lambda: F.fig4_data({"LH": 0.85}, {"LH": 0.80}),
        "no-pretraining": lambda: F.fig4_data({"LH": 0.85}, {}),
        "one-panel-without-mh": lambda: without(F.fig4_data(walk, pre), "FedWalk MH", D01),
        "smoke-length": lambda: short(F.fig4_data(walk, pre)),
    }


def _fig5_cases():
    def no_walk():
        data = F.fig5_data({0.1: 0.03, 0.3: 0.0})
        data.curves = F.FIG5_CURVES[:1]
        return data

    return {
        "largest-at-01": lambda: F.fig5_data({0.1: 0.04, 0.3: 0.02, 1.0: 0.01, 10.0: 0.0}),
        "largest-at-03": lambda: F.fig5_data({0.1: 0.01, 0.3: 0.03, 1.0: 0.02}),
        "two-seeds-noise": lambda: F.fig5_data(
            {0.1: 0.03, 0.3: 0.025}, seeds=(0, 1), noise=(0.02, -0.03)
        ),
        "no-dir01": lambda: F.fig5_data({0.3: 0.03, 1.0: 0.01}),
        "dir01-only": lambda: F.fig5_data({0.1: 0.03}),
        "no-fedwalk-curve": no_walk,
        "smoke-length": lambda: short(F.fig5_data({0.1: 0.04, 0.3: 0.02})),
        "a-run-diverged": lambda: diverged(
            F.fig5_data({0.1: 0.04, 0.3: 0.02}), {("data.dirichlet_alpha=0.3", "FedWalk"): [(2, 9)]}
        ),
    }


#: (figure, claim id, its scenarios)
CLAIMS = [
    ("fedwalk-table2", "fedwalk-beats-baselines", _table_cases),
    ("fedwalk-table2", "fedwalk-helps-each-base", _table_cases),
    ("fedwalk-fig2", "leash-slows-early", _fig2_cases),
    ("fedwalk-fig2", "lower-loss-later", _fig2_cases),
    ("fedwalk-fig3", "tau-rises-then-falls", _tau_cases),
    ("fedwalk-fig3", "tau-falls-hh", _tau_cases),
    ("fedwalk-fig4", "fedwalk-beats-pretraining", _fig4_cases),
    ("fedwalk-fig5", "gain-largest-at-dir01", _fig5_cases),
]


def golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("figure", "claim_id", "cases"), CLAIMS, ids=[c[1] for c in CLAIMS])
def test_declared_fedwalk_claim_judges_as_its_legacy_criterion(figure, claim_id, cases):
    claim = declared(figure, claim_id)
    want = golden()[claim_id]
    got = {name: judged(claim, make()) for name, make in cases().items()}
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
    # the scenarios decide the claim both ways
    assert {"supported", "contradicted"} <= {g["verdict"] for g in got.values()}


def test_every_fedwalk_claim_is_declared_and_covered_by_the_golden_scenarios():
    specs = [read_spec(p) for p in sorted(SWEEPS.glob("fedwalk-*.yaml"))]
    ids = sorted({(s.figure, c.id) for s in specs for c in s.claims})
    for s in specs:
        for c in s.claims:
            assert isinstance(c, Claim) and c.id and c.kind, (s.figure, c)
            assert claim_problem([c]) == ""
    assert ids == sorted((f, i) for f, i, _ in CLAIMS)
    assert set(golden()) == {i for _, i, _ in CLAIMS}
    for _, claim_id, cases in CLAIMS:
        assert len(golden()[claim_id]) >= 4
        assert sorted(golden()[claim_id]) == sorted(cases())


def test_golden_verdicts_are_varied_per_claim():
    """Each claim's golden scenarios decide it both ways and show the not-testable rules."""
    for claim_id, scenarios in golden().items():
        verdicts = {s["verdict"] for s in scenarios.values()}
        assert {"supported", "contradicted"} <= verdicts, claim_id
        assert "not-testable" in verdicts, claim_id
