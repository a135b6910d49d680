"""Opening a store: :func:`prepare_store` checks the URI (:mod:`fedsweep.tracking.uri`), gives
a new local store its complete schema under a lock (:mod:`fedsweep.tracking.schema`) or opens a
database once, each failure one sentence; :func:`get_client` is MLflow's client of a prepared
store, :func:`connect_uri` the URI MLflow opens it with."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fedsweep.core.errors import first_line
from fedsweep.tracking import credentials
from fedsweep.tracking.schema import (
    create_schema,
    foreign_problem,
    latest_schema_revision,
    schema_problem,
)
from fedsweep.tracking.uri import (
    TrackingUriError,
    check_tracking_uri,
    database_driver_problem,
    missing_store_message,
    sqlite_path,
    store_missing,
)

#: sqlite stores whose schema this process has seen complete (see :func:`prepare_store`)
_READY: set[str] = set()


class StoreMissingError(TrackingUriError):
    """A reading command (figures, runs, compare, ui) named a local store that does not exist:
    reading never creates a store."""


class StoreBrokenError(TrackingUriError):
    """A local sqlite store MLflow cannot open: half-migrated (an interrupted or concurrent
    first use by an older fedsweep, or by MLflow itself), or made by another MLflow version.
    The message says which, how many runs it holds and how to recover."""


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing), held for the block.
    Without ``fcntl`` (Windows) the block runs unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def prepare_store(tracking_uri: str, *, create: bool = True) -> None:
    """Check the URI (:func:`check_tracking_uri`; a URI MLflow cannot open raises
    :class:`TrackingUriError`), then make sure a local sqlite store has its complete schema.

    MLflow creates the tables of a fresh sqlite database in the first process that opens it
    (``SqlAlchemyStore.__init__`` runs every schema migration when a table is missing). Two
    processes doing that at once on one new file fail ("table experiments already exists",
    "duplicate column name: step", "table _alembic_tmp_tags already exists") and leave a
    half-migrated file that every later open fails on. So the first open of a store in each
    process takes ``<db>.lock``; under it a missing store's schema is built on a private file
    and linked into place (:func:`create_schema`), an existing one is checked
    (:func:`schema_problem`; a broken store raises :class:`StoreBrokenError` saying how to
    recover), and the store is opened once (a complete schema: MLflow migrates nothing; a store
    without experiments gets its Default one, which two processes must not create at once).
    MLflow's store modules and its schema revision are loaded before the lock, so that processes
    opening one store at once (a sweep's trial workers) import side by side and hold the lock
    for milliseconds, not one after the other.

    ``create=False`` (reading commands): a missing local store raises
    :class:`StoreMissingError`; nothing is created, not even its folder."""
    if tracking_uri in _READY:
        return
    db = sqlite_path(tracking_uri)
    if not create and db is not None and store_missing(tracking_uri):
        raise StoreMissingError(missing_store_message(tracking_uri))
    check_tracking_uri(tracking_uri)  # creates a sqlite store's folder
    if db is None:
        if credentials.scheme(tracking_uri) in credentials.DB_SCHEMES:
            _open_database(tracking_uri)
        _READY.add(tracking_uri)
        return
    from mlflow import MlflowClient

    latest_schema_revision()  # imports MLflow's store modules: outside the lock
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401 - the same: its import is long

    foreign = foreign_problem(db) if db.is_file() else None
    if foreign:  # before the lock: not even a lock file beside another program's database
        raise StoreBrokenError(foreign)
    lock = db.with_name(db.name + ".lock")
    with _file_lock(lock) if create or os.access(db.parent, os.W_OK) else contextlib.nullcontext():
        if store_missing(tracking_uri):
            try:
                create_schema(db)
            except Exception as err:  # noqa: BLE001 - nothing is left behind; say why
                first = first_line(err)
                raise StoreBrokenError(
                    f"could not create the MLflow store {db} ({type(err).__name__}: {first}); "
                    "nothing was left behind, so it can be retried as it is"
                ) from err
        problem = schema_problem(db)
        if problem:
            raise StoreBrokenError(problem)
        # under the lock: MLflow's first open of a store without experiments creates the
        # Default one and its tags, and two processes doing it at once collide on the tags'
        # key (IntegrityError, seen with 4 runs starting on a fresh store); the schema is
        # complete (checked above), so the open migrates nothing and takes milliseconds
        try:
            MlflowClient(tracking_uri=connect_uri(tracking_uri)).search_experiments(max_results=1)
        except Exception as err:  # noqa: BLE001 - MLflow's open errors vary
            first = first_line(err)
            raise StoreBrokenError(
                f"the MLflow store {db} cannot be opened ({type(err).__name__}: {first}); if "
                f"it holds no runs you need, remove it (rm {db}) and run again, else back it "
                f"up and run: mlflow db upgrade {tracking_uri}"
            ) from None
    _READY.add(tracking_uri)


def _open_database(tracking_uri: str) -> None:
    """Open a database store once (MLflow creates its schema on a first open) and turn what
    goes wrong into one sentence: a missing driver, a refused connection, a wrong password."""
    from mlflow import MlflowClient

    check_database(tracking_uri)
    try:
        MlflowClient(tracking_uri=connect_uri(tracking_uri)).search_experiments(max_results=1)
    except Exception as err:  # noqa: BLE001 - SQLAlchemy/MLflow wrap the driver's error
        raise _unopened(tracking_uri, err) from None


def check_database(tracking_uri: str) -> None:
    """A database URI's driver loads and one connection opens, in seconds (MLflow retries a
    failed engine for minutes, logging a traceback per attempt), without importing MLflow:
    :class:`TrackingUriError` naming the cause otherwise."""
    problem = database_driver_problem(tracking_uri)
    if problem:
        raise TrackingUriError(f"tracking URI {credentials.redact(tracking_uri)}: {problem}")
    try:
        _connect_once(connect_uri(tracking_uri))
    except Exception as err:  # noqa: BLE001 - SQLAlchemy wraps the driver's error
        raise _unopened(tracking_uri, err) from None


def _unopened(tracking_uri: str, err: BaseException) -> TrackingUriError:
    cause = err
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__
    text = str(getattr(cause, "orig", None) or cause).strip().splitlines() or [type(err).__name__]
    lines = [ln.strip() for ln in text if ln.strip()]
    first = credentials.redact(" ".join(lines[:2]))[:300]
    return TrackingUriError(
        f"tracking URI {credentials.redact(tracking_uri)}: the database cannot be opened "
        f"({first}); check the server, the database name and the credentials (~/.pgpass, "
        "PGPASSWORD)"
    )


#: seconds a database has to accept fedsweep's first connection
DB_CONNECT_TIMEOUT_S = 10


def _connect_once(uri: str) -> None:
    """Open and close one connection to the database ``uri`` (no retries)."""
    import sqlalchemy

    args = (
        {"connect_timeout": DB_CONNECT_TIMEOUT_S}
        if credentials.scheme(uri) in ("postgresql", "postgres", "mysql")
        else {}
    )
    engine = sqlalchemy.create_engine(uri, connect_args=args, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def get_client(tracking_uri: str, *, create: bool = True):
    """MLflow's client of a prepared store (:func:`prepare_store`; ``create=False`` for
    reading commands: a missing local store is an error)."""
    from mlflow import MlflowClient

    prepare_store(tracking_uri, create=create)
    return MlflowClient(tracking_uri=connect_uri(tracking_uri))


def connect_uri(tracking_uri: str) -> str:
    """The URI MLflow opens the store with: the clean URI, with a database password held in
    this process's environment put back (:func:`credentials.connect_uri`). Never log or print
    it; pass it only to MLflow."""
    return credentials.connect_uri(tracking_uri)
