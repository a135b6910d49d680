"""``bherd-diagnosis``'s report table (issue 35): the deviation per η and α with its interval over
seeds, the accuracy gap to FedAvg paired by seed, and the plain-words line per η."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from dashboards.papers.bherd.diagnosis import report_table, summary
from fedsweep.judge.panels import Panel


def long_table() -> pd.DataFrame:
    rows = []
    for seed, (dev, acc, ref) in enumerate(
        [(0.10, 0.80, 0.80), (0.12, 0.81, 0.80), (0.11, 0.79, 0.80)]
    ):
        for r in (1, 2):
            rows.append(("f", "p1", "α=0.1", seed, "x", r, "bherd_dev", dev * r))
            rows.append(("f", "p1", "α=0.1", seed, "x", r, "test_acc", acc - (2 - r) * 0.1))
            rows.append(("f", "p1", "FedAvg (RR)", seed, "y", r, "test_acc", ref - (2 - r) * 0.1))
    cols = ["figure", "panel_id", "curve", "seed", "run_id", "round", "metric", "value"]
    return pd.DataFrame(rows, columns=cols)


def test_summary_is_per_run_mean_deviation_and_paired_final_accuracy_gap():
    data = SimpleNamespace(long=long_table(), panels=[Panel("p1", "η=1e-4 (paper)")])
    table = summary(data).sort_values("seed")
    assert table["curve"].tolist() == ["α=0.1"] * 3  # the reference is no row of its own
    assert table["dev"].round(6).tolist() == [0.15, 0.18, 0.165]  # mean of rounds 1 and 2
    assert table["acc_gap"].round(6).tolist() == [0.0, 0.01, -0.01]  # the last round's, paired


def test_report_table_has_the_interval_and_says_nothing_moved():
    data = SimpleNamespace(long=long_table(), panels=[Panel("p1", "η=1e-4 (paper)")])
    text = report_table(data, "paper")
    assert "| η | α=0.1 |" in text
    row = next(line for line in text.splitlines() if line.startswith("| η=1e-4 (paper) |"))
    assert row.startswith("| η=1e-4 (paper) | 0.165 [0.128, 0.202]<br>Δacc 0 [")
    assert "deviates from FedAvg's by 16.5%–16.5%" in text
    assert "no α's final accuracy differs from FedAvg's by more than 0.01" in text
