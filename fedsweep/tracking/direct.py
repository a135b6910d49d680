"""The hot paths of a sweep, written as single SQL statements on MLflow's own tables when the
store is MLflow's SQLAlchemy store (SQLite, PostgreSQL, MySQL), through MLflow's client API
otherwise (a tracking server, a file store).

- :func:`write_metrics`: a trial's per-round metrics. ``MlflowClient.log_batch`` builds one ORM
  object per value and costs about 0.1-0.17 ms per value on a 2-core machine (a 100-round BHerd
  SVM trial logs 2,600: 0.25-0.45 s); one multi-row ``INSERT`` costs 35-45 ms for the same rows.
- :func:`write_params` and :func:`end_run`: a trial's run's params at its creation (one
  ``INSERT`` for its 101 params, not two ``log_batch`` calls), and its end (its status tag and
  its termination in one transaction, not three).
- :func:`done_runs_by_hash`: which config hashes already have a finished run. Through the client
  API this loads every done run of the store, with all its params, tags and metrics (4.4-5.3 s
  for the 765 runs of a whole quick profile), three times per sweep; the query here reads two
  tag rows per matching run.

Both do what MLflow 3.17.2's ``SqlAlchemyStore`` does, on the tables and columns of its own
SQLAlchemy models (``mlflow.store.tracking.dbmodels.models``), so the rows are those
``log_batch`` / ``search_runs`` would write or find: ``tests/tracking/test_direct.py`` checks that
against the client API on a real store, for the pinned MLflow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: the ``fedsweep.status`` values of a run that counts as done (a result a sweep reuses)
DONE_STATUSES = ("finished", "diverged")
#: the ``fedsweep.status`` of a search trial's run that its early-stopping scheduler stopped
#: (``fedsweep.specs.search``): ended, but done only for its search, never reused otherwise
STOPPED_STATUS = "stopped_early"
#: the statuses of a run that ended (not one a trial adopts and continues)
ENDED_STATUSES = (*DONE_STATUSES, STOPPED_STATUS)
HASH_TAG = "fedsweep.config_hash"
STATUS_TAG = "fedsweep.status"
#: hashes per ``IN (...)`` (bound parameters; SQLite allows 32,766, others fewer)
CHUNK = 500


def sql_store(client):
    """The client's ``SqlAlchemyStore``, or None (a tracking server, a file store)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    return store if isinstance(store, SqlAlchemyStore) else None


# ------------------------------------------------------------------------------ metrics
def write_metrics(client, run_id: str, rows: Sequence[tuple[str, float, int, int]]) -> None:
    """Log ``rows`` of ``(key, value, timestamp_ms, step)`` to the active run ``run_id``, as
    ``client.log_batch`` would: every row into ``metrics``, the latest (by step, timestamp,
    value) of each key into ``latest_metrics``, NaN stored as 0 with ``is_nan``, +-inf as
    +-max float, in one transaction. A row that the run already has (same key, value, timestamp,
    step) makes the whole batch go through ``log_batch``, which skips it."""
    if not rows:
        return
    # a row logged before rolls the batch back as a whole: MLflow's path then skips it
    if not _written_by_sql(client, lambda store: _write_sql(store, run_id, rows)):
        _write_client(client, run_id, rows)


#: MLflow's limit on the metrics of one ``log_batch`` request
MAX_METRICS = 1000


def _written_by_sql(client, write) -> bool:
    """``write(store)`` on the client's SQL store, in its own transaction: True when it wrote;
    False where the store is not a SQL one, or where a row the table has already (SQLAlchemy's
    IntegrityError, possibly wrapped in MLflow's exception) rolled the transaction back as a
    whole: the caller then takes MLflow's client path, which skips or checks that row."""
    store = sql_store(client)
    if store is None:
        return False
    try:
        write(store)
    except Exception as err:  # MLflow's session wraps it in an MlflowException
        from sqlalchemy.exc import IntegrityError

        if not isinstance(err, IntegrityError) and not isinstance(err.__cause__, IntegrityError):
            raise
        return False
    return True


