"""Whether a process is alive, for the parts that clean up after other processes (the UI's
process tree, a killed store creator's private file), whether something listens on a port
(the UI's port, the team services), a port nothing listens on, a probe run in a child
process that is killed when its time is up (remote storage, an artifact store), and the
environment of the MLflow servers fedsweep starts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def alive(pid: int) -> bool:
    """The process ``pid`` runs (a zombie, which has exited and only waits to be reaped, does
    not). A process of another user counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return not stat.parent.parent.is_dir()  # no /proc: trust kill(0)


def started_at(pid: int) -> str:
    """When the process ``pid`` started, as the kernel counts it (clock ticks since boot, field
    22 of ``/proc/PID/stat``); "" when unknown (no such process, no ``/proc``). With the PID it
    names one process: a PID the system reused for a new process has another start."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def listens(host: str, port: int, timeout: float = 1.0) -> bool:
    """Something accepts TCP connections on ``host:port`` (within ``timeout`` seconds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        return sock.connect_ex((host, port)) == 0


def free_port(host: str = "127.0.0.1") -> int:
    """A port of ``host`` that nothing listens on now (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def probe_in_child(module: str, text: str, timeout: float) -> str | None:
    """Run ``python -m module`` with ``text`` on its stdin (a URI that may hold a password:
    never on a command line) and fedsweep importable; None when it exits 0, else its last line
    of output. Raises ``subprocess.TimeoutExpired`` when it runs past ``timeout`` seconds (it
    is killed then: a thread would be left waiting in a client library that retries for
    minutes, and such libraries wait for it at exit)."""
    root = str(Path(__file__).resolve().parents[2])  # fedsweep's own, installed or not
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    child = subprocess.run(
        [sys.executable, "-m", module],
        input=text,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": path},
    )
    if child.returncode == 0:
        return None
    lines = (child.stdout or child.stderr).strip().splitlines()
    return lines[-1] if lines else f"the probe exited with code {child.returncode}"


def mlflow_server_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an ``mlflow server``/``mlflow ui`` that fedsweep starts (``fedsweep
    ui``, ``fedsweep team up``): ``env`` (default: this process's) with MLflow's telemetry off
    and its server-side job execution off unless the user's environment sets either. Job
    execution (MLflow 3.x's GenAI jobs: scorers, prompt optimisation; fedsweep runs none) starts
    a job runner with its own consumer processes beside the server: measured on 2 cores, a
    SQLite-backed server up for 15 s took 29.7 CPU-s with it and 7.4 without, and it kept
    about 0.17 of a core busy while idle. ``MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true`` puts it
    back."""
    env = dict(os.environ if env is None else env)
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    return env
