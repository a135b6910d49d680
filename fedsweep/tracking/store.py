"""Where runs are stored: an MLflow sqlite store at an absolute path by default.

Resolution order: explicit URI (config ``tracking.uri`` / CLI ``--tracking-uri``), then
``$MLFLOW_TRACKING_URI``, then ``sqlite:///<cwd>/mlruns/mlflow.db``. Relative sqlite/file paths
are made absolute at resolution time (Ray Tune changes the working directory of trials).
Artifacts of a sqlite store go next to the database, in ``<store dir>/artifacts``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from fedsweep.core.cache import cache_folder
from fedsweep.core.errors import first_line
from fedsweep.core.processes import alive
from fedsweep.tracking import credentials

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

DEFAULT_STORE_DIR = "mlruns"
DB_NAME = "mlflow.db"


def default_store_dir() -> Path:
    return Path(os.environ.get("FEDSWEEP_STORE_DIR", DEFAULT_STORE_DIR)).resolve()


def ray_results_dir(tracking_uri: str | None) -> Path:
    """Where a sweep into ``tracking_uri`` keeps Ray's state, its logs and its lock files when
    ``--storage`` is not given: ``<store dir>/ray_results``, the store dir being the folder of a
    SQLite store (``sqlite:////data/exp/mlflow.db`` -> ``/data/exp/ray_results``), else (a
    server, PostgreSQL) the default store folder (``$FEDSWEEP_STORE_DIR`` or ``./mlruns``)."""
    uri = tracking_uri or ""
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///") :].split("?", 1)[0]
        if path and path != ":memory:":
            return Path(path).resolve().parent / "ray_results"
    return default_store_dir() / "ray_results"


def resolve_tracking_uri(uri: str | None = None) -> str:
    """The store's URI: absolute for a local path, and *clean*: a password in it moves into
    this process's environment (:mod:`fedsweep.tracking.credentials`), so nothing that logs,
    prints or hands on the URI can leak it."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri and "@" in uri:
        try:
            uri = credentials.absorb(uri)
        except credentials.CredentialsError as err:
            raise TrackingUriError(str(err)) from None
    network = credentials.HTTP_SCHEMES + credentials.DB_SCHEMES  # databricks://PROFILE:PREFIX
    problem = credentials.parse_problem(uri) if credentials.scheme(uri or "") in network else None
    if problem:
        raise TrackingUriError(problem)
    if not uri:
        return f"sqlite:///{default_store_dir() / DB_NAME}"
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///") :]
        if not path.startswith("/"):  # sqlite:///relative.db
            return f"sqlite:///{Path(path).resolve()}"
        return uri
    if "://" not in uri:  # a bare path: a file store
        return Path(uri).resolve().as_uri()
    return uri


def artifact_root(tracking_uri: str, explicit: str | None = None) -> str | None:
    """Absolute artifact location for the experiments fedsweep creates: ``explicit``
    (``--artifact-root``: a URI such as ``s3://bucket/x``, or a folder, made absolute), else
    ``<store dir>/artifacts`` beside a local sqlite database, else, for a database URI,
    ``<cwd>/mlruns/artifacts`` (MLflow's default, ``./mlruns``, is relative: each process, and
    each Ray trial in its own folder, would write its own copy). None for a tracking server,
    which decides itself (``mlflow server --artifacts-destination``)."""
    if explicit:
        return explicit if "://" in explicit else Path(explicit).expanduser().resolve().as_uri()
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///") :])
        return (db.parent / "artifacts").as_uri()
    if credentials.scheme(tracking_uri) in credentials.DB_SCHEMES:
        return (default_store_dir() / "artifacts").as_uri()
    return None


class TrackingUriError(ValueError):
    """A tracking URI fedsweep cannot use (unknown scheme, unwritable or refused store)."""


#: the URI schemes MLflow 3.17 has a tracking store for (``postgresql+psycopg2`` etc. included)
TRACKING_SCHEMES = (
    "sqlite",
    "file",
    "http",
    "https",
    "databricks",
    "databricks-uc",
    "uc",
    "postgresql",
    "mysql",
    "mssql",
)


