"""Where runs are stored, and whether a tracking URI can be used, without opening it.

Resolution order: explicit URI (config ``tracking.uri`` / CLI ``--tracking-uri``), then
``$MLFLOW_TRACKING_URI``, then ``sqlite:///<cwd>/mlruns/mlflow.db``. Relative sqlite/file paths
are made absolute at resolution time (Ray Tune changes the working directory of trials).
Artifacts of a sqlite store go next to the database, in ``<store dir>/artifacts``.
:func:`check_tracking_uri` refuses a URI MLflow cannot open in one sentence (an unknown scheme,
a folder that cannot be made, a tracking server that does not answer, a missing database
driver); opening the store is :mod:`fedsweep.tracking.connect`'s.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

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
