"""The FedVeca figures (sweeps/fedveca-fig3..8.yaml, dashboards/papers/fedveca/): the declared
claims (their named measures and guard: ``fedsweep/judge/papers/fedveca.py``) on hand-built
per-seed runs (supported, contradicted and inconclusive cases each, and each claim's degenerate
case), and the six builders on a real MLflow sqlite store of hand-logged runs (no training, no
Ray), derived baselines resolved from their FedVeca runs as the sweep does."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
import yaml

from dashboards import BUILDERS, build_figures
from dashboards.papers.fedveca import figures as fedveca
from fedsweep.judge import runs as JR
from fedsweep.judge import verdicts as JV
from fedsweep.judge.check import claim_problem
from fedsweep.judge.claim import judge_claim
from fedsweep.judge.panels import Panel
from fedsweep.judge.papers import fedveca as M
from fedsweep.judge.runs import aggregate
from fedsweep.judge.store import RunIndex, resolve_derived
from fedsweep.specs.claims import Claim
from fedsweep.specs.figure import figure_plan
from fedsweep.specs.load import CurveSpec, DeriveSpec, Trial, expand, load_spec, read_spec
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.store import ensure_experiment
from tests.helpers import log_config, migrated_claim, stand_in_for_paper

ROOT = Path(__file__).resolve().parents[2]

SWEEPS = ROOT / "sweeps"
FIGURES = [f"fedveca-fig{i}" for i in range(3, 9)]
T = 12  # rounds of every hand-made curve (≥ MIN_ROUNDS: the verdicts are testable)


def claim(claim_id: str) -> Claim:
    """The declared claim ``claim_id`` of a FedVeca spec, as migrated (``strict: false``,
    min_seeds 2, the migrated margins: tests/helpers.migrated_claim): these scenarios test the
    paper's criteria; tests/figures/test_margins.py and test_strict.py test issue 51's rules."""
    for figure in FIGURES:
        if any(c.id == claim_id for c in read_spec(SWEEPS / f"{figure}.yaml").claims):
            return migrated_claim(figure, claim_id)
    raise KeyError(claim_id)


def judge(claim_id: str, data: JR.ClaimData) -> JR.Result:
    """The declared claim's own verdict and numbers on ``data`` (before the not-testable rules)."""
    return judge_claim(claim(claim_id), data)


# ------------------------------------------------------------------------------ curves
def cv(label: str, derive_from: str | None = None, **kv) -> CurveSpec:
    """A curve spec; ``derive_from`` makes it a derived curve (fixed steps = mean_tau)."""
    derive = None
    if derive_from is not None:
        derive = DeriveSpec(**{"from": derive_from, "set": {"fixed_steps.steps": "mean_tau"}})
    return CurveSpec(
        label=label, set={k.replace("__", "."): v for k, v in kv.items()}, derive=derive
    )


def loss_curve(hit: int, bumps: int = 0, high: float = 0.6, low: float = 0.25) -> list[float]:
    """``high`` until round ``hit``, then ``low``; the last ``2 * bumps`` rounds alternate
    ``low + 0.02`` / ``low`` (``bumps`` rises of the loss)."""
    ys = [high if t < hit else low for t in range(1, T + 1)]
    for k in range(bumps):
        ys[T - 2 * k - 2] = low + 0.02
    return ys


def acc_of(loss: list[float]) -> list[float]:
    return [1.2 - v for v in loss]  # 0.6 -> 0.6, 0.25 -> 0.95 (≥ the centralized 0.90)


def long_rows(series: dict[tuple[str, str, int, str], list[float]], start: int = 1):
    """Long table from {(panel_id, curve, seed, metric): values from round ``start``}."""
    rows = [
        ("f", pid, label, seed, f"{pid}-{label}-{seed}", t, metric, v)
        for (pid, label, seed, metric), ys in series.items()
        for t, v in enumerate(ys, start=start)
    ]
    cols = ["figure", "panel_id", "curve", "seed", "run_id", "round", "metric", "value"]
    return pd.DataFrame(rows, columns=cols)


def make(curves, series, panels, start: int = 1) -> JR.ClaimData:
    """ClaimData whose seed means are aggregated from per-run ``series`` (see ``long_rows``)."""
    long = long_rows(series, start)
    return JR.ClaimData(aggregate(long), curves, panels, long=long)


SETTING = [Panel("setting=svm-mnist", "SVM, MNIST", {"model.name": "svm"})]
FIG3 = [
    cv("Centralized SGD", "FedVeca", algorithm="centralized", step_policy="fixed"),
    cv("FedAvg", "FedVeca", algorithm="fedavg", step_policy="fixed"),
    cv("FedNova", "FedVeca", algorithm="fednova", step_policy="fixed"),
    cv("FedVeca"),
]


