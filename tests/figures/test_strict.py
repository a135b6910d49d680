"""Issue 51's rules on top of the interval (a declared claim's ``strict``, the default): a
claim of k parts controls its family-wise error (Holm), an interval is never narrower than
the measure's resolution, and a part whose two sides are one computation is named
``degenerate`` and not counted."""

from __future__ import annotations

from types import SimpleNamespace

from dashboards.report import _claim_lines, claim_rows
from fedsweep.judge import evidence as JE
from fedsweep.judge import verdicts as JV
from fedsweep.judge.panels import Panel
from fedsweep.judge.stats import Measure, interval, p_values
from fedsweep.specs.claims import Claim
from tests.figures import test_dashboards as D

FASTER = Measure("loss AUC reduction", 0.05, "greater")
CLEAR = [0.20, 0.21, 0.19, 0.20, 0.22]
#: below the 0.05 margin on every seed, but not by much: one-sided p about 0.01
MARGINAL = [0.030, 0.045, 0.040, 0.020, 0.035]


def _judge(effects: list[list[float]], family: bool):
    panels = [Panel(f"p={i}", f"P{i}", {}) for i in range(len(effects))]
    parts = {p.panel_id: e for p, e in zip(panels, effects, strict=True)}

    def check(p: Panel):
        return [JE.Part("", interval(parts[p.panel_id], list(range(5))), FASTER)], ""

    data = D.runs([], {}, panels=panels)
    return (*JE.decide_panels(data, check, panels, family=family), data)


def test_holm_keeps_a_contradiction_only_if_it_survives_the_family():
    p = p_values(interval(MARGINAL, list(range(5))), FASTER)[1]
    assert 0.025 / 3 < p < 0.025 / 2  # kept among 2 parts, not among 3
    verdict, numbers, _ = _judge([MARGINAL], family=True)
    assert verdict == "contradicted" and "Holm" not in numbers  # one part: one test
    verdict, numbers, _ = _judge([CLEAR, MARGINAL], family=True)
    assert verdict == "contradicted"
    assert numbers.endswith("Holm over 2 parts: 1 of 1 contradicted part stands (family-wise "
                            "error ≤ 0.025 on that side)")  # fmt: skip
    verdict, numbers, data = _judge([CLEAR, CLEAR, MARGINAL], family=True)
    assert verdict == "inconclusive", numbers
    assert "→ inconclusive (contradicted alone (p = 0.01), not after Holm's correction over 3 " in (
        numbers
    )
    assert numbers.endswith("Holm over 3 parts: 0 of 1 contradicted part stand (family-wise "
                            "error ≤ 0.025 on that side)")  # fmt: skip
    assert [r["verdict"] for r in data.evidence] == ["supported", "supported", "inconclusive"]
    assert _judge([CLEAR, CLEAR, MARGINAL], family=False)[0] == "contradicted"  # as migrated


def test_an_interval_is_never_narrower_than_the_test_sets_step():
    """Three seeds at the same one-image gain (0.0001 on 10,000 test images): no certainty of
    zero width; the interval is ± one image at least, and the verdict says it cannot tell."""
    curves = [D.curve("A", bherd__alpha=0.4), D.curve("B", bherd__alpha=0.5)]
    hs = {
        (None, "A", "test_acc"): [[0.5] * 9 + [0.9001]] * 3,
        (None, "B", "test_acc"): [[0.5] * 9 + [0.9000]] * 3,
        (None, "A", "test_loss"): D.decay(0.9, seeds=3),
        (None, "B", "test_loss"): D.decay(1.0, seeds=3),
    }
    data = D.runs(curves, hs, base={"selector": "bherd", "data": {"dataset": "mnist"}})
    claim = Claim.model_validate({
        "id": "a-higher", "text": "A is more accurate", "kind": "higher", "measure": "final_acc",
        "curve": "A", "versus": "B", "margin": 0.0,
    })  # fmt: skip
    (check,) = JV.judge_claims([claim], data)
    row = check.evidence[0]
    assert abs(row["effect"] - 1e-4) < 1e-9
    assert row["floor"] == 1e-4 and row["ci_low"] <= 1e-12
    assert check.verdict == "inconclusive"
    (lenient,) = JV.judge_claims([claim.model_copy(update={"strict": False})], data)
    assert lenient.verdict == "supported"  # the zero-width interval the former judge trusted