# ------------------------------------------------------------------------------- params
#: MLflow's limit on the params (and on the tags) of one ``log_batch`` request
MAX_PARAMS = 100


def write_params(client, run_id: str, params: Sequence[tuple[str, str]]) -> None:
    """Log ``params`` (``(key, value)``) to the active run ``run_id`` as ``client.log_batch``
    would (MLflow's checks; a value longer than MLflow's limit cut as it cuts it): on a SQL
    store one multi-row ``INSERT`` in one transaction (``log_batch`` takes one transaction per
    100 params, each reading the run again). A key the run has already makes the ``INSERT``
    fail as a whole: then ``log_batch`` logs them, which accepts an equal value and refuses a
    changed one."""
    if not params or _written_by_sql(
        client, lambda store: _write_params_sql(store, run_id, params)
    ):
        return
    from mlflow.entities import Param

    items = [Param(k, v) for k, v in params]
    for i in range(0, len(items), MAX_PARAMS):
        client.log_batch(run_id, params=items[i : i + MAX_PARAMS])


def _write_params_sql(store, run_id: str, params: Sequence[tuple[str, str]]) -> None:
    from mlflow.store.tracking.dbmodels.models import SqlParam
    from mlflow.utils.validation import _validate_param, _validate_param_keys_unique
    from sqlalchemy import insert

    checked = [_validate_param(k, v, path=f"params[{i}]") for i, (k, v) in enumerate(params)]
    _validate_param_keys_unique(checked)
    rows = [{"run_uuid": run_id, "key": p.key, "value": p.value} for p in checked]
    with store.ManagedSessionMaker(read_only=False) as session:
        store._check_run_is_active(store._get_run(run_uuid=run_id, session=session))
        session.execute(insert(SqlParam.__table__), rows)


# ---------------------------------------------------------------------------- run's end
def end_run(client, run_id: str, status: str, tags: dict[str, str]) -> None:
    """Set ``tags`` on the active run ``run_id`` and terminate it with MLflow status
    ``status`` (end time: now), as ``client.log_batch(tags=...)`` then
    ``client.set_terminated`` would: on a SQL store in one transaction (a reader sees the run
    ended with its tags or running without them; the client takes three, each reading the run
    again)."""
    store = sql_store(client)
    if store is None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)) for k, v in tags.items()]
        for i in range(0, len(items), MAX_PARAMS):
            client.log_batch(run_id, tags=items[i : i + MAX_PARAMS])
        client.set_terminated(run_id, status)
        return
    _end_run_sql(store, run_id, status, tags)


def _end_run_sql(store, run_id: str, status: str, tags: dict[str, str]) -> None:
    import time

    from mlflow.entities import RunStatus
    from mlflow.store.tracking.dbmodels.models import SqlTag
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME
    from mlflow.utils.validation import _validate_tag

    checked = [_validate_tag(k, str(v), path=f"tags[{i}]") for i, (k, v) in enumerate(tags.items())]
    if any(t.key == MLFLOW_RUN_NAME for t in checked):  # the run's name: MLflow's own path
        raise ValueError(f"end_run does not set {MLFLOW_RUN_NAME}")
    ended = RunStatus.to_string(RunStatus.from_string(status))
    with store.ManagedSessionMaker(read_only=False) as session:
        run = store._get_run(run_uuid=run_id, session=session)
        store._check_run_is_active(run)
        for tag in checked:  # an existing tag takes the new value (MLflow's _set_tags)
            session.merge(SqlTag(run_uuid=run_id, key=tag.key, value=tag.value))
        run.status = ended
        run.end_time = int(time.time() * 1000)
        session.add(run)


def _write_client(client, run_id: str, rows: Sequence[tuple[str, float, int, int]]) -> None:
    from mlflow.entities import Metric

    metrics = [Metric(k, float(v), ts, step) for k, v, ts, step in rows]
    for i in range(0, len(metrics), MAX_METRICS):
        client.log_batch(run_id, metrics=metrics[i : i + MAX_METRICS])