def fig3_data(hits: dict[str, list[int | None]], panels=SETTING) -> JR.ClaimData:
    """Per seed (one list entry each) the centralized run at loss 0.30 / acc 0.90 (one round)
    and each method reaching it at ``hits[method][seed]`` (None: never within T)."""
    series = {}
    for p in panels:
        pid = p.panel_id
        for seed in range(len(hits["FedVeca"])):
            series[(pid, "Centralized SGD", seed, "test_loss")] = [0.30]
            series[(pid, "Centralized SGD", seed, "test_acc")] = [0.90]
            for label, per_seed in hits.items():
                hit = per_seed[seed]
                loss = loss_curve(hit) if hit is not None else [0.6] * T
                series[(pid, label, seed, "test_loss")] = loss
                series[(pid, label, seed, "test_acc")] = acc_of(loss)
    return make(FIG3, series, panels)


def reach(veca, avg, nova) -> str:
    data = fig3_data({"FedAvg": avg, "FedNova": nova, "FedVeca": veca})
    return judge("reaches-centralized-first", data)


def test_fedveca_reaches_first_per_seed():
    data = fig3_data({"FedAvg": [8, 9, 7], "FedNova": [None, 7, 8], "FedVeca": [3, 4, 4]})
    verdict, numbers = judge("reaches-centralized-first", data)
    assert verdict == "supported", numbers
    # per seed: min(8, >12) − 3 = 5, 7 − 4 = 3, 7 − 4 = 3 (FedNova's censoring does not matter)
    assert "L_c level effect 3.67 [" in numbers and "censored" not in numbers
    assert len(data.evidence) == 2 and data.evidence[0]["panel"] == "SVM, MNIST · L_c level"
    assert data.evidence[0]["effect"] == pytest.approx(11 / 3)
    assert data.evidence[1]["panel"] == "SVM, MNIST · A_c level"
    # the baselines are first in every seed
    assert reach([8, 9, 8], [3, 4, 4], [5, 5, 5])[0] == "contradicted"
    # noise: FedVeca first in one seed, last in another
    assert reach([4, 6, 5], [5, 4, 6], [6, 7, 5])[0] == "inconclusive"
    # two seeds, a clear but uneven lead: t_{0.975,1} = 12.7 cannot decide
    assert reach([3, 7], [8, 8], [9, 9])[0] == "inconclusive"
    # only FedVeca reaches the level: the baselines' rounds are > 12, so it is first anyway
    verdict, numbers = reach([3, 4, 3], [None] * 3, [None] * 3)
    assert verdict == "supported" and "censored" in numbers, numbers


def test_a_censored_fedveca_seed_cannot_be_supported():
    # FedVeca leads by 5 rounds in two seeds and never reaches the level in the third: its
    # rounds there are only known to be > 12, so the least favourable effect is −inf
    verdict, numbers = reach([3, 3, None], [8, 8, 8], [9, 9, 9])
    assert verdict == "inconclusive", numbers
    assert "censored: least favourable bounds effect -inf" in numbers
    # no method reaches the level (the quick profile's SVM panel): nothing is known
    assert reach([None] * 3, [None] * 3, [None] * 3)[0] == "inconclusive"
    # FedVeca never reaches and the baselines do in every seed: contradicted
    assert reach([None] * 3, [3, 4, 3], [5, 5, 5])[0] == "contradicted"


PREMISE = "premise-above-bound"
PHI = "phi-smooth-slow-fast-noisy"


def premise_data(runs: dict[int, list[float]]) -> JR.ClaimData:
    """FedVeca's premise per seed from round 2 (as logged) in two panels."""
    panels = [Panel("setting=svm", "SVM", {}), Panel("setting=cnn", "CNN", {})]
    series = {
        (p.panel_id, "FedVeca", seed, "premise"): ys for p in panels for seed, ys in runs.items()
    }
    return make([cv("FedVeca")], series, panels, start=2)


def test_the_premise_is_a_lower_bound():
    """The paper: "we set the value '1' as a lower bound" and the SVM values are "slightly
    smaller than the lower bound for the first few rounds": below 1 is the violation."""
    paper_like = {s: [0.8] * 4 + [1.5 + 0.1 * s] * 7 for s in range(3)}  # rounds 2-5 below
    verdict, numbers = judge(PREMISE, premise_data(paper_like))
    assert verdict == "supported", numbers  # rounds 2–5, all below 1, do not count
    assert "effect 0 [0, 0] (95% CI, 3 seeds)" in numbers
    # what the upper-bound reading called "yes" (every value below 1) violates it everywhere
    below = {s: [0.001 * 1.8**t for t in range(11)] for s in range(3)}  # max 0.357
    assert judge(PREMISE, premise_data(below))[0] == "contradicted"
    # two seeds, one below the bound in half its late rounds: the interval cannot decide
    mixed = {0: [1.5] * 11, 1: [1.5] * 4 + [0.5, 1.5] * 3 + [0.5]}
    verdict, numbers = judge(PREMISE, premise_data(mixed))
    assert verdict == "inconclusive", numbers
    data = premise_data(paper_like)
    data.long = data.long[data.long["metric"] != "premise"]
    assert judge(PREMISE, data)[0] == "n/a"


