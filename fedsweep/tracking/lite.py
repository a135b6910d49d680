"""A tracked run's and a sweep trial's store work on a local SQLite MLflow store, with Python's
``sqlite3`` and plain file writes: no ``import mlflow`` (about 2.3 CPU-s in a fresh process,
3.5 s with MLflow's SQLAlchemy store), which every new Ray trial actor paid before its first
round.

:class:`LiteStore` writes the rows MLflow 3.17.2's ``SqlAlchemyStore`` writes for the same calls,
on the tables and columns of its own models (``mlflow.store.tracking.dbmodels.models``,
``mlflow.store.model_registry.dbmodels.models``): runs (``create_run``: the ``mlflow.runName``
tag, ``user_id`` from ``mlflow.user``, MLflow's empty source columns), tags, params (checked and
cut as ``log_batch`` cuts them: :mod:`fedsweep.tracking.mlflow_checks`), metrics and
``latest_metrics`` (NaN stored as 0 with ``is_nan``, +-inf as +-max float, the latest by step,
timestamp, value), a run's status and end time, an
experiment's tags, and the registered models that hold fedsweep's leases
(``tracking.leases``). Artifacts go into the run's local artifact folder as MLflow's local
artifact repository writes them (a hidden ``.artifact.uploading.*`` file renamed into place).
``tests/tracking/test_lite.py`` checks the rows against MLflow's client on two real stores.

It serves a store only when that is safe (:func:`lite_db`): a ``sqlite:///`` URI whose file has
MLflow's complete schema at the revision this module was written for, with the MLflow version
installed whose rows it copies, no MLflow workspaces, and a Default experiment (MLflow's first
open made it). Anything else (PostgreSQL, a tracking server, a file store, another MLflow, a new
store) goes through MLflow's client (``tracking.runstore.ClientStore``), as does an experiment
whose artifact location is not a local folder. ``FEDSWEEP_LITE_STORE=0`` turns it off.

Each write is one ``BEGIN IMMEDIATE`` transaction with MLflow's own connection settings
(``PRAGMA foreign_keys = ON``, a busy timeout of 20 s): several trials and the driver write one
database at once, and a writer that waits takes the lock before it reads, so two writers never
deadlock. A locked or full database raises ``sqlite3.OperationalError`` as MLflow's path raises
SQLAlchemy's (its text, "database is locked" or "database or disk is full", is what fedsweep's
error handling reads).
"""

from __future__ import annotations

import math
import os
import posixpath
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from fedsweep.tracking.direct import (
    CHUNK,
    DONE_STATUSES,
    ENDED_STATUSES,
    HASH_TAG,
    STATUS_TAG,
    by_latest_start,
)
from fedsweep.tracking.mlflow_checks import (
    MAX_KEY,
    LiteError,
    check_metric,
    check_model_name,
    check_name,
    check_registry_tag,
    checked_param,
    checked_tag,
    env_off,
    sanitized,
    within_limit,
)
from fedsweep.tracking.uri import file_uri_path, sqlite_path

#: the MLflow whose rows :class:`LiteStore` writes, and its schema revision (alembic head)
MLFLOW_VERSION = "3.17.2"
SCHEMA_REVISION = "dc11669786a5"
#: ``0``/``off``: every store through MLflow's client
LITE_ENV = "FEDSWEEP_LITE_STORE"
#: MLflow's connection settings for SQLite (``mlflow.store.db.utils``: ``busy_timeout = 20000``)
BUSY_TIMEOUT_S = 20.0
#: MLflow's workspace of every row when workspaces are off (``DEFAULT_WORKSPACE_NAME``)
WORKSPACE = "default"
#: the prefix of MLflow's local artifact repository's files being written (hidden from listings)
UPLOADING = ".artifact.uploading."
RUN_NAME_TAG = "mlflow.runName"
USER_TAG = "mlflow.user"
PARENT_TAG = "mlflow.parentRunId"
#: MLflow's ``RunStatus`` names
RUN_STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")

#: stores this process found servable (:func:`lite_db`)
_SERVABLE: set[str] = set()


def _on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _installed_mlflow() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlflow")
    except PackageNotFoundError:
        return None


