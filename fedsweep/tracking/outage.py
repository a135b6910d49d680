"""Waiting out an outage of the tracking server (or of the database behind it) instead of
failing.

MLflow's REST client already retries a request for about 4 minutes with backoff once a run is
under way (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``, 7 by default). What failed during a 30-60 s
outage was the step before: a trial that started then (or a driver waiting with ``--wait``)
opened the store, whose check (``store.probe_server``: one ``GET /health`` with a 10 s timeout,
so that a wrong URI fails in seconds) raised, and the trial failed and used up one of its
retries. :func:`patiently` runs such a step again with bounded exponential backoff while the
store is unreachable, up to ``$FEDSWEEP_OUTAGE_WAIT_S`` seconds (default 600), and says so on
the console: ``note: MLflow server http://… unreachable since 14:02:17, retrying (for up to
600 s; FEDSWEEP_OUTAGE_WAIT_S sets it)``. A store that never answered at all is the driver's
business: ``fedsweep sweep`` still refuses it before Ray starts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from fedsweep.tracking.credentials import redact

T = TypeVar("T")

#: seconds a trial or a waiting driver waits for an unreachable store before it fails
OUTAGE_WAIT_ENV = "FEDSWEEP_OUTAGE_WAIT_S"
OUTAGE_WAIT_S = 600.0
#: the first pause and the longest one between two tries
FIRST_PAUSE_S, LONGEST_PAUSE_S = 1.0, 30.0
#: seconds between two console notes about the same outage
NOTE_EVERY_S = 60.0

#: words of the errors an unreachable store raises (the probe's, urllib3's/requests', MLflow's
#: once its own retries ran out, SQLAlchemy's for a database that went away)
_UNREACHABLE = (
    "does not answer",
    "connection refused",
    "max retries exceeded",
    "failed to establish a new connection",
    "connection aborted",
    "connection reset",
    "remote end closed connection",
    "temporarily unavailable",
    "could not connect to server",
    "connection to server at",
    "server closed the connection",
    "the database cannot be opened",
    "503",
    "502",
    "504",
)


def unreachable(err: BaseException) -> bool:
    """Whether ``err`` (or an exception it carries) says the store cannot be reached now."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [err]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ConnectionError | TimeoutError):
            return True
        text = str(e).lower()
        if any(word in text for word in _UNREACHABLE):
            return True
        stack += [e.__cause__, e.__context__]
    return False


def max_wait_s() -> float:
    try:
        return max(0.0, float(os.environ.get(OUTAGE_WAIT_ENV) or OUTAGE_WAIT_S))
    except ValueError:
        return OUTAGE_WAIT_S