def test_a_statistical_claim_carries_its_evidence():
    checks = JV.judge_claims(
        [claim(PREMISE)], premise_data({s: [0.8] * 4 + [1.5] * 7 for s in range(3)})
    )
    (check,) = checks
    assert check.verdict == "supported" and len(check.evidence) == 2  # one row per panel
    assert check.id == PREMISE and check.claim == claim(PREMISE).summary
    row = check.evidence[0]
    assert (row["panel"], row["effect"], row["ci_low"], row["ci_high"]) == ("SVM", 0.0, 0.0, 0.0)
    assert (row["threshold"], row["seeds"]) == (0.05, [0, 1, 2])


METHODS = ("FedAvg", "FedNova", "FedVeca")
CASES = [
    Panel("data.partition=case1", "Case 1", {"data.partition": "case1"}),
    Panel("data.partition=case2", "Case 2", {"data.partition": "case2"}),
]
#: Case 1 where the three overlap in every seed: accuracies within 0.004, loss AUCs within 1.4%
OVERLAP = {
    "FedAvg": ([0.900, 0.902, 0.899], [0.300, 0.300, 0.300]),
    "FedNova": ([0.903, 0.901, 0.900], [0.303, 0.302, 0.304]),
    "FedVeca": ([0.899, 0.903, 0.901], [0.301, 0.304, 0.302]),
}
#: Case 2 where they differ clearly (accuracy spread ≈ 0.7, AUC spread ≈ 200%)
APART = {
    "FedAvg": ([0.10, 0.12, 0.11], [0.90, 0.91, 0.92]),
    "FedNova": ([0.50, 0.52, 0.49], [0.60, 0.62, 0.61]),
    "FedVeca": ([0.80, 0.81, 0.83], [0.30, 0.29, 0.31]),
}


def case_data(case1: dict, case2: dict) -> JR.ClaimData:
    """Per method (final accuracies per seed, flat loss = its AUC per seed) in each case."""
    series = {}
    for panel, values in zip(CASES, (case1, case2), strict=True):
        for label, (accs, aucs) in values.items():
            for seed, (acc, auc) in enumerate(zip(accs, aucs, strict=True)):
                series[(panel.panel_id, label, seed, "test_acc")] = [0.5] * (T - 1) + [acc]
                series[(panel.panel_id, label, seed, "test_loss")] = [auc] * T
    return make(FIG3, series, CASES)


def test_case1_overlap_per_seed():
    data = case_data(OVERLAP, APART)
    verdict, numbers = judge("case1-overlap", data)
    assert verdict == "supported", numbers
    assert "accuracy spread effect" in numbers and "loss-AUC spread effect" in numbers
    assert "no other panel shows the methods differing" not in numbers  # Case 2 shows it
    assert [row["panel"] for row in data.evidence] == [
        "Case 1 · accuracy spread",
        "Case 1 · loss-AUC spread",
    ]
    # FedNova 0.03 above the others in every seed: the accuracies do not overlap
    apart_acc = {**OVERLAP, "FedNova": ([0.933, 0.932, 0.930], OVERLAP["FedNova"][1])}
    assert judge("case1-overlap", case_data(apart_acc, APART))[0] == "contradicted"
    # FedVeca's loss AUC 10% below the others in every seed
    fast = {**OVERLAP, "FedVeca": (OVERLAP["FedVeca"][0], [0.27, 0.27, 0.27])}
    assert judge("case1-overlap", case_data(fast, APART))[0] == "contradicted"
    # two seeds, one overlapping, one 0.02 apart: the interval cannot decide
    two = {m: (accs[:2], aucs[:2]) for m, (accs, aucs) in OVERLAP.items()}
    two["FedVeca"] = ([0.899, 0.923], two["FedVeca"][1])
    assert judge("case1-overlap", case_data(two, APART))[0] == "inconclusive"


def test_case1_overlap_needs_the_methods_to_differ_somewhere():
    """Overlapping in Case 1 says nothing about the method if they overlap everywhere."""
    verdict, numbers = judge("case1-overlap", case_data(OVERLAP, OVERLAP))
    assert verdict == "inconclusive", numbers
    assert "no other panel shows the methods differing beyond the margins" in numbers
    # a diverged Case 2 run is no evidence that they differ
    data = case_data(OVERLAP, APART)
    data.diverged = {(CASES[1].panel_id, label): [(s, 5) for s in range(3)] for label in METHODS}
    assert judge("case1-overlap", data)[0] == "inconclusive"
    # without a Case 2 panel nothing shows that they can differ either
    data = case_data(OVERLAP, APART)
    data.panels = CASES[:1]
    assert judge("case1-overlap", data)[0] == "inconclusive"
    # ... but methods apart in Case 1 contradict the claim wherever else they overlap
    apart_acc = {**OVERLAP, "FedNova": ([0.933, 0.932, 0.930], OVERLAP["FedNova"][1])}
    verdict, numbers = judge("case1-overlap", case_data(apart_acc, OVERLAP))
    assert verdict == "contradicted" and "no other panel shows the methods" in numbers, numbers


