"""``tracking.lite`` (sqlite3 on a local SQLite store) against MLflow's client path
(``tracking.runstore.ClientStore``) on two real fresh stores: the same calls of a tracked run, a
sweep trial and its leases write the same rows (run ids and times normalised) and the same
artifact files, MLflow's client reads the sqlite3-written run back, and the sqlite3 path never
imports MLflow or SQLAlchemy.
"""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fedsweep.tracking import lite, runstore
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.leases import DESCRIPTION
from fedsweep.tracking.store import ensure_experiment
from tests.tracking.test_direct import FIRST

ROOT = Path(__file__).resolve().parents[2]
INF, NAN = float("inf"), float("nan")
EXPERIMENT = "lite"
PARENT = "f" * 32
HASH = "c0ffee"
# a tracked run's calls: test_direct's first flush (NaN and +-inf, a key whose latest row is
# not its last one, an equal-step tie broken by timestamp, then by value, a row repeated inside
# a batch); then a flush with a row the run has (MLflow's skip), an older step and a later
# timestamp
SECOND = [("loss", 2.5, 1000, 1), ("loss", 1.5, 2000, 3), ("acc", 0.9, 2000, 4)]
THIRD = [("tie", 0.5, 1001, 4), ("new", 7.0, 2000, 3), ("round_time", 1.0, 2000, 6)]
# 151 params (more than one log_batch request), one value past MLflow's length limit
PARAMS = [(f"p.{i:03d}", str(i)) for i in range(150)] + [("long", "x" * 7000)]
TABLES = {
    "runs": "run_uuid, name, source_type, source_name, entry_point_name, user_id, status,"
    " start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id,"
    " deleted_time",
    "tags": "key, value, run_uuid",
    "params": "key, value, run_uuid",
    "metrics": "key, value, timestamp, step, is_nan, run_uuid",
    "latest_metrics": "key, value, timestamp, step, is_nan, run_uuid",
    "experiment_tags": "key, value, experiment_id",
    "registered_models": "name, creation_time, last_updated_time, description, workspace",
    "registered_model_tags": "key, value, name, workspace",
}


def _fresh(folder: Path) -> str:
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    ensure_experiment(get_client(uri), EXPERIMENT, uri)  # as a sweep's driver makes it
    return uri


@pytest.fixture
def stores(tmp_path, monkeypatch):
    """(MLflow's client path, the sqlite3 path) on two fresh stores."""
    theirs, ours = _fresh(tmp_path / "client"), _fresh(tmp_path / "lite")
    monkeypatch.setenv(lite.LITE_ENV, "0")
    client = runstore.open_store(theirs, EXPERIMENT)
    monkeypatch.delenv(lite.LITE_ENV)
    sqlite = runstore.open_store(ours, EXPERIMENT)
    assert isinstance(client, runstore.ClientStore) and isinstance(sqlite, lite.LiteStore)
    return client, sqlite


