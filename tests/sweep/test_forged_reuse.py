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
from fedsweep.tracking.store import get_client
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
