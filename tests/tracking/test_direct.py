"""``tracking.direct`` against MLflow's own client API on real stores: the metric rows and
latest-metric rows it writes equal ``log_batch``'s, the params it writes and the end it gives a
run equal ``log_batch``'s and ``set_terminated``'s, and the done runs it finds equal a full
``search_runs`` scan's (finished/diverged, latest start, deleted runs and experiments left out).
"""

from __future__ import annotations

import math
import sqlite3

import pytest

from fedsweep.tracking.connect import get_client
from fedsweep.tracking.direct import (
    _done_client,
    _done_sql,
    _write_client,
    done_runs_by_hash,
    end_run,
    load_runs,
    sql_store,
    write_metrics,
    write_params,
)

INF = float("inf")
NAN = float("nan")

# (key, value, timestamp ms, step): NaN and +-inf, a key whose latest row is not its last one
# (a larger step logged first), an equal-step tie broken by timestamp, then by value, and a
# row repeated inside the batch
FIRST = [
    ("loss", 2.5, 1000, 1),
    ("loss", NAN, 1001, 2),
    ("acc", 0.1, 1000, 1),
    ("acc", 0.3, 1000, 5),
    ("acc", 0.2, 1002, 3),
    ("tie", 1.0, 1000, 4),
    ("tie", 3.0, 1000, 4),
    ("tie", 2.0, 1000, 4),
    ("big", INF, 1000, 1),
    ("small", -INF, 1000, 1),
    ("client/0/dist", 0.5, 1000, 1),
    ("client/0/dist", 0.5, 1000, 1),
]
# a second flush: "loss" moves on, "acc" gets an older step (its latest stays), "tie" an equal
# step with a later timestamp (it replaces), a new key
SECOND = [
    ("loss", 1.5, 2000, 3),
    ("acc", 0.9, 2000, 4),
    ("tie", 0.5, 1001, 4),
    ("new", 7.0, 2000, 3),
]


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "mlflow.db"
    client = get_client(f"sqlite:///{db}")
    experiment = client.create_experiment("direct")
    return client, experiment, db


def _rows(db, table: str, run_id: str) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return sorted(
            con.execute(
                f"select key, value, timestamp, step, is_nan from {table} where run_uuid = ?",
                (run_id,),
            ).fetchall()
        )


def test_write_metrics_equals_log_batch(store):
    client, experiment, db = store
    assert sql_store(client) is not None
    ours = client.create_run(experiment).info.run_id
    theirs = client.create_run(experiment).info.run_id
    for batch in (FIRST, SECOND):
        write_metrics(client, ours, batch)
        _write_client(client, theirs, batch)
    for table in ("metrics", "latest_metrics"):
        got, want = _rows(db, table, ours), _rows(db, table, theirs)
        assert got == want, table
    assert len(_rows(db, "metrics", ours)) == len(FIRST) + len(SECOND) - 1  # the repeat once
    latest = {k: (v, step) for k, v, _, step, _ in _rows(db, "latest_metrics", ours)}
    assert latest["acc"] == (0.3, 5) and latest["tie"] == (0.5, 4) and latest["loss"] == (1.5, 3)
    # and as the client reads them back
    a, b = client.get_run(ours).data.metrics, client.get_run(theirs).data.metrics
    assert a.keys() == b.keys() and all(a[k] == b[k] for k in a)
    assert a["big"] == 1.7976931348623157e308 and a["small"] == -a["big"]  # MLflow's stand-in
    assert all(not math.isnan(v) for v in a.values())


def test_write_metrics_again_skips_rows_the_run_has(store):
    """A batch holding a row the run has already (e.g. a flush that is repeated) goes through
    MLflow's own path, which skips that row; nothing is written twice, nothing is lost."""
    client, experiment, db = store
    run = client.create_run(experiment).info.run_id
    write_metrics(client, run, FIRST)
    write_metrics(client, run, [FIRST[0], ("later", 1.0, 3000, 9)])
    keys = [k for k, *_ in _rows(db, "metrics", run)]
    assert keys.count("loss") == 2 and keys.count("later") == 1


def test_write_metrics_refuses_a_deleted_run_and_a_bad_value(store):
    from mlflow.exceptions import MlflowException

    client, experiment, _ = store
    run = client.create_run(experiment).info.run_id
    with pytest.raises(MlflowException, match="value"):
        write_metrics(client, run, [("loss", "high", 1000, 1)])
    client.delete_run(run)
    with pytest.raises(MlflowException, match="must be in the 'active' state"):
        write_metrics(client, run, [("loss", 1.0, 1000, 1)])


# 101 params (one more than a log_batch request takes), one value past MLflow's length limit
PARAMS = [(f"p.{i:03d}", str(i)) for i in range(100)] + [("long", "x" * 7000)]


def _params(db, run_id: str) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return sorted(con.execute("select key, value from params where run_uuid = ?", (run_id,)))


def test_write_params_equals_log_batch(store):
    from mlflow.entities import Param

    client, experiment, db = store
    ours = client.create_run(experiment).info.run_id
    theirs = client.create_run(experiment).info.run_id
    write_params(client, ours, PARAMS)
    items = [Param(k, v) for k, v in PARAMS]
    for i in range(0, len(items), 100):
        client.log_batch(theirs, params=items[i : i + 100])
    assert _params(db, ours) == _params(db, theirs)
    assert len(_params(db, ours)) == 101 and dict(_params(db, ours))["long"] == "x" * 6000
    assert client.get_run(ours).data.params == client.get_run(theirs).data.params