def _scenario(store) -> dict:
    """A trial's calls (leases, its run from creation to end, an adoption), and what the
    store answers; run ids in the answers are replaced by their order of creation."""
    out = {}
    lease = {"token": "t1", "host": "h", "pid": "1", "owner": "o", "beat": "t1:1"}
    out["acquired"] = [store.create_lease("fedsweep.claim.trial.x", lease, DESCRIPTION)]
    out["acquired"].append(store.create_lease("fedsweep.claim.trial.x", lease, DESCRIPTION))
    store.set_lease_tag("fedsweep.claim.trial.x", "beat", "t1:2")
    out["holder"] = store.lease_tags("fedsweep.claim.trial.x")
    out["nobody"] = store.lease_tags("fedsweep.claim.trial.none")
    for name in ("fedsweep.claim.trial.y", "fedsweep.claim.trial.z"):
        store.create_lease(name, {**lease, "token": name}, DESCRIPTION)
    store.release_lease("fedsweep.claim.trial.y", "someone else")  # not its holder: stays
    store.release_lease("fedsweep.claim.trial.z", "fedsweep.claim.trial.z")
    store.delete_lease("fedsweep.claim.trial.y")
    store.delete_lease("fedsweep.claim.trial.none")

    exp = store.ensure_experiment(EXPERIMENT, "a sweep's title", overwrite=True)
    tags = {
        "mlflow.parentRunId": PARENT,
        "mlflow.user": "alice",
        "fedsweep.config_hash": HASH,
        "fedsweep.status": "running",
    }
    ids = []
    run_id, artifacts = store.create_run(exp, tags, "trial-0")
    ids.append(run_id)
    store.write_params(run_id, PARAMS)
    store.write_params(run_id, PARAMS[:3])  # logged again unchanged: accepted
    with pytest.raises(Exception, match="Changing param values is not allowed"):
        store.write_params(run_id, [("p.000", "changed"), ("fresh", "1")])
    store.log_text(run_id, artifacts, "name: x\nseed: 1\n", "config.yaml")
    for batch in (FIRST, SECOND):
        store.write_metrics(run_id, batch)
    out["unfinished"] = store.unfinished_child(PARENT, HASH) == run_id
    out["done before"] = store.done_run_candidates([HASH])
    store.end_run(run_id, "KILLED", {"fedsweep.status": "killed"})
    with pytest.raises(Exception, match="not found"):
        store.reopen_run("0" * 32)
    # the adoption by a retried trial
    store.reopen_run(run_id)
    store.set_tags(run_id, {"fedsweep.resumed_at_round": "2", "mlflow.runName": "trial-0b"})
    out["artifacts"] = store.list_artifacts(run_id, store.artifact_uri(run_id))
    out["history"] = store.metric_history(run_id, "loss")
    out["past 2"] = sorted(store.keys_past(run_id, 2))
    store.write_metrics(run_id, THIRD)
    folder = Path(store.artifact_uri(run_id).removeprefix("file://"))
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("a.npz", "b.npz"):
            (Path(tmp) / name).write_bytes(name.encode() * 100)
        store.log_artifacts(run_id, artifacts, tmp, "records")
    store.end_run(run_id, "FINISHED", {"fedsweep.status": "finished", "fedsweep.x": "y" * 9000})
    out["done"] = [(ids.index(r), bool(t)) for r, t in store.done_run_candidates([HASH])[HASH]]
    out["parent"] = store.run_tag(run_id, "mlflow.parentRunId")
    out["config"] = store.read_text(run_id, "config.yaml")
    out["no unfinished"] = store.unfinished_child(PARENT, HASH)
    out["files"] = sorted(
        (p.relative_to(folder).as_posix(), p.read_bytes()) for p in folder.rglob("*") if p.is_file()
    )
    out["run"] = run_id
    return out


def _dump(uri: str, run_ids: list[str]) -> dict[str, list]:
    """Every table's rows, run ids as ``run<i>``, times as ``T``."""
    db = uri.removeprefix("sqlite:///")
    names = {r: f"run{i}" for i, r in enumerate(run_ids)}
    root = Path(db).parent.as_uri()

    def norm(col: str, v):
        if isinstance(v, str):
            for r, name in names.items():
                v = v.replace(r, name)
            v = v.replace(root, "ROOT")
        if col in ("start_time", "end_time", "creation_time", "last_updated_time") and v:
            return "T"
        return v

    out = {}
    with sqlite3.connect(db) as con:
        for table, columns in TABLES.items():
            cols = [c.strip() for c in columns.split(",")]
            rows = con.execute(f"SELECT {columns} FROM {table}").fetchall()
            out[table] = sorted(
                (tuple(norm(c, v) for c, v in zip(cols, row, strict=True)) for row in rows),
                key=repr,
            )
    # the saved view's envelope holds its creation time
    out["experiment_tags"] = [
        (k, "VIEW" if k.startswith("mlflow.sharedViewState.") else v, e)
        for k, v, e in out["experiment_tags"]
    ]
    return out


def test_the_sqlite3_path_writes_the_rows_of_mlflows_client(stores):
    client, sqlite = stores
    theirs, ours = _scenario(client), _scenario(sqlite)
    a, b = theirs.pop("run"), ours.pop("run")
    assert _dump(sqlite.tracking_uri, [b]) == _dump(client.tracking_uri, [a])
    assert ours["history"][1][1] != ours["history"][1][1]  # NaN read back as NaN
    for answers in (theirs, ours):
        answers["history"] = [(s, "nan" if math.isnan(v) else v) for s, v in answers["history"]]
    assert ours == theirs
    assert ours["acquired"] == [True, False] and ours["holder"]["beat"] == "t1:2"
    assert ours["past 2"] == ["acc", "loss", "tie"] and ours["unfinished"] is True
    assert [f for f, _ in ours["files"]] == ["config.yaml", "records/a.npz", "records/b.npz"]
    rows = _dump(sqlite.tracking_uri, [b])
    assert ("p.000", "0", "run0") in rows["params"] and len(rows["params"]) == len(PARAMS)
    assert ("long", "x" * 6000, "run0") in rows["params"]  # cut as MLflow cuts it
    assert [m for m in rows["registered_models"] if m[0].endswith(".x")]  # held, not released


