"""Leases in the tracking store: who drives a sweep, who trains a config, across machines.

A lease is a named lock that lives in the MLflow store itself, so every machine that shares the
store sees it (a local lock file does not: two drivers on two machines ran the same figure).
The store must offer an atomic "create if absent": MLflow's model registry does, on every
backend fedsweep supports (a local SQLite or PostgreSQL database, a tracking server): a
registered model's name is unique, :meth:`create_registered_model` refuses an existing one, and
the model's tags are written in the same transaction. So a lease is a registered model named
``fedsweep.claim.<kind>.<key>`` (MLflow UI: Models), tagged with its holder (host, PID, what it
runs) and a heartbeat, and deleted when released. Names are visible while held; released
leases leave nothing. (The names in the store and the model's description keep the word
"claim": other fedsweep versions sharing a store read them; so does the setting
``$FEDSWEEP_CLAIM_STALE_S``.)

A lease is taken over only when its holder is known to be gone (issue 62):

* the holder ran on this host: when its process has ended (its PID is gone, or the PID now
  names another process: the ``pid_start`` tag, the process's start time, tells a reused PID
  apart). A live process on this host keeps its lease however long its heartbeat stands
  still (an outage of the store stops every heartbeat);
* the holder's ``owner`` equals the taker's: Ray retrying the same trial of the same sweep
  (the earlier attempt is over);
* the holder ran on another host: once its heartbeat has not moved for :func:`stale_s`
  seconds (``$FEDSWEEP_CLAIM_STALE_S``, default 90) *while this process's reads of the store
  succeeded*: the time between two successful reads counts only when they are at most
  :data:`MAX_GAP_S` apart, and a read that fails starts the count afresh. So an outage of the
  store (when no heartbeat can move) never counts as time without a heartbeat; only this
  machine's clock is used (clock skew between machines does not matter).
"""

from __future__ import annotations

import getpass
import math
import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager, nullcontext

from fedsweep.core.processes import alive, started_at

#: the stored names' prefix (a lease of kind ``driver`` or ``trial``: :func:`lease_name`)
PREFIX = "fedsweep.claim."
#: seconds between two heartbeats of a held lease
BEAT_S = 15.0
#: the variable that sets the seconds without a heartbeat after which a lease of another host
#: counts as abandoned (:func:`stale_s`), and its default
STALE_ENV = "FEDSWEEP_CLAIM_STALE_S"
STALE_DEFAULT_S = 90.0
#: set (tests): the stale seconds instead of ``$FEDSWEEP_CLAIM_STALE_S``
STALE_S: float | None = None
#: the longest time between two successful reads of a lease that counts towards its staleness:
#: a longer gap (a read that failed, or hung in MLflow's retries) may hide an outage of the
#: store, when no heartbeat could move
MAX_GAP_S = 10.0
#: the variable that names the team member a lease's holder works for (default: the login name)
MEMBER_ENV = "FEDSWEEP_MEMBER"
#: the description of a lease's registered model (stored: its words stay)
DESCRIPTION = (
    "fedsweep: a claim held while a sweep or a trial runs (who runs it: the tags); removed "
    "when it ends. Not a model."
)


class LeaseSettingError(ValueError):
    """``$FEDSWEEP_CLAIM_STALE_S`` is not a number of seconds."""


def stale_s() -> float:
    """Seconds a lease of another host may go without a heartbeat (counted while the store
    answers) before it counts as abandoned: ``$FEDSWEEP_CLAIM_STALE_S``, default 90. Raises
    :class:`LeaseSettingError` (one line: the variable, the value, what is allowed) for a value
    that is not a finite number of seconds >= 0 (``fedsweep sweep`` checks it before anything
    runs)."""
    if STALE_S is not None:
        return STALE_S
    text = os.environ.get(STALE_ENV, "").strip()
    if not text:
        return STALE_DEFAULT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise LeaseSettingError(
            f"{STALE_ENV}: got {text!r} (allowed: a finite number of seconds >= 0, e.g. 90; "
            f"unset: {STALE_DEFAULT_S:g})"
        )
    return value