PHIS = [cv(f"φ={p}", fedveca__phi=p) for p in (0.5, 0.05, 0.005)]
SLOW = [0.6 - 0.02 * t for t in range(T)]  # no rise, loss AUC 0.49


def phi_data(runs: dict[str, list[list[float]]]) -> JR.ClaimData:
    """Per φ the test-loss history of each seed."""
    series = {
        ("all", label, seed, "test_loss"): ys
        for label, per_seed in runs.items()
        for seed, ys in enumerate(per_seed)
    }
    return make(PHIS, series, [Panel("all", "", {})])


def test_phi_smooth_slow_per_seed():
    # φ=0.5 smooth and slow; φ=0.05 1 rise, AUC ≈ 0.34; φ=0.005 3 rises, AUC ≈ 0.28
    paper = {
        "φ=0.5": [SLOW] * 3,
        "φ=0.05": [loss_curve(4, 1), loss_curve(5, 1), loss_curve(4, 1)],
        "φ=0.005": [loss_curve(2, 3), loss_curve(2, 4), loss_curve(2, 3)],
    }
    data = phi_data(paper)
    verdict, numbers = judge(PHI, data)
    assert verdict == "supported", numbers
    assert "fedveca.fewest_loss_rises φ=0.5 0, φ=0.05 1, φ=0.005 3.333" in numbers
    assert "fedveca.largest_loss_auc φ=0.5 0.49," in numbers
    assert len(data.evidence) == 4 and data.evidence[0]["panel"] == "all · φ=0.5 fewest rises"
    # the quick profile's pattern: φ=0.5 smooth *and* fastest
    fast_big = {**paper, "φ=0.5": [loss_curve(2), loss_curve(2), loss_curve(1)]}
    verdict, numbers = judge(PHI, phi_data(fast_big))
    assert verdict == "contradicted", numbers
    assert "φ=0.5 slowest effect" in numbers
    # two seeds: the smallest φ the noisiest in one, φ=0.05 in the other
    mixed = {
        "φ=0.5": [SLOW] * 2,
        "φ=0.05": [loss_curve(4, 1), loss_curve(4, 3)],
        "φ=0.005": [loss_curve(2, 3), loss_curve(2, 1)],
    }
    verdict, numbers = judge(PHI, phi_data(mixed))
    assert verdict == "inconclusive", numbers
    assert "φ=0.005 most rises effect 0 [" in numbers


FIG8 = [
    cv("FedVeca N=5", data__num_clients=5),
    cv("FedVeca N=30", data__num_clients=30),
    cv("FedVeca N=50", data__num_clients=50),
    cv(
        "FedNova N=50",
        "FedVeca N=50",
        data__num_clients=50,
        algorithm="fednova",
        step_policy="fixed",
    ),
    cv(
        "FedAvg N=50", "FedVeca N=50", data__num_clients=50, algorithm="fedavg", step_policy="fixed"
    ),
]
#: loss AUC of ``loss_curve(hit)``: 1 → 0.25, 4 → 0.3375, 5 → 0.3667, 6 → 0.3958, 7 → 0.425,
#: 8 → 0.4542, 9 → 0.4833
BASELINES = {"FedNova N=50": [7, 8, 7], "FedAvg N=50": [8, 8, 9]}


def fig8_data(hits: dict[str, list[int]]) -> JR.ClaimData:
    """Per curve the round at which each seed's loss drops (``loss_curve``)."""
    series = {}
    for label, per_seed in hits.items():
        for seed, hit in enumerate(per_seed):
            series[("all", label, seed, "test_loss")] = loss_curve(hit)
            series[("all", label, seed, "test_acc")] = acc_of(loss_curve(hit))
    return make(FIG8, series, [Panel("all", "", {})])


def by_n(n5: list[int], n30: list[int], n50: list[int]) -> dict[str, list[int]]:
    return {"FedVeca N=5": n5, "FedVeca N=30": n30, "FedVeca N=50": n50} | BASELINES


