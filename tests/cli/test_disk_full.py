"""Issue 62, item 10: a full disk during ``fedsweep run`` was a traceback of 171-198 lines
(SQLite's "database or disk is full", hidden behind "cannot rollback - no transaction is
active") and could leave the run RUNNING. Now one line saying the disk is full and where, exit
1 (docs/concepts/exit-codes.md), and the run that had started is FAILED. On a real full file
system: a small tmpfs (the tests run as root, as CI does; skipped where mounting is refused)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True
    )
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode(errors='replace')[:200]}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, leave_kb: int) -> None:
    free_kb = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize // 1024
    with open(disk / "filler", "wb") as f:
        f.write(b"\0" * max(0, free_kb - leave_kb) * 1024)


@pytest.mark.parametrize("leave_kb", [60, 8])
def test_a_full_disk_during_run_is_one_line_and_no_run_is_left_running(
    small_disk, tmp_path, monkeypatch, leave_kb
):
    monkeypatch.chdir(tmp_path)
    db = small_disk / "mlflow.db"
    uri = f"sqlite:///{db}"
    config = str(ROOT / "configs/demo-mnist5k.yaml")
    res = CliRunner().invoke(app, ["run", config, "--set", "train.rounds=1", "-q",
                                   "--tracking-uri", uri])  # fmt: skip
    assert res.exit_code == 0, res.output  # the store exists, with one finished run
    _fill(small_disk, leave_kb)
    res = CliRunner().invoke(app, ["run", config, "--set", "train.rounds=300", "-q",
                                   "--tracking-uri", uri])  # fmt: skip
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output[-3000:]
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output[-3000:]
    assert lines[0].startswith(f"fedsweep run: the store's file system is full at {small_disk} ")
    assert "no space left on device" in lines[0] and "marked FAILED" in lines[0]
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        statuses = [row[0] for row in con.execute("SELECT status FROM runs")]
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert "RUNNING" not in statuses and statuses.count("FINISHED") == 1, statuses