def member() -> str:
    """Who a lease's holder works for: ``$FEDSWEEP_MEMBER``, else the login name ("" when
    neither is known)."""
    name = os.environ.get(MEMBER_ENV, "").strip()
    if name:
        return name
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in some containers
        return ""


class LeaseBusy(RuntimeError):
    """The lease is held by a live holder; ``holder`` is its tags."""

    def __init__(self, name: str, holder: dict):
        super().__init__(f"{name} is held by {describe(holder)}")
        self.name, self.holder = name, holder


def describe(holder: dict) -> str:
    """``PID 123 on node-a (since 12:01:02 UTC; member alice)``."""
    if not holder:
        return "another process"
    about = [f"since {holder['started']}"] if holder.get("started") else []
    about += [f"member {holder['member']}"] if holder.get("member") else []
    more = f" ({'; '.join(about)})" if about else ""
    return f"PID {holder.get('pid', '?')} on {holder.get('host', '?')}{more}"


def lease_name(kind: str, key: str) -> str:
    """A registered model name: no ``/`` or ``:`` (MLflow refuses them)."""
    safe = key.replace("/", "_").replace(":", "_")
    return f"{PREFIX}{kind}.{safe}"


class Leases:
    """The leases of one store (``tracking_uri``: the clean URI, :func:`store.resolve_tracking_uri`)."""

    def __init__(self, tracking_uri: str):
        from fedsweep.tracking.runstore import open_store

        #: the store's lease operations (``tracking.runstore``: sqlite3 on a local SQLite
        #: store, MLflow's model registry otherwise)
        self.store = open_store(tracking_uri)
        #: name -> (the beat seen, when it was last read, seconds it stood still while read)
        self._seen: dict[str, tuple[str, float, float]] = {}

    # ------------------------------------------------------------------ primitives
    def try_acquire(self, name: str, tags: dict[str, str]) -> bool:
        """Create the lease with ``tags``; False when it exists (atomic in the store)."""
        return self.store.create_lease(name, tags, DESCRIPTION)

    def holder(self, name: str) -> dict | None:
        """The lease's tags, None when nobody holds it."""
        return self.store.lease_tags(name)

    def beat(self, name: str, token: str) -> None:
        """Move the lease's heartbeat (only while ``token`` holds it)."""
        self.store.set_lease_tag(name, "beat", f"{token}:{time.time():.0f}")

    def release(self, name: str, token: str) -> None:
        """Delete the lease if ``token`` still holds it (one transaction on a SQL store)."""
        self.store.release_lease(name, token)

    # ------------------------------------------------------------------ policy
    def abandoned(
        self, name: str, holder: dict, owner: str | None = None, now: float | None = None
    ) -> bool:
        """Whether ``holder`` (the lease's tags, just read) is gone: it is ``owner``'s own
        earlier attempt, its process on this host has ended, or (a holder on another host) its
        heartbeat has not moved for :func:`stale_s` seconds of successful reads (the module's
        docstring). ``now``: the time of the read (``time.monotonic()``)."""
        if owner is not None and holder.get("owner") == owner:
            return True
        if holder.get("host") == socket.gethostname():
            pid = holder.get("pid", "")
            if pid.isdigit():
                self._seen.pop(name, None)
                # a live process keeps its lease, whatever its heartbeat says; a PID reused by
                # a newer process (another start time) is not the holder's
                start, now_start = holder.get("pid_start", ""), started_at(int(pid))
                return not alive(int(pid)) or bool(start and now_start and now_start != start)
        beat = holder.get("beat", "")
        now = time.monotonic() if now is None else now
        seen = self._seen.get(name)
        if seen is None or seen[0] != beat:
            self._seen[name] = (beat, now, 0.0)
            return False
        gap = now - seen[1]
        still = seen[2] + (gap if gap <= MAX_GAP_S else 0.0)
        self._seen[name] = (beat, now, still)
        return still >= stale_s()

    def unsure(self, name: str | None = None) -> None:
        """A read of the store failed (an outage): the staleness of ``name`` (every lease's:
        None) is counted afresh from the next successful read."""
        if name is None:
            self._seen.clear()
        else:
            self._seen.pop(name, None)

    def take_over(self, name: str, holder: dict, tags: dict[str, str]) -> bool:
        """Replace an abandoned lease by ours; False when another taker was faster."""
        now = self.holder(name)
        if now is not None and now.get("token") == holder.get("token"):
            self.store.delete_lease(name)
        self._seen.pop(name, None)
        return self.try_acquire(name, tags)


