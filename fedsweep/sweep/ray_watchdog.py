"""Leave nothing behind when a sweep driver that started a local Ray is killed (``kill -9``).

Ray 2.60 starts its core processes (gcs, raylet, monitor, log monitor) so that they die with
the driver, and idle workers follow within seconds; but the DashboardAgent and RuntimeEnvAgent
(~180 MB together) live on for about 60 s, in a report to the already dead GCS with a fixed
60 s timeout (``gcs_client.publish_error(..., 60)`` in ``ray/_private/utils.py``). Ray has no
supported way to start without them (the raylet refuses empty agent commands), so fedsweep
starts a tiny watchdog next to a Ray it starts itself:

- the watchdog reads its stdin, a pipe from the driver; the OS closes the pipe however the
  driver ends, ``kill -9`` included;
- on a normal shutdown the driver first writes one byte, and the watchdog exits doing nothing;
- on end-of-file without that byte (the driver died) it SIGKILLs the processes of that Ray:
  those whose environment carries ``RAY_RAYLET_PID=<raylet pid>`` (workers) and those holding a
  file open in the Ray session's folder (the agents, whose environment Ray's process-title
  rewrite can clobber).

Never started for a Ray cluster fedsweep attaches to (``--address``): that is not its to stop.
Linux only (``/proc``); elsewhere nothing is started.
"""

from __future__ import annotations

import os
import subprocess
import sys

_CODE = r"""
import os, signal, sys
tag = ("RAY_RAYLET_PID=" + sys.argv[1]).encode()
session = sys.argv[2].rstrip("/") + "/"
driver = int(sys.argv[3])
if sys.stdin.buffer.read():  # the driver's goodbye: Ray was shut down properly
    sys.exit(0)
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) in (os.getpid(), driver):
        continue
    try:
        with open(f"/proc/{name}/environ", "rb") as handle:
            hit = tag in handle.read().split(b"\0")
        fds = f"/proc/{name}/fd"
        hit = hit or any(os.readlink(f"{fds}/{fd}").startswith(session) for fd in os.listdir(fds))
        if hit:
            os.kill(int(name), signal.SIGKILL)
    except OSError:
        pass
"""

_watchdog: subprocess.Popen | None = None


def start() -> None:
    """Start the watchdog of the local Ray this process has just started (best effort: when
    Ray's node information is not where 2.60 keeps it, or there is no ``/proc``, nothing)."""
    global _watchdog
    if _watchdog is not None or not os.path.isdir("/proc/self/fd"):
        return
    try:
        import ray

        node = ray._private.worker._global_node
        raylet_pid = node.all_processes["raylet"][0].process.pid
        session = node.get_session_dir_path()
    except (AttributeError, KeyError, IndexError, TypeError):
        return
    _watchdog = subprocess.Popen(
        [sys.executable, "-S", "-c", _CODE, str(raylet_pid), session, str(os.getpid())],
        stdin=subprocess.PIPE,
        start_new_session=True,  # outlives a kill of the driver's process group
        close_fds=True,
    )


def stop() -> None:
    """After ``ray.shutdown()``: tell the watchdog all is well and let it exit."""
    global _watchdog
    if _watchdog is None:
        return
    try:
        _watchdog.stdin.write(b"bye")
        _watchdog.stdin.close()
        _watchdog.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        _watchdog.kill()
    _watchdog = None
