"""Verdicts as statistics (fedsweep/judge/stats.py): per-seed effects, a 95% t interval, four
verdicts; a clear effect turns from inconclusive to supported as seeds are added, pure noise
stays inconclusive, and no verdict is decided while its interval contains its threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedsweep.judge.evidence import evidence_row
from fedsweep.judge.stats import (
    INTERVAL_METHOD,
    Measure,
    claim_seeds_needed,
    confidence,
    current_level,
    decide,
    holm,
    interval,
    interval_method,
    look_level,
    p_values,
    paired,
    part_seeds_needed,
    seeds_needed,
    t_quantile,
)

FASTER = Measure("loss-AUC reduction of B against A, per seed", 0.0, "greater")
MATCHES = Measure("final accuracy B − A, per seed", 0.01, "within")
FEW_BELOW = Measure("share of rounds below the bound, per seed", 0.05, "less")


def test_the_interval_by_hand():
    ev = interval([0.03, 0.05, 0.07], seeds=[0, 1, 2])
    half = t_quantile(2) * 0.02 / math.sqrt(3)  # s = 0.02
    assert math.isclose(ev.mean, 0.05)
    assert math.isclose(ev.ci_low, 0.05 - half) and math.isclose(ev.ci_high, 0.05 + half)
    assert interval([0.4]).ci_low == -math.inf  # one seed: no interval
    assert decide(interval([0.4]), FASTER) == "inconclusive"
    assert t_quantile(1) == pytest.approx(12.7062) and t_quantile(1000) == pytest.approx(
        1.96, abs=1e-3
    )


def test_a_clear_effect_becomes_supported_as_seeds_are_added():
    """Effect 0.05 ± 0.02 per seed: two seeds cannot decide (t_{0.975,1} = 12.7), ten do."""
    signs = [1, -1] * 5
    verdicts = {}
    for n in (2, 3, 10):
        effects = [0.05 + 0.02 * s for s in signs[:n]]
        verdicts[n] = decide(interval(effects), FASTER)
    assert verdicts == {2: "inconclusive", 3: "inconclusive", 10: "supported"}


def test_pure_noise_stays_inconclusive_however_many_seeds():
    noise = np.random.default_rng(20261125).normal(0.0, 0.05, size=30)
    for n in range(2, 31):
        assert decide(interval(noise[:n]), FASTER) == "inconclusive", n


def test_contradicted_and_equivalence():
    slower = [-0.05, -0.06, -0.04, -0.05, -0.055]
    assert decide(interval(slower), FASTER) == "contradicted"
    same = [0.001, -0.002, 0.0, 0.002, -0.001]
    assert decide(interval(same), MATCHES) == "supported"  # inside ±0.01
    differ = [0.05, 0.06, 0.055, 0.045]
    assert decide(interval(differ), MATCHES) == "contradicted"  # beyond +0.01
    assert decide(interval([0.0, 0.0, 0.0]), FEW_BELOW) == "supported"
    assert decide(interval([0.3, 0.25, 0.35]), FEW_BELOW) == "contradicted"


def test_no_decision_while_the_interval_contains_the_threshold():
    rng = np.random.default_rng(7)
    for measure in (FASTER, MATCHES, FEW_BELOW):
        for _ in range(400):
            n = int(rng.integers(2, 8))
            ev = interval(rng.normal(rng.normal(0, 0.05), 0.03, size=n))
            verdict = decide(ev, measure)
            edges = (
                [-measure.threshold, measure.threshold]
                if measure.direction == "within"
                else [measure.threshold]
            )
            if any(ev.ci_low <= t <= ev.ci_high for t in edges):
                assert verdict == "inconclusive", (ev, measure)


def test_paired_differences_use_the_common_seeds():
    seeds, diffs = paired({0: 1.0, 1: 2.0, 2: 3.0}, {1: 2.5, 2: 2.0, 3: 9.0})
    assert seeds == [1, 2] and diffs == [0.5, -1.0]


@pytest.mark.parametrize(
    ("low", "high"),
    [
        ({0: 5.0, 1: 3.0, 2: 3.0}, {0: 5.0, 1: 3.0, 2: 3.0}),
        ({0: 5.0, 1: 5.0, 2: -math.inf}, {0: 5.0, 1: 5.0, 2: -5.0}),
        ({0: 10.0, 1: 9.0, 2: 10.0}, {0: math.inf, 1: math.inf, 2: math.inf}),
        ({0: -math.inf, 1: -9.0, 2: -8.0}, {0: -3.0, 1: -9.0, 2: -8.0}),
        ({0: -math.inf, 1: -math.inf}, {0: math.inf, 1: math.inf}),
        ({0: 4.0, 1: 5.0, 2: 4.5}, {0: 4.0, 1: math.inf, 2: 4.5}),
    ],
)
def test_a_censored_part_is_decided_by_its_bounds(low, high):
    """Rounds to a target not reached within T are bounds: the part's verdict is bounded()'s,
    and its evidence row never reads decided while its interval contains the threshold."""
    from fedsweep.judge.evidence import Bounds, Part, bounded, decide_part

    measure = Measure("rounds of the baseline − ours, per seed", 0.0, "greater")
    verdict, row, _ = decide_part(Part("level", Bounds(low, high), measure))
    assert verdict == bounded(low, high, measure)[0] == row["verdict"]
    lo = -math.inf if row["ci_low"] is None else row["ci_low"]
    hi = math.inf if row["ci_high"] is None else row["ci_high"]
    if verdict != "inconclusive":
        assert not lo <= 0.0 <= hi


def test_a_blocked_part_is_inconclusive_whatever_its_interval():
    from fedsweep.judge.evidence import Part, decide_part

    measure = Measure("accuracy gain, per seed", 0.01, "greater")
    ev = interval([0.2, 0.21, 0.19], [0, 1, 2])
    verdict, row, text = decide_part(Part("FedWalk", ev, measure, "grid not converged: widen it"))
    assert verdict == row["verdict"] == "inconclusive" and row["why"].startswith("grid not")
    assert "the interval alone: supported" in text


# ------------------------------------------------------------------- issue 51's building blocks
def test_other_levels_use_the_student_t_quantile_and_95_keeps_the_table():
    assert t_quantile(4) == 2.7764  # the table every report so far used, unchanged
    assert t_quantile(4, 0.99) == pytest.approx(4.6041, abs=1e-4)
    assert t_quantile(10, 0.90) == pytest.approx(1.8125, abs=1e-4)
    wide = interval([0.03, 0.05, 0.07], level=0.99)
    assert wide.ci_low < interval([0.03, 0.05, 0.07]).ci_low
    with pytest.raises(ValueError):
        t_quantile(3, 1.0)


@pytest.mark.parametrize("measure", [FASTER, FEW_BELOW, MATCHES], ids=lambda m: m.direction)
def test_one_sided_p_values_give_the_interval_s_verdict(measure):
    """Each side at 0.025 is the test the 95% interval inverts: p < 0.025 exactly where the
    interval decides (cases far from the boundary, so no rounding of the t table decides)."""
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(300):
        n = int(rng.integers(2, 12))
        centre = 0.0 if measure.direction == "within" else measure.threshold
        effects = rng.normal(centre + rng.uniform(-0.05, 0.05), rng.uniform(0.001, 0.05), n)
        ev = interval(effects)
        verdict = decide(ev, measure)
        support, contradict = p_values(ev, measure)
        if min(abs(support - 0.025), abs(contradict - 0.025)) < 1e-3:
            continue  # too near the boundary for the 4-digit table
        assert (support < 0.025) == (verdict == "supported"), (effects, support)
        assert (contradict < 0.025) == (verdict == "contradicted"), (effects, contradict)
        seen.add(verdict)
    assert seen == {"supported", "contradicted", "inconclusive"}


def test_holm_steps_down_and_stops_at_the_first_kept_hypothesis():
    assert holm([0.01, 0.04, 0.03, 0.005], alpha=0.05) == [True, False, False, True]
    assert holm([0.02, 0.02], alpha=0.05) == [True, True]  # 0.02 <= 0.025, then <= 0.05
    assert holm([0.03, 0.001], alpha=0.05) == [True, True]
    # 0.001 <= 0.05/3; 0.03 > 0.05/2 stops it: 0.045 is kept although it is <= 0.05
    assert holm([0.045, 0.03, 0.001], alpha=0.05) == [False, False, True]
    assert holm([0.06, 0.001], alpha=0.05) == [False, True]
    assert holm([], alpha=0.05) == []


def test_seeds_needed_at_the_observed_spread():
    ev = interval([0.0, 1.0, 2.0])  # mean 1, sd 1, threshold 0
    assert decide(ev, FASTER) == "inconclusive"
    # t_{0.975,5} / sqrt(6) = 1.049 > 1, t_{0.975,6} / sqrt(7) = 0.925 < 1
    assert seeds_needed(ev, FASTER) == 7
    assert seeds_needed(ev, FASTER, floor=1.5) is None  # the resolution never lets it decide
    assert seeds_needed(interval([-1.0, 0.0, 1.0]), FASTER) is None  # the mean on the threshold
    decided = interval([0.9, 1.0, 1.1])
    assert decide(decided, FASTER) == "supported" and seeds_needed(decided, FASTER) == 3
    assert seeds_needed(interval([0.5]), FASTER) is None
    # an equivalence decides only when its mean lies inside the margin (or far outside)
    assert seeds_needed(interval([0.002, 0.004, 0.006, 0.0]), MATCHES) is not None
    assert seeds_needed(interval([0.0095, 0.0105, 0.0100]), MATCHES, cap=50) is None


def test_the_sequential_rule_splits_the_error_over_the_looks():
    assert look_level(1) == 0.95 and look_level(5) == pytest.approx(0.99)
    with pytest.raises(ValueError):
        look_level(0)


def test_a_block_judged_at_another_level():
    """``confidence`` sets the level of every interval (and Holm's alpha) inside it, and the
    interval's words say it; outside, 95% and the words every report used."""
    at95 = interval([0.03, 0.05, 0.07])
    with confidence(0.99):
        assert current_level() == 0.99 and interval_method().startswith("two-sided 99% ")
        at99 = interval([0.03, 0.05, 0.07])
        assert holm([0.002, 0.004]) == [True, True] and holm([0.002, 0.0051]) == [True, False]
    assert at99.ci_low < at95.ci_low and at99.ci_high > at95.ci_high
    assert current_level() == 0.95 and interval_method() == INTERVAL_METHOD
    assert interval([0.03, 0.05, 0.07]) == at95
    with pytest.raises(ValueError), confidence(1.0):
        pass


def test_seeds_needed_from_a_claim_s_evidence_rows():
    """A report row carries its parts' evidence (effect, interval, seeds, threshold, side): the
    spread comes back from the interval's width, and a claim is decided by the fewer seeds of
    its two ways (every undecided part supported, or one part contradicted)."""
    unsure = evidence_row("Case 1", interval([0.0, 1.0, 2.0]), FASTER)  # needs 7 (above)
    assert unsure["verdict"] == "inconclusive" and part_seeds_needed(unsure) == 7
    sure = evidence_row("Case 2", interval([0.9, 1.0, 1.1]), FASTER)
    assert claim_seeds_needed([sure, unsure]) == 7
    assert claim_seeds_needed([sure]) is None  # decided
    against = evidence_row("Case 3", interval([-1.5, -0.5, 0.5]), FASTER)  # mean -0.5
    needed_against = part_seeds_needed(against)
    assert needed_against is not None and needed_against > 7
    # one part on the failing side: contradicting it is one way, supporting both the other
    assert claim_seeds_needed([unsure, against]) == needed_against
    noisy = evidence_row("Case 4", interval([-1.0, 0.0, 1.0]), FASTER)  # mean on the threshold
    assert part_seeds_needed(noisy) is None and claim_seeds_needed([unsure, noisy]) is None
    assert claim_seeds_needed([noisy, against]) == needed_against
    lone = evidence_row("Case 5", interval([0.4]), FASTER)
    assert part_seeds_needed(lone) is None
