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
from fedsweep.cli.sweep_console import (
    PlannedSweep,
    SweepConsole,
    ray_output_to,
    short_duration,
)
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
        [*cmd, "--tracking-uri", store, "--max-concurrent", "1"],  # one trial actor
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
    assert len(lines) <= 30, console
    for text in RAY_ONLY + BAD:
        assert text not in console, f"{text!r} on the console:\n{console}"
    # the log file: named once (relative to the working folder), holds Ray's tables (and the
    # console's lines, for context)
    named = [m.group(1) for line in lines if (m := re.search(r"goes to (\S+\.log)$", line))]
    assert len(named) == 1, console
    log = tmp_path / named[0]
    assert log.parent == tmp_path / "store" / "ray_results" / "logs" and log.is_file()
    text = log.read_text()
    assert "Configuration for experiment" in text and "Trial status" in text
    assert "TERMINATED" in text
    # progress: one line per quarter of the 3 trials (1 and 2 done; the summary says 3)
    progress = [line for line in lines if line.startswith("  [1/1] console-fig: ")]
    pattern = (
        r"(\d)/3 trials · (\d) done · \d running · 0 failed · 0 skipped · 0 shared · .+ · ETA .+"
    )
    matches = [re.search(pattern, line) for line in progress]
    assert all(matches), progress
    assert all(m.group(1) == m.group(2) for m in matches), progress
    done = [m.group(2) for m in matches]
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
    # the metrics table (one seed: the means alone) and the next steps
    assert "console-fig [smoke]: 3 of 3 trials have a run; mean ± std over seeds" in console
    assert len([ln for ln in lines if re.fullmatch(r"\s*alpha=\S+\s+1\s+0\.\d{4}\s+.*", ln)]) == 3
    # the store named is the default one (FEDSWEEP_STORE_DIR): no --tracking-uri to repeat
    assert f"  fedsweep figures --figure {spec} --profile smoke" in lines, console

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
    console = SweepConsole(3, "quick", out, out, live=False, interval=3600, width=200)
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
    done = [int(re.search(r" (\d+) done", line).group(1)) for line in lines[:-1]]
    assert done == [13, 25, 38], lines  # 25 %, 50 %, 75 %; 100 % is the summary line
    assert all("/60 trials" in line and "8 skipped · 2 shared" in line for line in lines[:-1])
    assert all("ETA" in line for line in lines[:-1])
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
    console = SweepConsole(
        1, "paper", out, out, live=False, interval=60, clock=lambda: now[0], width=200
    )
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
    assert (
        "0/100 trials · 0 done · 2 running · 0 failed · 0 skipped · 0 shared · 1 min 00 s · ETA ?"
        in out.getvalue()
    )


# ---------------------------------------------------------------- width, counts, ETA
def running_console(n_sweeps=1, *, plan=None, figure="bherd-diagnosis", now=None):
    """A console in the middle of sweep 1: 18 trials (3 skipped, 2 shared, 1 without data),
    12 scheduled, 4 done (one of them reusing another sweep's run), 1 failed, 2 running."""
    now = now if now is not None else [0.0]
    console = SweepConsole(
        n_sweeps, "quick", io.StringIO(), io.StringIO(), live=False, plan=plan,
        clock=lambda: now[0], interval=3600,
    )  # fmt: skip
    console.begin_sweep(1, figure)
    report = SweepReport(figure, "quick", 18, skipped=3, shared=2, unavailable=1, scheduled=12)
    console.begin(report)
    states = ["PENDING"] * 12
    console.trial_event("start", trials(states), SimpleNamespace(trial_id="t0"))
    now[0] = 100.0
    states[:7] = ["TERMINATED"] * 4 + ["ERROR"] + ["RUNNING"] * 2
    tune_trials = trials(states)
    tune_trials[3].last_result = {"round": 2, "reused_run": 1}  # another sweep's run
    console.trial_event("step", tune_trials, None)
    return console, report, now