def test_a_part_of_one_computation_is_named_and_not_counted():
    """FedNova that took FedAvg's steps (identical histories) against BHerd-FedNova, beside a
    SCAFFOLD part that decides: the first part is listed as degenerate in the check and the
    report's row, the verdict is the SCAFFOLD part's."""
    curves = [
        D.curve("FedAvg", algorithm="fedavg"),
        D.curve("FedNova", algorithm="fednova"),
        D.curve("SCAFFOLD", algorithm="scaffold"),
        D.curve("BHerd-SCAFFOLD", algorithm="scaffold", selector="bherd"),
    ]
    hs = {
        (None, "FedAvg", "test_loss"): D.decay(1.0),
        (None, "FedNova", "test_loss"): D.decay(1.0),
        (None, "SCAFFOLD", "test_loss"): D.decay(1.0, k=2),
        (None, "BHerd-SCAFFOLD", "test_loss"): D.decay(0.7, k=3),
    }
    claim = Claim.model_validate({
        "id": "beats-fedavg", "text": "FedNova and BHerd-SCAFFOLD are faster than FedAvg / "
        "SCAFFOLD", "kind": "faster", "measure": "loss_auc", "name": "FedNova",
        "curve": "FedNova", "versus": "FedAvg", "margin": 0.05,
        "and": [{"kind": "faster", "name": "SCAFFOLD", "measure": "loss_auc",
                 "curve": "BHerd-SCAFFOLD", "versus": "SCAFFOLD", "margin": 0.05}],
    })  # fmt: skip
    data = D.runs(curves, hs)
    (check,) = JV.judge_claims([claim], data)
    assert check.verdict == "supported", check.numbers
    assert len(check.degenerate) == len(D.CASES)
    assert check.degenerate[0].startswith(
        "Case 1 · FedNova · FedNova − FedAvg: 'FedNova' and 'FedAvg' computed the same test_loss"
    )
    assert all("SCAFFOLD" in r["panel"] for r in check.evidence)
    result = SimpleNamespace(
        figure_id="bherd-fig2b", claims=[check], seeds=[0], profile="paper", profile_note="",
        runs=1, expected_runs=1, readings={},
    )  # fmt: skip
    (row,) = claim_rows([result])
    assert row["degenerate"] == list(check.degenerate) and row["readings"] == []
    lines = _claim_lines([row], result)
    assert "  - Degenerate, not counted: Case 1 · FedNova · FedNova − FedAvg: " in "\n".join(lines)


def test_a_rival_that_computed_another_rivals_runs_is_one_comparison_not_two():
    """fedveca-fig8's "N=50 beats the baselines": FedNova with FedAvg's local steps computed
    FedAvg's runs, so "vs FedNova" repeats "vs FedAvg": named degenerate, counted once."""
    curves = [
        D.curve("FedVeca", step_policy="fedveca"),
        D.curve("FedAvg", algorithm="fedavg"),
        D.curve("FedNova", algorithm="fednova"),
    ]
    hs = {
        (None, "FedVeca", "test_loss"): D.decay(0.7, k=1),
        (None, "FedAvg", "test_loss"): D.decay(1.0),
        (None, "FedNova", "test_loss"): D.decay(1.0),
    }
    claim = Claim.model_validate({
        "id": "beats-baselines", "text": "FedVeca beats FedAvg and FedNova", "kind": "faster",
        "measure": "loss_auc", "curve": "FedVeca", "versus": ["FedAvg", "FedNova"],
        "margin": 0.05,
    })  # fmt: skip
    (check,) = JV.judge_claims([claim], D.runs(curves, hs))
    assert check.verdict == "supported"
    assert [r["panel"].split(" · ")[-1] for r in check.evidence] == ["FedVeca − FedAvg"] * 3
    assert len(check.degenerate) == 3
    assert (
        "FedVeca − FedNova: it repeats FedVeca − FedAvg: 'FedNova' and 'FedAvg' computed"
        in (check.degenerate[0])
    )