def test_more_clients_do_not_converge_faster_per_seed():
    data = fig8_data(by_n([4, 4, 4], [5, 5, 6], [5, 5, 6]))
    verdict, numbers = judge("more-clients-not-faster", data)
    assert verdict == "supported", numbers
    assert [row["panel"] for row in data.evidence] == [
        "all · FedVeca N=30 − FedVeca N=5",
        "all · FedVeca N=50 − FedVeca N=5",
        "all · FedVeca N=50 − FedVeca N=30",
    ]
    # per seed (0.3375 − AUC_N=30) / 0.3375: twice −0.0864 (0.3667), once −0.1728 (0.3958)
    assert data.evidence[0]["effect"] == pytest.approx(-0.1152, abs=1e-4)
    # N=50 clearly faster than N=5 in every seed: (0.3375 − 0.25) / 0.3375 = 26% > 5%
    verdict, numbers = judge(
        "more-clients-not-faster", fig8_data(by_n([4, 4, 5], [4, 4, 5], [1, 1, 1]))
    )
    assert verdict == "contradicted", numbers
    # two seeds, N=50 much faster in one, slower in the other
    two = by_n([4, 4], [4, 4], [1, 5]) | {"FedNova N=50": [7, 8], "FedAvg N=50": [8, 8]}
    assert judge("more-clients-not-faster", fig8_data(two))[0] == "inconclusive"


def test_fedveca_n50_beats_the_baselines_per_seed():
    data = fig8_data(by_n([4, 4, 4], [5, 5, 5], [5, 5, 4]))
    verdict, numbers = judge("n50-beats-baselines", data)
    assert verdict == "supported", numbers
    assert "FedVeca N=50 − FedNova N=50 effect 0.179 [" in numbers
    assert "FedVeca N=50 − FedAvg N=50 effect 0.229 [" in numbers
    # FedNova is faster than FedVeca in every seed
    slow = by_n([4, 4, 4], [5, 5, 5], [8, 9, 8])
    assert judge("n50-beats-baselines", fig8_data(slow))[0] == "contradicted"
    # FedVeca ties FedNova in every seed: 0% is below the 5% margin of "faster"
    close = by_n([4, 4, 4], [5, 5, 5], [7, 8, 7]) | {"FedNova N=50": [7, 8, 7]}
    assert judge("n50-beats-baselines", fig8_data(close))[0] == "contradicted"
    # two seeds: FedVeca faster by 20% in one and slower in the other
    two = by_n([4, 4], [5, 5], [5, 9]) | {"FedNova N=50": [7, 8], "FedAvg N=50": [8, 8]}
    assert judge("n50-beats-baselines", fig8_data(two))[0] == "inconclusive"


# --------------------------------------------------------------------------- fig 6 (prose)
K6 = 60  # rounds of the hand-made Fig. 6 runs: the claims read rounds 6–50


def fig6_data(tau_k: dict[int, list[float]], w_change: dict[int, list[float]]) -> JR.ClaimData:
    """Per seed ``tau_k`` from round 1 and ``w_change`` from round 2 (as logged)."""
    rows = [
        long_rows({("all", "FedVeca", s, "tau_k"): ys for s, ys in tau_k.items()}),
        long_rows({("all", "FedVeca", s, "w_change"): ys for s, ys in w_change.items()}, 2),
    ]
    long = pd.concat(rows, ignore_index=True)
    return JR.ClaimData(aggregate(long), [cv("FedVeca")], [Panel("all", "", {})], long=long)


def oscillating(small: float, large: float) -> list[float]:
    """τ_init = 1, then alternating ``small`` / ``large`` (R1 on the SVM in Case 3)."""
    return [1.0] + [small if k % 2 else large for k in range(1, K6)]


def steady(base: float) -> list[float]:
    """τ_init = 1, then ``base`` + 0, 1, 2 in turn (|Δτ_k|/τ_k ≤ 2/base)."""
    return [1.0] + [base + k % 3 for k in range(1, K6)]


def geometric(start: float, rate: float) -> list[float]:
    return [start * rate**k for k in range(K6 - 1)]


FLAT_W = {s: geometric(0.1, 0.97) for s in range(3)}


def test_tau_k_oscillating_is_a_large_fluctuation():
    taus = {0: oscillating(5, 85), 1: oscillating(4, 80), 2: oscillating(6, 90)}
    data = fig6_data(taus, FLAT_W)
    verdict, numbers = judge("tau-k-steady", data)
    assert verdict == "contradicted", numbers
    # the median of |τ_k − τ_{k−1}| / τ_k alternates between ≈ 16 (5 → 85) and ≈ 0.94 (85 → 5)
    assert data.evidence[0]["effect"] > 1 and data.evidence[0]["seeds"] == [0, 1, 2]
    assert data.evidence[0]["threshold"] == M.TAU_STEADY == claim("tau-k-steady").margin


