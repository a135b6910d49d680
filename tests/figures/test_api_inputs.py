"""``fedsweep.api``'s inputs (issue 62, item 10): ``where=`` strings are read by a small grammar
of column comparisons and never run as code (``DataFrame.query`` ran
``@pd.io.common.os.system(...)``), and ``seeds=`` has the bound ``--seeds`` has (1000; a
``range(100000)`` built an 18 GB plan)."""

from __future__ import annotations

import time

import pandas as pd
import pytest

import fedsweep.api as api
from tests.helpers import small_spec, write_yaml


@pytest.fixture
def table() -> pd.DataFrame:
    """Rows shaped as :func:`fedsweep.api.runs` gives them (dotted config columns, NaN metrics
    of a missing run)."""
    return pd.DataFrame({
        "curve": ["FedAvg (RR)", "FedAvg", "FedAvg (RR)", "FedAvg"],
        "seed": [0, 1, 2, 3],
        "status": ["finished", "missing", "finished", "diverged"],
        "train.order": ["rr", "sgd", "rr", None],
        "bherd.alpha": [0.3, 0.3, 0.6, 0.6],
        "final_test_acc": [0.5, float("nan"), 0.9, 0.7],
    })  # fmt: skip


@pytest.mark.parametrize(
    ("where", "seeds"),
    [
        ("seed < 3", [0, 1, 2]),  # the documented example
        ("`train.order` == 'rr'", [0, 2]),  # a dotted column in backticks, as query took it
        ('train.order == "rr" and seed > 0', [2]),
        ("not (seed in [0, 1]) or curve == 'FedAvg'", [1, 2, 3]),
        ("`bherd.alpha` >= 0.5 & status != 'diverged'", [2]),
        ("~(seed == 0) | seed == 0", [0, 1, 2, 3]),
        ("final_test_acc > 0.6", [2, 3]),  # a NaN meets no comparison but !=
        ("train.order == None", [3]),
        ("seed not in [1, 2,]", [0, 3]),
        ("status in ['finished'] and (seed == 0 or seed == 2)", [0, 2]),
    ],
)
def test_where_strings_filter_by_column_comparisons(table, where, seeds):
    assert list(api._where(table, where)["seed"]) == seeds


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ("@pd.io.common.os.system('touch {marker}')", "unexpected '@' at position 0"),
        ("__import__('os').system('touch {marker}')", "unexpected '.' at position 16"),
        ("seed == 1 or (seed == 2", "expected ')' at position 23"),
        ("seed <", "a value (a number, a string, True, False, None) at position 6"),
        ("seed == 1 and", "a column name at position 13"),
        ("seed == 'a", "a string that is not closed at position 8"),
        ("seedz == 1", "unknown column 'seedz' at position 0 (did you mean 'seed'?)"),
        ("curve < 1", "its values cannot be compared with int"),
        ("seed == 1 seed", "the end (or and / or) at position 10"),
    ],
)
def test_a_bad_where_string_names_the_position_and_runs_nothing(table, tmp_path, where, words):
    marker = tmp_path / "ran"
    with pytest.raises(api.WhereError) as err:
        api._where(table, where.format(marker=marker))
    assert words in str(err.value), str(err.value)
    assert not marker.exists()


def test_where_strings_are_bounded_and_fast(table):
    """At most 64 comparisons and 2,000 characters (pandas' parser took tens of minutes over
    500 comparisons joined by ``and``); 64 is read at once."""
    many = " and ".join(f"seed != {i}" for i in range(65))
    with pytest.raises(api.WhereError, match="more than 64 comparisons"):
        api.parse_where(many)
    with pytest.raises(api.WhereError, match="at most 2000"):
        api.parse_where(" and ".join(["seed < 3"] * 500))
    deep = "(" * 40 + "seed < 3" + ")" * 40
    with pytest.raises(api.WhereError, match="nested deeper than 16"):
        api.parse_where(deep)
    start = time.monotonic()
    kept = api._where(table, " and ".join(f"seed != {i}" for i in range(10, 74)))
    assert len(kept) == 4 and time.monotonic() - start < 1.0


def test_seeds_have_the_bound_of_the_seeds_option(tmp_path, monkeypatch):
    """``seeds=`` over 1000 (``--seeds``' bound) is refused before any plan or store, naming
    the argument, the value and the bound; a range, a list, numpy integers are taken."""
    import numpy as np

    monkeypatch.chdir(tmp_path)
    spec = write_yaml(tmp_path / "tiny.yaml", small_spec("tiny", alphas=(0.5,)))
    missing = f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}"
    for function in (api.runs, api.curves, api.claims, api.figure):
        with pytest.raises(ValueError) as err:
            function(spec, "smoke", seeds=range(1001), tracking_uri=missing)
        assert "seeds: got 1001 seeds" in str(err.value) and "at most 1000" in str(err.value)
    for bad, words in [([0, -1], "seed -1"), ([True], "seed True"), ("0-9", "'0-9'"),
                       (iter(range(10**9)), "more than 1000")]:  # fmt: skip
        with pytest.raises(ValueError, match="seeds: got ") as err:
            api.runs(spec, "smoke", seeds=bad, tracking_uri=missing)
        assert words in str(err.value)
    assert api.checked_seeds(np.arange(3)) == [0, 1, 2]
    assert api.checked_seeds([3, 1, 1]) == [1, 3]


def test_a_bad_where_string_fails_before_the_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_yaml(tmp_path / "tiny.yaml", small_spec("tiny", alphas=(0.5,)))
    missing = f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}"
    with pytest.raises(api.WhereError, match="unexpected '@'"):
        api.runs(spec, "smoke", where="@pd.io.common.os.system('true')", tracking_uri=missing)