@pytest.mark.parametrize("width", [20, 40, 60, 80, 120, 200])
@pytest.mark.parametrize("n_sweeps", [1, 3])
def test_the_live_line_fits_the_width_and_always_shows_done_of_total(width, n_sweeps):
    plan = [PlannedSweep(18, 12, 600.0, 0)] * n_sweeps
    console, _, _ = running_console(n_sweeps, plan=plan)
    line = console.live_line(width).plain
    assert len(line) <= width, line
    assert "11/18" in line, line  # 3 done, 1 failed, 1 reused, 3 skipped, 2 shared, 1 no data
    assert console.over == 3 + 1 + 1 + 3 + 2 + 1
    status = console.status(width - 10)
    assert len(status) <= width - 10 and status.startswith("11/18")
    if width >= 80:
        assert line.startswith("[1/") and "bherd-diagnosis" in line and "ETA" in line
    if width >= 200:  # everything, the bar first
        assert "━" in line and "3 done · 2 running · 1 failed · 3 skipped · 3 shared" in line
        assert "1 not run" in line
    if n_sweeps > 1 and width >= 80:
        assert "all 11/54" in line or "all sweeps 11/54 trials" in line


def test_the_live_line_sheds_the_bar_first_then_words():
    console, _, _ = running_console()
    full = console.live_line(400).plain
    no_bar = console.live_line(len(full) - 1).plain
    assert "━" in full and "━" not in no_bar
    assert "trials ·" in no_bar and "ETA 2 min 55 s" in no_bar  # still the words
    compact = console.live_line(len(no_bar) - 1).plain
    assert "trials" not in compact and re.search(r"ETA \dm\d\ds", compact)
    assert "failed" in console.live_line(50).plain  # failures stay to the last


def test_live_counts_agree_with_the_summary_line():
    """Skipped, shared (a trial that found another sweep's run counts there, as the driver
    counts it) and not run are the summary line's numbers, not one "skipped" for all."""
    console, report, _ = running_console()
    line = console.status()
    assert "3 done · 2 running · 1 failed · 3 skipped · 3 shared · 1 not run" in line, line
    # what the driver reports at the end for the same trials
    report.finished, report.errored, report.shared = 3, 1, 3
    assert "3 run, 3 skipped, 3 shared, 1 failed, 1 not run (data missing)" in report.line()


def test_a_second_stage_does_not_count_the_first_stages_reused_trials_twice():
    console, report, _ = running_console()
    report.shared += 1  # the driver moved stage 0's reused trial to shared
    report.scheduled += 2
    console.begin(report)
    assert console.reused == 1 and console.shared + console.reused == 3


def test_the_command_eta_adds_the_later_sweeps_plans():
    plan = [PlannedSweep(18, 12, 600.0, 0), PlannedSweep(10, 4, 200.0, 0), None]
    console, _, now = running_console(3, plan=plan)
    # sweep 1: 4 trials over in 100 s, 12 - 5 left (the failed one is over too): 25 s each
    assert console.eta_s() == pytest.approx(25.0 * 7)
    seconds, exact = console.command_eta_s()
    assert not exact and seconds == pytest.approx(25.0 * 7 + 200.0)  # sweep 3: no plan
    assert console.command_counts() == (11, None)
    line = console.live_line(200).plain
    assert "all sweeps 11/? trials · ETA ≥ 6 min 15 s" in line, line
    # every plan known; sweep 3 without an estimate: the command's 25 s per trial
    console.plan[2] = PlannedSweep(6, 6, 0.0, 6)
    assert console.command_eta_s() == (pytest.approx(25.0 * 7 + 200.0 + 6 * 25.0), True)
    assert console.command_counts() == (11, 34)