def test_tau_k_steady_is_no_large_fluctuation():
    verdict, numbers = judge(
        "tau-k-steady", fig6_data({s: steady(10 + s) for s in range(3)}, FLAT_W)
    )
    assert verdict == "supported", numbers  # the warm-up's jump from τ_init = 1 does not count
    # only rounds 6–50 count: an oscillation after round 50 (not drawn) does not
    late = {s: steady(10 + s)[:50] + oscillating(5, 85)[50:] for s in range(3)}
    assert judge("tau-k-steady", fig6_data(late, FLAT_W))[0] == "supported"
    # one seed: no interval
    verdict, numbers = judge("tau-k-steady", fig6_data({0: steady(10)}, {0: FLAT_W[0]}))
    assert verdict == "inconclusive" and "1 seed: no interval" in numbers
    # two seeds, one steady and one oscillating: the interval cannot decide
    two = {0: steady(10), 1: oscillating(5, 85)}
    assert judge("tau-k-steady", fig6_data(two, {s: FLAT_W[s] for s in two}))[0] == "inconclusive"


def test_w_change_trend():
    taus = {s: steady(10) for s in range(3)}
    shrinking = {s: geometric(0.3 + 0.05 * s, 0.95) for s in range(3)}
    verdict, numbers = judge("w-change-shrinks", fig6_data(taus, shrinking))
    assert verdict == "supported", numbers
    assert "effect -0.0513 [" in numbers  # ln 0.95 per round
    # rising 0.02 → 0.3 (our R1 run): contradicted
    rising = {s: geometric(0.02 + 0.002 * s, 1.055) for s in range(3)}
    verdict, numbers = judge("w-change-shrinks", fig6_data(taus, rising))
    assert verdict == "contradicted", numbers
    # oscillating around a rising trend still rises
    zigzag = {s: [v * (3 if k % 2 else 1) for k, v in enumerate(rising[s])] for s in range(3)}
    assert judge("w-change-shrinks", fig6_data(taus, zigzag))[0] == "contradicted"
    # one seed: no interval
    assert (
        judge("w-change-shrinks", fig6_data({0: taus[0]}, {0: shrinking[0]}))[0] == "inconclusive"
    )
    # the spec's declared claims reach the judge
    checks = JV.judge_claims(
        load_spec(SWEEPS / "fedveca-fig6.yaml").claims, fig6_data(taus, rising)
    )
    assert [(c.id, c.verdict) for c in checks] == [
        ("tau-k-steady", "supported"),
        ("w-change-shrinks", "contradicted"),
    ]


def test_the_fig6_claims_read_the_rounds_the_figure_draws():
    assert M.FIG6_ROUNDS == fedveca.FIRST_ROUNDS
    assert claim("tau-k-steady").after == claim("w-change-shrinks").after == M.FIG6_WARMUP


def test_every_fedveca_claim_quotes_the_paper():
    claims = [c for f in FIGURES for c in load_spec(SWEEPS / f"{f}.yaml").claims]
    assert len(claims) == 8
    for c in claims:
        assert c.text and c.where.startswith("Sec. IV-B") and c.summary, c.id


@pytest.mark.parametrize("figure", FIGURES)
def test_every_claim_is_declared_and_judged(figure):
    spec = load_spec(SWEEPS / f"{figure}.yaml")
    assert BUILDERS[figure].__module__ == "dashboards.papers.fedveca.figures"
    assert spec.claims and all(isinstance(c, Claim) for c in spec.claims)
    assert claim_problem(spec.claims) == ""


def test_claims_not_testable_on_short_curves():
    data = fig3_data({"FedAvg": [8, 9, 7], "FedNova": [None, 7, 8], "FedVeca": [3, 4, 4]})
    data.agg = data.agg[data.agg["round"] <= 3]
    [check] = JV.judge_claims([claim("reaches-centralized-first")], data)
    assert check.verdict == "not-testable" and check.shown == "not testable at this profile (T=3)"
    assert "L_c" in check.numbers and "centralized run's final test loss" in check.criterion


# ------------------------------------------------------------------------ builders (store)
def run_values(trial: Trial) -> dict[str, list[float]]:
    """Hand-made histories of a smoke trial, by its config (a config hash is logged once, so
    trials shared by several figures get the same values): centralized at 0.30 / 0.90 in one
    round; FedAvg and FedNova reach it at rounds 8 and 7, FedVeca at 4 (N=5; 5 at N=30 and
    N=50); φ=0.5 falls slowly and smoothly, φ=0.005 fast with bumps; in Case 1 all overlap."""
    cfg = trial.config
    if cfg.algorithm == "centralized":
        return {"test_loss": [0.30], "test_acc": [0.90]}
    if cfg.data.partition == "case1":
        loss = loss_curve(4)
    elif cfg.step_policy == "fixed":
        loss = loss_curve(8 if cfg.algorithm == "fedavg" else 7)
    elif cfg.fedveca.phi == 0.5:
        loss = [0.6 - 0.02 * t for t in range(T)]
    elif cfg.fedveca.phi == 0.005:
        loss = loss_curve(2, bumps=3)
    else:
        loss = loss_curve(4 if cfg.data.num_clients == 5 else 5, bumps=1)
    out = {"test_loss": loss, "test_acc": acc_of(loss)}
    if cfg.step_policy == "fedveca":
        out |= estimates(cfg.data.num_clients)
    return out


