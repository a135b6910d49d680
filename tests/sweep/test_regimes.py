"""One rule for every regime (issue 51, item 1; fedsweep/specs/regimes.py): a profile's regime
follows from what its trials' configs change against the paper profile's: the horizon alone is
``truncated``, data, model, η or another setting is ``scaled``, nothing is the paper profile's
own regime; a profile may not declare a less removed regime than the rule gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedsweep.specs.load import load_spec, spec_paths
from fedsweep.specs.model import Regime
from fedsweep.specs.regimes import (
    changes,
    most_removed,
    panel_changes,
    regime_problems,
    rule_regime,
)

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"


def _regimes(figure: str, profile: str) -> dict[str, Regime | None]:
    spec = load_spec(SWEEPS / f"{figure}.yaml")
    found = panel_changes(spec, profile)
    base = spec.profiles["paper"]
    return {
        cell.label: rule_regime(base.regime_of(cell.pairs), found.get(cell.panel_id, []))
        for cell in spec.panel_cells(profile)
    }


def test_changes_skip_what_cannot_change_a_result():
    here = {"train.rounds": 100, "data.root": "/a", "eval.batch_size": 500, "train.lr": 0.1}
    paper = {"train.rounds": 500, "data.root": "/b", "eval.batch_size": 1000, "train.lr": 0.1}
    assert changes(here, paper) == [("train.rounds", 100, 500)]
    assert most_removed(["paper", "truncated", "reconstructed"]) == "truncated"
    assert most_removed([]) == "paper"


def test_the_horizon_alone_is_truncated_anything_else_scaled():
    base = Regime(kind="paper")
    short = rule_regime(base, [("train.rounds", 100, 500)])
    assert (short.kind, short.reason) == ("truncated", "T=100 of the paper profile's 500 rounds")
    both = rule_regime(base, [("train.lr", 0.01, 0.0001), ("train.rounds", 10, 500)])
    assert both.kind == "scaled" and "η=0.01 (paper profile 0.0001)" in both.reason
    assert rule_regime(base, []) is base
    rebuilt = Regime(kind="reconstructed", reason="the τ rule is ours")
    assert rule_regime(rebuilt, []) is rebuilt
    truncated = rule_regime(rebuilt, [("train.rounds", 50, 100)])
    assert truncated.kind == "truncated" and truncated.reason.startswith("the τ rule is ours; ")


@pytest.mark.parametrize(
    ("figure", "panel", "kind", "words"),
    [
        ("bherd-fig3a", "Case 1", "truncated", "T=100 of the paper profile's 500 rounds"),
        ("bherd-fig2a", "SVM, MNIST · Case 2", "truncated", "T=100 of the paper profile's 500"),
        ("bherd-fig2a", "CNN, MNIST · Case 1", "scaled", "η=0.01 (paper profile 0.0001)"),
        ("fedveca-fig5", "", "reconstructed", "the τ rule R1"),
        ("intro-sampling", "Balanced clients (control)", "scaled", "model.name=mlp"),
    ],
)
def test_shipped_quick_profiles_by_the_rule(figure, panel, kind, words):
    regimes = _regimes(figure, "quick")
    found = regimes[panel] if panel else next(iter(regimes.values()))
    assert found is not None and found.kind == kind and words in found.reason, found


def test_no_quick_panel_of_a_shipped_spec_is_the_paper_s_regime():
    """The quick profile changes the horizon, data or model of every figure: none of its panels
    is in the paper's regime (what the quick rows of claims-quick.json were labelled)."""
    for path in spec_paths(SWEEPS):
        spec = load_spec(path)
        if "quick" not in spec.profiles:
            continue
        found = panel_changes(spec, "quick")
        base = spec.profiles["paper"]
        for cell in spec.panel_cells("quick"):
            ruled = rule_regime(base.regime_of(cell.pairs), found.get(cell.panel_id, []))
            assert ruled is None or ruled.kind != "paper", (spec.figure, cell.label)


def test_a_declared_regime_less_removed_than_the_rule_is_a_problem(tmp_path):
    import yaml

    tree = yaml.safe_load((SWEEPS / "bherd-fig4e.yaml").read_text())
    tree["profiles"]["quick"]["regime"] = {"kind": "paper"}
    path = tmp_path / "bherd-fig4e.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    (problem,) = regime_problems(load_spec(path), path.name)
    assert problem == (
        "bherd-fig4e.yaml: profiles.quick declares regime 'paper', but the profile "
        "changes T=100 of the paper profile's 500 rounds: its regime is 'truncated' at least "
        "(allowed: truncated, scaled)"
    )
    tree["profiles"]["quick"]["regime"] = {"kind": "scaled", "reason": "ours"}
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    assert regime_problems(load_spec(path), path.name) == []  # more removed: allowed