def lite_db(tracking_uri: str) -> Path | None:
    """The database file of ``tracking_uri`` when :class:`LiteStore` can serve it, else None:
    a ``sqlite:///`` URI (no query) whose file has this MLflow's complete schema (alembic
    revision :data:`SCHEMA_REVISION`, no table of a stopped migration) and an experiment, the
    installed MLflow is :data:`MLFLOW_VERSION`, MLflow's workspaces are off and
    ``$FEDSWEEP_LITE_STORE`` is not ``0``. A store found servable stays so for the process."""
    db = sqlite_path(tracking_uri)
    if db is None or "?" in tracking_uri or env_off(LITE_ENV) or _on("MLFLOW_ENABLE_WORKSPACES"):
        return None
    if tracking_uri in _SERVABLE:
        return db
    if _installed_mlflow() != MLFLOW_VERSION or not _schema_ready(db):
        return None
    _SERVABLE.add(tracking_uri)
    return db


def _schema_ready(db: Path) -> bool:
    try:
        if not db.is_file() or db.stat().st_size == 0:
            return False
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            tables = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            if "alembic_version" not in tables or any(
                t.startswith("_alembic_tmp_") for t in tables
            ):
                return False
            versions = [r[0] for r in con.execute("SELECT version_num FROM alembic_version")]
            if versions != [SCHEMA_REVISION]:
                return False
            return con.execute("SELECT count(*) FROM experiments").fetchone()[0] > 0
        finally:
            con.close()
    except (OSError, sqlite3.Error):
        return False


def _now_ms() -> int:
    return int(time.time() * 1000)


def _marks(n: int) -> str:
    return ",".join("?" * n)