def check_tracking_uri(tracking_uri: str, *, write: bool = False, create: bool = True) -> None:
    """Refuse, in one sentence, a resolved tracking URI MLflow cannot open: an unknown scheme, a
    file store (a bare path; MLflow 3.17 refuses it unless ``MLFLOW_ALLOW_FILE_STORE=true``),
    or a local sqlite database whose folder cannot be created (or, with ``write``, written).
    ``create=False``: a missing folder is tried (a temporary folder in the nearest existing one,
    removed at once), not created, so a command can refuse a bad URI before its other checks
    and leave nothing behind. Imports neither MLflow nor torch (a database URI: SQLAlchemy's
    dialect, to name a missing driver)."""
    scheme = credentials.scheme(tracking_uri)
    if scheme not in TRACKING_SCHEMES:
        raise TrackingUriError(
            f"tracking URI {tracking_uri!r}: unknown scheme {scheme or '(none)'!r} (allowed: "
            f"{', '.join(TRACKING_SCHEMES)}; e.g. sqlite:///{default_store_dir() / DB_NAME})"
        )
    if scheme == "file" and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in (
        "true",
        "1",
    ):
        raise TrackingUriError(
            f"tracking URI {tracking_uri!r} is a file store (a bare path or file://), which "
            "MLflow 3.17 refuses; use a database, e.g. "
            f"sqlite:///{Path(tracking_uri.partition('://')[2]) / DB_NAME}"
        )
    if scheme in ("http", "https"):
        probe_server(tracking_uri)
    if scheme in credentials.DB_SCHEMES:
        problem = database_driver_problem(tracking_uri)
        if problem:
            raise TrackingUriError(f"tracking URI {credentials.redact(tracking_uri)}: {problem}")
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///") :])
        try:
            if create:
                db.parent.mkdir(parents=True, exist_ok=True)
            else:
                _try_folder(db.parent)
        except OSError as err:
            raise TrackingUriError(
                f"tracking URI {tracking_uri!r}: cannot create the folder {db.parent} of the "
                f"sqlite database ({err.strerror or err})"
            ) from None
        if db.exists() and not db.is_file():
            raise TrackingUriError(
                f"tracking URI {tracking_uri!r}: {db} is not a file (a folder?); name the "
                f"database file, e.g. sqlite:///{db / DB_NAME}"
            )
        if (
            write
            and db.parent.exists()
            and not os.access(db if db.exists() else db.parent, os.W_OK)
        ):
            raise TrackingUriError(
                f"tracking URI {tracking_uri!r}: {db if db.exists() else db.parent} is not "
                "writable; choose a store you can write to (--tracking-uri)"
            )


def _try_folder(folder: Path) -> None:
    """Raise the ``OSError`` that creating ``folder`` would raise, creating nothing: the
    nearest existing folder must be a folder that a temporary folder can be made in."""
    import errno
    import tempfile

    base = folder
    while not os.path.exists(base) and base != base.parent:
        base = base.parent
    if base == folder:
        if not folder.is_dir():
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(folder))
        return
    if not base.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(base))
    os.rmdir(tempfile.mkdtemp(prefix=".fedsweep-probe-", dir=base))


#: seconds a tracking server has to answer fedsweep's first request (env overrides)
SERVER_TIMEOUT_ENV = "FEDSWEEP_TRACKING_TIMEOUT"
SERVER_TIMEOUT_S = 10.0
#: tracking servers that answered in this process
_REACHABLE: set[str] = set()


def server_timeout() -> float:
    """``$FEDSWEEP_TRACKING_TIMEOUT`` in seconds (default :data:`SERVER_TIMEOUT_S`). Raises
    :class:`TrackingUriError` (one line: the variable, its value, what is allowed) for a value
    that is not a number of seconds > 0 (a word, 0 or less, nan, inf: a traceback before)."""
    text = os.environ.get(SERVER_TIMEOUT_ENV)
    if text is None or not text.strip():
        return SERVER_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise TrackingUriError(
            f"${SERVER_TIMEOUT_ENV}={text!r}: not a number of seconds (allowed: a number > 0, "
            f"e.g. 30; unset: {SERVER_TIMEOUT_S:g})"
        )
    return value


def probe_server(tracking_uri: str) -> None:
    """Fail in seconds, not minutes, when an http(s) tracking server does not answer: one
    ``GET <uri>/health`` (MLflow's server answers ``OK``) with a timeout of
    ``$FEDSWEEP_TRACKING_TIMEOUT`` (default 10 s). Any HTTP answer, even an error status (a
    proxy, an auth wall), counts as reachable; MLflow's own retries (minutes with backoff) only
    apply once the server has answered. Raises :class:`TrackingUriError`."""
    if tracking_uri in _REACHABLE:
        return
    import urllib.error
    import urllib.request

    timeout = server_timeout()
    url = tracking_uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            pass
    except urllib.error.HTTPError:
        pass  # it answered
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        if isinstance(reason, TimeoutError):
            why = f"no answer within {timeout:g} s"
        else:
            why = getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
        raise TrackingUriError(
            f"tracking URI {tracking_uri!r}: the tracking server does not answer ({why}); "
            f"start it (e.g. mlflow server --host 127.0.0.1 --port 5000) or choose another "
            f"store (--tracking-uri; {SERVER_TIMEOUT_ENV} sets the wait)"
        ) from None
    _REACHABLE.add(tracking_uri)