def patiently(
    step: Callable[[], T],
    tracking_uri: str,
    say: Callable[[str], None] | None = None,
    *,
    max_wait: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``step()``, tried again while it fails because the store is unreachable
    (:func:`unreachable`), with pauses of 1, 2, 4 ... 30 s, for at most ``max_wait`` seconds
    (default :func:`max_wait_s`); ``say(line)`` hears of the outage when it starts and once a
    minute. Any other error, or the outage outlasting the wait, is raised as it is."""
    limit = max_wait_s() if max_wait is None else max_wait
    began: float | None = None
    since = ""
    noted = -float("inf")
    pause = FIRST_PAUSE_S
    while True:
        try:
            result = step()
        except Exception as err:
            if not unreachable(err):
                raise
            now = clock()
            if began is None:
                began, since = now, time.strftime("%H:%M:%S")
            if now - began >= limit:
                raise
            if say is not None and now - noted >= NOTE_EVERY_S:
                noted = now
                say(
                    f"note: MLflow server {redact(tracking_uri)} unreachable since {since}, "
                    f"retrying (for up to {limit:g} s; {OUTAGE_WAIT_ENV} sets it)"
                )
            sleep(min(pause, max(0.0, limit - (now - began))))
            pause = min(pause * 2, LONGEST_PAUSE_S)
            continue
        if began is not None and say is not None:
            say(f"note: MLflow server {redact(tracking_uri)} answers again (since {since})")
        return result


#: MLflow's request settings inside :func:`brief_requests` (one try, a short timeout)
BRIEF_REQUESTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
}


@contextmanager
def brief_requests() -> Iterator[None]:
    """Inside, MLflow's requests to a tracking server are tried once with a 5 s timeout (MLflow
    reads these variables at every request). For the clean-up of an interrupted command: a
    driver stopped by SIGTERM during an outage spent MLflow's retries (about 4 minutes per
    write) marking its runs KILLED and releasing its leases, so it seemed to ignore the signal
    (measured: still running 120 s after SIGTERM). What cannot be written now is left to the
    next sweep of the figure (it ends RUNNING children and takes over stale leases)."""
    old = {key: os.environ.get(key) for key in BRIEF_REQUESTS}
    os.environ.update(BRIEF_REQUESTS)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: seconds between two quick reads of the store by a driver's outage watch (:func:`watching`)
WATCH_EVERY_S = 2.0
#: seconds one quick read may take before the store counts as not answering
WATCH_TIMEOUT_S = 5.0
#: a registered model nobody creates: reading it asks the store's database (404 when it answers)
_PROBE_NAME = "fedsweep.claim.outage-probe"


def quick_read(tracking_uri: str, store=None) -> object:
    """One read of the store that fails at once when it does not answer (no retries; a tracking
    server's read has a :data:`WATCH_TIMEOUT_S` timeout and an error status 5xx, the server up
    but its database down, fails too). Returns the store opened (``store``: one opened before),
    to be given again."""
    from fedsweep.tracking.runstore import ClientStore, open_store

    if store is None:
        store = open_store(tracking_uri)
    registry = store.client._get_registry_client().store if isinstance(store, ClientStore) else None
    if registry is not None and hasattr(registry, "get_host_creds"):  # a tracking server
        from mlflow.utils.rest_utils import http_request

        answer = http_request(
            registry.get_host_creds(), "/api/2.0/mlflow/registered-models/get", "GET",
            max_retries=0, backoff_factor=0, timeout=WATCH_TIMEOUT_S, raise_on_status=False,
            params={"name": _PROBE_NAME},
        )  # fmt: skip
        if answer.status_code >= 500:
            raise ConnectionError(f"the tracking server answered {answer.status_code}")
    else:
        store.lease_tags(_PROBE_NAME)
    return store


class _Watch:
    """The thread of :func:`watching`."""

    def __init__(self, tracking_uri: str, say: Callable[[str], None], every_s: float):
        import threading

        self.uri, self.say, self.every_s = tracking_uri, say, every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="outage watch")
        self.down: tuple[float, str] | None = None  # (monotonic, HH:MM:SS) when it went away

    def _run(self) -> None:
        store = None
        while not self.stop.wait(self.every_s):
            try:
                store = quick_read(self.uri, store)
            except Exception as err:  # noqa: BLE001 - whatever it is, the store did not answer
                if self.down is None:
                    self.down = (time.monotonic(), time.strftime("%H:%M:%S"))
                    self._say(
                        f"note: MLflow server {redact(self.uri)} unreachable since "
                        f"{self.down[1]} ({_why(err)}); the sweep waits for it (trials and "
                        "MLflow retry their writes)"
                    )
                continue
            if self.down is not None:
                took = time.monotonic() - self.down[0]
                self._say(
                    f"note: MLflow server {redact(self.uri)} answers again (unreachable from "
                    f"{self.down[1]}, about {took:.0f} s)"
                )
                self.down = None

    def _say(self, text: str) -> None:
        try:
            self.say(text)
        except Exception:  # noqa: BLE001 - a display must never stop a sweep
            pass


def _why(err: BaseException) -> str:
    """What an error of a quick read says in a few words (``Connection refused``, ``the
    tracking server answered 503``), else its first line, cut."""
    import re

    from fedsweep.core.errors import first_line

    text = first_line(err, None)
    found = re.search(
        r"(Connection refused|timed out|Name or service not known|the tracking server answered \d{3}|"
        r"could not connect to server|Connection reset)",
        text,
        re.I,
    )
    return found.group(1) if found else redact(text[:100])


@contextmanager
def watching(
    tracking_uri: str, say: Callable[[str], None] | None, every_s: float = WATCH_EVERY_S
) -> Iterator[None]:
    """While inside, a daemon thread reads the store every ``every_s`` seconds
    (:func:`quick_read`) and ``say``s when it stops answering (within seconds, while MLflow's
    own requests are still being retried in silence) and when it answers again. Nothing for a
    local SQLite store (no outage to see) or without ``say``."""
    from fedsweep.tracking.uri import sqlite_path

    if say is None or sqlite_path(tracking_uri) is not None:
        yield
        return
    watch = _Watch(tracking_uri, say, every_s)
    watch.thread.start()
    try:
        yield
    finally:
        watch.stop.set()
        watch.thread.join(timeout=1)


# ------------------------------------------------------------------ a stop asked for
#: what :func:`stop_requested` calls (the open :func:`brief_once_stopped` blocks)
_ON_STOP: list[Callable[[], None]] = []


def stop_requested() -> None:
    """Ctrl-C or SIGTERM: every :func:`brief_once_stopped` block open makes the rest of its
    requests brief (:func:`brief_requests`)."""
    for hook in list(_ON_STOP):
        hook()


class _Stop:
    def __init__(self) -> None:
        self.requested = False


@contextmanager
def brief_once_stopped() -> Iterator[_Stop]:
    """Inside, once :func:`stop_requested` was called (a signal handler: a stopped command's
    clean-up), MLflow's requests are brief until the block ends: a command stopped during an
    outage of the store would otherwise spend MLflow's retries, minutes, on each clean-up
    write. Yields an object whose ``requested`` says whether that happened."""
    from contextlib import ExitStack

    stop = _Stop()
    stack = ExitStack()

    def hook() -> None:
        if not stop.requested:
            stop.requested = True
            stack.enter_context(brief_requests())

    with stack:
        _ON_STOP.append(hook)
        try:
            yield stop
        finally:
            _ON_STOP.remove(hook)


def relay_sigint() -> None:
    """Wrap the SIGINT handler in place now (Ray Tune installs its own for a fit: it stops the
    trials gracefully) so that Ctrl-C first calls :func:`stop_requested`, then does what it
    did. Only in the main thread; a handler wrapped already (or SIG_IGN/SIG_DFL) is left."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGINT)
    if not callable(current) or getattr(current, "_fedsweep_relay", False):
        return

    def relay(signum, frame):
        stop_requested()
        current(signum, frame)

    relay._fedsweep_relay = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGINT, relay)
