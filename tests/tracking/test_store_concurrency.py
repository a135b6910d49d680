"""One store, many writers: ``fedsweep run`` processes started at once on a fresh sqlite store
all finish and log every round (MLflow creates the schema in the first process that opens the
file; :func:`fedsweep.tracking.connect.prepare_store` serialises that under a file lock, and
builds a new store's schema on a private file linked into place), and a store left
half-migrated is refused with how to recover (issue 14)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import small_run, write_yaml

ROOT = Path(__file__).resolve().parents[2]
WRITERS = 6
ROUNDS = 2


@pytest.mark.slow
def test_concurrent_runs_on_a_fresh_sqlite_store_all_finish(tmp_path):
    from mlflow import MlflowClient

    config = write_yaml(tmp_path / "run.yaml", small_run("conc", "concurrency", rounds=ROUNDS))
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"  # neither folder nor file exists
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_DISABLE_TELEMETRY": "true"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "fedsweep.cli.main", "run", str(config), "-q"]
            + ["--set", f"seed={seed}", "--tracking-uri", uri],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for seed in range(WRITERS)
    ]
    deadline = time.time() + 300
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.time()))
            outputs.append(out)
    finally:
        for proc in procs:
            proc.kill()
    failed = [
        (p.returncode, o[-2000:]) for p, o in zip(procs, outputs, strict=True) if p.returncode
    ]
    assert not failed, failed

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("concurrency")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == WRITERS
    assert sorted(r.data.params["seed"] for r in runs) == [str(s) for s in range(WRITERS)]
    for run in runs:
        assert run.info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "test_loss")]
        assert steps == list(range(1, ROUNDS + 1))


# ------------------------------------------------ issue 14: a store broken for good, no more
def _half_migrated(db: Path) -> None:
    """What six processes migrating one fresh file at once left (reproduced on MLflow 3.17.2):
    the initial tables, the migrations up to one revision in the middle, and a batch
    migration's ``_alembic_tmp_tags`` table that was never renamed."""
    from alembic import command
    from mlflow.store.db.utils import (
        InitialBase,
        _get_alembic_config,
        create_sqlalchemy_engine_with_retry,
    )

    uri = f"sqlite:///{db}"
    engine = create_sqlalchemy_engine_with_retry(uri)
    InitialBase.metadata.create_all(engine)
    config = _get_alembic_config(uri)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "4465047574b1")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE _alembic_tmp_tags AS SELECT * FROM tags")
    engine.dispose()