#: sqlite stores whose schema this process has seen complete (see :func:`prepare_store`)
_READY: set[str] = set()


class StoreMissingError(TrackingUriError):
    """A reading command (figures, runs, compare, ui) named a local store that does not exist:
    reading never creates a store."""


class StoreBrokenError(TrackingUriError):
    """A local sqlite store MLflow cannot open: half-migrated (an interrupted or concurrent
    first use by an older fedsweep, or by MLflow itself), or made by another MLflow version.
    The message says which, how many runs it holds and how to recover."""


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a local ``sqlite:///`` URI, else None."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(tracking_uri[len("sqlite:///") :])
    return None


def store_missing(tracking_uri: str) -> bool:
    """A local sqlite store whose database does not exist (or is an empty file)."""
    db = sqlite_path(tracking_uri)
    return db is not None and (not db.is_file() or db.stat().st_size == 0)


def missing_store_message(tracking_uri: str) -> str:
    return (
        f"no MLflow store at {sqlite_path(tracking_uri)} (reading commands do not create one): "
        "make runs first (fedsweep sweep bherd-fig3a --profile smoke, or fedsweep run "
        "CONFIG), or name the store with --tracking-uri / MLFLOW_TRACKING_URI"
    )


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


#: the suffix of the file a new store's schema is built in (``mlflow.db.creating-<pid>``)
CREATING = ".creating-"


#: folder of the schema templates (default: the user cache dir); ``0``/``off`` builds every new
#: store's schema with MLflow's migrations instead of copying a template
SCHEMA_CACHE_ENV = "FEDSWEEP_SCHEMA_CACHE"


def _schema_cache_dir() -> Path | None:
    return cache_folder(SCHEMA_CACHE_ENV, "mlflow-schema")


def _build_schema(path: Path) -> None:
    """MLflow's own first-open path (``SqlAlchemyStore.__init__``: create_all, then every
    alembic migration) on the new file ``path``."""
    from mlflow.store.db.utils import _initialize_tables, create_sqlalchemy_engine_with_retry

    engine = create_sqlalchemy_engine_with_retry(f"sqlite:///{path}")
    try:
        _initialize_tables(engine)
    finally:
        engine.dispose()


def _schema_template() -> Path | None:
    """An empty MLflow sqlite database with this MLflow's complete schema, built once per
    machine and MLflow schema revision (about 4 s of migrations) and copied for every new
    store after that. None when the cache folder cannot be used (each store then runs the
    migrations itself). A template that is not a complete schema is built again."""
    folder = _schema_cache_dir()
    if folder is None:
        return None
    import mlflow

    path = folder / f"mlflow-{mlflow.__version__}-{_latest_schema_revision()}.db"
    try:
        if path.is_file() and _schema_complete(path):
            return path
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}{CREATING}{os.getpid()}")
        tmp.unlink(missing_ok=True)
        try:
            _build_schema(tmp)
            os.replace(tmp, path)  # atomic: a reader sees the old template or the complete one
        finally:
            tmp.unlink(missing_ok=True)
    except OSError:
        return None
    return path if _schema_complete(path) else None