def test_mlflows_client_reads_the_sqlite3_run_back(stores):
    client, sqlite = stores
    theirs, ours = _scenario(client)["run"], _scenario(sqlite)["run"]
    reader = get_client(sqlite.tracking_uri)
    run, ref = reader.get_run(ours), client.client.get_run(theirs)
    assert run.info.run_name == ref.info.run_name == "trial-0b"
    assert (run.info.status, run.info.user_id) == (ref.info.status, ref.info.user_id)
    assert run.info.artifact_uri.endswith(f"/{ours}/artifacts")
    assert run.data.params == ref.data.params and run.data.tags.keys() == ref.data.tags.keys()
    assert (
        run.data.metrics == ref.data.metrics and run.data.metrics["big"] == 1.7976931348623157e308
    )
    exp = reader.get_experiment_by_name(EXPERIMENT).experiment_id
    found = reader.search_runs(
        [exp],
        filter_string=f"tags.`mlflow.parentRunId` = '{PARENT}' and "
        f"tags.`fedsweep.config_hash` = '{HASH}' and tags.`fedsweep.status` = 'finished'",
    )
    assert [r.info.run_id for r in found] == [ours]
    for key in ("loss", "tie", "round_time"):
        got = [(m.step, m.timestamp, str(m.value)) for m in reader.get_metric_history(ours, key)]
        want = [(m.step, m.timestamp, str(m.value)) for m in client.client.get_metric_history(theirs, key)]  # fmt: skip
        assert got == want and got
    assert [f.path for f in reader.list_artifacts(ours)] == ["config.yaml", "records"]
    assert [f.path for f in reader.list_artifacts(ours, "records")] == [
        "records/a.npz",
        "records/b.npz",
    ]


def test_which_stores_the_sqlite3_path_serves(tmp_path, monkeypatch):
    uri = _fresh(tmp_path / "s")
    assert lite.lite_db(uri) == Path(uri.removeprefix("sqlite:///"))
    assert lite.lite_db(f"sqlite:///{tmp_path / 'missing' / 'mlflow.db'}") is None
    assert lite.lite_db("postgresql://u@h/db") is None and lite.lite_db("http://h:5000") is None
    monkeypatch.setenv("MLFLOW_ENABLE_WORKSPACES", "true")
    assert lite.lite_db(uri) is None
    monkeypatch.delenv("MLFLOW_ENABLE_WORKSPACES")
    # another schema revision (another MLflow made or migrated it): MLflow's client
    other = tmp_path / "other.db"
    other.write_bytes(Path(uri.removeprefix("sqlite:///")).read_bytes())
    with sqlite3.connect(other) as con:
        con.execute("UPDATE alembic_version SET version_num = 'abc'")
    assert lite.lite_db(f"sqlite:///{other}") is None
    # an experiment with a remote artifact root: the run's store is MLflow's client
    client = get_client(uri)
    client.create_experiment("remote", artifact_location="s3://bucket/x")
    assert isinstance(runstore.open_store(uri, "remote"), runstore.ClientStore)
    assert isinstance(runstore.open_store(uri, "new one"), runstore.ClientStore)
    assert isinstance(runstore.open_store(uri, EXPERIMENT), lite.LiteStore)


def test_artifact_uri_is_mlflows(tmp_path):
    """A run's artifact URI as MLflow's ``append_to_uri_path`` makes it."""
    from mlflow.utils.uri import append_to_uri_path

    for location in ("file:///a/b", "file:///a/b/", "/a/b", "/a/b/"):
        assert lite._run_artifacts(location, "r1") == append_to_uri_path(
            location, "r1", "artifacts"
        )


PROBE = """
import sys
from fedsweep.tracking.leases import Leases, holder_tags
from fedsweep.tracking.run_logger import MlflowRunLogger
from fedsweep.sweep.trial import unfinished_sibling

uri = sys.argv[1]
leases = Leases(uri)
tags = holder_tags("o")
assert leases.try_acquire("fedsweep.claim.trial.p", tags)
logger = MlflowRunLogger(uri, "lite")
run = logger.start({"name": "x"}, {"mlflow.parentRunId": "p" * 32}, run_name="x")
logger.log_round(1, {"test_acc": 0.5, "round_time": 1.0})
logger.log_arrays({"a": __import__("numpy").zeros(3)}, "records")
logger.end("finished")
assert unfinished_sibling(uri, "p" * 32, "h") is None
leases.release("fedsweep.claim.trial.p", tags["token"])
print(sorted(m for m in ("mlflow", "sqlalchemy", "alembic") if m in sys.modules))
"""


def test_the_sqlite3_path_imports_no_mlflow(tmp_path):
    """A trial's store work on a local SQLite store, in a fresh interpreter: MLflow and
    SQLAlchemy are never imported."""
    uri = _fresh(tmp_path / "s")
    out = subprocess.run(
        [sys.executable, "-c", PROBE, uri],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    run = get_client(uri).search_runs(
        [get_client(uri).get_experiment_by_name("lite").experiment_id]
    )
    assert [r.data.tags["fedsweep.status"] for r in run] == ["finished"]
