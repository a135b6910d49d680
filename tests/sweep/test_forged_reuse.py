"""Issue 48, item 2: no forged reuse. A config cannot set tags in fedsweep's or MLflow's
namespaces (``fedsweep.config_hash`` is the key by which sweeps reuse runs), and a run found by
its hash tag is adopted only when its logged config hashes to that tag: a mismatch is skipped
with one warning naming the run, and the trial runs (or an older genuine run is reused)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.specs.load import expand, load_spec
from fedsweep.sweep.plan import plan_sweep
from fedsweep.sweep.store_index import finished_trials, trial_runs
from fedsweep.tracking import provenance
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.tracked_run import TrackedRun
from tests.helpers import small_run, small_spec, write_yaml


@pytest.mark.parametrize(
    "key", ["fedsweep.config_hash", "fedsweep.figure", "mlflow.parentRunId", "MLflow.runName"]
)
def test_a_config_cannot_set_reserved_tags(tmp_path, key):
    tree = small_run("forger", "e", tracking={"tags": {key: "31b2ebb50caaf4f3", "team": "x"}})
    path = write_yaml(tmp_path / "forger.yaml", tree)
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert "Traceback" not in res.output
    text = " ".join(res.output.split())
    assert f"tag '{key}' is in a reserved namespace (fedsweep.*, mlflow.*" in text
    assert "field `tracking.tags`" in text
    ok = small_run("forger", "e", tracking={"tags": {"team": "x", "fedsweepish": "y"}})
    res = CliRunner().invoke(app, ["validate", str(write_yaml(tmp_path / "ok.yaml", ok))])
    assert res.exit_code == 0, res.output


def _run(store: str, config, tag: str) -> str:
    cfg = config.model_copy(deep=True)
    cfg.tracking.enabled, cfg.tracking.uri, cfg.tracking.experiment = True, store, "elsewhere"
    cfg.tracking.log_records = False
    tracked = TrackedRun(cfg, tags={"fedsweep.config_hash": tag})
    assert tracked.execute().result.status == "finished"
    return tracked.run_id


def test_a_run_whose_logged_config_does_not_hash_to_its_tag_is_not_adopted(
    tmp_path, capsys, monkeypatch
):
    """A finished run of α=1.0 tagged with the alpha=0.5 trial's hash (what ``tracking.tags``
    allowed before): the plan runs alpha=0.5 instead of reusing it, the runner's lookups skip it,
    one warning names the run (once, however often it is looked up); a genuine run of α=1.0
    is reused; an older genuine run of alpha=0.5 under the forged one is taken instead."""
    monkeypatch.setattr(provenance, "_CHECKED", {})
    monkeypatch.setattr(provenance, "_WARNED", set())
    spec_path = write_yaml(tmp_path / "forgery.yaml", small_spec("forgery", alphas=(0.5, 1.0)))
    trials = {t.curve: t for t in expand(load_spec(spec_path), "smoke")}
    half, one = trials["alpha=0.5"], trials["alpha=1.0"]
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    forged = _run(store, one.config, half.config_hash)  # alpha=1.0's numbers, alpha=0.5's key
    genuine = _run(store, one.config, one.config_hash)

    plan = plan_sweep(spec_path, "smoke", tracking_uri=store)
    rows = {r.trial_id: r for r in plan.trials}
    assert (rows[half.trial_id].status, rows[half.trial_id].run_id) == ("run", None)
    assert (rows[one.trial_id].status, rows[one.trial_id].run_id) == ("reuse", genuine)
    client = get_client(store, create=False)
    assert finished_trials(client, [half, one]) == {one.config_hash}
    assert set(trial_runs(client, [half, one])) == {one.config_hash}
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        f"warning: run {forged} is tagged fedsweep.config_hash={half.config_hash}, but its "
        f"logged config hashes to {one.config_hash}: not reused (a forged or corrupted tag)"
    ]

    older = _run(store, half.config, half.config_hash)  # now a genuine alpha=0.5 run as well...
    newest = _run(store, one.config, half.config_hash)  # ...and a newer forged one above it
    assert trial_runs(client, [half])[half.config_hash].info.run_id == older
    assert f"run {newest} is tagged" in capsys.readouterr().err


def test_a_run_adopted_without_its_config_gets_it_and_is_then_reused(tmp_path, monkeypatch):
    """A driver killed between a run's creation and its ``config.yaml`` (seen in the kill -9
    test: the first 100 params written, nothing after) leaves a run that the resumed trial
    adopts and finishes: the adopting start writes the params and config it lacks, so the
    finished run passes the provenance check (else the sweep counted it as interrupted)."""
    from mlflow.entities import Param

    from fedsweep.config.hashing import config_hash
    from fedsweep.config.load import flatten
    from fedsweep.tracking.run_logger import MAX_PARAMS, MlflowRunLogger, _param_str
    from tests.helpers import tiny_config

    monkeypatch.setattr(provenance, "_CHECKED", {})
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    cfg = tiny_config(tracking__enabled=True, tracking__uri=store)
    tree = cfg.model_dump(mode="json")
    tags = {"fedsweep.config_hash": config_hash(cfg), "fedsweep.status": "running"}
    killed = MlflowRunLogger(store, "e")
    run_id = killed.client.create_run(killed.experiment_id, tags=tags).info.run_id
    params = [Param(k, _param_str(v)) for k, v in sorted(flatten(tree).items())]
    assert len(params) > MAX_PARAMS
    killed.client.log_batch(run_id, params=params[:MAX_PARAMS])  # then kill -9
    client = get_client(store)
    assert provenance.hash_problem(client, run_id, tags["fedsweep.config_hash"]).startswith(
        "its logged config cannot be read"
    )
    adopting = MlflowRunLogger(store, "e")
    assert adopting.start(tree, {**tags, "x": "1"}, run_id=run_id) == run_id
    assert provenance.hash_problem(client, run_id, tags["fedsweep.config_hash"]) == ""
    assert len(client.get_run(run_id).data.params) == len(params)
    adopting.start(tree, tags, run_id=run_id)  # a second adoption writes nothing twice
    assert [a.path for a in client.list_artifacts(run_id)] == ["config.yaml"]


def test_figures_and_report_skip_a_run_whose_config_does_not_hash_to_its_tag(tmp_path, monkeypatch):
    """Issue 62, item 8: the figures and the report drew the newest run of each hash without
    the check a sweep applies before adopting one. A forged run (α=1.0's config under
    alpha=0.5's hash, newer than the genuine alpha=0.5 run) is skipped with one warning naming
    it, by ``figures`` and by ``report``, and the genuine run is drawn; a genuine run whose
    ``config.yaml`` is rewritten afterwards is skipped too (the verdict kept in the local cache
    is keyed by the file's size and time)."""
    import json
    import os
    from pathlib import Path

    from fedsweep.tracking.uri import file_uri_path

    monkeypatch.setattr(provenance, "_CHECKED", {})
    monkeypatch.setattr(provenance, "_WARNED", set())
    monkeypatch.setenv(provenance.CACHE_ENV, str(tmp_path / "cache"))
    spec_path = write_yaml(tmp_path / "forgery.yaml", small_spec("forgery", alphas=(0.5, 1.0)))
    trials = {t.curve: t for t in expand(load_spec(spec_path), "smoke")}
    half, one = trials["alpha=0.5"], trials["alpha=1.0"]
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    genuine = _run(store, half.config, half.config_hash)
    _run(store, one.config, one.config_hash)
    forged = _run(store, one.config, half.config_hash)  # newest of alpha=0.5's hash
    common = ["--profile", "smoke", "--tracking-uri", store]

    def drawn(res) -> list[str]:
        assert res.exit_code == 0, res.output
        return [ln for ln in res.output.splitlines() if ln.startswith("warning: run ")]

    res = CliRunner().invoke(
        app, ["figures", "--spec", str(spec_path), "--out", str(tmp_path / "f"), "--format",
              "svg", *common],
    )  # fmt: skip
    (warning,) = drawn(res)
    assert warning.startswith(f"warning: run {forged} is tagged fedsweep.config_hash=")
    assert f"its logged config hashes to {one.config_hash}: not drawn" in warning
    runs = (tmp_path / "f" / "forgery-runs.csv").read_text()
    assert genuine in runs and forged not in runs

    monkeypatch.setattr(provenance, "_WARNED", set())  # a new process: warned again
    out = tmp_path / "r"
    res = CliRunner().invoke(
        app, ["report", "--figure", str(spec_path), "--out", str(out), *common]
    )
    (warning,) = drawn(res)
    assert f"warning: run {forged} is tagged" in warning
    cached = json.loads((tmp_path / "cache" / provenance.CACHE_FILE).read_text())
    assert any(k.startswith(f"{forged} ") and v for k, v in cached.items())
    assert any(k.startswith(f"{genuine} ") and not v for k, v in cached.items())

    # the genuine run's config rewritten to another one: checked again, skipped
    client = get_client(store, create=False)
    folder = Path(file_uri_path(client.get_run(genuine).info.artifact_uri))
    config = folder / "config.yaml"
    config.write_text(config.read_text().replace("alpha: 0.5", "alpha: 0.75"))
    os.utime(config, ns=(1, 1))
    monkeypatch.setattr(provenance, "_WARNED", set())
    res = CliRunner().invoke(app, ["report", "--figure", str(spec_path), "--out", str(out),
                                   *common])  # fmt: skip
    assert {w.split()[2] for w in drawn(res)} == {forged, genuine}
