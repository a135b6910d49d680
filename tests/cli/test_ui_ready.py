"""``fedsweep ui``: the address is printed only once the server answers, the server's output goes
to a log file (not the console), and the address it really serves is remembered in the store's
``ui.json`` for the links other commands print (``ui_base``'s precedence)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from fedsweep.core.processes import free_port
from fedsweep.tracking.connect import prepare_store
from fedsweep.tracking.store import (
    DEFAULT_UI_BASE,
    UI_STATE_FILE,
    UI_URL_ENV,
    served_ui,
    ui_base,
    ui_open_hint,
)

ROOT = Path(__file__).resolve().parents[2]
#: MLflow's server starts in seconds on an idle machine, in a minute or two on a busy one
START_S = 180


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _remember(folder: Path, uri: str, url: str, pid: int) -> None:
    (folder / UI_STATE_FILE).write_text(json.dumps({"url": url, "pid": pid, "tracking_uri": uri}))


# ------------------------------------------------------------------ ui_base's precedence
def test_ui_base_uses_the_address_of_a_live_fedsweep_ui_for_that_store(tmp_path, monkeypatch):
    monkeypatch.delenv(UI_URL_ENV, raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert ui_base(uri) == DEFAULT_UI_BASE  # nothing remembered
    _remember(tmp_path, uri, "http://127.0.0.1:5077/", os.getpid())  # a live process
    assert served_ui(uri) == "http://127.0.0.1:5077"
    assert ui_base(uri) == "http://127.0.0.1:5077"
    _remember(tmp_path, uri, "http://127.0.0.1:5077", _dead_pid())  # its process has ended
    assert served_ui(uri) is None and ui_base(uri) == DEFAULT_UI_BASE
    other = f"sqlite:///{tmp_path / 'other.db'}"  # another store's file in the same folder
    _remember(tmp_path, other, "http://127.0.0.1:5078", os.getpid())
    assert ui_base(uri) == DEFAULT_UI_BASE and ui_base(other) == "http://127.0.0.1:5078"
    (tmp_path / UI_STATE_FILE).write_text("{not json")  # a torn or foreign file: ignored
    assert ui_base(uri) == DEFAULT_UI_BASE


def test_ui_base_precedence(tmp_path, monkeypatch):
    """--ui-url > an http(s) tracking server > $FEDSWEEP_UI_URL > a live `fedsweep ui` for the
    store > http://127.0.0.1:5000."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _remember(tmp_path, uri, "http://127.0.0.1:5077", os.getpid())
    monkeypatch.setenv(UI_URL_ENV, "http://env:1/")
    assert ui_base(uri, explicit="http://given:2/") == "http://given:2"
    assert ui_base("https://mlflow.lab/") == "https://mlflow.lab"
    assert ui_base(uri) == "http://env:1"
    monkeypatch.delenv(UI_URL_ENV)
    assert ui_base(uri) == "http://127.0.0.1:5077"
    assert ui_base("postgresql://u@db/mlflow") == DEFAULT_UI_BASE  # no store folder: no file
    assert ui_base(None) == DEFAULT_UI_BASE


