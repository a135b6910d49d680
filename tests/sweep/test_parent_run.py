"""The parent run of an interrupted sweep that was deleted since (in the MLflow UI: still
readable, no longer writable): the next sweep opens a new parent instead of failing with
MLflow's "must be in the 'active' state" (seen on a real store, 2026-11-29)."""

from __future__ import annotations

from fedsweep.specs.load import load_spec
from fedsweep.sweep.store_index import open_parent_run
from tests.helpers import small_spec, write_yaml


def test_a_deleted_parent_run_is_replaced_not_written(tmp_path):
    from mlflow import MlflowClient

    spec = load_spec(write_yaml(tmp_path / "parent-fig.yaml", small_spec("parent-fig")))
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.create_experiment("parent-fig")
    tags = {"fedsweep.figure": "parent-fig", "fedsweep.status": "running"}
    first = open_parent_run(client, exp, spec, "smoke", None, tags)
    assert open_parent_run(client, exp, spec, "smoke", {"parent_run_id": first}, tags) == first
    client.delete_run(first)
    second = open_parent_run(client, exp, spec, "smoke", {"parent_run_id": first}, tags)
    assert second != first
    run = client.get_run(second)
    assert run.info.lifecycle_stage == "active" and run.data.tags["fedsweep.status"] == "running"
