"""Ray's own output, away from the console: :func:`ray_output_to` sends everything the process
writes to fd 1/2 (Ray Tune's tables, Ray's warnings, the worker output Ray forwards to the
driver, MLflow's log lines) to a log file and hands the caller streams on the original
stdout/stderr.

The sweep layer owns it: ``fedsweep sweep``'s console (``fedsweep.cli.sweep_console``) and the
bench's sweeps (``fedsweep.bench``) both run Ray under it.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


class _Sink(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` while the output is captured: writes to the log file, and
    to ``fallback`` once the log is closed (a logging handler may keep a reference to it)."""

    def __init__(self, log: TextIO, fallback: TextIO):
        self._log, self._fallback = log, fallback

    def _target(self) -> TextIO:
        return self._fallback if self._log.closed else self._log

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


def _console_stream(stream: TextIO, fd: int) -> tuple[TextIO, bool]:
    """A stream on what ``stream`` writes to now, that survives ``fd`` being redirected:
    a new file object on a duplicate of ``fd`` when ``stream`` writes to ``fd``, else
    ``stream`` itself (e.g. a test runner's buffer). Returns it and whether it is new."""
    try:
        own = stream.fileno() == fd
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        own = False
    if not own:
        return stream, False
    encoding = getattr(stream, "encoding", None) or "utf-8"
    return os.fdopen(os.dup(fd), "w", buffering=1, encoding=encoding, errors="replace"), True


@contextmanager
def ray_output_to(log_path: Path) -> Iterator[tuple[TextIO, TextIO]]:
    """Redirect fd 1/2 (and ``sys.stdout``/``sys.stderr``) to ``log_path`` (appending); yield
    ``(out, err)`` streams on the original stdout/stderr for the console. Everything is put back
    on exit, also on an exception, so an error message after it reaches the user."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    out, new_out = _console_stream(sys.stdout, 1)
    err, new_err = _console_stream(sys.stderr, 2)
    log = open(log_path, "a", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115
    saved = os.dup(1), os.dup(2)
    py_streams = sys.stdout, sys.stderr
    color = os.environ.get("RAY_COLOR_PREFIX")
    os.environ["RAY_COLOR_PREFIX"] = "0"  # no colour codes around forwarded worker lines
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout, sys.stderr = _Sink(log, py_streams[0]), _Sink(log, py_streams[1])
    try:
        yield out, err
    finally:
        for stream in (sys.stdout, sys.stderr, out, err):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        sys.stdout, sys.stderr = py_streams
        log.close()
        if color is None:
            os.environ.pop("RAY_COLOR_PREFIX", None)
        else:
            os.environ["RAY_COLOR_PREFIX"] = color
        for stream, new in ((out, new_out), (err, new_err)):
            if new:
                stream.close()