def _write_sql(store, run_id: str, rows: Sequence[tuple[str, float, int, int]]) -> None:
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric
    from mlflow.utils.validation import _validate_metric
    from sqlalchemy import and_, bindparam, insert, select, update

    checked: set[str] = set()
    records, seen = [], set()
    for i, (key, value, ts, step) in enumerate(rows):
        # MLflow's checks (name, value, timestamp, step): in full for a key's first row and for
        # any row that is not plainly (float or int, int >= 0, int); they raise as log_batch does
        plain = type(value) in (float, int) and type(ts) is int and ts >= 0 and type(step) is int
        if key not in checked or not plain:
            _validate_metric(key, value, ts, step, path=f"metrics[{i}]")
            checked.add(key)
        is_nan, stored = store.sanitize_metric_value(float(value))
        ident = (key, stored, ts, step, is_nan)
        if ident in seen:  # log_batch drops repeats within one batch
            continue
        seen.add(ident)
        records.append(
            {"run_uuid": run_id, "key": key, "value": stored, "timestamp": ts, "step": step,
             "is_nan": is_nan}
        )  # fmt: skip
    latest: dict[str, dict] = {}
    for r in records:  # the first of equal maxima wins, as in MLflow's strict comparison
        old = latest.get(r["key"])
        if old is None or _order(r) > _order(old):
            latest[r["key"]] = r
    with store.ManagedSessionMaker(read_only=False) as session:
        run = store._get_run(run_uuid=run_id, session=session)
        store._check_run_is_active(run)
        session.execute(insert(SqlMetric.__table__), records)
        table = SqlLatestMetric.__table__
        keys = sorted(latest)
        changed = []
        for i in range(0, len(keys), CHUNK):
            query = (
                select(table.c.key, table.c.step, table.c.timestamp, table.c.value)
                .where(table.c.run_uuid == run_id, table.c.key.in_(keys[i : i + CHUNK]))
                .order_by(table.c.key)
                .with_for_update()
            )
            for key, step, ts, value in session.execute(query):
                new = latest.pop(key)
                if _order(new) > (step, ts, value):
                    changed.append({**new, "k": key})
        if latest:
            session.execute(insert(table), list(latest.values()))
        if changed:
            session.execute(
                update(table)
                .where(and_(table.c.run_uuid == run_id, table.c.key == bindparam("k")))
                .values(
                    value=bindparam("value"),
                    timestamp=bindparam("timestamp"),
                    step=bindparam("step"),
                    is_nan=bindparam("is_nan"),
                ),
                [{k: c[k] for k in ("k", "value", "timestamp", "step", "is_nan")} for c in changed],
            )


def _order(record: dict) -> tuple:
    return (record["step"], record["timestamp"], record["value"])


# ---------------------------------------------------------------------------- done runs
def done_runs_by_hash(client, hashes: Iterable[str]) -> dict[str, tuple[str, int]]:
    """For each of ``hashes`` that has a done run (``fedsweep.status`` finished or diverged)
    in an active experiment of the store, ``(run_id, start_time_ms)`` of its latest started one
    (the larger run id on an equal start). Runs and experiments deleted in the UI do not count,
    as in ``search_runs``' default view."""
    return {h: runs[0] for h, runs in done_run_candidates(client, hashes).items()}


def done_run_candidates(
    client, hashes: Iterable[str], statuses: Sequence[str] = DONE_STATUSES
) -> dict[str, list[tuple[str, int]]]:
    """For each of ``hashes`` with done runs (``statuses``: those of :data:`STOPPED_STATUS`
    for a search's stopped trials), every one as ``(run_id, start_time_ms)``, the
    latest started first (the larger run id first on an equal start): what
    :func:`done_runs_by_hash` picks from, and what ``tracking.provenance`` checks in turn."""
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    store = sql_store(client)
    found = (
        _done_sql(store, wanted, statuses)
        if store is not None
        else _done_client(client, wanted, statuses)
    )
    return by_latest_start(found)


