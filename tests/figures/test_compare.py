"""``fedsweep compare`` and ``fedsweep runs`` on a real MLflow sqlite store, filled by
``fedsweep run`` (mnist-5k, 3 rounds): α=0.3 with seeds 0 and 1, α=0.5 with seed 0."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from fedsweep.cli.main import app
from tests.helpers import small_run

runner = CliRunner()

RUN = small_run(
    "cmp-test",
    "cmp-test",
    train={"rounds": 3, "batch_size": 25, "lr": 0.001, "order": "fixed"},
    eval={"train_metrics": False},
)
MADE = [("0.3", 0), ("0.3", 1), ("0.5", 0)]


def _hash(config, sets: list[str]) -> str:
    args = ["validate", str(config)]
    for item in sets:
        args += ["--set", item]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return res.output.split("config hash:")[1].split()[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Three tracked runs; returns (uri, {(alpha, seed): run}, {(alpha, seed): config hash})."""
    from mlflow import MlflowClient

    tmp = tmp_path_factory.mktemp("cmp")
    uri = f"sqlite:///{tmp / 'store' / 'mlflow.db'}"
    config = tmp / "run.yaml"
    config.write_text(yaml.safe_dump(RUN))
    client = MlflowClient(tracking_uri=uri)
    runs, hashes = {}, {}
    for alpha, seed in MADE:
        sets = [f"bherd.alpha={alpha}", f"seed={seed}"]
        args = ["run", str(config), "--tracking-uri", uri, "-q"]
        for item in sets:
            args += ["--set", item]
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        run_id = res.output.split("mlflow_run_id=")[1].split()[0]
        h = _hash(config, sets)
        runs[(alpha, seed)] = client.get_run(run_id)
        # every run, single or swept, carries its config hash
        assert runs[(alpha, seed)].data.tags["fedsweep.config_hash"] == h
        hashes[(alpha, seed)] = h
    return uri, runs, hashes


def _final(run, key: str) -> float:
    return run.data.metrics[key]


def _compare(uri, tmp_path, *args):
    res = runner.invoke(
        app, ["compare", "--tracking-uri", uri, "--out", str(tmp_path), "--no-png", *args]
    )
    assert res.exit_code == 0, res.output
    table = pd.read_csv(tmp_path / "compare.csv")
    return res.output, table


@pytest.mark.slow
def test_compare_by_where_groups_seeds_with_the_logged_finals(store, tmp_path):
    uri, runs, _ = store
    out, table = _compare(uri, tmp_path, "--where", "data.partition=case3", "-e", "cmp-test")
    assert sorted(table["label"]) == ["α=0.3", "α=0.5"]
    row = table.set_index("label").loc["α=0.3"]
    seeds = [runs[("0.3", 0)], runs[("0.3", 1)]]
    assert row["n"] == 2
    acc = np.array([_final(r, "test_acc") for r in seeds])
    loss = np.array([_final(r, "test_loss") for r in seeds])
    assert row["final_test_acc_mean"] == pytest.approx(acc.mean(), rel=1e-12)
    assert row["final_test_acc_std"] == pytest.approx(acc.std(ddof=1), rel=1e-9, abs=1e-12)
    assert row["final_test_loss_mean"] == pytest.approx(loss.mean(), rel=1e-12)
    assert row["rounds_max"] == 3 and row["rounds_min"] == 3
    assert set(row["run_ids"].split()) == {r.info.run_id for r in seeds}
    one = table.set_index("label").loc["α=0.5"]
    assert one["n"] == 1 and one["final_test_acc_std"] == 0.0
    assert one["final_test_acc_mean"] == _final(runs[("0.5", 0)], "test_acc")
    # the printed table: label, n, final acc mean ± std, best acc (round), final loss, rounds
    line = next(x for x in out.splitlines() if x.startswith("α=0.3"))
    assert f"{acc.mean():.4f} ± {acc.std(ddof=1):.4f}" in line
    assert f"{loss.mean():.4f} ± {loss.std(ddof=1):.4f}" in line
    assert re.search(r"\(t=[123]\)", line) and line.split()[1] == "2"
    header = next(x for x in out.splitlines() if x.startswith("group"))
    assert header.split()[:2] == ["group", "n"] and "best test_acc" in header
    html = (tmp_path / "compare.html").read_text()
    assert "α=0.3 (n=2)" in html and "α=0.5 (n=1)" in html
    assert "bherd-fedavg · svm · mnist-5k · Case 3 · N=3 · T=3" in html  # what all share
    assert (tmp_path / "plotly.min.js").is_file() and "cdn.plot.ly" not in html


def test_compare_by_run_id_and_by_hash(store, tmp_path):
    uri, runs, hashes = store
    a, b = runs[("0.3", 0)], runs[("0.3", 1)]
    out, table = _compare(uri, tmp_path / "ids", a.info.run_id, "--run", b.info.run_id)
    assert len(table) == 1 and table.loc[0, "n"] == 2
    # nothing differs between groups: the run name without the seed (the name says what the
    # --set overrides changed)
    assert table.loc[0, "label"] == "bherd-fedavg svm mnist-5k case3 α=0.3"
    both = np.array([_final(a, "test_acc"), _final(b, "test_acc")])
    assert table.loc[0, "final_test_acc_mean"] == pytest.approx(both.mean(), rel=1e-12)

    h = hashes[("0.5", 0)]
    out, table = _compare(uri, tmp_path / "hash", "--hash", h)
    assert len(table) == 1 and table.loc[0, "n"] == 1
    assert table.loc[0, "run_ids"] == runs[("0.5", 0)].info.run_id
    assert table.loc[0, "final_test_loss_mean"] == _final(runs[("0.5", 0)], "test_loss")
    # a prefix of the hash, and two hashes: one group per config, seeds pooled
    _, table = _compare(
        uri, tmp_path / "two", "--hash", hashes[("0.3", 0)][:8], "--hash", hashes[("0.3", 1)]
    )
    assert len(table) == 1 and table.loc[0, "n"] == 2


