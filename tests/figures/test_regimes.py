"""Regimes are declared, not guessed (issue 34): a profile says per panel whether its runs are
in the paper's regime, a reconstructed one or a scaled one; a claim judged on scaled panels is
not testable (numbers still shown), and a figure mixing regimes is judged per regime."""

from __future__ import annotations

import pytest

from dashboards import claims as C
from dashboards import registry as R
from dashboards.model import Panel
from fedsweep.specs.load import SpecError, load_spec
from fedsweep.specs.model import Regime
from tests.figures.test_fedveca_figures import claim, cv, make

CLAIM = claim("premise-above-bound")
PAPER = Regime(kind="paper")
SCALED = Regime(kind="scaled", reason="T=10 instead of 100, 2 seeds")


def data_with(regimes: list[Regime | None]):
    panels = [Panel(f"setting=p{i}", f"P{i}", {}, r) for i, r in enumerate(regimes)]
    runs = {s: [0.8] * 4 + [1.5] * 7 for s in range(3)}
    series = {(p.panel_id, "FedVeca", s, "premise"): ys for p in panels for s, ys in runs.items()}
    return make([cv("FedVeca")], series, panels, start=2)


def test_scaled_panels_are_not_testable_with_their_numbers():
    (check,) = C.check_claims([CLAIM], data_with([SCALED, SCALED]), R.CRITERIA)
    assert check.verdict == "not-testable"
    assert check.shown.startswith("not testable at this profile: scaled regime (scaled: T=10")
    assert "effect 0 [0, 0] (95% CI, 3 seeds)" in check.numbers  # still measured
    assert check.regime == "scaled: T=10 instead of 100, 2 seeds"


def test_mixed_regimes_are_judged_per_regime():
    checks = C.check_claims([CLAIM], data_with([PAPER, SCALED]), R.CRITERIA)
    assert [(c.regime, c.verdict) for c in checks] == [
        ("paper", "supported"),
        ("scaled: T=10 instead of 100, 2 seeds", "not-testable"),
    ]
    assert checks[0].numbers.startswith("[paper regime: P0] P0: effect 0 [0, 0]")
    assert "P1" not in checks[0].numbers and len(checks[0].evidence) == 1


def test_undeclared_regimes_are_judged_as_before():
    (check,) = C.check_claims([CLAIM], data_with([None, None]), R.CRITERIA)
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