def _cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_DISABLE_TELEMETRY": "true"}
    return subprocess.run(
        [sys.executable, "-m", "fedsweep.cli.main", *map(str, args)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_store_whose_creation_fails_halfway_is_not_left_behind(tmp_path, monkeypatch):
    """The schema is built on a private file and linked into place: a creation that fails
    (or is killed) in the middle of MLflow's migrations leaves no store, and the next first use
    removes a killed creator's private file and creates the store."""
    import mlflow.store.db.utils as db_utils

    from fedsweep.tracking import connect, schema

    db = tmp_path / "s" / "mlflow.db"
    uri = f"sqlite:///{db}"
    monkeypatch.setenv(schema.SCHEMA_CACHE_ENV, "off")  # run the migrations here

    def stop_midway(engine):
        raise RuntimeError("killed during the migrations")

    monkeypatch.setattr(db_utils, "_upgrade_db", stop_midway)  # after create_all
    with pytest.raises(connect.StoreBrokenError, match="nothing was left behind"):
        connect.prepare_store(uri)
    assert not db.exists()
    assert list(db.parent.glob("mlflow.db.creating-*")) == []
    monkeypatch.undo()

    stale = db.parent / "mlflow.db.creating-999999999"  # a creator killed with kill -9
    stale.write_bytes(b"half a schema")
    connect.prepare_store(uri)
    assert db.is_file() and not stale.exists()
    from mlflow import MlflowClient

    assert [e.name for e in MlflowClient(tracking_uri=uri).search_experiments()] == ["Default"]


@pytest.mark.slow
def test_a_half_migrated_store_is_refused_with_how_to_recover(tmp_path, monkeypatch):
    """A store left half-migrated (by an older fedsweep or by MLflow itself) fails every later
    run with a traceback from MLflow's migrations; now each command says what it is and how to
    recover, and the recovery it prints works: with no runs, remove the file; with runs, drop
    the leftover table and upgrade. The refusals and the last check run in fresh processes;
    the run after the file is removed, which only has to succeed, in this one."""
    from typer.testing import CliRunner

    from fedsweep.cli.main import app

    config = write_yaml(tmp_path / "run.yaml", small_run("hm", "half-migrated", rounds=ROUNDS))
    db = tmp_path / "store" / "mlflow.db"
    uri = f"sqlite:///{db}"
    db.parent.mkdir()
    _half_migrated(db)
    res = _cli("run", config, "-q", "--tracking-uri", uri, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert "half-migrated" in res.stderr and "_alembic_tmp_tags" in res.stderr
    assert f"it holds no runs, so remove it (rm {db})" in res.stderr
    db.unlink()  # what it says
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["run", str(config), "-q", "--tracking-uri", uri])
    assert res.exit_code == 0, (res.output, res.exception)

    # a store with a run and a leftover migration table
    import sqlite3

    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE _alembic_tmp_tags AS SELECT * FROM tags")
    res = _cli("runs", "--tracking-uri", uri, cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    message = " ".join(res.stderr.split())
    assert "holds 1 run(s)" in message and "mlflow db upgrade" in message
    drop = message.split("then python -c ")[1].split(", then mlflow")[0]
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    subprocess.run(f"{sys.executable} -c {drop}", shell=True, check=True, env=env)
    subprocess.run(
        [sys.executable, "-m", "mlflow", "db", "upgrade", uri], check=True, env=env, timeout=120
    )
    res = _cli("runs", "--tracking-uri", uri, cwd=tmp_path)
    assert res.returncode == 0 and "1 run" in res.stdout, res.stdout + res.stderr


@pytest.mark.slow
def test_new_stores_are_copies_of_a_schema_template_equal_to_mlflows_own(tmp_path, monkeypatch):
    """MLflow's migrations take about 4 s per new store: they run once per machine and schema
    revision into a template that every new store copies. A copy has the same tables, columns
    and schema revision as a store MLflow creates itself, opens as a store, and a template that
    is not a complete schema is built again rather than copied."""
    import sqlite3

    from mlflow import MlflowClient

    from fedsweep.tracking import connect, schema

    monkeypatch.setenv(schema.SCHEMA_CACHE_ENV, str(tmp_path / "cache"))

    def schema(db):
        """Tables and indexes with their columns, and the schema revision. (Not the SQL text:
        SQLAlchemy may order a table's constraints differently from one process to the next.)"""
        with sqlite3.connect(db) as con:
            objects = con.execute("SELECT type, name, tbl_name FROM sqlite_master").fetchall()
            columns = {
                name: sorted(
                    (c[1], c[2], c[3], c[5])
                    for c in con.execute(
                        f"PRAGMA {'table' if kind == 'table' else 'index'}_xinfo('{name}')"
                    )
                )
                for kind, name, _ in objects
                if kind in ("table", "index")
            }
            version = con.execute("SELECT version_num FROM alembic_version").fetchall()
        return sorted(objects), columns, version

    own = tmp_path / "own.db"
    MlflowClient(tracking_uri=f"sqlite:///{own}").search_experiments()  # MLflow by itself
    copied = tmp_path / "a" / "mlflow.db"
    connect.prepare_store(f"sqlite:///{copied}")
    (template,) = (tmp_path / "cache").glob("mlflow-*.db")
    assert schema(copied) == schema(own) == schema(template)

    template.write_bytes(b"not a database")  # e.g. a disk-full write
    again = tmp_path / "b" / "mlflow.db"
    connect.prepare_store(f"sqlite:///{again}")
    assert schema(again) == schema(own) and schema(template) == schema(own)
    client = MlflowClient(tracking_uri=f"sqlite:///{again}")
    exp = client.create_experiment("x")
    client.create_run(exp)
    assert len(client.search_runs([exp])) == 1