def by_latest_start(found: Iterable[tuple[str, str, int]]) -> dict[str, list[tuple[str, int]]]:
    """``(hash, run_id, start_time_ms)`` rows grouped by hash, each hash's runs the latest
    started first (the larger run id first on an equal start)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for h, run_id, start in sorted(found, key=lambda r: (r[2], r[1]), reverse=True):
        out.setdefault(h, []).append((run_id, start))
    return out


def _done_sql(
    store, wanted: list[str], statuses: Sequence[str] = DONE_STATUSES
) -> list[tuple[str, str, int]]:
    from mlflow.entities import LifecycleStage
    from mlflow.store.tracking.dbmodels.models import SqlExperiment, SqlRun, SqlTag
    from sqlalchemy import and_, select
    from sqlalchemy.orm import aliased

    hash_tag, status_tag = aliased(SqlTag), aliased(SqlTag)
    found = []
    with store.ManagedSessionMaker() as session:
        for i in range(0, len(wanted), CHUNK):
            query = (
                select(hash_tag.value, SqlRun.run_uuid, SqlRun.start_time)
                .join(
                    hash_tag,
                    and_(hash_tag.run_uuid == SqlRun.run_uuid, hash_tag.key == HASH_TAG),
                )
                .join(
                    status_tag,
                    and_(
                        status_tag.run_uuid == SqlRun.run_uuid,
                        status_tag.key == STATUS_TAG,
                        status_tag.value.in_(list(statuses)),
                    ),
                )
                .join(SqlExperiment, SqlExperiment.experiment_id == SqlRun.experiment_id)
                .where(
                    hash_tag.value.in_(wanted[i : i + CHUNK]),
                    SqlRun.lifecycle_stage == LifecycleStage.ACTIVE,
                    SqlExperiment.lifecycle_stage == LifecycleStage.ACTIVE,
                )
            )
            found += [(h, run_id, start or 0) for h, run_id, start in session.execute(query)]
    return found


def unfinished_children(client, parent_run_id: str, config_hash: str) -> list[str] | None:
    """The child runs of ``parent_run_id`` tagged with ``config_hash`` whose ``fedsweep.status``
    is not an ended one (:data:`ENDED_STATUSES`; or missing), active and in an active
    experiment, in ``search_runs``' default order (the latest started first, then by run id):
    one query on a SQL store (a sweep trial asks it for the run to adopt); None on another store
    (the caller searches through the client)."""
    store = sql_store(client)
    if store is None:
        return None
    from mlflow.entities import LifecycleStage
    from mlflow.store.tracking.dbmodels.models import SqlExperiment, SqlRun, SqlTag
    from sqlalchemy import and_, or_, select
    from sqlalchemy.orm import aliased

    parent, hashed, status = aliased(SqlTag), aliased(SqlTag), aliased(SqlTag)
    query = (
        select(SqlRun.run_uuid)
        .join(
            parent,
            and_(
                parent.run_uuid == SqlRun.run_uuid,
                parent.key == "mlflow.parentRunId",
                parent.value == parent_run_id,
            ),
        )
        .join(
            hashed,
            and_(
                hashed.run_uuid == SqlRun.run_uuid,
                hashed.key == HASH_TAG,
                hashed.value == config_hash,
            ),
        )
        .outerjoin(status, and_(status.run_uuid == SqlRun.run_uuid, status.key == STATUS_TAG))
        .join(SqlExperiment, SqlExperiment.experiment_id == SqlRun.experiment_id)
        .where(
            or_(status.value.is_(None), status.value.not_in(ENDED_STATUSES)),
            SqlRun.lifecycle_stage == LifecycleStage.ACTIVE,
            SqlExperiment.lifecycle_stage == LifecycleStage.ACTIVE,
        )
        .order_by(SqlRun.start_time.desc(), SqlRun.run_uuid)
    )
    with store.ManagedSessionMaker() as session:
        return [run_id for (run_id,) in session.execute(query)]


def tagged_done_hashes(db, hashes: Iterable[str]) -> set[str] | None:
    """Which of ``hashes`` have a done run by their tags alone (the query of :func:`_done_sql`),
    read from the local SQLite store file ``db`` with the standard library: no MLflow import,
    no provenance check, so a superset of what ``tracking.provenance.verified_done_runs``
    finds. A missing or empty file has none; None when the file cannot be read so (not an
    MLflow store, locked, damaged). For a sweep driver that decides, before MLflow is imported,
    whether it will schedule anything."""
    import sqlite3
    from pathlib import Path

    wanted = sorted(set(hashes))
    path = Path(db)
    if not path.is_file() or path.stat().st_size == 0:
        return set()
    found: set[str] = set()
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
        try:
            for i in range(0, len(wanted), CHUNK):
                chunk = wanted[i : i + CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = con.execute(
                    "SELECT DISTINCT h.value FROM tags h"
                    " JOIN tags s ON s.run_uuid = h.run_uuid AND s.key = ?"
                    f" AND s.value IN ({','.join('?' * len(DONE_STATUSES))})"
                    " JOIN runs r ON r.run_uuid = h.run_uuid"
                    " JOIN experiments e ON e.experiment_id = r.experiment_id"
                    f" WHERE h.key = ? AND h.value IN ({marks})"
                    " AND r.lifecycle_stage = 'active' AND e.lifecycle_stage = 'active'",
                    [STATUS_TAG, *DONE_STATUSES, HASH_TAG, *chunk],
                )
                found.update(value for (value,) in rows)
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return found


def _done_client(
    client, wanted: list[str], statuses: Sequence[str] = DONE_STATUSES
) -> list[tuple[str, str, int]]:
    """The same through the client API: every done run of the store (one paged search per
    status; MLflow's search has no ``IN`` for tags)."""
    keep = set(wanted)
    experiments = [e.experiment_id for e in client.search_experiments()]
    found = []
    for status in statuses:
        token = None
        while experiments:
            page = client.search_runs(
                experiments,
                filter_string=f"tags.`{STATUS_TAG}` = '{status}'",
                max_results=5000,
                page_token=token,
            )
            for run in page:
                h = run.data.tags.get(HASH_TAG)
                if h in keep:
                    found.append((h, run.info.run_id, run.info.start_time or 0))
            token = page.token
            if not token:
                break
    return found


def artifact_uri(client, run_id: str) -> str | None:
    """The run's artifact location: one column of one row on a SQL store (``get_run`` reads
    the run's params, tags and metrics too), ``get_run``'s otherwise. MLflow's exception when
    the run does not exist, as ``get_run``."""
    store = sql_store(client)
    if store is None:
        return client.get_run(run_id).info.artifact_uri
    from mlflow.store.tracking.dbmodels.models import SqlRun
    from sqlalchemy import select

    with store.ManagedSessionMaker() as session:
        found = session.execute(
            select(SqlRun.artifact_uri).where(SqlRun.run_uuid == run_id)
        ).one_or_none()
    if found is None:
        return client.get_run(run_id).info.artifact_uri  # MLflow's own "not found"
    return found[0]


def load_runs(client, run_ids: Iterable[str]) -> dict[str, object]:
    """The MLflow runs ``run_ids`` (of any active experiment), by id: one search per 100."""
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    experiments = [e.experiment_id for e in client.search_experiments()]
    out = {}
    for i in range(0, len(ids), 100):
        chunk = ", ".join(f"'{r}'" for r in ids[i : i + 100])
        for run in client.search_runs(
            experiments, filter_string=f"attributes.run_id IN ({chunk})", max_results=1000
        ):
            out[run.info.run_id] = run
    return out
