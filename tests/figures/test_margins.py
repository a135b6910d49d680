"""Practical margins everywhere (issue 51, item 2): every comparison of a shipped claim that
ranks curves declares a margin that matters, a lead inside it decides nothing in favour, and a
claim may declare where it fails (``fails_below``) so that a practical tie is inconclusive."""

from __future__ import annotations

from pathlib import Path

from fedsweep.judge import verdicts as JV
from fedsweep.judge.measures import MEASURES
from fedsweep.specs.claims import Claim
from fedsweep.specs.load import read_spec, spec_paths
from tests.figures import test_dashboards as D

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
CURVES = [D.curve("α=0.4", bherd__alpha=0.4), D.curve("α=0.5", bherd__alpha=0.5)]
FIRST = {
    "id": "a04-fastest",
    "text": "α=0.4 is the fastest",
    "kind": "first",
    "measure": "loss_auc",
    "curve": "α=0.4",
    "versus": "α=0.5",
    "margin": 0.05,
}


def _data(level: float):
    """α=0.4 at ``level`` of α=0.5's loss (0.999: a 0.1% lower loss AUC), tiny seed noise."""
    hs = {
        (None, "α=0.4", "test_loss"): D.decay(level, k=1, noise=1e-4),
        (None, "α=0.5", "test_loss"): D.decay(1.0, noise=1e-4),
    }
    return D.runs(CURVES, hs, base={"selector": "bherd"})


def test_every_shipped_ranking_declares_a_margin_that_matters():
    """first / monotone / interior_optimum: a margin > 0 on every comparison (a loss AUC 5%,
    an accuracy 1 point, a final loss 0.01), or a count (rounds, rises) whose resolution of 1
    widens the interval (a lead of less than one round decides nothing)."""
    rankings = []
    for path in spec_paths(SWEEPS):
        for claim in read_spec(path).claims:
            for comp in claim.comparisons:
                if comp.kind in ("first", "monotone", "interior_optimum"):
                    step = MEASURES[comp.measure].resolution
                    rankings.append((claim.id, comp.measure, comp.margin, step))
    assert len(rankings) >= 15
    assert [r for r in rankings if r[2] <= 0 and r[3] != 1.0] == []


def test_a_lead_inside_the_margin_is_no_win():
    tiny, clear = _data(0.999), _data(0.8)
    claim = Claim.model_validate(FIRST)
    (check,) = JV.judge_claims([claim], tiny)
    assert check.verdict == "contradicted"  # ahead by 0.1%: not first by a margin that matters
    assert all(0 < e["effect"] < 0.002 and e["threshold"] == 0.05 for e in check.evidence)
    assert JV.judge_claims([claim], clear)[0].verdict == "supported"
    at_zero = claim.model_copy(update={"margin": 0.0})  # the former rule: any lead ranks first
    assert JV.judge_claims([at_zero], tiny)[0].verdict == "supported"


def test_fails_below_leaves_a_practical_tie_inconclusive():
    claim = Claim.model_validate({**FIRST, "fails_below": -0.05})
    (tie,) = JV.judge_claims([claim], _data(0.999))
    assert tie.verdict == "inconclusive"
    assert tie.evidence[0]["against"] == -0.05
    assert tie.evidence[0]["holds_when"] == "effect > 0.05 (fails: effect < -0.05)"
    (behind,) = JV.judge_claims([claim], _data(1.25))  # a rival 20% ahead
    assert behind.verdict == "contradicted"
    assert JV.judge_claims([claim], _data(0.8))[0].verdict == "supported"


def test_a_readings_overrides_reach_the_claims_guards():
    """A figure drawn under a reading (``--set bherd.scale=one_over_alpha``) judges its claims
    on the method its runs ran: the E/α guard that makes "larger E converges faster" hold by
    construction is silent under the 1/α reading (issue 51, item 6)."""
    from fedsweep.judge.panels import Panel
    from fedsweep.judge.papers.bherd import e_over_alpha
    from fedsweep.judge.runs import curve_configs
    from fedsweep.specs.figure import figure_plan
    from fedsweep.specs.load import load_spec

    spec = load_spec(SWEEPS / "bherd-fig3b.yaml")
    labels = [c.label for c in spec.curve_list()]
    panel = Panel("data.partition=case1", "Case 1", {})
    for overrides, fires in (({}, True), ({"bherd.scale": "one_over_alpha"}, False)):
        plan = figure_plan(spec, "quick", extra=overrides)
        data = D.runs(spec.curve_list(), {}, configs=curve_configs(plan))
        assert (e_over_alpha(data, panel, labels) is not None) == fires, overrides