def test_before_a_trial_ends_the_eta_comes_from_the_plan():
    now = [0.0]
    plan = [PlannedSweep(4, 4, 400.0, 0), PlannedSweep(2, 2, 100.0, 0)]
    console = SweepConsole(2, "quick", io.StringIO(), live=False, plan=plan, clock=lambda: now[0])
    console.begin_sweep(1, "fig")
    console.begin(SweepReport("fig", "quick", 4, scheduled=4))
    console.trial_event("start", trials(["RUNNING"] + ["PENDING"] * 3), None)
    now[0] = 150.0
    assert console.eta_s() == pytest.approx(250.0)
    assert console.command_eta_s() == (pytest.approx(350.0), True)
    # the ended sweep's rate serves the next sweep's first minutes
    for i in range(4):
        console.trial_event(
            "complete", trials(["TERMINATED"] * 4), SimpleNamespace(trial_id=f"t{i}")
        )
    console.end_sweep(SweepReport("fig", "quick", 4, scheduled=4, finished=4), 150.0)
    assert console.command_counts() == (4, 6)


def test_planned_sweeps_count_a_config_an_earlier_sweep_runs_as_reused():
    from fedsweep.sweep.plan import SweepPlan

    def row(h, estimate):
        return SimpleNamespace(status="run", config_hash=h, estimate_s=estimate)

    first = SweepPlan("a", "quick", workers=2)
    first.trials = [row("h1", 10.0), row("h2", 10.0)]
    second = SweepPlan("b", "quick", workers=2)
    second.trials = [row("h1", 10.0), row("h3", None), SimpleNamespace(status="reuse")]
    earlier: set[str] = set()
    assert PlannedSweep.of(first, earlier) == PlannedSweep(2, 2, 10.0, 0)
    assert PlannedSweep.of(second, earlier) == PlannedSweep(3, 1, 0.0, 1)


def test_the_end_table_fits_80_columns_without_cutting_figure_ids():
    out = io.StringIO()
    console = SweepConsole(3, "quick", out, out, live=False, width=80)
    ids = ["bherd-diagnosis", "intro-selection", "fedwalk-table2"]
    for index, fig in enumerate(ids, 1):
        console.begin_sweep(index, fig)
        report = SweepReport(
            fig, "quick", 1234, skipped=100, shared=3, finished=1000, unavailable=12,
            no_source=4, errored=2,
        )  # fmt: skip
        console.end_sweep(report, 3720)
    out.truncate(0)
    out.seek(0)
    console.print_table()
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 80, out.getvalue()
    for fig in ids:
        assert any(
            re.match(rf"{fig}\s+1234\s+1000\s+100\s+3\s+2\s+12\s+4\s+1h02m$", ln) for ln in lines
        )
    assert any(
        re.match(r"total\s+3702\s+3000\s+300\s+9\s+6\s+36\s+12\s+3h06m$", ln) for ln in lines
    )
    wide = io.StringIO()  # where it fits: the long headers and times
    console.console.file, console.console.width = wide, 120  # noqa: SLF001
    console.print_table()
    assert "no source" in wide.getvalue() and "1 h 02 min" in wide.getvalue()


def test_driver_lines_wrap_at_the_width_but_a_command_does_not():
    out = io.StringIO()
    console = SweepConsole(1, "smoke", out, out, live=False, width=60)
    console.begin_sweep(1, "fig")
    console.echo("fig [smoke]: 6 trials, 0 already finished, scheduling 6 (parent MLflow run "
                 "2a25fec37e504b3ba344674f79cb9456)")  # fmt: skip
    text = out.getvalue()
    assert max(map(len, text.splitlines())) <= 60 and "2a25fec37e504b3ba344674f79cb9456" in text
    out.truncate(0)
    out.seek(0)
    console.print(
        "[1/1] fig [smoke]: 6 run, 0 skipped, 0 shared, 0 failed of 6 trials in 1 min 05 s"
    )
    assert out.getvalue().splitlines()[-1].endswith(" 1 min 05 s")  # a duration is not split
    out.truncate(0)
    out.seek(0)
    command = "fedsweep figures --figure fig --profile smoke --tracking-uri sqlite:///x/y.db"
    console.print(f"  {command}", wrap=False)
    assert out.getvalue() == f"  {command}\n"


def test_short_durations():
    assert [short_duration(s) for s in (4.4, 65, 3720)] == ["4s", "1m05s", "1h02m"]
