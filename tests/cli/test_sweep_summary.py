"""The metrics table at the end of ``fedsweep sweep`` (``fedsweep.sweep.summary``): a real tiny
sweep of two figures (real Ray Tune, real MLflow sqlite store), the second reusing the first's
runs, at 80 columns. Each row's seed count and means are checked against the runs' own logged
values, read back independently (one run at a time, through MLflow's client)."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.sweep.summary import Stat, figure_summary, value_text
from fedsweep.tracking.connect import get_client
from tests.helpers import small_spec, write_yaml


def write_spec(folder: Path, name: str, alphas, seeds=(0, 1)) -> Path:
    spec = small_spec(
        name,
        title="summary test",
        alphas=alphas,
        seeds=seeds,
        rounds=2,
        eval_={"train_metrics": True, "test_subset": 200},
        max_failures=0,
    )
    return write_yaml(folder / f"{name}.yaml", spec)


def logged(client, figure: str) -> dict[str, dict[str, list[float]]]:
    """curve -> metric -> the values of the figure's runs (final test acc, best test acc,
    final train loss), read run by run."""
    experiment = client.get_experiment_by_name(figure)
    out: dict[str, dict[str, list[float]]] = {}
    for run in client.search_runs([experiment.experiment_id]):
        tags = run.data.tags
        if tags.get("fedsweep.kind") == "sweep" or tags.get("fedsweep.status") != "finished":
            continue
        history = client.get_metric_history(run.info.run_id, "test_acc")
        row = out.setdefault(run.data.tags["fedsweep.curve"], {})
        row.setdefault("final_test_acc", []).append(run.data.metrics["test_acc"])
        row.setdefault("best_test_acc", []).append(max(m.value for m in history))
        row.setdefault("final_train_loss", []).append(run.data.metrics["train_loss"])
    return out


@pytest.mark.slow
def test_sweep_ends_with_a_metrics_table_per_figure_in_80_columns(
    ray_session, tmp_path, monkeypatch
):
    write_spec(tmp_path, "sum-a", alphas=(0.5,))
    write_spec(tmp_path, "sum-b", alphas=(0.5,))  # the same configs: the first's runs, reused
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    # trials of 2 rounds: one Ray actor (a second one's start costs more than it saves)
    argv = ["sweep", "sum-a.yaml", "sum-b.yaml", "--profile", "smoke", "--max-concurrent", "1"]
    res = CliRunner().invoke(app, argv, env={"COLUMNS": "80"})
    out = res.stdout
    assert res.exit_code == 0, (res.output[-3000:], res.exception)
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80, "\n".join(ln for ln in lines if len(ln) > 80)

    client = get_client(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}", create=False)
    values = logged(client, "sum-a")
    assert list(values) == ["alpha=0.5"]
    for figure, curves in (("sum-a", ["alpha=0.5"]), ("sum-b", ["alpha=0.5"])):
        assert f"{figure} [smoke]: 2 of 2 trials have a run; mean ± std over seeds" in out
        summary = figure_summary(tmp_path / f"{figure}.yaml", "smoke")
        assert [(r.curve, r.seeds) for r in summary.rows] == [(c, 2) for c in curves]
        for row in summary.rows:
            for key in ("final_test_acc", "best_test_acc", "final_train_loss"):
                expected = values[row.curve][key]
                assert row.stats[key].n == 2
                assert row.stats[key].mean == pytest.approx(statistics.fmean(expected))
                assert row.stats[key].std == pytest.approx(statistics.stdev(expected))
            texts = [value_text(row.stats[k]) for k in ("final_test_acc", "best_test_acc")]
            texts.append(value_text(row.stats["final_train_loss"]))
            pattern = rf"\s*{re.escape(row.curve)}\s+2\s+" + r"\s+".join(map(re.escape, texts))
            assert any(re.fullmatch(pattern + r"\s*", ln) for ln in lines), (pattern, out)
    # the second figure ran nothing: its table holds the first's runs
    assert "[2/2] sum-b [smoke]: 0 run, 2 skipped, 0 shared, 0 failed of 2 trials" in out
    # what to do next: the exact commands (the default store: no --tracking-uri)
    assert "  fedsweep figures --figure sum-a.yaml --figure sum-b.yaml --profile smoke" in lines
    assert "  fedsweep ui" in lines


def test_value_text_and_stats():
    assert Stat.of([0.5, float("nan"), 0.7]) == Stat(
        pytest.approx(0.6), pytest.approx(0.1414, abs=1e-4), 2
    )
    assert Stat.of([float("nan")]) is None
    assert value_text(Stat(0.85234, 0.0123, 3)) == "0.8523 ± 0.0123"
    assert value_text(Stat(0.85234, 0.0, 1)) == "0.8523"
    assert value_text(None) == "-"
    assert value_text(Stat(12345.6, 10.0, 2)) == "1.235e+04 ± 10.0000"


def test_next_commands_name_the_figures_and_a_store_that_is_not_the_default(tmp_path, monkeypatch):
    from fedsweep.cli.sweep_run import next_commands

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "sweeps").mkdir()
    shipped = write_spec(tmp_path / "sweeps", "fig-a", alphas=(0.5,))
    own = write_spec(tmp_path, "mine", alphas=(0.5,))
    specs = [Path("sweeps/fig-a.yaml"), Path("mine.yaml")]
    assert shipped.is_file() and own.is_file()
    default = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    for uri in (None, default):
        assert next_commands(specs, ["fig-a", "mine"], "smoke", uri) == [
            "fedsweep figures --figure fig-a --figure mine.yaml --profile smoke",
            "fedsweep ui",
        ]
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert next_commands(specs[:1], ["fig-a"], "quick", other) == [
        f"fedsweep figures --figure fig-a --profile quick --tracking-uri {other}",
        f"fedsweep ui --tracking-uri {other}",
    ]
    # issue 48, item 17: a tracking server (team mode) serves its own UI at its real address
    server = "http://10.0.0.5:5001"
    assert next_commands(specs[:1], ["fig-a"], "quick", server)[1] == (
        "open http://10.0.0.5:5001/#/experiments  (the tracking server's MLflow UI)"
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server)  # as `team up` has it exported
    assert next_commands(specs[:1], ["fig-a"], "quick", None)[1].startswith(
        "open http://10.0.0.5:5001/#/experiments"
    )
    from fedsweep.cli.run import next_steps

    assert next_steps("abc", server)[1].strip().startswith("open http://10.0.0.5:5001/")
