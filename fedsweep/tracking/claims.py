"""Claims in the tracking store: who drives a sweep, who trains a config, across machines.

A claim is a named lock that lives in the MLflow store itself, so every machine that shares the
store sees it (a local lock file does not: two drivers on two machines ran the same figure).
The store must offer an atomic "create if absent": MLflow's model registry does, on every
backend fedsweep supports (a local SQLite or PostgreSQL database, a tracking server): a
registered model's name is unique, :meth:`create_registered_model` refuses an existing one, and
the model's tags are written in the same transaction. So a claim is a registered model named
``fedsweep.claim.<kind>.<key>`` (MLflow UI: Models), tagged with its holder (host, PID, what it
runs) and a heartbeat, and deleted when released. Names are visible while held; released
claims leave nothing.

A claim whose holder died is taken over: at once when the holder ran on this host and its PID is
gone, or when the holder's ``owner`` equals the claimant's (Ray retrying the same trial of the
same sweep), else once its heartbeat has not moved for :data:`STALE_S` seconds as seen from
here (clock skew between machines does not matter: only this machine's clock is used).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager, nullcontext

from fedsweep.core.processes import alive

PREFIX = "fedsweep.claim."
#: seconds between two heartbeats of a held claim
BEAT_S = 15.0
#: seconds without a heartbeat after which a claim of another host counts as abandoned
STALE_S = float(os.environ.get("FEDSWEEP_CLAIM_STALE_S") or 90.0)
DESCRIPTION = (
    "fedsweep: a claim held while a sweep or a trial runs (who runs it: the tags); removed "
    "when it ends. Not a model."
)


class ClaimBusy(RuntimeError):
    """The claim is held by a live holder; ``holder`` is its tags."""

    def __init__(self, name: str, holder: dict):
        super().__init__(f"{name} is held by {describe(holder)}")
        self.name, self.holder = name, holder


def describe(holder: dict) -> str:
    """``PID 123 on node-a (since 12:01:02 UTC)``."""
    if not holder:
        return "another process"
    since = f" (since {holder['started']})" if holder.get("started") else ""
    return f"PID {holder.get('pid', '?')} on {holder.get('host', '?')}{since}"


def claim_name(kind: str, key: str) -> str:
    """A registered model name: no ``/`` or ``:`` (MLflow refuses them)."""
    safe = key.replace("/", "_").replace(":", "_")
    return f"{PREFIX}{kind}.{safe}"


class Claims:
    """The claims of one store (``tracking_uri``: the clean URI, :func:`store.resolve_tracking_uri`)."""

    def __init__(self, tracking_uri: str):
        from fedsweep.tracking.runstore import open_store

        #: the store's claim operations (``tracking.runstore``: sqlite3 on a local SQLite
        #: store, MLflow's model registry otherwise)
        self.store = open_store(tracking_uri)
        self._seen: dict[str, tuple[str, float]] = {}  # name -> (beat seen, when first seen)

    # ------------------------------------------------------------------ primitives
    def try_acquire(self, name: str, tags: dict[str, str]) -> bool:
        """Create the claim with ``tags``; False when it exists (atomic in the store)."""
        return self.store.create_claim(name, tags, DESCRIPTION)

    def holder(self, name: str) -> dict | None:
        """The claim's tags, None when nobody holds it."""
        return self.store.claim_tags(name)

    def beat(self, name: str, token: str) -> None:
        """Move the claim's heartbeat (only while ``token`` holds it)."""
        self.store.set_claim_tag(name, "beat", f"{token}:{time.time():.0f}")

    def release(self, name: str, token: str) -> None:
        """Delete the claim if ``token`` still holds it (one transaction on a SQL store)."""
        self.store.release_claim(name, token)

    # ------------------------------------------------------------------ policy
    def abandoned(self, name: str, holder: dict, owner: str | None = None) -> bool:
        """Whether ``holder`` (the claim's tags) is gone: its process on this host has ended,
        it is ``owner``'s own earlier attempt, or its heartbeat has not moved for STALE_S."""
        if owner is not None and holder.get("owner") == owner:
            return True
        if holder.get("host") == socket.gethostname():
            pid = holder.get("pid", "")
            if pid.isdigit() and not alive(int(pid)):
                return True
        beat = holder.get("beat", "")
        seen = self._seen.get(name)
        now = time.monotonic()
        if seen is None or seen[0] != beat:
            self._seen[name] = (beat, now)
            return False
        return now - seen[1] >= STALE_S

    def take_over(self, name: str, holder: dict, tags: dict[str, str]) -> bool:
        """Replace an abandoned claim by ours; False when another claimant was faster."""
        now = self.holder(name)
        if now is not None and now.get("token") == holder.get("token"):
            self.store.delete_claim(name)
        self._seen.pop(name, None)
        return self.try_acquire(name, tags)


def holder_tags(owner: str = "", **extra: str) -> dict[str, str]:
    """The tags of a new claim: a fresh token, this host and PID, ``owner`` (who may take it
    over at once: the same trial of the same sweep) and ``extra``."""
    token = uuid.uuid4().hex
    return {
        "token": token,
        "host": socket.gethostname(),
        "pid": str(os.getpid()),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "owner": owner,
        "beat": f"{token}:{time.time():.0f}",
        **{k: str(v) for k, v in extra.items()},
    }


class Heartbeat:
    """A daemon thread that moves a held claim's heartbeat every :data:`BEAT_S` seconds (its
    own connection to the store; a failed beat is retried at the next one)."""

    def __init__(self, tracking_uri: str, name: str, token: str):
        self.uri, self.name, self.token = tracking_uri, name, token
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"beat {name}")

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        claims = None
        while not self._stop.wait(BEAT_S):
            try:
                claims = claims or Claims(self.uri)
                claims.beat(self.name, self.token)
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
    """Hold the claim ``name`` for the block (heartbeat included), then release it. Held by a
    live holder: raise :class:`ClaimBusy`, or with ``wait`` call ``on_wait(holder)`` once and
    poll until it is free or abandoned. Yields the holder tags (``tags``). An outage of the
    store while claiming (or waiting) is waited out (``tracking.outage.patiently``; ``say``
    hears of it), not a failure."""
    from fedsweep.tracking.outage import brief_requests, patiently

    claims = patiently(lambda: Claims(tracking_uri), tracking_uri, say)
    waited = False
    while not patiently(lambda: claims.try_acquire(name, tags), tracking_uri, say):
        holder = patiently(lambda: claims.holder(name), tracking_uri, say)
        if holder is None:
            continue  # released meanwhile
        if claims.abandoned(name, holder, tags.get("owner") or None):
            if claims.take_over(name, holder, tags):
                break
            continue
        if not wait:
            raise ClaimBusy(name, holder)
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
                claims.release(name, tags["token"])
        except Exception:  # noqa: BLE001 - a claim left behind is taken over when stale
            pass
