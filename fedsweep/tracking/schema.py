"""MLflow's schema of a local SQLite store: a new store's schema built atomically from a
template made once per machine (:func:`create_schema`), and why an existing database cannot be
opened as it is (:func:`schema_problem`: half-migrated, another MLflow's, not MLflow's at all),
said with how to recover. Read-only but for the creation; :func:`fedsweep.tracking.connect
.prepare_store` calls these under the store's lock."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from fedsweep.core.cache import cache_folder
from fedsweep.core.processes import alive

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


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


def schema_template() -> Path | None:
    """An empty MLflow sqlite database with this MLflow's complete schema, built once per
    machine and MLflow schema revision (about 4 s of migrations) and copied for every new
    store after that. None when the cache folder cannot be used (each store then runs the
    migrations itself). A template that is not a complete schema is built again."""
    folder = _schema_cache_dir()
    if folder is None:
        return None
    import mlflow

    path = folder / f"mlflow-{mlflow.__version__}-{latest_schema_revision()}.db"
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


def _table_names(db: Path) -> set[str] | None:
    """The names of ``db``'s tables, read-only; None when it is not an SQLite database."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return None
    return {r[0] for r in rows}


def _schema_complete(db: Path) -> bool:
    """``db`` has MLflow tables and no schema problem (:func:`schema_problem`)."""
    return bool(_table_names(db)) and schema_problem(db) is None


def create_schema(db: Path) -> None:
    """Create MLflow's schema for a new local store atomically: the schema is made on a private
    file beside ``db`` (``mlflow.db.creating-<pid>``): a copy of the machine's schema template
    (:func:`schema_template`), else MLflow's migrations run there. The private file is then
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
        template = schema_template()
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
def latest_schema_revision() -> str:
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


def foreign_problem(db: Path) -> str | None:
    """:func:`_foreign_text` when ``db`` is another program's SQLite database (tables, none of
    MLflow's, no leftover migration table), else None (read-only; a file that is not SQLite
    at all is :func:`schema_problem`'s)."""
    tables = _table_names(db)
    if tables is None:
        return None
    if (
        tables
        and not tables & _MLFLOW_TABLES
        and not any(t.startswith("_alembic_tmp_") for t in tables)
    ):
        return _foreign_text(db, tables)
    return None


def schema_problem(db: Path) -> str | None:
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
    head = latest_schema_revision()
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