def _schema_complete(db: Path) -> bool:
    """``db`` has MLflow tables and no schema problem (:func:`_schema_problem`)."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = con.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return False
    return bool(tables and tables[0]) and _schema_problem(db) is None


def _create_schema(db: Path) -> None:
    """Create MLflow's schema for a new local store atomically: the schema is made on a private
    file beside ``db`` (``mlflow.db.creating-<pid>``): a copy of the machine's schema template
    (:func:`_schema_template`), else MLflow's migrations run there. The private file is then
    hard-linked to ``db`` (``link`` never replaces an existing file). A process killed halfway
    leaves only its private file (removed by the next creator), never a half-migrated store.
    Called with the store's lock held; an empty ``db`` (0 bytes) counts as missing."""
    import shutil

    for stale in db.parent.glob(db.name + CREATING + "*"):  # left by a killed creator
        pid = stale.name.rpartition("-")[2]
        if not pid.isdigit() or not alive(int(pid)):
            stale.unlink(missing_ok=True)
    tmp = db.with_name(f"{db.name}{CREATING}{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        template = _schema_template()
        if template is not None:
            shutil.copyfile(template, tmp)
        else:
            _build_schema(tmp)
        if db.exists() and db.stat().st_size == 0:
            db.unlink()
        try:
            os.link(tmp, db)
        except FileExistsError:  # another creator (without a working lock) won: use its store
            pass
        except OSError:  # a file system without hard links: rename (replaces nothing here)
            if not db.exists():
                os.replace(tmp, db)
    finally:
        tmp.unlink(missing_ok=True)


@functools.cache
def _latest_schema_revision() -> str:
    """This MLflow's schema revision (its alembic scripts' head), read once per process: each
    read of MLflow's own scans every migration script (30 ms)."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return _get_latest_schema_revision()


#: tables the first of MLflow's migrations creates: a database with none of them (and no
#: leftover migration table) was never an MLflow store, not even a half-migrated one
_MLFLOW_TABLES = frozenset({"alembic_version", "experiments", "runs", "metrics", "params", "tags"})


def _foreign_text(db: Path, tables: set[str]) -> str:
    shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
    return (
        f"{db} is not an MLflow store: it is an SQLite database of something else (tables "
        f"{shown}; none of MLflow's). fedsweep leaves it alone: name an MLflow store, or a "
        "new file, with --tracking-uri / MLFLOW_TRACKING_URI"
    )


def _foreign_problem(db: Path) -> str | None:
    """:func:`_foreign_text` when ``db`` is another program's SQLite database (tables, none of
    MLflow's, no leftover migration table), else None (read-only; a file that is not SQLite
    at all is :func:`_schema_problem`'s)."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return None
    tables = {r[0] for r in rows}
    if (
        tables
        and not tables & _MLFLOW_TABLES
        and not any(t.startswith("_alembic_tmp_") for t in tables)
    ):
        return _foreign_text(db, tables)
    return None


def _schema_problem(db: Path) -> str | None:
    """Why MLflow cannot open the sqlite database ``db`` as it is, or None: leftover
    ``_alembic_tmp_*`` tables or a missing schema version (a migration stopped halfway), or a
    schema version other than this MLflow's (an older or newer MLflow, or a half-migrated
    store). Read-only; an empty database (no tables) is no problem (it is created)."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            versions = (
                [r[0] for r in con.execute("SELECT version_num FROM alembic_version")]
                if "alembic_version" in tables
                else []
            )
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        return (
            f"the MLflow store {db} cannot be opened: it is not an MLflow sqlite database, or "
            f"it is damaged ({err}). Check --tracking-uri / MLFLOW_TRACKING_URI; if this is "
            f"your store, restore it from a backup, or move it away (mv {db} {db}.broken) and "
            "run again"
        )
    if not tables:
        return None
    head = _latest_schema_revision()
    leftovers = sorted(t for t in tables if t.startswith("_alembic_tmp_"))
    if not leftovers and not tables & _MLFLOW_TABLES:
        return _foreign_text(db, tables)
    if leftovers or len(versions) != 1:
        what = (
            f"leftover migration table(s) {', '.join(leftovers)}"
            if leftovers
            else f"{len(versions)} schema versions recorded (expected 1)"
        )
        return _broken_text(db, f"it is half-migrated ({what})", runs, leftovers)
    if versions[0] != head:
        return _broken_text(
            db,
            f"its schema is at MLflow revision {versions[0]}, this MLflow expects {head}: it "
            "was made by another MLflow version, or its creation stopped halfway",
            runs,
            leftovers,
        )
    return None


def _broken_text(db: Path, what: str, runs: int, leftovers: list[str]) -> str:
    uri = f"sqlite:///{db}"
    if runs == 0:
        fix = (
            f"it holds no runs, so remove it (rm {db}) and run again; fedsweep creates a new "
            "store atomically"
        )
    else:
        drop = "; ".join(f"DROP TABLE {t}" for t in leftovers)
        steps = (
            f"python -c \"import sqlite3; sqlite3.connect('{db}').executescript('{drop}')\", then "
            if leftovers
            else ""
        )
        fix = (
            f"it holds {runs} run(s): back it up (cp {db} {db}.bak), then {steps}"
            f"mlflow db upgrade {uri}"
        )
    return f"the MLflow store {db} cannot be opened: {what}. To recover: {fix}."


def prepare_store(tracking_uri: str, *, create: bool = True) -> None:
    """Check the URI (:func:`check_tracking_uri`; a URI MLflow cannot open raises
    :class:`TrackingUriError`), then make sure a local sqlite store has its complete schema.

    MLflow creates the tables of a fresh sqlite database in the first process that opens it
    (``SqlAlchemyStore.__init__`` runs every schema migration when a table is missing). Two
    processes doing that at once on one new file fail ("table experiments already exists",
    "duplicate column name: step", "table _alembic_tmp_tags already exists") and leave a
    half-migrated file that every later open fails on. So the first open of a store in each
    process takes ``<db>.lock``; under it a missing store's schema is built on a private file
    and linked into place (:func:`_create_schema`), an existing one is checked
    (:func:`_schema_problem`; a broken store raises :class:`StoreBrokenError` saying how to
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

    _latest_schema_revision()  # imports MLflow's store modules: outside the lock
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401 - the same: its import is long

    foreign = _foreign_problem(db) if db.is_file() else None
    if foreign:  # before the lock: not even a lock file beside another program's database
        raise StoreBrokenError(foreign)
    lock = db.with_name(db.name + ".lock")
    with _file_lock(lock) if create or os.access(db.parent, os.W_OK) else contextlib.nullcontext():
        if store_missing(tracking_uri):
            try:
                _create_schema(db)
            except Exception as err:  # noqa: BLE001 - nothing is left behind; say why
                first = first_line(err)
                raise StoreBrokenError(
                    f"could not create the MLflow store {db} ({type(err).__name__}: {first}); "
                    "nothing was left behind, so it can be retried as it is"
                ) from err
        problem = _schema_problem(db)
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


#: the pip extra that installs the database drivers of a team store
TEAM_EXTRA = "pip install 'fedsweep[team]'"


def database_driver_problem(tracking_uri: str) -> str | None:
    """Why SQLAlchemy cannot load the driver of a database URI (``postgresql://`` needs
    psycopg 3 with SQLAlchemy 2.1, ``postgresql+psycopg2://`` psycopg2), or None."""
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        url = make_url(tracking_uri)
        dialect = url.get_dialect()
        dialect.import_dbapi()
    except (ArgumentError, NoSuchModuleError) as err:
        return f"SQLAlchemy has no dialect for it ({credentials.redact(str(err))})"
    except ImportError as err:
        name = getattr(err, "name", None) or str(err)
        return (
            f"its database driver {name!r} ({url.get_backend_name()}+{url.get_driver_name()}) "
            f"is not installed: {TEAM_EXTRA} (PostgreSQL), or name an installed driver in the "
            "URI's scheme, e.g. postgresql+psycopg2://"
        )
    return None


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


#: MLflow's experiment description (the UI's "Description" of an experiment or a run)
NOTE_TAG = "mlflow.note.content"
#: MLflow 3.x's experiment kind: an experiment tagged ``custom_model_development`` is a
#: training-runs experiment (``genai_development``: GenAI/traces). Key and value as in MLflow
#: 3.17's UI bundle (``mlflow/server/js/build/static/js/main.*.js``:
#: ``CUSTOM_MODEL_DEVELOPMENT="custom_model_development"``, read from the tag
#: ``mlflow.experimentKind``; ``mlflow/demo/generators/traces.py`` sets the GenAI value).
KIND_TAG = "mlflow.experimentKind"
KIND_TRAINING = "custom_model_development"
#: In 3.17 the UI's "GenAI | Model training" switch (per browser, default GenAI) decides the view
#: before the tag does; a ``workflowType`` query in the URL overrides the switch, so every URL
#: fedsweep prints or links carries it (see :func:`ui_url`).
TRAINING_VIEW_QUERY = "workflowType=machine_learning"
#: MLflow 3.17's saved views of an experiment's runs page (its "Views" menu) are experiment tags
#: ``mlflow.sharedViewState.<id>`` = ``{"name", "createdAt", "updatedAt", "state"}``, ``state``
#: the JSON of the page's search facets and UI state; ``#/experiments/<id>/runs?
#: viewStateShareKey=<id>`` opens one (``mlflow/server/js/build/static/js/3448.*.chunk.js``:
#: the envelope; ``5439.*``: ``openView``; ``3878.*``: the loader). fedsweep gives every
#: experiment it touches the view :data:`VIEW_STATE` and links to it (:func:`ui_path`).
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
#: a sweep trial's figure line, readable (``naming.trial_line_name``): what the view groups by
LINE_TAG = "fedsweep.line"
VIEW_ID = "fedsweep-trials"
VIEW_TAG = VIEW_TAG_PREFIX + VIEW_ID
VIEW_NAME = "fedsweep: every trial, charted"
#: the envelope key that marks the view as fedsweep's: a view someone overwrote in the UI (which
#: writes the envelope without it) is theirs, and fedsweep leaves it alone
VIEW_OWNER_KEY = "fedsweep"
VIEW_STATE = {
    # MLflow nests child runs under their (collapsed) parent only when the list is sorted by
    # start time (``nestChildren`` in ``3878.*``); sorted by trial id, a sweep's trials are one
    # flat list (profile, panel, curve, seed), the sweep's parent run last
    "orderByKey": "tags.`fedsweep.trial_id`",
    "orderByAsc": True,
    # the default table shows Source, Models and Dataset; the global test curves instead
    "selectedColumns": ["metrics.`Global/test_acc`", "metrics.`Global/test_loss`"],
    # the chart view draws every run, not the first 10 (MLflow's default)
    "runsHiddenMode": "SHOW_ALL",
    # one group per line of the figure, its seeds' mean drawn in the charts (MLflow 3.17's "Group
    # by", ``useGroupedValuesInCharts`` on by default): the charts look like the figure (issue 52,
    # item 2). One key, the trial's tag LINE_TAG: MLflow names a group of one key by its value
    # alone ("α=0.3 · Case 2 · quick profile"), of several keys "key: value, key: value" (the
    # legends read "fedsweep.profile: smoke, feds…", issue 65)
    "groupBy": {
        "aggregateFunction": "average",
        "groupByKeys": [{"mode": "tag", "groupByData": LINE_TAG}],
    },
}
#: the view a link opens in: the chart view (``TABLE``: the runs table with the metric columns)
VIEW_MODE_QUERY = "compareRunsMode=CHART"
#: the description of an experiment that ``fedsweep run`` creates
GENERIC_DESCRIPTION = (
    "fedsweep runs: one federated-learning run per MLflow run, named by what it runs; the tag "
    "`fedsweep.config_hash` groups runs with the same config."
)


def ui_path(
    experiment_id: str | None = None, run_id: str | None = None, *, view: bool = True
) -> str:
    """The MLflow UI route of the experiment list (``#/experiments?workflowType=...``), a run
    (``#/experiments/1/runs/abc?workflowType=...``) or an experiment, all in the training-runs
    view. An experiment opens in fedsweep's saved view (:data:`VIEW_STATE`: every trial in one
    flat list, charted, with the test metrics as columns; ``#/experiments/1/runs?
    viewStateShareKey=fedsweep-trials&compareRunsMode=CHART&...``); ``view=False`` for an
    experiment that does not have it (made by an older fedsweep, and not touched since):
    MLflow would show an error, then the plain runs page."""
    path = "#/experiments"
    if experiment_id is None:
        return f"{path}?{TRAINING_VIEW_QUERY}"
    if run_id is not None:
        return f"{path}/{experiment_id}/runs/{run_id}?{TRAINING_VIEW_QUERY}"
    # the tab route: ``#/experiments/<id>`` redirects to it and drops the query
    if not view:
        return f"{path}/{experiment_id}/runs?{TRAINING_VIEW_QUERY}"
    return f"{path}/{experiment_id}/runs?viewStateShareKey={VIEW_ID}&{VIEW_MODE_QUERY}&" + (
        TRAINING_VIEW_QUERY
    )


#: a search link's order: by trial id, so the matching runs are one flat list (sorted by start
#: time, MLflow's default, it nests them under their collapsed parent runs)
SEARCH_ORDER_QUERY = f"orderByKey={quote(VIEW_STATE['orderByKey'], safe='')}&orderByAsc=true"


def ui_search_path(experiment_ids, search_filter: str) -> str:
    """The UI route that shows the runs of ``experiment_ids`` matching ``search_filter`` (one
    experiment's run list, or MLflow's compare-experiments view for several), flat."""
    ids = sorted({str(i) for i in experiment_ids})
    query = f"searchFilter={quote(search_filter, safe='')}&{SEARCH_ORDER_QUERY}&"
    query += TRAINING_VIEW_QUERY
    if len(ids) == 1:  # the tab route: ``#/experiments/<id>`` redirects and drops the filter
        return f"#/experiments/{ids[0]}/runs?{query}"
    listed = quote(json.dumps(ids, separators=(",", ":")), safe="")
    return f"#/compare-experiments/s?experiments={listed}&{query}"


#: the MLflow UI's address when the tracking URI is no server and no --ui-url is given
UI_URL_ENV = "FEDSWEEP_UI_URL"
DEFAULT_UI_BASE = "http://127.0.0.1:5000"


#: the file in a local store's folder where a running ``fedsweep ui`` keeps its address
UI_STATE_FILE = "ui.json"


def store_folder(tracking_uri: str) -> Path | None:
    """The folder of a local store (a sqlite database's folder, a file store), else None."""
    db = sqlite_path(tracking_uri)
    if db is not None:
        return db.parent
    if tracking_uri.startswith("file:"):
        return file_uri_path(tracking_uri)
    return None


def file_uri_path(uri: str) -> Path | None:
    """The local path of a ``file:`` URI or of a plain absolute path (an MLflow store's or
    artifact location), else None (``s3://``, ``mlflow-artifacts:``, a server)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(uri)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    if parts.scheme == "" and uri.startswith("/"):
        return Path(uri)
    return None


def ui_state_path(tracking_uri: str) -> Path | None:
    """``<store folder>/ui.json`` of a local store (None for a database or tracking server)."""
    folder = store_folder(tracking_uri)
    return folder / UI_STATE_FILE if folder is not None else None


def served_ui(tracking_uri: str) -> str | None:
    """The base URL at which a running ``fedsweep ui`` serves ``tracking_uri`` (its
    ``ui.json``: ``{"url", "pid", "tracking_uri"}``, written once the server answers and removed
    when it stops), else None: no file, another store's, or its process no longer runs."""
    path = ui_state_path(tracking_uri)
    if path is None:
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict):
        return None
    url, pid = state.get("url"), state.get("pid")
    if not isinstance(url, str) or not url or not isinstance(pid, int) or pid <= 0:
        return None
    if state.get("tracking_uri") != tracking_uri or not alive(pid):
        return None
    return url.rstrip("/")


def ui_base(tracking_uri: str | None, explicit: str | None = None) -> str:
    """The base URL of the MLflow UI that shows ``tracking_uri``'s runs: ``explicit``
    (``--ui-url``), else the tracking server itself for an ``http(s)`` URI (it serves the UI),
    else ``$FEDSWEEP_UI_URL``, else the address of a running ``fedsweep ui`` for this store
    (:func:`served_ui`: the port it really serves), else ``http://127.0.0.1:5000``
    (``fedsweep ui``'s default)."""
    if explicit:
        return explicit.rstrip("/")
    if tracking_uri and credentials.scheme(tracking_uri) in ("http", "https"):
        return credentials.redact(tracking_uri).rstrip("/")
    if os.environ.get(UI_URL_ENV):
        return os.environ[UI_URL_ENV].rstrip("/")
    served = served_ui(tracking_uri) if tracking_uri else None
    return served or DEFAULT_UI_BASE


def ui_open_hint(tracking_uri: str | None, explicit: str | None = None) -> str:
    """How to open the UI that :func:`ui_base` links when nothing says it runs, else "": the
    links of a figure drawn while no ``fedsweep ui`` serves its store (no ``--ui-url``, no
    ``$FEDSWEEP_UI_URL``, no tracking server) point at ``fedsweep ui``'s default address,
    http://127.0.0.1:5000, where nothing may answer (issue 65, item 8): the command that serves
    it there, e.g. ``fedsweep ui --tracking-uri sqlite:////abs/mlruns/mlflow.db``."""
    if explicit or os.environ.get(UI_URL_ENV):
        return ""
    if not tracking_uri or credentials.scheme(tracking_uri) in ("http", "https"):
        return ""
    if served_ui(tracking_uri):
        return ""
    return f"fedsweep ui --tracking-uri {credentials.redact(tracking_uri)}"


def ui_url(
    base: str, experiment_id: str | None = None, run_id: str | None = None, *, view: bool = True
) -> str:
    """``ui_path`` under a server's base URL, e.g. ``http://127.0.0.1:5000``."""
    return f"{base.rstrip('/')}/{ui_path(experiment_id, run_id, view=view)}"


#: the text of the link to fedsweep's saved view in an experiment's description
VIEW_LINK_TEXT = "every trial, by curve, charted"


def experiment_note(description: str, experiment_id: str) -> str:
    """``description`` with a link to the experiment's fedsweep view at the end of its first
    line: the runs page shows the description's first line above the runs, so the view is one
    click from the page the experiment list opens (relative, it works on any port)."""
    first, newline, rest = description.partition("\n")
    link = f"[{VIEW_LINK_TEXT}]({ui_path(experiment_id)})"
    return f"{first} · {link}{newline}{rest}"


def view_tag_value(
    current: str | None,
    now_ms: int | None = None,
    *,
    name: str = VIEW_NAME,
    view: dict | None = None,
) -> str | None:
    """The value to give an experiment's ``VIEW_TAG``, or None to leave it: ``current`` is
    missing or unreadable, or fedsweep's own view (``VIEW_OWNER_KEY``) with another name or
    state (written by another fedsweep version); a view someone overwrote in the UI stays.
    ``name`` and ``view``: another of fedsweep's views (default: :data:`VIEW_STATE`)."""
    import time

    state = json.dumps(VIEW_STATE if view is None else view, separators=(",", ":"))
    old = None
    if current:
        try:
            old = json.loads(current)
        except ValueError:
            old = None
    if isinstance(old, dict) and not old.get(VIEW_OWNER_KEY) and isinstance(old.get("state"), str):
        return None  # someone's own view under this id
    if isinstance(old, dict) and (old.get("name"), old.get("state")) == (name, state):
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    created = old.get("createdAt") if isinstance(old, dict) else None
    envelope = {
        "name": name,
        "createdAt": created if isinstance(created, int) else now,
        "updatedAt": now,
        "state": state,
        VIEW_OWNER_KEY: 1,
    }
    return json.dumps(envelope, separators=(",", ":"))


#: a figure's saved view per panel: ``mlflow.sharedViewState.fedsweep-panel-<n>``
PANEL_VIEW_ID = "fedsweep-panel-{n}"


def panel_views(panels: list[tuple[str, str]]) -> dict[str, tuple[str, dict]]:
    """fedsweep's saved view of each panel of a figure with several, ``panels`` = (panel id,
    panel label) in the figure's order: view id -> (name, state). MLflow 3.17 draws every
    visible run in every chart (a chart has no run filter of its own), so a figure's panels
    share one chart per metric in :data:`VIEW_STATE`; a panel's view is that view searched down
    to the panel's trials (tag ``fedsweep.panel``): its charts draw that panel's lines only."""
    if len(panels) < 2:
        return {}
    out = {}
    for n, (panel, label) in enumerate(panels, 1):
        if "'" in panel:  # not quotable in MLflow's search syntax: the figure's view shows it
            continue
        state = {**VIEW_STATE, "searchFilter": f"tags.`fedsweep.panel` = '{panel}'"}
        out[PANEL_VIEW_ID.format(n=n)] = (f"fedsweep: {label or panel}", state)
    return out


def ensure_panel_views(client, experiment_id: str, panels: list[tuple[str, str]]) -> None:
    """Give the experiment :func:`panel_views` (each written as :func:`view_tag_value` says:
    once, and never over a view someone saved under its id)."""
    if not panels:
        return
    tags = client.get_experiment(experiment_id).tags or {}
    for view_id, (name, state) in panel_views(panels).items():
        key = VIEW_TAG_PREFIX + view_id
        value = view_tag_value(tags.get(key), name=name, view=state)
        if value is not None:
            client.set_experiment_tag(experiment_id, key, value)


def ensure_experiment(
    client,
    name: str,
    tracking_uri: str,
    description: str | None = None,
    *,
    overwrite: bool = False,
    artifacts: str | None = None,
) -> str:
    """The experiment's id, creating it (with an absolute artifact location) if needed.

    Every experiment fedsweep touches opens in MLflow's training-runs view (``KIND_TAG``), has
    fedsweep's saved view (``VIEW_TAG``, :func:`view_tag_value`) and a description:
    ``description`` (default: a generic one) with a link to that view
    (:func:`experiment_note`) is written when the experiment has none, or always with
    ``overwrite`` (a sweep writes its spec's title). ``artifacts``: the artifact root of a new
    experiment (:func:`artifact_root`).
    """
    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            location = artifact_root(tracking_uri, artifacts)
            exp_id = client.create_experiment(name, artifact_location=location)
        except Exception:  # created concurrently by another process
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
        else:
            exp = client.get_experiment(exp_id)
    updates = experiment_tag_updates(
        exp.tags or {}, exp.experiment_id, description, overwrite=overwrite
    )
    for key, value in updates.items():
        client.set_experiment_tag(exp.experiment_id, key, value)
    return exp.experiment_id


def experiment_tag_updates(
    tags: dict[str, str],
    experiment_id: str,
    description: str | None = None,
    *,
    overwrite: bool = False,
) -> dict[str, str]:
    """The tags :func:`ensure_experiment` sets on an experiment whose tags are ``tags``, in
    order: its kind, fedsweep's saved view, its description (see there)."""
    out = {}
    if tags.get(KIND_TAG) != KIND_TRAINING:
        out[KIND_TAG] = KIND_TRAINING
    view = view_tag_value(tags.get(VIEW_TAG))
    if view is not None:
        out[VIEW_TAG] = view
    text = experiment_note(description or GENERIC_DESCRIPTION, experiment_id)
    # an older fedsweep wrote the same description without the link: give it the link
    stale = tags.get(NOTE_TAG) in (None, "", description or GENERIC_DESCRIPTION)
    if tags.get(NOTE_TAG) != text and (overwrite or stale):
        out[NOTE_TAG] = text
    return out