def test_runs_lists_matching_runs_with_ui_urls(store):
    uri, runs, hashes = store
    res = runner.invoke(
        app, ["runs", "--tracking-uri", uri, "--where", "bherd.alpha=0.3", "--ui-url", "http://h:1"]
    )
    assert res.exit_code == 0, res.output
    lines = [x for x in res.output.splitlines() if "http://h:1/" in x]
    assert len(lines) == 2
    for seed in (0, 1):
        run = runs[("0.3", seed)]
        url = (
            f"http://h:1/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}"
            "?workflowType=machine_learning"
        )
        line = next(x for x in lines if x.endswith(url))
        assert "finished" in line and hashes[("0.3", seed)] in line
        assert f"{_final(run, 'test_acc'):.4f}" in line
    assert "2 run(s)" in res.output
    # the alias, --limit, a config value written in another form (1e-3 is logged as 0.001)
    res = runner.invoke(
        app, ["find", "--tracking-uri", uri, "--where", "train.lr=1e-3", "--limit", "1"]
    )
    assert res.exit_code == 0 and "1 run(s) (limit reached" in res.output
    res = runner.invoke(app, ["runs", "--tracking-uri", uri, "--status", "diverged"])
    assert res.exit_code == 0 and "no runs match" in res.output
    res = runner.invoke(app, ["runs", "--tracking-uri", uri, "--where", "seed!=0"])
    assert res.exit_code == 0 and runs[("0.3", 1)].info.run_id in res.output
    assert "1 run(s)" in res.output


BAD = [
    (["runs", "--where", "bherd.alpah=0.3"], "did you mean `bherd.alpha`"),
    (["runs", "--where", "data.partition=case4"], "case3"),
    (["runs", "--where", "bherd.alpha>0.3"], "= or !="),
    (["runs", "--where", "nonsense"], "KEY=VALUE"),
    (["runs", "--where", "bherd=1"], "section"),
    (["runs", "--status", "finshed"], "did you mean 'finished'"),
    (["runs", "--experiment", "cmp-tset"], "did you mean 'cmp-test'"),
    (["compare", "--hash", "xyz"], "16 hex digits"),
    (["compare"], "choose runs"),
    (["compare", "0123456789abcdef0123456789abcdef"], "no run with id"),
    (["compare", "--where", "bherd.alpha=0.9"], "no finished or diverged run"),
    (["compare", "--where", "bherd.alpha=0.3", "--metric", "test_accc"], "did you mean 'test_acc'"),
    (["compare", "--where", "metrics.test_acc>x"], "number"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_filters_exit_2_with_one_message(store, tmp_path, args, message):
    uri, _, _ = store
    res = runner.invoke(app, [*args, "--tracking-uri", uri])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)


def test_a_missing_store_is_a_usage_error_not_a_new_database(tmp_path):
    db = tmp_path / "none" / "mlflow.db"
    for cmd in (["runs"], ["compare", "--where", "bherd.alpha=0.3"]):
        res = runner.invoke(app, [*cmd, "--tracking-uri", f"sqlite:///{db}"])
        assert res.exit_code == 2 and "no MLflow store" in res.output
    assert not db.exists()


def test_where_becomes_mlflow_search_syntax():
    from fedsweep.cli.explore import hash_filter, parse_where

    assert parse_where("bherd.alpha=0.3").clause() == "params.`bherd.alpha` = '0.3'"
    assert parse_where("train.lr=1e-4").clause() == "params.`train.lr` = '0.0001'"
    assert parse_where("train.local_epochs=2").clause() == "params.`train.local_epochs` = '2.0'"
    assert parse_where("fedsweep.figure=bherd-fig3a").clause() == (
        "tags.`fedsweep.figure` = 'bherd-fig3a'"
    )
    assert parse_where("metrics.test_acc>=0.8").clause() == "metrics.`test_acc` >= 0.8"
    assert parse_where("tags.note!=it's").clause() == 'tags.`note` != "it\'s"'
    assert hash_filter("ABCDEF12").clause() == "tags.`fedsweep.config_hash` LIKE 'abcdef12%'"


def test_group_labels_say_what_differs():
    from dashboards.compare import group_labels

    base = {"algorithm": "fedavg", "selector": "bherd", "bherd.alpha": 0.3, "seed": 0}
    flat = {
        "a": base,
        "b": {**base, "bherd.alpha": 0.5, "seed": 1},
        "c": {**base, "selector": "none", "data.partition": "case2"},
    }
    labels = group_labels(flat, {"a": "x", "b": "y", "c": "z"})
    assert labels["a"].startswith("bherd-fedavg · α=0.3")
    assert labels["b"].startswith("bherd-fedavg · α=0.5")
    assert labels["c"] == "fedavg · Case 2"  # bherd.alpha is moot without the BHerd selector
    assert group_labels({"a": base}, {"a": "seed 1 · α=0.3 · Case 2"}) == {"a": "α=0.3 · Case 2"}
    assert group_labels({"a": base}, {"a": "α=0.3 · Case 2 · seed 1"}) == {"a": "α=0.3 · Case 2"}