# ------------------------------------------------------------------------------- the store
class LiteStore:
    """The store operations of ``tracking.runstore``'s interface on the local SQLite store
    ``db`` (``tracking_uri``'s file; :func:`lite_db` said it can be served)."""

    def __init__(self, tracking_uri: str, db: Path):
        self.tracking_uri, self.db = tracking_uri, Path(db)
        self._client = None

    @property
    def client(self):
        """MLflow's client of the store, made (and MLflow imported) on first use: for what
        this store does not do itself (a found run's artifacts on a remote location)."""
        if self._client is None:
            from fedsweep.tracking.connect import get_client

            self._client = get_client(self.tracking_uri)
        return self._client

    # --------------------------------------------------------------- connections
    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.db, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        con.execute("PRAGMA foreign_keys = ON")
        con.execute("PRAGMA case_sensitive_like = true")
        return con

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        con = self._connect()
        try:
            yield con
        finally:
            con.close()

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken before its first read (``BEGIN IMMEDIATE``)."""
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                if con.in_transaction:  # SQLite ends it itself on some errors (a full disk):
                    con.execute("ROLLBACK")  # a second ROLLBACK would hide the error
                raise
            con.execute("COMMIT")
        finally:
            con.close()

    @staticmethod
    def _active_run(con: sqlite3.Connection, run_id: str) -> None:
        """MLflow's ``_get_run`` and ``_check_run_is_active``."""
        row = con.execute(
            "SELECT lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise LiteError(f"Run with id={run_id} not found")
        if row[0] != "active":
            raise LiteError(
                f"The run {run_id} must be in the 'active' state. Current state is {row[0]}."
            )

    # --------------------------------------------------------------- experiments
    def experiment(self, name: str) -> tuple[str, str | None, str] | None:
        """``(experiment id, artifact location, lifecycle stage)`` of the experiment ``name``
        (deleted ones too, as ``get_experiment_by_name``), or None."""
        with self._reading() as con:
            row = con.execute(
                "SELECT experiment_id, artifact_location, lifecycle_stage FROM experiments"
                " WHERE name = ? AND workspace = ?",
                (name, WORKSPACE),
            ).fetchone()
        return None if row is None else (str(row[0]), row[1], row[2])

    def serves_experiment(self, name: str) -> bool:
        """The experiment ``name`` exists, is active, and keeps its artifacts in a local
        folder (this store writes them)."""
        found = self.experiment(name)
        return found is not None and found[2] == "active" and _local(found[1]) is not None

    def ensure_experiment(
        self, name: str, description: str | None = None, *, overwrite: bool = False
    ) -> str:
        """``store.ensure_experiment`` of an existing experiment (:meth:`serves_experiment`):
        its kind, saved view and description tags as MLflow's ``set_experiment_tag`` writes
        them, where they differ."""
        from fedsweep.tracking.store import experiment_tag_updates

        found = self.experiment(name)
        if found is None:
            raise LiteError(f"no experiment named {name!r}")
        exp_id = found[0]
        with self._reading() as con:
            tags = dict(
                con.execute(
                    "SELECT key, value FROM experiment_tags WHERE experiment_id = ?", (int(exp_id),)
                ).fetchall()
            )
        updates = experiment_tag_updates(tags, exp_id, description, overwrite=overwrite)
        for key, value in updates.items():  # one transaction each, as the client's calls
            check_name(key, "key")
            within_limit("key", MAX_KEY, key)
            with self._writing() as con:
                stage = con.execute(
                    "SELECT lifecycle_stage FROM experiments WHERE experiment_id = ?",
                    (int(exp_id),),
                ).fetchone()
                if stage is None or stage[0] != "active":
                    raise LiteError(f"The experiment {exp_id} must be in the 'active' state.")
                con.execute(
                    "INSERT INTO experiment_tags (key, value, experiment_id) VALUES (?, ?, ?)"
                    " ON CONFLICT (key, experiment_id) DO UPDATE SET value = excluded.value",
                    (key, value, int(exp_id)),
                )
        return exp_id

    # ---------------------------------------------------------------------- runs
    def create_run(
        self, experiment_id: str, tags: dict[str, str], run_name: str | None
    ) -> tuple[str, str]:
        """``MlflowClient.create_run``: a RUNNING run with ``tags`` (and ``mlflow.runName``),
        started now; ``(run id, artifact URI)``."""
        tags = dict(tags or {})
        tag_name = tags.get(RUN_NAME_TAG)
        if run_name and tag_name and run_name != tag_name:
            raise LiteError(
                "Both 'run_name' argument and 'mlflow.runName' tag are specified, but with "
                f"different values (run_name='{run_name}', mlflow.runName='{tag_name}')."
            )
        name = run_name or tag_name
        if not name:  # MLflow draws a random name: its own path
            raise LiteError("a run needs a name (run_name or the mlflow.runName tag)")
        if not tag_name:
            tags[RUN_NAME_TAG] = name
        run_id = uuid.uuid4().hex
        with self._writing() as con:
            row = con.execute(
                "SELECT artifact_location, lifecycle_stage FROM experiments"
                " WHERE experiment_id = ?",
                (int(experiment_id),),
            ).fetchone()
            if row is None:
                raise LiteError(f"No Experiment with id={experiment_id} exists")
            if row[1] != "active":
                raise LiteError(
                    f"The experiment {experiment_id} must be in the 'active' state. "
                    f"Current state is {row[1]}."
                )
            artifact_uri = _run_artifacts(row[0], run_id)
            con.execute(
                "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name,"
                " user_id, status, start_time, end_time, source_version, lifecycle_stage,"
                " artifact_uri, experiment_id, deleted_time)"
                " VALUES (?, ?, 'UNKNOWN', '', '', ?, 'RUNNING', ?, NULL, '', 'active', ?, ?,"
                " NULL)",
                (
                    run_id,
                    name,
                    tags.get(USER_TAG, "unknown"),
                    _now_ms(),
                    artifact_uri,
                    int(experiment_id),
                ),
            )
            con.executemany(
                "INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                [(k, v, run_id) for k, v in tags.items()],
            )
        return run_id, artifact_uri

    def reopen_run(self, run_id: str) -> None:
        """``MlflowClient.update_run(run_id, status="RUNNING")`` (its end time stays)."""
        with self._writing() as con:
            self._active_run(con, run_id)
            con.execute("UPDATE runs SET status = 'RUNNING' WHERE run_uuid = ?", (run_id,))

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        """``log_batch(tags=...)``: each tag set (a new value replaces the old one;
        ``mlflow.runName`` renames the run too)."""
        checked = [checked_tag(k, str(v)) for k, v in tags.items()]
        if not checked:
            return
        with self._writing() as con:
            self._active_run(con, run_id)
            self._upsert_tags(con, run_id, checked)

    @staticmethod
    def _upsert_tags(con, run_id: str, checked: Sequence[tuple[str, str]]) -> None:
        con.executemany(
            "INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)"
            " ON CONFLICT (key, run_uuid) DO UPDATE SET value = excluded.value",
            [(k, v, run_id) for k, v in checked],
        )
        for key, value in checked:
            if key == RUN_NAME_TAG:
                con.execute("UPDATE runs SET name = ? WHERE run_uuid = ?", (value, run_id))

    def write_params(self, run_id: str, params: Sequence[tuple[str, str]]) -> None:
        """``tracking.direct.write_params``: one multi-row insert; with a key the run has, an
        equal value is skipped and a changed one refused, as ``log_batch`` does."""
        if not params:
            return
        checked = [checked_param(k, v) for k, v in params]
        keys = [k for k, _ in checked]
        if len(set(keys)) != len(keys):
            dupes = [k for i, k in enumerate(keys) if k in keys[:i]]
            raise LiteError(f"Duplicate parameter keys have been submitted: {dupes}.")
        rows = [(k, v, run_id) for k, v in checked]
        try:
            with self._writing() as con:
                self._active_run(con, run_id)
                con.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)", rows)
            return
        except sqlite3.IntegrityError:
            pass
        with self._writing() as con:  # some keys are there already: MLflow's _log_params
            self._active_run(con, run_id)
            have = dict(con.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,)))
            changed = [
                {"key": k, "old_value": have[k], "new_value": v}
                for k, v in checked
                if k in have and have[k] != v
            ]
            if changed:
                raise LiteError(
                    "Changing param values is not allowed. Params were already"
                    f" logged='{changed}' for run ID='{run_id}'."
                )
            con.executemany(
                "INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
                [r for r in rows if r[0] not in have],
            )

    def write_metrics(self, run_id: str, rows: Sequence[tuple[str, float, int, int]]) -> None:
        """``tracking.direct.write_metrics``: every row into ``metrics`` (a row the run has
        already skipped, as ``log_batch`` skips it) and the latest of each key into
        ``latest_metrics``, in one transaction."""
        if not rows:
            return
        checked: set[str] = set()
        records, seen = [], set()
        for key, value, ts, step in rows:
            plain = (
                type(value) in (float, int) and type(ts) is int and ts >= 0 and type(step) is int
            )
            if key not in checked or not plain:
                check_metric(key, value, ts, step)
                checked.add(key)
            is_nan, stored = sanitized(float(value))
            ident = (key, stored, ts, step, is_nan)
            if ident in seen:  # log_batch drops repeats within one batch
                continue
            seen.add(ident)
            records.append(ident)
        latest: dict[str, tuple] = {}
        for r in records:  # the first of equal maxima wins, as MLflow's strict comparison
            old = latest.get(r[0])
            if old is None or (r[3], r[2], r[1]) > (old[3], old[2], old[1]):
                latest[r[0]] = r
        columns = (
            "metrics (key, value, timestamp, step, is_nan, run_uuid) VALUES (?, ?, ?, ?, ?, ?)"
        )
        values = [(k, v, ts, step, nan, run_id) for k, v, ts, step, nan in records]
        try:
            with self._writing() as con:
                self._active_run(con, run_id)
                con.executemany(f"INSERT INTO {columns}", values)
                self._update_latest(con, run_id, dict(latest))
            return
        except sqlite3.IntegrityError:
            pass
        # a row logged before: MLflow's log_batch inserts the others (latest_metrics already
        # holds a row at least as late as any row the table has)
        with self._writing() as con:
            self._active_run(con, run_id)
            con.executemany(f"INSERT OR IGNORE INTO {columns}", values)
            self._update_latest(con, run_id, dict(latest))

    @staticmethod
    def _update_latest(con, run_id: str, latest: dict[str, tuple]) -> None:
        keys = sorted(latest)
        changed = []
        for i in range(0, len(keys), CHUNK):
            chunk = keys[i : i + CHUNK]
            found = con.execute(
                "SELECT key, step, timestamp, value FROM latest_metrics WHERE run_uuid = ?"
                f" AND key IN ({_marks(len(chunk))}) ORDER BY key",
                [run_id, *chunk],
            ).fetchall()
            for key, step, ts, value in found:
                new = latest.pop(key)
                if (new[3], new[2], new[1]) > (step, ts, value):
                    changed.append((new[1], new[2], new[3], new[4], run_id, key))
        con.executemany(
            "INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(k, v, ts, step, nan, run_id) for k, v, ts, step, nan in latest.values()],
        )
        con.executemany(
            "UPDATE latest_metrics SET value = ?, timestamp = ?, step = ?, is_nan = ?"
            " WHERE run_uuid = ? AND key = ?",
            changed,
        )

    def end_run(self, run_id: str, status: str, tags: dict[str, str]) -> None:
        """``tracking.direct.end_run``: ``tags`` set and the run ended with MLflow status
        ``status`` (end time: now), in one transaction."""
        checked = [checked_tag(k, str(v)) for k, v in tags.items()]
        if any(k == RUN_NAME_TAG for k, _ in checked):
            raise ValueError(f"end_run does not set {RUN_NAME_TAG}")
        if status.upper() not in RUN_STATUSES:
            raise LiteError(f"Could not get run status corresponding to string {status}")
        try:
            with self._writing() as con:
                self._active_run(con, run_id)
                self._upsert_tags(con, run_id, checked)
                con.execute(
                    "UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?",
                    (status.upper(), _now_ms(), run_id),
                )
        except sqlite3.OperationalError as err:
            if "disk is full" not in str(err) or status.upper() == "FINISHED":
                raise
            self._end_on_a_full_disk(run_id, status.upper(), dict(checked))

    def _end_on_a_full_disk(self, run_id: str, status: str, tags: dict[str, str]) -> None:
        """End a failed or killed run on a full disk, where the rollback journal of
        :meth:`end_run` cannot be created: the journal in memory for this one transaction,
        which only rewrites rows in place (the run's status and end time, its
        ``fedsweep.status`` tag), so no page is added. A run is never left RUNNING because its
        disk filled (issue 62 item 10)."""
        con = self._connect()
        try:
            con.execute("PRAGMA journal_mode = MEMORY")
            con.execute("BEGIN IMMEDIATE")
            con.execute(
                "UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?",
                (status, _now_ms(), run_id),
            )
            if "fedsweep.status" in tags:
                con.execute(
                    "UPDATE tags SET value = ? WHERE run_uuid = ? AND key = 'fedsweep.status'",
                    (tags["fedsweep.status"], run_id),
                )
            con.execute("COMMIT")
        finally:
            con.close()

    # --------------------------------------------------------------------- reads
    def artifact_uri(self, run_id: str) -> str:
        """The run's artifact location."""
        with self._reading() as con:
            row = con.execute(
                "SELECT artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)
            ).fetchone()
        if row is None:
            raise LiteError(f"Run with id={run_id} not found")
        return row[0]

    def run_tag(self, run_id: str, key: str) -> str | None:
        """The value of the run's tag ``key`` (None without it)."""
        with self._reading() as con:
            row = con.execute(
                "SELECT value FROM tags WHERE run_uuid = ? AND key = ?", (run_id, key)
            ).fetchone()
        return None if row is None else row[0]

    def metric_history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        """``(step, value)`` of every value of ``key`` in ``get_metric_history``'s order (by
        timestamp, step, value); NaN as NaN."""
        with self._reading() as con:
            if con.execute("SELECT 1 FROM runs WHERE run_uuid = ?", (run_id,)).fetchone() is None:
                raise LiteError(f"Run with id={run_id} not found")
            rows = con.execute(
                "SELECT step, value, is_nan FROM metrics WHERE run_uuid = ? AND key = ?"
                " ORDER BY timestamp, step, value",
                (run_id, key),
            ).fetchall()
        return [(step, math.nan if nan else value) for step, value, nan in rows]

    def keys_past(self, run_id: str, step: int) -> list[str]:
        """The metric keys whose latest value is of a step after ``step``."""
        with self._reading() as con:
            rows = con.execute(
                "SELECT key FROM latest_metrics WHERE run_uuid = ? AND step > ?", (run_id, step)
            ).fetchall()
        return [key for (key,) in rows]

    def done_run_candidates(
        self, hashes: Iterable[str], statuses: Sequence[str] = DONE_STATUSES
    ) -> dict[str, list[tuple[str, int]]]:
        """``tracking.direct.done_run_candidates`` (the same query)."""
        wanted = sorted(set(hashes))
        found = []
        with self._reading() as con:
            for i in range(0, len(wanted), CHUNK):
                chunk = wanted[i : i + CHUNK]
                found += con.execute(
                    "SELECT h.value, r.run_uuid, r.start_time FROM runs r"
                    " JOIN tags h ON h.run_uuid = r.run_uuid AND h.key = ?"
                    " JOIN tags s ON s.run_uuid = r.run_uuid AND s.key = ?"
                    f" AND s.value IN ({_marks(len(statuses))})"
                    " JOIN experiments e ON e.experiment_id = r.experiment_id"
                    f" WHERE h.value IN ({_marks(len(chunk))})"
                    " AND r.lifecycle_stage = 'active' AND e.lifecycle_stage = 'active'",
                    [HASH_TAG, STATUS_TAG, *statuses, *chunk],
                ).fetchall()
        return by_latest_start((h, run_id, start or 0) for h, run_id, start in found)

    def unfinished_child(self, parent_run_id: str, config_hash: str) -> str | None:
        """``tracking.direct.unfinished_children``' first run (the same query), or None."""
        with self._reading() as con:
            row = con.execute(
                "SELECT r.run_uuid FROM runs r"
                " JOIN tags p ON p.run_uuid = r.run_uuid AND p.key = ? AND p.value = ?"
                " JOIN tags h ON h.run_uuid = r.run_uuid AND h.key = ? AND h.value = ?"
                " LEFT OUTER JOIN tags s ON s.run_uuid = r.run_uuid AND s.key = ?"
                " JOIN experiments e ON e.experiment_id = r.experiment_id"
                f" WHERE (s.value IS NULL OR s.value NOT IN ({_marks(len(ENDED_STATUSES))}))"
                " AND r.lifecycle_stage = 'active' AND e.lifecycle_stage = 'active'"
                " ORDER BY r.start_time DESC, r.run_uuid LIMIT 1",
                [PARENT_TAG, parent_run_id, HASH_TAG, config_hash, STATUS_TAG, *ENDED_STATUSES],
            ).fetchone()
        return None if row is None else row[0]

    # ----------------------------------------------------------------- artifacts
    def list_artifacts(self, run_id: str, artifact_uri: str | None = None) -> list[str]:
        """The paths at the top of the run's artifacts (``list_artifacts(run_id)``)."""
        folder = _local(artifact_uri or self.artifact_uri(run_id))
        if folder is None:
            return [f.path for f in self.client.list_artifacts(run_id)]
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if not p.name.startswith(UPLOADING))

    def read_text(self, run_id: str, path: str) -> str:
        """The text of the run's artifact ``path`` (``OSError`` when it has none)."""
        folder = _local(self.artifact_uri(run_id))
        if folder is None:  # a remote location: MLflow downloads it
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                return Path(self.client.download_artifacts(run_id, path, tmp)).read_text()
        return (folder / path).read_text()

    def log_text(self, run_id: str, artifact_uri: str, text: str, artifact_file: str) -> None:
        """``log_text``: ``text`` as the run's artifact ``artifact_file`` (UTF-8)."""
        target = self._target(artifact_uri, artifact_file)
        _publish(target, lambda handle: handle.write(text.encode("utf-8")))

    def log_artifacts(
        self, run_id: str, artifact_uri: str, local_dir: str | Path, artifact_path: str | None
    ) -> None:
        """``log_artifacts``: the files under ``local_dir`` into the run's ``artifact_path``."""
        base = Path(local_dir)
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            rel = path.relative_to(base).as_posix()
            target = self._target(artifact_uri, f"{artifact_path}/{rel}" if artifact_path else rel)

            def copy(handle, source=path):
                with open(source, "rb") as src:
                    shutil.copyfileobj(src, handle)

            _publish(target, copy)

    @staticmethod
    def _target(artifact_uri: str, artifact_file: str) -> Path:
        folder = _local(artifact_uri)
        if folder is None:
            raise LiteError(f"the artifact location {artifact_uri} is not a local folder")
        rel = posixpath.normpath(artifact_file)
        if rel.startswith(("/", "..")) or rel == ".":
            raise LiteError(f"invalid artifact path {artifact_file!r}")
        return folder / rel

    # --------------------------------------------------------------------- leases
    def create_lease(self, name: str, tags: dict[str, str], description: str) -> bool:
        """``create_registered_model(name, tags, description)``: False when ``name`` exists."""
        check_model_name(name)
        for key, value in tags.items():
            check_registry_tag(key, value)
        now = _now_ms()
        try:
            with self._writing() as con:
                con.execute(
                    "INSERT INTO registered_models (name, creation_time, last_updated_time,"
                    " description, workspace) VALUES (?, ?, ?, ?, ?)",
                    (name, now, now, description, WORKSPACE),
                )
                con.executemany(
                    "INSERT INTO registered_model_tags (key, value, name, workspace)"
                    " VALUES (?, ?, ?, ?)",
                    [(k, v, name, WORKSPACE) for k, v in tags.items()],
                )
        except sqlite3.IntegrityError:
            return False
        return True

    def lease_tags(self, name: str) -> dict[str, str] | None:
        """The registered model's tags, None when there is none named ``name``."""
        check_model_name(name)
        with self._reading() as con:
            exists = con.execute(
                "SELECT 1 FROM registered_models WHERE name = ? AND workspace = ?",
                (name, WORKSPACE),
            ).fetchone()
            if exists is None:
                return None
            return dict(
                con.execute(
                    "SELECT key, value FROM registered_model_tags WHERE name = ? AND workspace = ?",
                    (name, WORKSPACE),
                ).fetchall()
            )

    def set_lease_tag(self, name: str, key: str, value: str) -> None:
        """``set_registered_model_tag``; LiteError when the model does not exist."""
        check_model_name(name)
        check_registry_tag(key, value)
        with self._writing() as con:
            if not self._model_exists(con, name):
                raise LiteError(f"Registered Model with name={name} not found")
            con.execute(
                "INSERT INTO registered_model_tags (key, value, name, workspace)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (workspace, key, name)"
                " DO UPDATE SET value = excluded.value",
                (key, value, name, WORKSPACE),
            )

    def delete_lease(self, name: str) -> None:
        """``delete_registered_model`` (its tags with it); nothing when there is none."""
        with self._writing() as con:
            self._delete_model(con, name)

    def release_lease(self, name: str, token: str) -> None:
        """Delete the lease ``name`` if its ``token`` tag is ``token``, in one transaction."""
        with self._writing() as con:
            row = con.execute(
                "SELECT value FROM registered_model_tags WHERE name = ? AND workspace = ?"
                " AND key = 'token'",
                (name, WORKSPACE),
            ).fetchone()
            if row is not None and row[0] == token:
                self._delete_model(con, name)

    @staticmethod
    def _model_exists(con, name: str) -> bool:
        return (
            con.execute(
                "SELECT 1 FROM registered_models WHERE name = ? AND workspace = ?",
                (name, WORKSPACE),
            ).fetchone()
            is not None
        )

    @staticmethod
    def _delete_model(con, name: str) -> None:
        """A lease's registered model and its tags (a lease has no versions or aliases)."""
        con.execute(
            "DELETE FROM registered_model_tags WHERE name = ? AND workspace = ?", (name, WORKSPACE)
        )
        con.execute(
            "DELETE FROM registered_models WHERE name = ? AND workspace = ?", (name, WORKSPACE)
        )


def _local(uri: str | None) -> Path | None:
    """The folder of a local artifact location (``file:`` URI without query, or a plain
    absolute path), else None."""
    if not uri or "?" in uri or "#" in uri:
        return None
    return file_uri_path(uri)


def _run_artifacts(location: str, run_id: str) -> str:
    """MLflow's ``append_to_uri_path(location, run_id, "artifacts")`` of a local location."""
    return f"{location.rstrip('/')}/{run_id}/artifacts"


def _publish(target: Path, write) -> None:
    """``write(handle)`` into a hidden file beside ``target`` (MLflow's prefix, which its
    listings skip), renamed into place: a reader sees the whole file or none."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{UPLOADING}{uuid.uuid4().hex}.{target.name}")
    try:
        with open(tmp, "wb") as handle:
            write(handle)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
