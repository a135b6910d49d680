"""Whether a process is alive, for the parts that clean up after other processes (the UI's
process tree, a killed store creator's private file), and whether something listens on a port
(the UI's port, the team services)."""

from __future__ import annotations

import os
import socket
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


def listens(host: str, port: int, timeout: float = 1.0) -> bool:
    """Something accepts TCP connections on ``host:port`` (within ``timeout`` seconds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        return sock.connect_ex((host, port)) == 0