def test_a_link_to_a_ui_nothing_serves_comes_with_the_command_that_serves_it(tmp_path, monkeypatch):
    """Issue 65, item 8: a figure drawn while no `fedsweep ui` serves its store links
    http://127.0.0.1:5000; the hint says how to start it there. A UI that is known (served for
    the store, --ui-url, $FEDSWEEP_UI_URL, a tracking server) needs none."""
    monkeypatch.delenv(UI_URL_ENV, raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert ui_base(uri) == DEFAULT_UI_BASE
    assert ui_open_hint(uri) == f"fedsweep ui --tracking-uri {uri}"
    assert ui_open_hint(uri, explicit="http://given:2") == ""
    assert ui_open_hint("https://mlflow.lab") == ""
    _remember(tmp_path, uri, "http://127.0.0.1:5077", os.getpid())
    assert ui_open_hint(uri) == ""  # served: its link works
    monkeypatch.setenv(UI_URL_ENV, "http://env:1")
    assert ui_open_hint(f"sqlite:///{tmp_path / 'other.db'}") == ""


# ---------------------------------------------------------------------- the real server
class _Lines:
    """Collects a process's output lines in a thread (so a test can wait for one line)."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, needle: str, proc, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [x for x in self.lines if needle in x]
            if found:
                return found[0]
            assert proc.poll() is None or any(needle in x for x in self.lines), "\n".join(
                self.lines
            )
            time.sleep(0.05)
        raise AssertionError(f"no {needle!r} line within {timeout} s:\n" + "\n".join(self.lines))

    def join(self) -> None:
        self._thread.join(timeout=10)


def _ui(tmp_path: Path, port: int, *extra: str, workers: int = 1) -> subprocess.Popen:
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    prepare_store(uri)  # the UI reads a store, never makes one
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop(UI_URL_ENV, None)
    cmd = [sys.executable, "-m", "fedsweep", "ui", "--port", str(port), "--workers", str(workers)]
    cmd += ["--tracking-uri", uri, *extra]
    return subprocess.Popen(
        cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _is_mlflow(pid: int) -> bool:
    """Whether the process runs ``python -m mlflow`` (the server ``fedsweep ui`` starts)."""
    try:
        args = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(a == b"-m" and b == b"mlflow" for a, b in zip(args, args[1:], strict=False))


def _servers_on(port: int) -> list[int]:
    """Processes whose command line serves ``--port port`` (an ``mlflow`` server or worker)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"mlflow" in b" ".join(args) and str(port).encode() in args:
                out.append(int(entry.name))
    return out


def _cmdline(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")).decode()
    except OSError:
        return ""


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _session_members(sid: int) -> set[int]:
    """Processes whose session id is ``sid`` (Linux /proc)."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                out.add(int(entry.name))
    return out


def _settled_tree(pid: int) -> list[int]:
    """``pid``'s descendants once they have not changed for 0.5 s (the web workers and the job
    consumer are up by the time the port answers; at most 2 s)."""
    from fedsweep.cli.ui import descendants

    tree, settled, until = descendants(pid), time.monotonic(), time.monotonic() + 2.0
    while time.monotonic() - settled < 0.5 and time.monotonic() < until:
        time.sleep(0.1)
        now = descendants(pid)
        if now != tree:
            tree, settled = now, time.monotonic()
    return tree


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list processes")
def test_the_address_is_printed_once_it_answers_and_the_log_stays_off_the_console(tmp_path):
    """One ``fedsweep ui`` with two web workers: the address is printed once the server
    answers, the server's output goes to its log, the address is remembered in ``ui.json``;
    then SIGTERM (Ctrl-C, SIGINT, takes the same handler) leaves the port free and no process
    of its tree (MLflow's server, the leader of its own session, its workers) behind."""
    from fedsweep.cli.ui import _children_map, alive

    port = free_port()
    proc = _ui(tmp_path, port, workers=2)
    out = _Lines(proc.stdout)
    state = tmp_path / "store" / UI_STATE_FILE
    try:
        line = out.wait_for("experiments: http://", proc, START_S)
        url = line.split("experiments: ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=5) as response:  # at once: no retry
            assert response.status == 200
        assert url == f"http://127.0.0.1:{port}/#/experiments?workflowType=machine_learning"
        # the store remembers the address (and this `fedsweep ui`'s pid) for other commands
        remembered = json.loads(state.read_text())
        assert remembered["url"] == f"http://127.0.0.1:{port}" and remembered["pid"] == proc.pid
        uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
        assert ui_base(uri) == f"http://127.0.0.1:{port}"
        printed = len(out.lines)
        for path in ("/health", "/", "/ajax-api/2.0/mlflow/experiments/search?max_results=5"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                assert r.status == 200
        time.sleep(1.0)
        (logged,) = [x for x in out.lines if "its log: " in x]
        log = Path(logged.split("its log: ", 1)[1].split(")")[0])
        assert log == tmp_path / "store" / f"ui-{port}.log"
        tree = _settled_tree(proc.pid)
        (server,) = _children_map()[proc.pid]  # mlflow, the leader of its own session
        assert len(tree) >= 2, tree  # mlflow server and its uvicorn workers
        # MLflow's job execution is off (fedsweep runs no GenAI jobs): no job runner, whose
        # consumers took ~22 CPU-s of a 15 s server life (core.processes.mlflow_server_env)
        commands = [_cmdline(p) for p in tree]
        assert not [c for c in commands if "mlflow.server.jobs" in c], commands
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        out.join()
    assert proc.returncode == 143, "\n".join(out.lines)  # 128 + SIGTERM, as documented
    assert out.lines[printed:] == ["MLflow UI stopped."]  # no access log, no warnings
    assert not any('"GET /' in x for x in out.lines)
    text = log.read_text()
    assert '"GET /health' in text and '"GET /ajax-api/2.0/mlflow/experiments/search' in text
    assert not state.exists()  # forgotten when it stops
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_answers(port) or any(alive(p) for p in tree)):
        time.sleep(0.2)
    assert not _answers(port), "port still answers"
    assert [p for p in tree if alive(p)] == []
    assert _session_members(server) == set()
    assert _servers_on(port) == []


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list processes")
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_issue_62_a_signal_stops_the_tree_and_exits_128_plus_the_signal(tmp_path, sig, code):
    """``fedsweep ui`` stopped by SIGTERM (a scheduler, ``docker stop``) exits 143, by Ctrl-C
    130, as its help and docs/concepts/exit-codes.md say (it exited 0), after stopping its
    server's tree: here while the server is still starting (the same handler as once it
    serves)."""
    from fedsweep.cli.ui import alive, descendants

    proc = _ui(tmp_path, free_port())
    out = _Lines(proc.stdout)
    try:
        deadline = time.monotonic() + 180  # a loaded machine starts the server slowly
        # the MLflow server is started, so the handlers are in place (an earlier child, such
        # as the `uname -p` an import runs, comes before them: a SIGTERM then is the default's)
        while not [p for p in descendants(proc.pid) if _is_mlflow(p)]:
            assert proc.poll() is None and time.monotonic() < deadline, "\n".join(out.lines)
            time.sleep(0.05)
        tree = descendants(proc.pid)
        proc.send_signal(sig)
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        out.join()
    assert proc.returncode == code, "\n".join(out.lines)
    assert out.lines[-1] == "MLflow UI stopped." and "Traceback" not in "\n".join(out.lines)
    assert [p for p in tree if alive(p)] == []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list processes")
def test_a_server_that_does_not_answer_in_time_is_stopped_in_one_line(tmp_path):
    port = free_port()
    proc = _ui(tmp_path, port, "--start-timeout", "1")  # MLflow's imports alone take longer
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 1, out
    log = tmp_path / "store" / f"ui-{port}.log"
    (error,) = [x for x in out.splitlines() if "did not answer" in x]
    assert "within 1 s" in error and str(log) in error
    assert "experiments: http" not in out and "Traceback" not in out
    assert not (tmp_path / "store" / UI_STATE_FILE).exists()
    deadline = time.monotonic() + 10
    while _servers_on(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _servers_on(port) == []


# ------------------------------------------------------------------ web workers (issue 48)
@pytest.mark.parametrize(("cores", "workers"), [(1, 1), (2, 1), (3, 1), (4, 2), (8, 4), (64, 4)])
def test_the_default_web_workers_follow_the_machine(monkeypatch, cores, workers):
    """issue 48, item 13: MLflow's 4 workers never answered on a loaded 2-core machine, 1 came
    up: without --workers, one per two cores, 1 to 4."""
    from fedsweep.cli import ui as ui_mod

    monkeypatch.setattr(ui_mod.os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert ui_mod.default_workers() == workers


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list processes")
def test_a_server_that_does_not_answer_names_workers_in_its_line(tmp_path, monkeypatch):
    """issue 48, item 13: the server is started with the machine's workers (here 8 cores: 4),
    and the line for a server that did not answer in time names --workers (then
    --start-timeout), not only a longer timeout. In-process: a sleeping process stands in for
    MLflow's server and never answers."""
    from typer.testing import CliRunner

    from fedsweep.cli import ui as ui_mod
    from fedsweep.cli.main import app

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    prepare_store(uri)
    monkeypatch.setattr(ui_mod.os, "sched_getaffinity", lambda pid: set(range(8)))
    started: list[list[str]] = []
    real_popen = subprocess.Popen

    def server(cmd, **kwargs):
        started.append(cmd)
        return real_popen([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)

    monkeypatch.setattr(ui_mod.subprocess, "Popen", server)
    port = free_port()
    res = CliRunner().invoke(
        app, ["ui", "--port", str(port), "--start-timeout", "1", "--tracking-uri", uri]
    )
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    (cmd,) = started
    assert cmd[cmd.index("--workers") + 1] == "4"
    log = tmp_path / "store" / f"ui-{port}.log"
    assert res.stderr.strip().splitlines() == [
        f"the MLflow server did not answer on http://127.0.0.1:{port} within 1 s with "
        "--workers 4 (stopped; --workers 1 starts sooner on a busy machine, --start-timeout "
        f"waits longer); its log: {log}"
    ]


def test_ui_of_a_tracking_server_names_its_own_ui(tmp_path, monkeypatch):
    """Issue 48, item 17: in team mode the store is a tracking server, which serves its UI at
    its real address; ``fedsweep ui`` says where instead of starting a server on :5000."""
    from typer.testing import CliRunner

    from fedsweep.cli.main import app

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["ui", "--tracking-uri", "http://10.0.0.5:5001"])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    text = " ".join(res.output.split())
    assert "is a tracking server: it serves its own MLflow UI, open " in text
    assert "http://10.0.0.5:5001/#/experiments" in text


def test_servers_fedsweep_starts_run_no_mlflow_jobs_unless_asked(monkeypatch):
    """`fedsweep ui` and `fedsweep team up` start MLflow with its job execution off; a user's
    own setting (e.g. ``true`` for MLflow's GenAI jobs) is kept."""
    from fedsweep.core.processes import mlflow_server_env

    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", raising=False)
    env = mlflow_server_env()
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert env["MLFLOW_DISABLE_TELEMETRY"] == "true" and env["PATH"] == os.environ["PATH"]
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "true")
    assert mlflow_server_env()["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "true"
    given = mlflow_server_env({"PGPASSFILE": "/x"})
    assert given == {
        "PGPASSFILE": "/x",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }


def test_trials_swept_before_the_line_tag_get_it_when_the_ui_lists_their_figure(tmp_path):
    """The saved view groups by ``fedsweep.line`` (issue 65, item 1); a trial swept before the
    tag existed would sit under MLflow's "Additional runs": ``fedsweep ui`` names its line from
    its curve, panel and profile tags while it lists the figures. A run that has the tag keeps
    it; a run that is not a sweep trial is left alone."""
    from fedsweep.cli.ui import figure_links
    from fedsweep.tracking.connect import get_client
    from fedsweep.tracking.store import LINE_TAG, VIEW_TAG

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = get_client(uri)
    exp = client.create_experiment("bherd-fig4e", tags={VIEW_TAG: "{}"})
    old = {"fedsweep.curve": "RR", "fedsweep.panel_label": "Case 2", "fedsweep.profile": "smoke"}
    old_run = client.create_run(exp, tags=old).info.run_id
    new_run = client.create_run(exp, tags={**old, LINE_TAG: "kept"}).info.run_id
    other = client.create_run(exp, tags={"fedsweep.curve": "RR"}).info.run_id

    lines = figure_links(uri, "http://127.0.0.1:5000")
    assert any("bherd-fig4e" in line for line in lines), lines
    assert client.get_run(old_run).data.tags[LINE_TAG] == "RR · Case 2 · smoke profile"
    assert client.get_run(new_run).data.tags[LINE_TAG] == "kept"
    assert LINE_TAG not in client.get_run(other).data.tags


def test_a_signal_while_the_figure_links_are_read_stops_the_command(monkeypatch):
    """The handlers raise ``_Stop``; a SIGTERM that landed while ``fedsweep ui`` read its figure
    links (an MLflow query, slow on a loaded machine) was swallowed by that read's ``except
    Exception`` and the command kept serving: it hung in ``proc.wait()`` (2 of 7 tries under
    load). ``_Stop`` now passes every ``except Exception``."""
    import fedsweep.tracking.connect as connect
    from fedsweep.cli import ui

    def slow_store(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the store is read
        time.sleep(5)
        raise AssertionError("the signal's handler did not run")

    def on_signal(signum, _frame):
        raise ui._Stop(signum)

    monkeypatch.setattr(connect, "get_client", slow_store)
    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        with pytest.raises(ui._Stop) as stop:
            ui.figure_links("sqlite:///nowhere.db", "http://127.0.0.1:1")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert stop.value.signum == signal.SIGTERM