def estimates(n: int) -> dict[str, list[float]]:
    """FedVeca's logged estimates: per client τ, β, δ, A; per round τ_k, Σ τ and, from round 2
    (the lists below start at round 2: see ``log_trial``), w_change, β̂ and the premise."""
    out: dict[str, list[float]] = {"tau_total": [5.0 * n] * T, "tau_k": [5.0] * T}
    for i in range(n):
        out[f"client/{i}/tau"] = [1.0, 1.0] + [float(3 + i)] * (T - 2)
        out[f"client/{i}/beta"] = [10.0 + i] * T
        out[f"client/{i}/delta"] = [0.1 * (i + 1)] * T
        out[f"client/{i}/A"] = [0.01 * (10.0 + i) ** 2 * 0.1 * (i + 1)] * T
    out["premise"] = [0.5 * 1.7**t for t in range(T - 1)]  # 0.5 .. 101: > 2 decades, < 1 early
    out["beta_hat"] = [20.0] * (T - 1)
    out["w_change"] = [0.1] * (T - 1)
    return out


FROM_ROUND_2 = {"premise", "beta_hat", "w_change"}


def log_trial(client, exp: str, trial: Trial) -> None:
    """One finished run with the trial's tags and hand-made histories (no training)."""
    from mlflow.entities import Metric

    tags = {
        "fedsweep.config_hash": trial.config_hash,
        "fedsweep.figure": trial.figure,
        "fedsweep.status": "finished",
    }
    run = client.create_run(exp, tags=tags).info.run_id
    log_config(client, run, trial.config)
    metrics = [
        Metric(key, float(v), 0, t)
        for key, ys in run_values(trial).items()
        for t, v in enumerate(ys, start=2 if key in FROM_ROUND_2 else 1)
    ]
    client.log_batch(run, metrics=metrics)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One run per distinct smoke trial of the six figures (ordinary trials first, then the
    derived ones, resolved from the FedVeca runs as the sweep does), then the six figures."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('fedveca-store') / 'mlflow.db'}"
    client = get_client(uri)
    logged: set[str] = set()
    specs = {f: load_spec(SWEEPS / f"{f}.yaml") for f in FIGURES}
    for stage in (0, 1):
        for fid, spec in specs.items():
            exp = ensure_experiment(client, fid, uri)
            trials = expand(spec, "smoke")
            if stage:
                index = RunIndex.load(client)
                trials = resolve_derived(figure_plan(spec, "smoke"), index, client)
            for trial in trials:
                if (trial.derive is not None) == bool(stage) and trial.config_hash not in logged:
                    log_trial(client, exp, trial)
                    logged.add(trial.config_hash)
    out = tmp_path_factory.mktemp("fedveca-figures")
    # the hand-made smoke runs stand for the paper's (the smoke profile's data and horizon make
    # its regime "scaled" by the rule, where no claim is testable)
    sweeps = tmp_path_factory.mktemp("fedveca-sweeps")
    for fid in FIGURES:
        tree = yaml.safe_load((SWEEPS / f"{fid}.yaml").read_text())
        (sweeps / f"{fid}.yaml").write_text(yaml.safe_dump(stand_in_for_paper(tree)))
    results = build_figures(uri, "smoke", out, FIGURES, sweeps, png=False)
    return {r.figure_id: r for r in results}


@pytest.mark.slow
def test_fedveca_figures_build_with_the_r1_note(built):
    assert set(built) == set(FIGURES)
    for fid, r in built.items():
        assert r.status == "complete" and r.error is None, (fid, r.error, r.notes)
        sub = r.figure.layout.title.subtitle.text
        assert fedveca.R1_NOTE in sub and "docs/algorithms.md §5.5" in sub, fid
        assert "smoke profile" in sub


def test_fedveca_claims_on_the_built_figures(built):
    checks = {c.claim: c for fid in FIGURES for c in built[fid].claims}
    # one seed per panel at the smoke profile: no interval, so no decision either way
    assert {claim: c.verdict for claim, c in checks.items()} == {
        "FedVeca reaches the centralized loss and accuracy first": "inconclusive",
        "the premise stays above its lower bound after the first few rounds": "inconclusive",
        "in Case 1 all three overlap": "inconclusive",
        "the global step size tau_k shows no large fluctuation": "inconclusive",
        "the model change ||w_k - w_{k-1}|| becomes smaller as the rounds increase": (
            "inconclusive"
        ),
        "larger phi is smooth but slow, the smallest phi is fast but noisy": "inconclusive",
        "more clients do not converge faster": "inconclusive",
        "FedVeca at N=50 beats the baselines at N=50": "inconclusive",
    }, [c.numbers for c in checks.values()]
    # ... but the effects are measured and shown: FedVeca first by min(8, 7) − 4 = 3 rounds
    fig3 = checks["FedVeca reaches the centralized loss and accuracy first"].numbers
    assert "L_c level effect 3 (1 seed: no interval) → inconclusive" in fig3
    fig6 = checks["the global step size tau_k shows no large fluctuation"].numbers
    assert "all: effect 0 (1 seed: no interval) → inconclusive" in fig6  # τ_k = 5 throughout
    assert all(c.numbers.endswith("[τ rule R1 (our reconstruction)]") for c in checks.values())
    assert all(c.evidence for c in checks.values())


