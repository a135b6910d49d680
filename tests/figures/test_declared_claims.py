"""Declared claims (issue 50): BHerd's claims, declared in ``sweeps/bherd-*.yaml``, give the same
verdicts and numbers as the prose-keyed criteria they replaced on the same data; the claim
language's checks; a researcher's own study (docs/how-to/own-claims.md).

``golden/claims-bherd.json`` holds, per claim id and scenario, the outputs of the legacy
criteria of ``dashboards/papers/bherd/claims.py`` at commit efc6b87 (before they were removed):
the verdict and label of ``check_claims``, the criterion's own verdict before the not-testable
rules (``raw``) and the evidence rows (effect, interval, seeds, threshold, side, verdict;
numbers rounded to 12 digits). The declared judge was checked equal to them while the legacy
code existed, and is compared with them now."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from dashboards.report import claim_rows
from fedsweep.judge import verdicts as JV
from fedsweep.judge.check import claim_problem
from fedsweep.specs.claims import Claim
from fedsweep.specs.load import SpecError, load_spec, read_spec
from fedsweep.specs.model import Regime
from tests.figures import test_bherd_fig2 as F2
from tests.figures import test_dashboards as D
from tests.figures.test_declared_claims_fedwalk import judged
from tests.helpers import migrated_claim, own_example

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
GOLDEN = Path(__file__).parent / "golden" / "claims-bherd.json"


declared = migrated_claim  # (figure, claim id) -> the claim as migrated


# ------------------------------------------------------------------------ the 14 claims
def _fig2a_cases():
    runs = {
        "FedAvg": F2.FEDAVG_RUN,
        "BHerd-FedAvg": ([0.4, 0.3, 0.25], [0.75, 0.83, 0.86]),
        "GraB-FedAvg": ([0.5, 0.4, 0.35], [0.70, 0.78, 0.801]),
    }
    same_acc = {**runs, "BHerd-FedAvg": (runs["BHerd-FedAvg"][0], F2.FEDAVG_RUN[1])}
    gain = {**runs, "GraB-FedAvg": (F2.FEDAVG_RUN[0], [0.75, 0.83, 0.85])}
    still = {"FedAvg": F2.FEDAVG_RUN, "GraB-FedAvg": ([2.3, 2.3, 2.3], [0.1, 0.1, 0.1])}
    return [
        F2.seed_runs(F2.FIG2A, runs),
        F2.seed_runs(F2.FIG2A, same_acc),
        F2.seed_runs(F2.FIG2A, gain),
        F2.seed_runs(F2.FIG2A, runs, seeds=1),
        F2.seed_runs(F2.FIG2A, still),
        F2.seed_runs(F2.FIG2A[:1], runs),
    ]


def _fig2b_cases():
    acc = [0.7, 0.75, 0.8]
    runs = {
        "FedNova": ([0.5, 0.4, 0.35], acc),
        "SCAFFOLD": ([0.5, 0.4, 0.35], acc),
        "BHerd-FedNova": ([0.3, 0.2, 0.18], acc),
        "BHerd-SCAFFOLD": ([0.35, 0.3, 0.25], acc),
    }
    same = {**runs, "BHerd-SCAFFOLD": runs["SCAFFOLD"]}
    return [F2.seed_runs(F2.FIG2B, runs), F2.seed_runs(F2.FIG2B, same)]


def _gain_cases():
    svm, cnn = D.SVM_GAINS, D.CNN_GAINS
    two = {k: [svm[k], cnn[k]] for k in svm}
    owt = {k: [cnn[k], svm[k]] for k in svm}
    only_svm = [p for p in D.fig2b_panels() if p.values["model.name"] == "svm"]
    paper, scaled = Regime(kind="paper"), Regime(kind="scaled", reason="η 100× the paper's")
    mixed = [
        dataclasses.replace(p, regime=scaled if p.values["model.name"] == "cnn" else paper)
        for p in D.fig2b_panels()
    ]
    return [
        D.fig2b_data(svm, cnn),
        D.fig2b_data(cnn, svm),
        D.fig2b_data({**svm, "BHerd-FedNova": 0.90}, {**cnn, "BHerd-FedNova": 0.93}),
        D.fig2b_data(two, owt),
        D.fig2b_data(svm, cnn, panels=only_svm),
        D.fig2b_data(svm, {}),
        D.fig2b_data(svm, cnn, panels=mixed),
    ]


def _alpha_cases():
    fa = [0.80, 0.81, 0.79, 0.80, 0.805]
    same = [a + d for a, d in zip(fa, [0.001, -0.002, 0.0, 0.002, -0.001], strict=True)]
    finals = {"FedAvg (RR)": fa, "α=1.0": same, "α=0.1": [a - 0.2 for a in fa]}
    curves = D.ALPHAS + [D.FEDAVG]
    return [
        D.seeds_data(curves, finals),
        D.seeds_data(curves, {"FedAvg (RR)": fa, "α=1.0": same, "α=0.1": same}),
        D.seeds_data(curves, {**finals, "α=1.0": [a + 0.05 for a in same]}),
        D.seeds_data(
            curves, {"FedAvg (RR)": [0.8, 0.8], "α=1.0": [0.79, 0.815], "α=0.1": [0.6] * 2}
        ),
        D.seeds_data(D.ALPHAS, finals),
        D.runs(curves, {}),
    ]


def _fastest_cases():
    levels = D.ALPHA_LEVELS
    fast01 = {**D.alpha_loss(levels), (1, "α=0.1", "test_loss"): D.decay(0.7)}
    two = D.alpha_loss({0.1: 1.0, 0.3: 0.8, 0.5: 1.0, 0.7: 0.9, 1.0: 1.0}, seeds=2)
    two[(None, "α=0.3", "test_loss")] = [D.decay(0.8, 1)[0], D.decay(0.95, 1)[0]]
    no_claimed = [c for c in D.ALPHAS if c.label not in ("α=0.3", "α=0.5")]
    div01 = {(p.panel_id, "α=0.1"): [(0, 4), (3, 6)] for p in D.CASES}
    div03 = {(D.CASES[0].panel_id, "α=0.3"): [(1, 4)]}
    return [
        D.runs(D.ALPHAS, D.alpha_loss(levels)),
        D.runs(D.ALPHAS, fast01),
        D.runs(D.ALPHAS, two),
        D.runs(no_claimed, D.alpha_loss(levels)),
        D.runs(D.ALPHAS, D.alpha_loss(levels), diverged=div01),
        D.runs(D.ALPHAS, D.alpha_loss(levels), diverged=div03),
    ]


def _fails_cases():
    nan = float("nan")
    broken = [[0.5] * 5 + [nan] * 5 for _ in range(5)]
    div = {(p.panel_id, "α=0.1"): [(s, 5) for s in range(5)] for p in D.CASES}
    blow = {
        (p.panel_id, "α=0.1"): [(s, "test_loss 3e+04 > 1000 x") for s in range(5)] for p in D.CASES
    }
    return [
        D.fails_data(D.acc(0.70, k=4)),
        D.fails_data(D.acc(0.845, k=4)),
        D.fails_data(D.final([0.70, 0.85]), seeds=2),
        D.runs(D.ALPHAS[1:], {}),
        D.fails_data(broken, diverged=div),
        D.fails_data(D.acc(0.85, k=4), blowups=blow),
    ]


def _e_cases():
    levels = D.E_LEVELS
    reverse = dict(zip(levels, reversed(levels.values()), strict=True))
    two = {
        (None, f"E={e}", "test_loss"): [D.decay(a, 1, k=i)[0], D.decay(b, 1, k=i)[0]]
        for i, (e, a, b) in enumerate(zip(levels, levels.values(), reverse.values(), strict=True))
    }
    one = D.ONE_OVER_ALPHA
    return [
        D.runs(D.E_CURVES, D.e_loss(levels), base=one),
        D.runs(D.E_CURVES, D.e_loss(reverse), base=one),
        D.runs(D.E_CURVES, D.e_loss({**levels, 2.0: 0.45}), base=one),
        D.runs(D.E_CURVES, two, base=one),
        D.runs(D.E_CURVES[:1], D.e_loss(levels)),
        D.runs(D.E_CURVES, D.e_loss(levels), base=D.LITERAL),
        D.runs(D.E_CURVES, D.e_loss(reverse), base=D.LITERAL),
        D.runs(D.E_CURVES, D.e_loss(levels), base={"selector": "none"}),
    ]


def _e2_cases():
    def data(e2, e1, seeds=5):
        return D.runs(
            D.E_CURVES,
            {
                (None, "E=2.0", "test_loss"): [[y + 1e-4 * s for y in e2[s]] for s in range(seeds)],
                (None, "E=1.0", "test_loss"): [[y + 1e-4 * s for y in e1[s]] for s in range(seeds)],
            },
        )

    z, s = D.ZIGZAG, D.SMOOTH
    return [
        data([z] * 5, [s] * 5),
        data([s] * 5, [z] * 5),
        data([z, s], [s, z], seeds=2),
        D.runs(D.E_CURVES[:3], {}),
    ]


def _batch_cases():
    levels = D.B_LEVELS
    paper = {**D.b_loss(levels), **D.b_loss({**levels, 50: 0.25}, panel=2)}
    two = D.b_loss(levels, seeds=2)
    two[(None, "B=50", "test_loss")] = [D.decay(0.32, 1)[0], D.decay(0.28, 1)[0]]
    two[(2, "B=50", "test_loss")] = [D.decay(0.25, 1)[0], D.decay(0.25, 1)[0]]
    return [
        D.runs(D.BS, paper),
        D.runs(D.BS, D.b_loss(levels)),
        D.runs(D.BS, two),
        D.runs([], {}),
    ]


def _n1_cases():
    return [
        D.n_data(),
        D.n_data(accs=dict.fromkeys(D.N_ACC, 0.90)),
        D.n_data(centralized=0.95),
        D.n_data(loss={**D.N_LOSS, 5: 0.4}),
        D.n_data(seeds=2, extra={(None, "N=1", "test_acc"): D.final([0.915, 0.885])}),
        D.runs(D.NS, {}),
    ]


def _n5_cases():
    return [
        D.n_data(),
        D.n_data(extra={(1, "N=10", "test_loss"): D.decay(0.3, k=10)}),
        D.n_data(
            seeds=2, extra={(None, "N=5", "test_loss"): [D.decay(0.6, 1)[0], D.decay(0.9, 1)[0]]}
        ),
        D.runs(D.NS[:1], {}),
    ]


def _case3_cases():
    near = [0.1, 0.12, 0.11, 0.3, 0.05]
    return [
        D.runs(D.FIG4D, D.clients(D.FAR)),
        D.runs(D.FIG4D, D.clients(near)),
        D.runs(D.FIG4D, D.clients(D.FAR, seeds=1)),
        D.runs(D.FIG4D, D.clients(D.FAR, metric="dist")),
        D.runs(D.FIG4D, {}, D.CASES[:2]),
        D.runs(D.FIG4D, {}),
    ]


def _rr_cases():
    cs = [
        D.curve(f"Case {i}, {o}", data__partition=f"case{i}", train__order=k)
        for i in (1, 2, 3)
        for o, k in (("RR", "rr"), ("no RR", "fixed"))
    ]
    return [
        D._rr_data(seeds=5, curves=cs),
        D._rr_data(seeds=5, curves=cs, shift={"Case 2, no RR": -0.05}),
        D._rr_data(seeds=2, curves=cs, finals={"Case 1, RR": [0.915, 0.885]}),
        D._rr_data(rounds=2, curves=cs),
        D._rr_data(curves=cs[:1]),
    ]


MIGRATED = [
    ("bherd-fig2a", "bherd-fedavg-faster-higher", _fig2a_cases),
    ("bherd-fig2a", "grab-little-gain", _fig2a_cases),
    ("bherd-fig2b", "bherd-speeds-up-fednova-scaffold", _fig2b_cases),
    ("bherd-fig2b", "bherd-gain-by-model", _gain_cases),
    ("bherd-fig3a", "alpha1-matches-fedavg", _alpha_cases),
    ("bherd-fig3a", "alpha03-05-fastest", _fastest_cases),
    ("bherd-fig3a", "alpha01-fails", _fails_cases),
    ("bherd-fig3b", "larger-e-faster", _e_cases),
    ("bherd-fig3b", "e2-oscillates", _e2_cases),
    ("bherd-fig3c", "best-batch", _batch_cases),
    ("bherd-fig3d", "n1-centralized-fastest", _n1_cases),
    ("bherd-fig3d", "n5-best", _n5_cases),
    ("bherd-fig4d", "case3-far-clients", _case3_cases),
    ("bherd-fig4e", "rr-differs-little", _rr_cases),
]


def golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("figure", "claim_id", "cases"), MIGRATED, ids=[m[1] for m in MIGRATED])
def test_declared_bherd_claim_judges_as_its_legacy_criterion(figure, claim_id, cases):
    claim = declared(figure, claim_id)
    want = golden()[claim_id]
    got = [judged(claim, data) for data in cases()]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, i
    # every case set decides the claim somewhere (not only n/a)
    assert {"supported", "contradicted", "inconclusive", "not-testable"} & {g["raw"] for g in got}


def test_every_bherd_claim_is_declared_and_checked_here():
    specs = [read_spec(p) for p in sorted(SWEEPS.glob("bherd-*.yaml"))]
    ids = [(s.figure, c.id) for s in specs for c in s.claims]
    assert all(isinstance(c, Claim) for s in specs for c in s.claims)
    assert sorted(ids) == sorted((f, i) for f, i, _ in MIGRATED)
    # the golden outputs cover exactly the declared claims, every scenario of each
    assert set(golden()) == {i for _, i, _ in MIGRATED}
    for _, claim_id, cases in MIGRATED:
        assert len(golden()[claim_id]) == len(cases())


# ------------------------------------------------------------------------ the language
BASE = {
    "figure": "tiny",
    "title": "tiny",
    "base": {"algorithm": "fedavg", "selector": "bherd", "train": {"rounds": 6}},
    "curves": [
        {"label": "α=0.4", "set": {"bherd.alpha": 0.4}},
        {"label": "α=0.5", "set": {"bherd.alpha": 0.5}},
        {"label": "α=0.5 again", "set": {"bherd.alpha": 0.5, "bherd.scale": "E_over_alpha"}},
    ],
    "seeds": [0, 1],
    "profiles": {"paper": {}, "quick": {}, "smoke": {}},
}
GOOD = {
    "id": "a04-faster",
    "text": "α=0.4 is faster than α=0.5",
    "kind": "faster",
    "measure": "loss_auc",
    "curve": "α=0.4",
    "versus": "α=0.5",
    "margin": 0.05,
}


def _load(tmp_path, *claims, **changes) -> object:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**BASE, **changes, "claims": list(claims)}, allow_unicode=True))
    return load_spec(path)


def test_a_declared_claim_loads_and_names_its_parts(tmp_path):
    spec = _load(tmp_path, GOOD, {**GOOD, "id": "b", "kind": "equivalent", "margin": 0.01})
    assert [c.id for c in spec.claims] == ["a04-faster", "b"]
    assert spec.claim_texts == ["α=0.4 is faster than α=0.5"] * 2
    assert claim_problem(spec.claims) == ""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "fastr"}, "kind"),
        ({"curve": "α=0.45"}, "curve: unknown curve 'α=0.45' (did you mean"),
        ({"versus": "α=0.4"}, "compares curve 'α=0.4' with itself"),
        ({"margin": -0.05}, "margin: -0.05 has the wrong sign for kind 'faster'"),
        ({"kind": "equivalent", "margin": 0}, "wrong sign for kind 'equivalent'"),
        ({"fails_below": 0.1}, "fails_below: 0.1 with holds 'above', margin 0.05; allowed: a"),
        ({"panels": ["data.partition=case9"]}, "panel 'data.partition=case9'"),
        ({"id": "Not A Slug"}, "is not a slug"),
        ({"versus": {"set": {"bherd.alpha": 0.7}}}, "no curve sets {set: bherd.alpha=0.7}"),
        ({"kind": "monotone"}, "over: kind 'monotone' needs"),
        ({"reading": "speed"}, "reading: 'speed' on the claim's own comparison"),
        (
            {"and": [{"kind": "faster", "measure": "loss_auc", "margin": 0, "reading": "a b"}]},
            "reading",
        ),
    ],
)
def test_claim_errors_stop_the_spec_in_one_line(tmp_path, change, message):
    with pytest.raises(SpecError) as err:
        _load(tmp_path, {**GOOD, **change})
    assert message in str(err.value)
    assert "claims" in str(err.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"measure": "loss_acu"}, "unknown measure 'loss_acu' (did you mean 'loss_auc'?)"),
        ({"measure": "final_acc"}, "is not a speed measure"),
        ({"kind": "higher", "measure": "bherd.client_distance_gap"}, "measures a panel"),
        ({"leave_out": ["bherd.never_updatd"]}, "did you mean 'bherd.never_updated'?"),
    ],
)
def test_measure_and_guard_errors_before_anything_runs(tmp_path, change, message):
    spec = _load(tmp_path, {**GOOD, **change})
    problem = claim_problem(spec.claims)
    assert message in problem and "\n" not in problem


def test_identical_configs_are_degenerate_not_judged():
    """Two curves that set different overrides but run the same config (the default scale set
    explicitly) are one computation: not judged."""
    curves = [
        D.curve("A", selector="bherd", bherd__alpha=0.5),
        D.curve("B", selector="bherd", bherd__alpha=0.5, bherd__scale="E_over_alpha"),
    ]
    claim = Claim.model_validate({**GOOD, "curve": "A", "versus": "B"})
    data = D.runs(curves, {(None, c.label, "test_loss"): D.decay(1.0) for c in curves})
    (check,) = JV.judge_claims([claim], data)
    assert check.verdict == "not-testable" and check.label.startswith("degenerate")
    assert check.evidence == ()


def test_min_seeds_and_resolution_are_declared_semantics():
    curves = [D.curve("α=0.4", bherd__alpha=0.4), D.curve("α=0.5", bherd__alpha=0.5)]
    hs = {
        (None, "α=0.4", "test_loss"): D.decay(0.8, k=1),
        (None, "α=0.5", "test_loss"): D.decay(1.0),
    }
    claim = Claim.model_validate(GOOD)
    # without BHerd selected, α is never read: the two curves are one computation
    (check,) = JV.judge_claims([claim], D.runs(curves, hs))
    assert check.label.startswith("degenerate")
    data = D.runs(curves, hs, base={"selector": "bherd"})
    assert JV.judge_claims([claim], data)[0].verdict == "supported"
    strict = claim.model_copy(update={"min_seeds": 6})
    (check,) = JV.judge_claims([strict], data)
    assert check.verdict == "inconclusive" and "fewer than the 6" in check.numbers
    coarse = claim.model_copy(update={"resolution": 0.5})  # a 20% gain below the floor
    (check,) = JV.judge_claims([coarse], data)
    # the margin is at least the resolution and the interval at least ± it: a gain smaller
    # than the measure can show decides nothing (issue 51, item 3)
    assert check.verdict == "inconclusive" and check.evidence[0]["threshold"] == 0.5
    assert check.evidence[0]["floor"] == 0.5 and check.evidence[0]["ci_low"] < 0
    legacy = coarse.model_copy(update={"strict": False})  # the margin alone, as migrated
    (check,) = JV.judge_claims([legacy], data)
    assert check.verdict == "contradicted" and "floor" not in check.evidence[0]


def test_report_rows_carry_id_verdict_effect_interval_margin_seeds():
    from dashboards.model import FigureResult

    claim = declared("bherd-fig4e", "rr-differs-little")
    cs = [
        D.curve(f"Case {i}, {o}", data__partition=f"case{i}", train__order=k)
        for i in (1, 2, 3)
        for o, k in (("RR", "rr"), ("no RR", "fixed"))
    ]
    checks = JV.judge_claims([claim], D._rr_data(seeds=5, curves=cs))
    result = FigureResult("bherd-fig4e", "t", "quick", None, [0], [0], 6, 6, claims=checks)
    (row,) = claim_rows([result])
    assert row["id"] == "rr-differs-little" and row["verdict"] == "supported"
    assert row["margin"] == 0.01 and row["seeds"] == 5
    assert row["ci_low"] < row["effect"] < row["ci_high"]
    assert row["paper_words"].startswith("“we can see that in Case 1-3")


# ------------------------------------------------------------------------ the how-to's study
def test_own_claims_example_parses_and_validates(tmp_path):
    path = tmp_path / "my-study.yaml"
    path.write_text(own_example())
    spec = load_spec(path)
    assert spec.extends == "bherd-fig4e"
    kinds = {c.kind for c in spec.claims}
    assert len(spec.claims) >= 2 and len(kinds) >= 2
    assert all(isinstance(c, Claim) and c.id for c in spec.claims)
    assert claim_problem(spec.claims) == ""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("margin: 0.05", "margin: -0.05", "wrong sign"),
        ("kind: faster", "kind: fastest", "kind"),
    ],
)
def test_own_claims_example_errors(tmp_path, old, new, message):
    text = own_example()
    assert old in text
    path = tmp_path / "my-study.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(SpecError, match=message):
        load_spec(path)


# The how-to's study swept and reported as the how-to says, on the quick start's store (so that
# it reuses Fig. 4e's runs): tests/test_quickstart.py,
# test_own_claims_example_reuses_the_quick_starts_runs_and_reports