def holder_tags(owner: str = "", **extra: str) -> dict[str, str]:
    """The tags of a new lease: a fresh token, this host, PID and the process's start time, the
    team member (:func:`member`), ``owner`` (who may take it over at once: the same trial of
    the same sweep) and ``extra``."""
    token = uuid.uuid4().hex
    return {
        "token": token,
        "host": socket.gethostname(),
        "pid": str(os.getpid()),
        "pid_start": started_at(os.getpid()),
        "member": member(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "owner": owner,
        "beat": f"{token}:{time.time():.0f}",
        **{k: str(v) for k, v in extra.items()},
    }


class Heartbeat:
    """A daemon thread that moves a held lease's heartbeat every :data:`BEAT_S` seconds (its
    own connection to the store; a failed beat is retried at the next one)."""

    def __init__(self, tracking_uri: str, name: str, token: str):
        self.uri, self.name, self.token = tracking_uri, name, token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"beat {name}")

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        leases = None
        while not self._stop.wait(BEAT_S):
            try:
                leases = leases or Leases(self.uri)
                leases.beat(self.name, self.token)
            except Exception:  # noqa: BLE001 - the store is being retried; beat again later
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@contextmanager
def hold(
    tracking_uri: str,
    name: str,
    tags: dict[str, str],
    *,
    wait: bool,
    on_wait=None,
    poll_s: float = 2.0,
    say=None,
):
    """Hold the lease ``name`` for the block (heartbeat included), then release it. Held by a
    live holder: raise :class:`LeaseBusy`, or with ``wait`` call ``on_wait(holder)`` once and
    poll until it is free or abandoned. Yields the holder tags (``tags``). An outage of the
    store while taking it (or waiting) is waited out (``tracking.outage.patiently``; ``say``
    hears of it), not a failure."""
    from fedsweep.tracking.outage import brief_requests, patiently

    leases = patiently(lambda: Leases(tracking_uri), tracking_uri, say)

    def surely(step):
        def run():
            try:
                return step()
            except Exception:
                leases.unsure(name)  # an outage: no time without a heartbeat counts across it
                raise

        return patiently(run, tracking_uri, say)

    waited = False
    while not surely(lambda: leases.try_acquire(name, tags)):
        asked = time.monotonic()
        holder = surely(lambda: leases.holder(name))
        if holder is None:
            continue  # released meanwhile
        if time.monotonic() - asked > MAX_GAP_S:  # a read that hung in retries: an outage
            leases.unsure(name)
        if leases.abandoned(name, holder, tags.get("owner") or None):
            if leases.take_over(name, holder, tags):
                break
            continue
        if not wait:
            raise LeaseBusy(name, holder)
        if not waited and on_wait is not None:
            on_wait(holder)
        waited = True
        time.sleep(poll_s)
    beat = Heartbeat(tracking_uri, name, tags["token"]).start()
    stopped = False
    try:
        yield tags
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: release in one quick try (an outage)
        stopped = True
        raise
    finally:
        beat.stop()
        try:
            with brief_requests() if stopped else nullcontext():
                leases.release(name, tags["token"])
        except Exception:  # noqa: BLE001 - released later, or taken over once this process ends
            if not stopped:
                _release_later(tracking_uri, name, tags["token"])


def _release_later(tracking_uri: str, name: str, token: str) -> None:
    """Release the lease from a daemon thread, tried every :data:`BEAT_S` seconds for as long as
    an outage is waited out: this process lives on (a Ray worker that runs the next trial), and
    a live process on this host keeps its leases (:meth:`Leases.abandoned`)."""
    from fedsweep.tracking.outage import max_wait_s

    def run() -> None:
        deadline = time.monotonic() + max_wait_s()
        while time.monotonic() < deadline:
            try:
                Leases(tracking_uri).release(name, token)
                return
            except Exception:  # noqa: BLE001 - the store is away: again later
                time.sleep(BEAT_S)

    threading.Thread(target=run, daemon=True, name=f"release {name}").start()
