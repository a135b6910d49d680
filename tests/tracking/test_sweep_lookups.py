"""Issue 49, item 2: a sweep's store look-ups in one query each (``tracking.direct``) find what
MLflow's client finds: the unfinished child run a trial adopts, a run's artifact location (the
provenance check reads its ``config.yaml`` there); and the parsed mnist-5k table read back from
the user's cache is the CSV's."""

from __future__ import annotations

import time

import numpy as np

from fedsweep.tracking.connect import get_client
from fedsweep.tracking.direct import DONE_STATUSES, artifact_uri, unfinished_children


def _search(client, parent: str, config_hash: str) -> list[str]:
    """What ``fedsweep.sweep.trial.unfinished_sibling`` found through the client before."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(
        experiments,
        filter_string=(
            f"tags.`mlflow.parentRunId` = '{parent}' and tags.`fedsweep.config_hash` = "
            f"'{config_hash}'"
        ),
    )
    return [r.info.run_id for r in runs if r.data.tags.get("fedsweep.status") not in DONE_STATUSES]


def test_unfinished_children_are_the_clients(tmp_path):
    client = get_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp, gone = client.create_experiment("a"), client.create_experiment("gone")
    parent = client.create_run(exp).info.run_id
    other = client.create_run(exp).info.run_id

    def child(status, config_hash="h1", under=parent, experiment=exp, start=None):
        tags = {"mlflow.parentRunId": under, "fedsweep.config_hash": config_hash}
        if status is not None:
            tags["fedsweep.status"] = status
        return client.create_run(experiment, tags=tags, start_time=start).info.run_id

    now = int(time.time() * 1000)
    child("finished", start=now)
    child("diverged", start=now)
    running = child("running", start=now - 5000)
    untagged = child(None, start=now)  # created, killed before its first tag
    twin = child("killed", start=now)  # same start as `untagged`: ordered by run id
    child("running", config_hash="h2")
    child("running", under=other)
    client.delete_run(child("running", start=now + 1))
    child("running", experiment=gone)
    client.delete_experiment(gone)
    found = unfinished_children(client, parent, "h1")
    assert found == _search(client, parent, "h1")
    assert set(found) == {running, untagged, twin} and found[-1] == running
    assert unfinished_children(client, parent, "nothing") == _search(client, parent, "nothing")


def test_artifact_uri_is_get_runs(tmp_path):
    client = get_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("a")).info.run_id
    assert artifact_uri(client, run_id) == client.get_run(run_id).info.artifact_uri


def test_the_cached_mnist5k_table_is_the_csvs(tmp_path, monkeypatch):
    from fedsweep.data import mnist5k

    monkeypatch.setenv("FEDSWEEP_DATA_CACHE", "off")
    parsed = mnist5k.read_mnist5k_raw()
    monkeypatch.setenv("FEDSWEEP_DATA_CACHE", str(tmp_path / "cache"))
    written = mnist5k.read_mnist5k_raw()  # parsed, then kept
    (cached_file,) = (tmp_path / "cache").iterdir()
    read = mnist5k.read_mnist5k_raw()  # read back
    for a, b, c in zip(parsed, written, read, strict=True):
        assert a.dtype == b.dtype == c.dtype and np.array_equal(a, b) and np.array_equal(a, c)
    cached_file.write_bytes(b"not a table")  # a damaged cache is parsed again
    again = mnist5k.read_mnist5k_raw()
    assert all(np.array_equal(a, b) for a, b in zip(parsed, again, strict=True))