def test_derived_baselines_are_found_and_noted(built):
    r = built["fedveca-fig3"]
    assert r.runs == r.expected_runs == 12
    assert any(
        n.startswith("FedAvg [SVM, MNIST]: fixed_steps.steps = mean_tau of FedVeca's run: 5")
        for n in r.notes
    ), r.notes
    flat = [t for t in r.figure.data if t.name and t.name.startswith("Centralized SGD")]
    assert flat and all(len(set(t.y)) == 1 for t in flat if t.fill is None)


def scatter(fig: go.Figure, name: str) -> list:
    return [t for t in fig.data if t.type == "scatter" and (t.name or "").startswith(name)]


def test_fig4_premise_bound_and_blank_round_1(built):
    fig = built["fedveca-fig4"].figure
    bounds = scatter(fig, fedveca.BOUND_NAME)
    assert len(bounds) == 3 and all(list(t.y) == [1.0, 1.0] for t in bounds)
    assert sum(bool(t.showlegend) for t in bounds) == 1
    premise = [
        t for t in scatter(fig, "FedVeca") if t.fill is None and t.yaxis in ("y", "y2", "y3")
    ]
    assert len(premise) == 3
    assert all(min(t.x) == 2 and 1 not in list(t.x) for t in premise)  # round 1 blank
    assert fig.layout.xaxis.range[0] < 1  # ... but on the axis
    assert fig.layout.yaxis.type == "log"  # premise spans 0.5 .. 101
    assert fig.layout.yaxis4.type != "log"  # β̂ is constant
    assert "round 1 blank" in fig.layout.title.subtitle.text


def test_fig6_six_cells_one_line_per_client(built):
    r = built["fedveca-fig6"]
    fig = r.figure
    titles = [a.text for a in fig.layout.annotations]
    assert len(titles) == 6 and titles[0].startswith("(a) τ") and titles[5].startswith("(f) ‖w")
    clients = [t for t in fig.data if (t.name or "").startswith("Client")]
    assert len(clients) == 4 * 5  # τ, β, δ, A for 5 clients
    assert sum(bool(t.showlegend) for t in clients) == 5
    cell_a = [t for t in fig.data if t.xaxis == "x"]
    assert len(cell_a) == 5 and list(cell_a[4].y)[-1] == 7.0  # client 5: τ = 3 + 4
    w = [t for t in fig.data if t.xaxis == "x6"]
    assert len(w) == 1 and min(w[0].x) == 2  # ||w_k − w_{k−1}|| from round 2
    assert "one run: seed 0, rounds 1–12 of 12" in fig.layout.title.subtitle.text


@pytest.mark.slow
def test_smoke_sweep_of_every_fedveca_spec_through_ray_tune_and_the_figures(
    ray_session, tmp_path, monkeypatch
):
    """The six specs as a user runs them: one `fedsweep sweep` (Ray Tune, real MLflow store, the
    derived stage included), then the figure builders. (A second sweep scheduling nothing is
    tested on a smaller spec in tests/sweep/test_derived.py.)"""
    from typer.testing import CliRunner

    from fedsweep.cli.main import app

    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("FEDSWEEP_DATA_DIR", raising=False)  # CIFAR-10 panels: skipped offline
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    specs = [str(SWEEPS / f"{f}.yaml") for f in FIGURES]
    # trials of a few rounds: one Ray actor per fit, reused by every trial; a second one's
    # start costs more than it saves (this test, back to back: 211 s with two, 169 s with one,
    # 2026-11-28)
    args = ["sweep", *specs, "--profile", "smoke", "--tracking-uri", uri, "--max-concurrent", "1"]
    args += ["--data-dir", str(tmp_path / "data")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    client = get_client(uri)
    runs = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()])]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    derived = [r for r in children if "fedsweep.derived_from" in r.data.tags]
    assert derived and all(r.data.params.get("derived_from") for r in derived)
    assert all(r.data.tags["fedsweep.status"] == "finished" for r in children)
    out = tmp_path / "figures"
    results = build_figures(uri, "smoke", out, FIGURES, SWEEPS, png=False)
    assert sorted(r.figure_id for r in results) == sorted(FIGURES)
    for f in FIGURES:
        assert "reconstruction" in (out / f"{f}.html").read_text()
    index = (out / "index.html").read_text()
    assert all(f in index for f in FIGURES)
