"""Issue 48, the fault matrix on one store, with real processes: two drivers of one figure
(the second with ``--wait``) while ``figures`` and ``report`` read the store, then a
``figures`` killed with -9 after its first file is written. Expected: every command ends
cleanly, one run per config hash, no metric row logged twice, no run left RUNNING, and the
previous figure files whole."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedsweep.tracking.connect import get_client

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "sweeps" / "bherd-fig4e.yaml"


def _whole(path: Path) -> bool:
    data = path.read_bytes()
    if path.suffix == ".html":
        return data.rstrip().endswith(b"</html>")
    if path.suffix == ".png":
        return data.startswith(b"\x89PNG") and data.rstrip().endswith(b"IEND\xaeB`\x82")
    return len(data) > 0


def _until_claimed(db: Path, name: str, proc, tmp_path: Path, timeout: float = 300) -> None:
    """Until the driver ``proc`` holds its claim ``name`` in the store (polled)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with sqlite3.connect(db, timeout=30) as con:
                if con.execute(
                    "SELECT 1 FROM registered_models WHERE name = ?", (name,)
                ).fetchone():
                    return
        except sqlite3.OperationalError:  # the schema is being made
            pass
        assert proc.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        assert time.monotonic() < deadline, f"{name} never claimed"
        time.sleep(0.2)


def _metric_rows(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=30) as con:
            return con.execute("SELECT COUNT(*) FROM metrics").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _until_written(db: Path, proc, timeout: float = 300) -> None:
    """Until the store holds more metric rows than now, or ``proc`` has ended (polled)."""
    before = _metric_rows(db)
    deadline = time.monotonic() + timeout
    while proc.poll() is None and _metric_rows(db) <= before:
        assert time.monotonic() < deadline, "nothing logged"
        time.sleep(0.2)


@pytest.mark.slow
def test_two_drivers_figures_and_report_at_once_then_a_killed_figures(tmp_path):
    env = {
        **os.environ,
        "FEDSWEEP_STORE_DIR": str(tmp_path / "store"),
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONPATH": str(ROOT),
    }
    db = tmp_path / "store" / "mlflow.db"
    store = f"sqlite:///{db}"
    get_client(store)  # the schema exists before the processes race to open it
    fs = [sys.executable, "-m", "fedsweep.cli.main"]
    # one trial actor per driver (the processes racing on the store are the point, not Ray's)
    sweep = [*fs, "sweep", str(SPEC), "--profile", "smoke", "--tracking-uri", store,
             "--max-concurrent", "1"]  # fmt: skip
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("first", "second")}  # noqa: SIM115
    try:
        first = subprocess.Popen(sweep, env=env, cwd=tmp_path, stdout=logs["first"],
                                 stderr=subprocess.STDOUT)  # fmt: skip
        _until_claimed(db, "fedsweep.claim.driver.bherd-fig4e.smoke", first, tmp_path)
        second = subprocess.Popen([*sweep, "--wait"], env=env, cwd=tmp_path,
                                  stdout=logs["second"], stderr=subprocess.STDOUT)  # fmt: skip
        readers = []
        while first.poll() is None and len(readers) < 2:  # read the store while it is written
            _until_written(db, first)  # a round more logged since the last read
            figures = [*fs, "figures", "--figure", "bherd-fig4e", "--sweeps-dir", str(ROOT / "sweeps"),
                       "--profile", "smoke", "--tracking-uri", store, "--out",
                       str(tmp_path / f"live{len(readers)}"), "--format", "png"]  # fmt: skip
            report = [*fs, "report", "--figure", "bherd-fig4e", "--sweeps-dir", str(ROOT / "sweeps"),
                      "--profile", "smoke", "--tracking-uri", store, "--out",
                      str(tmp_path / f"report{len(readers)}")]  # fmt: skip
            for cmd in (figures, report):
                done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                                      timeout=300)  # fmt: skip
                readers.append((cmd[3], done.returncode, done.stdout + done.stderr))
        assert first.wait(timeout=600) == 0, (tmp_path / "first.log").read_text()[-3000:]
        assert second.wait(timeout=600) == 0, (tmp_path / "second.log").read_text()[-3000:]
    finally:
        for proc in (locals().get("first"), locals().get("second")):
            if proc is not None and proc.poll() is None:
                proc.kill()
        for handle in logs.values():
            handle.close()
    assert readers, "the first sweep ended before a reader could run"
    for name, code, out in readers:
        assert code == 0 and "Traceback" not in out, (name, out[-2000:])
    assert "0 run, 6 skipped" in (tmp_path / "second.log").read_text()

    with sqlite3.connect(db) as con:
        hashes = con.execute(
            "SELECT t.value, COUNT(*) FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
            "AND t.key = 'fedsweep.config_hash' GROUP BY t.value"
        ).fetchall()
        assert len(hashes) == 6 and all(n == 1 for _, n in hashes), hashes
        repeated = con.execute(
            "SELECT run_uuid, key, step, timestamp, COUNT(*) FROM metrics "
            "GROUP BY run_uuid, key, step, timestamp HAVING COUNT(*) > 1"
        ).fetchall()
        assert repeated == []
        per_step = con.execute(
            "SELECT run_uuid, key, step, COUNT(*) FROM metrics GROUP BY run_uuid, key, step "
            "HAVING COUNT(*) > 1"
        ).fetchall()
        assert per_step == []  # each round of each metric logged once
        assert con.execute("SELECT COUNT(*) FROM runs WHERE status = 'RUNNING'").fetchone() == (0,)

    # kill -9 of `figures` once it has written its first file: the previous build stays whole
    out = tmp_path / "figs"
    draw = [*fs, "figures", "--figure", "bherd-fig4e", "--sweeps-dir", str(ROOT / "sweeps"),
            "--profile", "smoke", "--tracking-uri", store, "--out", str(out), "--format", "png"]  # fmt: skip
    assert (
        subprocess.run(draw, env=env, cwd=tmp_path, capture_output=True, timeout=300).returncode
        == 0
    )
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert "bherd-fig4e.png" in before and "index.html" in before
    started = time.time()
    proc = subprocess.Popen(draw, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        while proc.poll() is None and time.time() - started < 120:
            if any(p.stat().st_mtime > started for p in out.iterdir() if p.is_file()):
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    for name in before:
        path = out / name
        assert path.is_file(), name  # nothing removed
        assert _whole(path), name  # the old file or a whole new one, never a cut one
    assert not [p.name for p in out.iterdir() if ".part-" in p.name and p.stat().st_size == 0]
