"""Regimes are declared, not guessed (issue 34): a profile says per panel whether its runs are
in the paper's regime, a reconstructed one or a scaled one; a claim judged on scaled panels is
not testable (numbers still shown), and a figure mixing regimes is judged per regime."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedsweep.judge import verdicts as JV
from fedsweep.judge.measures import regimes_that_test
from fedsweep.judge.panels import Panel
from fedsweep.specs.claims import Claim
from fedsweep.specs.load import SpecError, load_spec
from fedsweep.specs.model import Regime
from tests.figures.test_fedveca_figures import claim, cv, make

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
CLAIM = claim("premise-above-bound")
PAPER = Regime(kind="paper")
SCALED = Regime(kind="scaled", reason="T=10 instead of 100, 2 seeds")


def data_with(regimes: list[Regime | None]):
    panels = [Panel(f"setting=p{i}", f"P{i}", {}, r) for i, r in enumerate(regimes)]
    runs = {s: [0.8] * 4 + [1.5] * 7 for s in range(3)}
    series = {(p.panel_id, "FedVeca", s, "premise"): ys for p in panels for s, ys in runs.items()}
    return make([cv("FedVeca")], series, panels, start=2)


def test_scaled_panels_are_not_testable_with_their_numbers():
    (check,) = JV.judge_claims([CLAIM], data_with([SCALED, SCALED]))
    assert check.verdict == "not-testable"
    assert check.shown.startswith("not testable at this profile: scaled regime (scaled: T=10")
    assert "effect 0 [0, 0] (95% CI, 3 seeds)" in check.numbers  # still measured
    assert check.regime == "scaled: T=10 instead of 100, 2 seeds"


def test_mixed_regimes_are_judged_per_regime():
    checks = JV.judge_claims([CLAIM], data_with([PAPER, SCALED]))
    assert [(c.regime, c.verdict) for c in checks] == [
        ("paper", "supported"),
        ("scaled: T=10 instead of 100, 2 seeds", "not-testable"),
    ]
    assert checks[0].numbers.startswith("[paper regime: P0] P0: effect 0 [0, 0]")
    assert "P1" not in checks[0].numbers and len(checks[0].evidence) == 1


def test_undeclared_regimes_are_judged_as_before():
    (check,) = JV.judge_claims([CLAIM], data_with([None, None]))
    assert (check.verdict, check.regime) == ("supported", "")


def test_the_spec_declares_regimes_with_a_reason(tmp_path):
    spec = tmp_path / "s.yaml"
    text = (
        "figure: regime-test\ntitle: t\nbase: {data: {dataset: mnist-5k, num_clients: 3}}\n"
        "panels: {data.partition: [case1, case2]}\ncurves: [{label: A, set: {}}]\n"
        "profiles:\n  quick:\n    seeds: [0]\n    regime: {kind: paper}\n"
        "    panel_regime:\n      data.partition=case2: {kind: scaled, reason: 'T=10'}\n"
        "  paper: {seeds: [0]}\n  smoke: {seeds: [0]}\n"
    )
    spec.write_text(text)
    prof = load_spec(spec).profiles["quick"]
    assert prof.regime_of((("data.partition", "case1"),)).kind == "paper"
    assert prof.regime_of((("data.partition", "case2"),)).text == "scaled: T=10"
    spec.write_text(text.replace("{kind: scaled, reason: 'T=10'}", "{kind: scaled}"))
    with pytest.raises(SpecError, match="needs a one-line reason"):
        load_spec(spec)
    spec.write_text(text.replace("data.partition=case2:", "data.partition=case9:"))
    with pytest.raises(SpecError, match="panel_regime: unknown panel value"):
        load_spec(spec)


def test_a_truncated_horizon_tests_the_start_of_a_run_not_its_end():
    """Issue 51, item 1: the first T of the paper's rounds test a claim about the whole run
    from its start (a loss AUC); a claim about its end (a final loss, a best accuracy, the
    plateau's oscillation) is not testable there, its numbers still shown; the same runs in the
    paper's regime decide both."""
    from tests.figures import test_dashboards as D
    from tests.figures.test_declared_claims import GOOD

    curves = [D.curve("α=0.4", bherd__alpha=0.4), D.curve("α=0.5", bherd__alpha=0.5)]
    hs = {
        (None, "α=0.4", "test_loss"): D.decay(0.8, k=1),
        (None, "α=0.5", "test_loss"): D.decay(1.0),
    }
    auc = Claim.model_validate(GOOD)
    end = Claim.model_validate({**GOOD, "id": "a04-lower", "measure": "final_loss"})
    truncated = Regime(kind="truncated", reason="T=10 of the paper profile's 500 rounds")
    for regime, verdicts in (
        (truncated, ["supported", "not-testable"]),
        (PAPER, ["supported", "supported"]),
    ):
        panels = [Panel(p.panel_id, p.label, p.values, regime) for p in D.CASES]
        data = D.runs(curves, hs, panels=panels, base={"selector": "bherd"})
        checks = JV.judge_claims([auc, end], data)
        assert [c.verdict for c in checks] == verdicts
    assert checks[1].evidence and regimes_that_test(end) == ("paper", "reconstructed")
    assert regimes_that_test(auc) == ("paper", "reconstructed", "truncated")
    shown = JV.judge_claims([end], D.runs(curves, hs, panels=[
        Panel(p.panel_id, p.label, p.values, truncated) for p in D.CASES
    ], base={"selector": "bherd"}))[0].shown  # fmt: skip
    assert shown == (
        "not testable at this profile: truncated regime (truncated: T=10 of the paper "
        "profile's 500 rounds)"
    )
    # a claim may still say which regimes can test it
    declared = end.model_copy(update={"regimes": ["paper", "truncated"]})
    assert regimes_that_test(declared) == ("paper", "truncated")


def test_a_profile_that_cuts_the_horizon_is_truncated_in_the_figure(tmp_path):
    """The figure's panels carry the rule's regime (not the profile's declaration): a quick
    profile of fewer rounds is ``truncated`` with the rounds in its reason; a declaration less
    removed than the rule stops the plan, one line."""
    from fedsweep.judge.panels import panels_of
    from fedsweep.specs.figure import figure_plan

    spec = load_spec(SWEEPS / "bherd-fig3a.yaml")
    (regime,) = {p.regime.text for p in panels_of(spec, "quick")}
    assert regime == "truncated: T=100 of the paper profile's 500 rounds"
    assert {p.regime.kind for p in panels_of(spec, "paper")} == {"paper"}
    text = (
        (SWEEPS / "bherd-fig3a.yaml")
        .read_text()
        .replace("  quick:\n", "  quick:\n    regime: {kind: paper}\n", 1)
    )
    path = tmp_path / "bherd-fig3a.yaml"
    path.write_text(text)
    with pytest.raises(
        SpecError,
        match=r"^bherd-fig3a.yaml: profiles.quick: panel 'Case 1' declares regime 'paper', but",
    ):
        figure_plan(load_spec(path), "quick")
