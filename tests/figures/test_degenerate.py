"""Comparisons that cannot differ (issue 51, item 5; fedsweep/judge/degenerate.py): two curves whose
runs computed the same test losses on every seed and round (to float rounding) are named as the
same computation; one rounding-level difference is still the same, a real difference is not."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fedsweep.judge.degenerate import TOLERANCE, same_computation
from fedsweep.judge.runs import ClaimData


def _data(curves: dict[str, dict[int, list[float]]]) -> ClaimData:
    rows = [
        {"panel_id": "p", "curve": curve, "seed": seed, "run_id": f"{curve}-{seed}",
         "round": r, "metric": "test_loss", "value": v}
        for curve, seeds in curves.items()
        for seed, values in seeds.items()
        for r, v in enumerate(values, 1)
    ]  # fmt: skip
    return ClaimData(agg=pd.DataFrame(), curves=[], panels=[], long=pd.DataFrame(rows))


def _losses(seed: int, scale: float = 1.0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(scale * np.exp(-np.linspace(0, 3, 50)) + 0.3 + 0.01 * rng.random(50))


def test_the_same_losses_on_every_seed_are_one_computation():
    same = {s: _losses(s) for s in (0, 1, 2)}
    rounded = {s: [v * (1 + 3e-16) for v in _losses(s)] for s in (0, 1, 2)}  # another order
    data = _data({"FedNova": rounded, "FedAvg": same})
    why = same_computation(data, "p", "FedNova", "FedAvg")
    assert why is not None and "on every seed and round" in why and "3 seeds, 150 values" in why
    assert same_computation(data, "p", "FedAvg", "FedAvg").endswith("compared with itself")


def test_a_real_difference_anywhere_is_not():
    base = {s: _losses(s) for s in (0, 1, 2)}
    other = {s: list(v) for s, v in base.items()}
    other[2][40] *= 1 + 100 * TOLERANCE  # one round of one seed
    assert same_computation(_data({"a": base, "b": other}), "p", "a", "b") is None
    scaled = {s: _losses(s, scale=1.001) for s in (0, 1, 2)}
    assert same_computation(_data({"a": base, "b": scaled}), "p", "a", "b") is None


def test_no_common_seed_or_different_rounds_says_nothing():
    a = {0: _losses(0)}
    assert same_computation(_data({"a": a, "b": {1: _losses(0)}}), "p", "a", "b") is None
    assert same_computation(_data({"a": a, "b": {0: _losses(0)[:30]}}), "p", "a", "b") is None
