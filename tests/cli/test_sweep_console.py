"""The console of ``fedsweep sweep``: a real smoke sweep through the CLI (real Ray Tune, real
MLflow sqlite store) prints a few lines (progress, summary, table, the log path) while Ray's own
output goes to the log file; ``--verbose`` shows Ray's output live.

The quiet sweep runs in a process of its own (it starts and stops its own Ray, and nothing may
reach the console up to the interpreter's exit); the checks that need no fresh process (the
re-run that schedules nothing, ``--verbose``) invoke the same command in this process."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.cli.sweep_console import SweepConsole, ray_output_to
from fedsweep.sweep.report import SweepReport
from tests.helpers import small_spec, write_yaml

ROOT = Path(__file__).resolve().parents[2]
#: what only Ray (or a trial's warnings) prints: none of it may reach the quiet console
RAY_ONLY = ("Trial status", "Configuration for experiment", "Token authentication", "╭", "+---")
BAD = ("Traceback", "Exception ignored", "UserWarning", "SystemExit")


def write_spec(folder: Path, name: str, alphas=(0.5, 1.0), seeds=(0,), rounds=2) -> Path:
    spec = small_spec(
        name,
        title="console test",
        alphas=alphas,
        seeds=seeds,
        rounds=rounds,
        eval_={"test_subset": 500},
        max_failures=0,
        checkpoint_every=1,
    )
    return write_yaml(folder / f"{name}.yaml", spec)


def sweep_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """``fedsweep sweep ARGS --profile smoke`` in a process of its own."""
    env = {
        **os.environ,
        "FEDSWEEP_STORE_DIR": str(tmp_path / "store"),
        "RAY_USAGE_STATS_ENABLED": "0",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "120",
    }
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "fedsweep.cli.main", "sweep", *args, "--profile", "smoke"]
    return subprocess.run(
        [*cmd, "--tracking-uri", store],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
    )


def sweep_here(tmp_path: Path, monkeypatch, *args: str):
    """The same command in this process (Click's test runner): the same store, store folder,
    working folder and terminal width as :func:`sweep_cli`; Ray is the session's when a sweep
    schedules trials."""
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    argv = ["sweep", *args, "--profile", "smoke", "--tracking-uri", store]
    return CliRunner().invoke(app, argv, env={"COLUMNS": "120"})


@pytest.mark.slow
def test_quiet_sweep_console_progress_summary_table_and_log(tmp_path, monkeypatch):
    spec = write_spec(tmp_path, "console-fig", alphas=(0.3, 0.5, 1.0))
    res = sweep_cli(tmp_path, str(spec))
    console = res.stdout + res.stderr
    assert res.returncode == 0, console[-3000:]
    lines = console.splitlines()
    assert len(lines) <= 16, console
    for text in RAY_ONLY + BAD:
        assert text not in console, f"{text!r} on the console:\n{console}"
    # the log file: named once, holds Ray's tables (and the console's lines, for context)
    named = [m.group(1) for line in lines if (m := re.search(r"goes to (\S+\.log)$", line))]
    assert len(named) == 1, console
    log = Path(named[0])
    assert log.parent == tmp_path / "store" / "ray_results" / "logs" and log.is_file()
    text = log.read_text()
    assert "Configuration for experiment" in text and "Trial status" in text
    assert "TERMINATED" in text
    # progress: one line per quarter of the 3 trials (1 and 2 done; the summary says 3)
    progress = [line for line in lines if line.startswith("  [1/1] console-fig: ")]
    pattern = r"(\d) done · \d running · 0 failed · 0 skipped / 3 trials · .+ · ETA .+"
    done = [re.search(pattern, line).group(1) for line in progress]
    # 1 and 2 at the quarters; a slow machine may add a heartbeat line (every minute) between
    assert {"1", "2"} <= set(done) and done == sorted(done) and set(done) <= {"0", "1", "2"}, (
        console
    )
    summary = "[1/1] console-fig [smoke]: 3 run, 0 skipped, 0 shared, 0 failed of 3 trials in "
    assert sum(line.startswith(summary) for line in lines) == 1, console
    assert summary in text
    header = re.compile(r"figure\s+trials\s+run\s+skipped\s+shared\s+failed\s+wall time")
    assert any(header.search(line) for line in lines), console
    assert any(re.fullmatch(r"\s*console-fig\s+3\s+3\s+0\s+0\s+0\s+.+", ln) for ln in lines)
    assert re.search(r"(?m)^\s*total\s+3\s+3\s+0\s+0\s+0\s+", console), console

    again = sweep_here(tmp_path, monkeypatch, str(spec))  # all finished: nothing to schedule
    assert again.exit_code == 0, (again.output, again.exception)
    assert "nothing to schedule" in again.stdout
    assert "[1/1] console-fig [smoke]: 0 run, 3 skipped, 0 shared, 0 failed of 3 trials" in (
        again.stdout
    )
    assert re.search(r"(?m)^\s*total\s+3\s+0\s+3\s+0\s+0\s+", again.stdout), again.stdout


@pytest.mark.slow
def test_verbose_sweep_shows_rays_output_live(ray_session, tmp_path, monkeypatch):
    spec = write_spec(tmp_path, "console-verbose", alphas=(0.5, 1.0))
    res = sweep_here(tmp_path, monkeypatch, str(spec), "--verbose")
    console = res.output  # stdout and stderr
    assert res.exit_code == 0, (console[-3000:], res.exception)
    assert "Configuration for experiment" in console and "Trial status" in console
    assert "goes to" not in console  # no log file in verbose mode
    assert "[1/1] console-verbose [smoke]: 2 run, 0 skipped, 0 shared, 0 failed" in console
    assert re.search(r"(?m)^\s*total\s+2\s+2\s+0\s+0\s+0\s+", res.stdout), console


# ---------------------------------------------------------------- the display, without Ray
def trials(states: list[str]):
    return [SimpleNamespace(trial_id=f"t{i}", status=s) for i, s in enumerate(states)]


def test_plain_progress_prints_one_line_per_quarter_for_a_50_trial_sweep():
    out = io.StringIO()
    console = SweepConsole(3, "quick", out, out, live=False, interval=3600)
    console.begin_sweep(2, "fig")
    report = SweepReport("fig", "quick", 60, skipped=8, shared=2, scheduled=50)
    console.begin(report)
    states = ["PENDING"] * 50
    for i in range(50):
        states[i] = "RUNNING"
        console.trial_event("start", trials(states), SimpleNamespace(trial_id=f"t{i}"))
        console.trial_event("step", trials(states), None)
        console.trial_event("complete", trials(states), SimpleNamespace(trial_id=f"t{i}"))
        states[i] = "TERMINATED"
    report.finished = 50
    console.end_sweep(report, 75.0)
    lines = out.getvalue().splitlines()
    done = [int(re.search(r": (\d+) done", line).group(1)) for line in lines[:-1]]
    assert done == [13, 25, 38], lines  # 25 %, 50 %, 75 %; 100 % is the summary line
    assert all("10 skipped / 60 trials" in line and "ETA" in line for line in lines[:-1])
    assert lines[-1] == (
        "[2/3] fig [quick]: 50 run, 8 skipped, 2 shared, 0 failed of 60 trials in 1 min 15 s"
    )


def test_failed_trial_is_named_once_and_counted():
    out = io.StringIO()
    console = SweepConsole(1, "smoke", out, out, live=False, interval=3600)
    console.begin_sweep(1, "fig")
    console.begin(SweepReport("fig", "smoke", 2, scheduled=2))
    failing = SimpleNamespace(trial_id="t0", status="RUNNING")
    console.trial_event("error", trials(["RUNNING", "RUNNING"]), failing)
    console.trial_event("step", trials(["ERROR", "RUNNING"]), None)
    text = out.getvalue()
    assert text.count("trial failed") == 1 and "t0" in text
    assert console.counts == {"done": 0, "running": 1, "failed": 1}


def test_ray_output_to_moves_fd_output_to_the_log_and_restores_it(tmp_path, capfd):
    log = tmp_path / "logs" / "x.log"
    with ray_output_to(log) as (out, _err):
        os.write(1, b"from fd 1\n")
        os.write(2, b"from fd 2\n")
        print("from print", flush=True)
        out.write("to the console\n")
        out.flush()
    print("after", flush=True)
    captured = capfd.readouterr()
    assert "to the console" in captured.out and "after" in captured.out
    for text in ("from fd 1", "from fd 2", "from print"):
        assert text not in captured.out + captured.err
        assert text in log.read_text()


@pytest.mark.parametrize("seconds,text", [(4.4, "4 s"), (65, "1 min 05 s"), (3720, "1 h 02 min")])
def test_durations(seconds, text):
    from fedsweep.sweep.report import duration

    assert duration(seconds) == text


def test_plain_heartbeat_waits_twice_as_long_each_time():
    """A sweep of hours whose quarters come rarely: status lines after 60, 180, 420, ... s."""
    now = [0.0]
    out = io.StringIO()
    console = SweepConsole(1, "paper", out, out, live=False, interval=60, clock=lambda: now[0])
    console.begin_sweep(1, "fig")
    console.begin(SweepReport("fig", "paper", 100, scheduled=100))
    states = ["RUNNING"] * 2 + ["PENDING"] * 98
    printed_at = []
    for second in range(0, 4000, 10):
        now[0] = float(second)
        before = out.getvalue().count("\n")
        console.trial_event("step", trials(states), None)
        if out.getvalue().count("\n") > before:
            printed_at.append(second)
    assert printed_at == [60, 180, 420, 900, 1860, 3780]
    assert "0 done · 2 running · 0 failed · 0 skipped / 100 trials · 1 min 00 s · ETA ?" in (
        out.getvalue()
    )
