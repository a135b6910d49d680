"""Issue 62, item 10 (from the last round): an SQLite file of another program given as
``--tracking-uri sqlite:///x.db`` was called "half-migrated", with the advice to delete it
(``rm x.db``). It is not an MLflow store: every command says so in one line, exit 2, and
leaves the file (and its folder) as they were."""

from __future__ import annotations

import hashlib
import sqlite3

from typer.testing import CliRunner

from fedsweep.cli.main import app
from tests.helpers import small_run, write_yaml


def test_a_foreign_sqlite_database_is_not_called_half_migrated_and_is_left_alone(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    db = folder / "x.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        con.execute("INSERT INTO notes (text) VALUES ('my data')")
    con.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    uri = f"sqlite:///{db}"
    config = write_yaml(tmp_path / "run.yaml", small_run("foreign", "e", rounds=1))
    for command in (["run", str(config), "-q"], ["runs"], ["report", "--out", str(tmp_path / "r")]):
        res = CliRunner().invoke(app, [*command, "--tracking-uri", uri])
        assert res.exit_code == 2 and isinstance(res.exception, SystemExit), (command, res.output)
        lines = res.output.strip().splitlines()
        assert len(lines) == 1, (command, res.output)
        assert lines[0].startswith(f"{db} is not an MLflow store: it is an SQLite database of "
                                   "something else (tables notes; none of MLflow's)"), lines[0]  # fmt: skip
        assert "half-migrated" not in res.output and "rm " not in res.output
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in folder.iterdir()) == ["x.db"]  # no lock file, nothing else