def test_write_params_again_equal_values_pass_a_changed_one_is_refused(store):
    """Params the run has (a resumed run logging its config again) go through MLflow's own
    path: equal values are accepted, a changed value is refused as log_batch refuses it."""
    from mlflow.exceptions import MlflowException

    client, experiment, db = store
    run = client.create_run(experiment).info.run_id
    write_params(client, run, PARAMS[:3])
    write_params(client, run, PARAMS[:5])
    assert len(_params(db, run)) == 5
    with pytest.raises(MlflowException, match="Changing param values is not allowed"):
        write_params(client, run, [("p.000", "changed")])
    with pytest.raises(MlflowException, match="Duplicate parameter keys"):
        write_params(client, run, [("dup", "1"), ("dup", "2")])
    client.delete_run(run)
    with pytest.raises(MlflowException, match="must be in the 'active' state"):
        write_params(client, run, [("new", "1")])


def test_end_run_equals_tags_then_set_terminated(store):
    from mlflow.entities import RunTag

    client, experiment, _ = store
    tags = {"fedsweep.status": "running", "keep": "1"}
    ours = client.create_run(experiment, tags=tags, run_name="r").info.run_id
    theirs = client.create_run(experiment, tags=tags, run_name="r").info.run_id
    ended = {"fedsweep.loss_blowup": "test_loss 9 > 2", "fedsweep.status": "finished"}
    end_run(client, ours, "FINISHED", ended)
    client.log_batch(theirs, tags=[RunTag(k, v) for k, v in ended.items()])
    client.set_terminated(theirs, "FINISHED")
    a, b = client.get_run(ours), client.get_run(theirs)
    assert a.data.tags == b.data.tags and a.data.tags["fedsweep.status"] == "finished"
    assert a.info.status == b.info.status == "FINISHED"
    assert a.info.end_time >= a.info.start_time
    killed = client.create_run(experiment).info.run_id
    end_run(client, killed, "KILLED", {"fedsweep.status": "killed"})
    assert client.get_run(killed).info.status == "KILLED"
    client.delete_run(killed)
    from mlflow.exceptions import MlflowException

    with pytest.raises(MlflowException, match="must be in the 'active' state"):
        end_run(client, killed, "FAILED", {"fedsweep.status": "failed"})


def _done_store(client, experiment: str) -> dict[str, str]:
    """Runs of every kind a done-run lookup must tell apart; returns name -> run id."""
    gone = client.create_experiment("deleted later")
    plan = {
        # name: (experiment, hash, status tag, start time)
        "a-old": (experiment, "A", "finished", 1000),
        "a-new": (experiment, "A", "finished", 5000),
        "b": (experiment, "B", "diverged", 1000),
        "c-failed": (experiment, "C", "failed", 1000),
        "d-running": (experiment, "D", "running", 1000),
        "e-gone-experiment": (gone, "E", "finished", 1000),
        "f-deleted": (experiment, "F", "finished", 1000),
        "g-no-status": (experiment, "G", None, 1000),
        "h-tie-1": (experiment, "H", "finished", 3000),
        "h-tie-2": (experiment, "H", "diverged", 3000),
        "s-stopped": (experiment, "S", "stopped_early", 1000),  # a search trial ASHA stopped
    }
    ids = {}
    for name, (exp, h, status, start) in plan.items():
        tags = {"fedsweep.config_hash": h, **({"fedsweep.status": status} if status else {})}
        ids[name] = client.create_run(exp, start_time=start, tags=tags, run_name=name).info.run_id
    client.delete_run(ids["f-deleted"])
    client.delete_experiment(gone)
    return ids


def test_done_runs_sql_equals_the_client_scan(store):
    client, experiment, _ = store
    ids = _done_store(client, experiment)
    wanted = sorted("ABCDEFGHSZ")
    sql, scan = _done_sql(sql_store(client), wanted), _done_client(client, wanted)
    assert sorted(sql) == sorted(scan)
    # a stopped search trial's run: done only when asked for by its status
    stopped = _done_sql(sql_store(client), wanted, ("stopped_early",))
    assert stopped == _done_client(client, wanted, ("stopped_early",))
    assert [(h, run_id) for h, run_id, _ in stopped] == [("S", ids["s-stopped"])]
    found = done_runs_by_hash(client, wanted)
    tie = max(ids["h-tie-1"], ids["h-tie-2"])
    assert {h: run_id for h, (run_id, _) in found.items()} == {
        "A": ids["a-new"],
        "B": ids["b"],
        "H": tie,
    }
    assert found["A"][1] == 5000
    assert done_runs_by_hash(client, []) == {}
    runs = load_runs(client, [ids["a-new"], ids["b"]])
    assert {r.data.tags["fedsweep.config_hash"] for r in runs.values()} == {"A", "B"}


def test_done_runs_in_chunks(store, monkeypatch):
    """More hashes than one ``IN (...)`` takes: every chunk is asked."""
    import fedsweep.tracking.direct as direct

    client, experiment, _ = store
    ids = _done_store(client, experiment)
    monkeypatch.setattr(direct, "CHUNK", 2)
    found = done_runs_by_hash(client, "ABCDEFGHZ")
    assert {h: r for h, (r, _) in found.items()} == {
        "A": ids["a-new"],
        "B": ids["b"],
        "H": max(ids["h-tie-1"], ids["h-tie-2"]),
    }
