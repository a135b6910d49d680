"""``fedsweep ui``: the MLflow web UI for the project's store, stopped as a whole.

``mlflow ui`` starts a server process that starts uvicorn with several web workers and a job
consumer; some of MLflow's job processes open sessions of their own. Sending SIGTERM to the
first process alone left the rest running and holding the port. So the server is started in
its own session (its own process group), and on SIGINT/SIGTERM/SIGHUP, and on any exit, the
whole tree is stopped: every descendant (found by parent pid before anything is killed) and the
process group get SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import TrackingUriOption, UsageError, clean_errors
from fedsweep.core.processes import alive, listens

GRACE_S = 5.0


def _children_map() -> dict[int, list[int]]:
    """Parent pid -> child pids of every process (Linux /proc; else ``ps``)."""
    out: dict[int, list[int]] = {}
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...; comm may hold spaces or parentheses
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            out.setdefault(ppid, []).append(int(entry.name))
        return out
    listing = subprocess.run(
        ["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, timeout=10
    ).stdout
    for line in listing.splitlines():
        pid, ppid = (int(x) for x in line.split())
        out.setdefault(ppid, []).append(pid)
    return out


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, their children, ...)."""
    children = _children_map()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal_all(pids: set[int], group: int | None, sig: int) -> None:
    if group is not None:
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_tree(proc: subprocess.Popen, grace: float = GRACE_S) -> None:
    """SIGTERM the process, its group and every descendant; SIGKILL what is left after
    ``grace`` seconds; reap the process."""
    pids = descendants(proc.pid) | {proc.pid}
    group = proc.pid  # started with start_new_session: its pid is its group id
    _signal_all(pids, group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()
        pids |= {p for p in descendants(proc.pid)} if proc.returncode is None else set()
        if not any(alive(p) for p in pids):
            break
        time.sleep(0.1)
    left = {p for p in pids if alive(p)}
    if left:
        _signal_all(left, group, signal.SIGKILL)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass


def bind_problem(host: str, port: int) -> str | None:
    """Why the server could not listen on ``host:port`` (tried here with a socket of our own,
    as uvicorn binds: SO_REUSEADDR), or None. The server would otherwise print a bind
    traceback from a worker and the command end without a clear reason."""
    import errno

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        return f"--host {host}: not an address of this machine ({err.strerror})"
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return (
                    f"port {port} on {host} is already in use (another `fedsweep ui`?); "
                    "stop it or choose another with --port"
                )
            if err.errno == errno.EACCES:
                return f"port {port} on {host}: permission denied (ports below 1024 need root)"
            if err.errno == errno.EADDRNOTAVAIL:
                return f"--host {host}: not an address of this machine (cannot listen there)"
            return f"cannot listen on {host}:{port} ({err.strerror or err})"
    return None


class _Stop(Exception):
    """Raised by the signal handlers to leave ``proc.wait()``."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def ui(
    port: Annotated[
        int, typer.Option(metavar="PORT", min=1, max=65535, help="Port to serve on.")
    ] = 5000,
    host: Annotated[
        str, typer.Option(metavar="HOST", help="Interface to bind (loopback by default).")
    ] = "127.0.0.1",
    workers: Annotated[
        int | None,
        typer.Option(metavar="N", min=1, help="Web workers (default: MLflow's, 4)."),
    ] = None,
    tracking_uri: TrackingUriOption = None,
) -> None:
    """Serve the MLflow web UI for the project's store (Ctrl-C stops it and all its workers).

    Prints the experiment list's URL, http://HOST:PORT/#/experiments. SIGINT, SIGTERM and
    SIGHUP stop the whole process tree (server, web workers, job consumer)."""
    from fedsweep.tracking.store import prepare_store, resolve_tracking_uri

    with clean_errors():
        uri = resolve_tracking_uri(tracking_uri)
        problem = bind_problem(host, port) or (
            f"port {port} on {host} is already in use (another `fedsweep ui`?); stop it or "
            "choose another with --port"
            if listens(host, port)
            else None
        )
        if problem:
            raise UsageError(problem)
        try:
            prepare_store(uri, create=False)  # reading: never creates a store
        except OSError as err:
            raise UsageError(f"cannot use the store {uri}: {err}") from None
    from fedsweep.tracking.store import connect_uri

    env = None
    if connect_uri(uri) != uri:  # a password: through the environment, not the command line
        env = {**os.environ, "MLFLOW_BACKEND_STORE_URI": connect_uri(uri)}
    cmd = [sys.executable, "-m", "mlflow", "ui"]
    cmd += ["--backend-store-uri", uri] if env is None else []
    cmd += ["--host", host, "--port", str(port)]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    typer.echo(f"MLflow UI for {uri}")
    from fedsweep.tracking.store import ui_path

    # the query opens the "Model training" view (MLflow 3.17 starts a new browser in GenAI's)
    typer.echo(f"experiments: http://{shown}:{port}/{ui_path()}  (Ctrl-C to stop)")

    def on_signal(signum, _frame):
        raise _Stop(signum)

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.getsignal(sig) for sig in handled}
    proc = subprocess.Popen(cmd, start_new_session=True, env=env)
    code = 0
    try:
        for sig in handled:
            signal.signal(sig, on_signal)
        code = proc.wait()
    except _Stop as stop:
        code = 128 + stop.signum
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    finally:
        for sig in handled:  # a second signal while stopping must not abort the clean-up
            signal.signal(sig, signal.SIG_IGN)
        stop_tree(proc)
        for sig, old in previous.items():
            signal.signal(sig, old)
    if code in (128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGHUP):
        typer.echo("MLflow UI stopped.")
        code = 0
    raise typer.Exit(code)
