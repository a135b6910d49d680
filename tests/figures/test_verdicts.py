"""Verdicts as statistics (dashboards/verdicts.py): per-seed effects, a 95% t interval, four
verdicts; a clear effect turns from inconclusive to supported as seeds are added, pure noise
stays inconclusive, and no verdict is decided while its interval contains its threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dashboards.verdicts import Measure, decide, interval, paired, t_quantile

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
    from dashboards.claims import Bounds, Part, bounded, decide_part

    measure = Measure("rounds of the baseline − ours, per seed", 0.0, "greater")
    verdict, row, _ = decide_part(Part("level", Bounds(low, high), measure))
    assert verdict == bounded(low, high, measure)[0] == row["verdict"]
    lo = -math.inf if row["ci_low"] is None else row["ci_low"]
    hi = math.inf if row["ci_high"] is None else row["ci_high"]
    if verdict != "inconclusive":
        assert not lo <= 0.0 <= hi


def test_a_blocked_part_is_inconclusive_whatever_its_interval():
    from dashboards.claims import Part, decide_part

    measure = Measure("accuracy gain, per seed", 0.01, "greater")
    ev = interval([0.2, 0.21, 0.19], [0, 1, 2])
    verdict, row, text = decide_part(Part("FedWalk", ev, measure, "grid not converged: widen it"))
    assert verdict == row["verdict"] == "inconclusive" and row["why"].startswith("grid not")
    assert "the interval alone: supported" in text
