"""One driver per sweep, and what ``--resume`` continues: the driver lock (an ``flock`` on a
file beside the sweep's folder), the sweep's state file (the interrupted plan: parent run,
``--set``, config hashes) and the checks that a resumed plan is the interrupted one."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
from pathlib import Path

from fedsweep.specs.load import Trial

STATE_FILE = "fedsweep_sweep.json"


def ray_experiment_name(figure: str, profile: str, tracking_uri: str, spec_path: Path) -> str:
    """Ray Tune's experiment folder of a sweep: ``<figure>-<profile>-<key>``, the key a hash of
    the store's URI and the spec's path, so a sweep never resumes (or removes) the Ray state
    of the same figure in another store."""
    key = hashlib.sha256(f"{tracking_uri}\n{spec_path}".encode()).hexdigest()[:8]
    return f"{figure}-{profile}-{key}"


class SweepBusyError(RuntimeError):
    """Another driver runs this sweep (same spec, profile and store) right now."""


@contextlib.contextmanager
def driver_lock(
    path: Path, figure: str, profile: str, uri: str, wait: bool, echo, waited: list | None = None
):
    """Hold ``path`` (an exclusive ``flock``, released by the OS even on ``kill -9``) while
    driving a sweep; the file says who holds it, and is removed when the sweep ends. A second
    driver of the same sweep and store raises :class:`SweepBusyError` naming the running one,
    or with ``wait`` blocks until it ends. Without ``fcntl`` (Windows) there is no lock.

    Removing the file on release races a driver that opened it before: that driver then holds
    a lock on a removed file while a third one creates a new file. So a driver that gets the
    lock checks that ``path`` is still the file it locked, and opens it afresh when not.
    ``waited``: gets the holder waited for (its text), if any."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        yield
        return
    while True:
        handle = open(path, "a+")  # noqa: SIM115 - closed below, or kept while held
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = _holder_text(handle.read())
            if not wait:
                handle.close()
                raise SweepBusyError(
                    f"{figure} [{profile}] is already being swept into {uri} by {holder}; "
                    "a second driver would run the same trials again and remove the first "
                    "one's Ray state. Wait for it (or stop it), or pass --wait to start when "
                    "it has ended (its finished trials are then reused)."
                ) from None
            echo(f"waiting for {holder} to end its sweep of {figure} [{profile}]")
            if waited is not None:
                waited.append(holder)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        if _same_file(handle, path):
            break
        handle.close()  # the holder removed it meanwhile: lock the file at ``path`` now
    with handle:
        handle.seek(0)
        handle.truncate()
        from fedsweep.tracking.leases import member

        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "member": member(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "store": uri,
        }
        handle.write(json.dumps(info))
        handle.flush()
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()  # while still held: nobody locks a file that is gone
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _same_file(handle, path: Path) -> bool:
    try:
        mine, now = os.fstat(handle.fileno()), os.stat(path)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


@contextlib.contextmanager
def store_driver_lease(
    uri: str, figure: str, profile: str, wait: bool, echo, waited: list | None = None
):
    """The driver's lease on (figure, profile) in the tracking store itself
    (:mod:`fedsweep.tracking.leases`): a second driver on any machine sharing the store raises
    :class:`SweepBusyError` naming the host and PID of the running one, or with ``wait`` waits
    for it to end. (``driver_lock`` guards this machine's Ray state; this guards the store.)
    While inside, an outage of the store is said when it starts and when it ends
    (``tracking.outage.watching``). ``waited``: gets the holder waited for, if any."""
    from fedsweep.tracking.leases import LeaseBusy, describe, hold, holder_tags, lease_name
    from fedsweep.tracking.outage import watching

    def waiting(holder: dict) -> None:
        if waited is not None:
            waited.append(holder)
        echo(f"waiting for {describe(holder)} to end its sweep of {figure} [{profile}]")

    tags = holder_tags(figure=figure, profile=profile)
    try:
        with (
            watching(uri, echo),
            hold(
                uri,
                lease_name("driver", f"{figure}.{profile}"),
                tags,
                wait=wait,
                on_wait=waiting,
                say=echo,
            ),
        ):
            yield
    except LeaseBusy as err:
        raise SweepBusyError(
            f"{figure} [{profile}] is already being swept into {uri} by "
            f"{describe(err.holder)}; a second driver would run the same trials again. Wait "
            "for it (or stop it), or pass --wait to start when it has ended (its finished "
            "trials are then reused)."
        ) from None


def _holder_text(text: str) -> str:
    try:
        info = json.loads(text)
        who = f"; member {info['member']}" if info.get("member") else ""
        return f"PID {info['pid']} on {info['host']} (started {info['started']}{who})"
    except (ValueError, KeyError, TypeError):
        return "another process (it has not written its PID yet)"


# ------------------------------------------------------------------ resume and Ray state
def read_state(state_path: Path | str, uri: str, echo, text: str | None = None) -> dict | None:
    """The state file of an interrupted sweep of this store, or None (no file, an unreadable
    one, or one written for another store: never resumed). ``text``: the file's content, read
    elsewhere (an object store's copy; ``state_path`` then only names it)."""
    if text is None:
        if not Path(state_path).is_file():
            return None
        text = Path(state_path).read_text()
    try:
        state = json.loads(text)
    except ValueError:
        echo(f"note: ignoring the unreadable sweep state {state_path}")
        return None
    if state.get("tracking_uri", uri) != uri:
        echo(f"note: ignoring {state_path}: it belongs to the store {state['tracking_uri']}")
        return None
    return state


class ResumeMismatchError(ValueError):
    """``--resume`` would continue trials whose configs differ from the sweep planned now."""


def check_resume_plan(
    state: dict,
    pending: list[Trial],
    overrides: dict,
    figure: str,
    profile: str,
    panels: str = "",
) -> None:
    """Refuse ``--resume`` when the restored trials are not the ones planned now (a changed
    ``--set``, an edited spec): Ray Tune would run the configs saved with the interrupted
    sweep. Raises :class:`ResumeMismatchError` with the difference."""
    if "hashes" not in state:
        return
    saved = set(state["hashes"])
    now = {t.config_hash for t in pending}
    if all(saved.intersection(t.hashes) for t in pending):  # a legacy hash: saved before
        return
    old_sets = state.get("overrides", {})
    new_sets = {k: v for k, v in overrides.items() if k != "data.root"}
    changed = [
        f"--set {k}: {old_sets.get(k, '(unset)')} -> {new_sets.get(k, '(unset)')}"
        for k in sorted(set(old_sets) | set(new_sets))
        if old_sets.get(k) != new_sets.get(k)
    ]
    if state.get("panels", "") != panels:
        old, new = state.get("panels") or "(every panel)", panels or "(every panel)"
        changed.append(f"--panel {old} -> {new}")
    what = "; ".join(changed) if changed else "the spec or its profile changed"
    raise ResumeMismatchError(
        f"--resume: {len(now - saved)} of the {len(now)} trials planned now for {figure} "
        f"[{profile}] are not among the interrupted sweep's ({what}). Resume with the "
        "same options as before, or run without --resume to start these trials afresh "
        "(finished runs are reused either way)."
    )


def resumable(state: dict, pending: list[Trial]) -> bool:
    """Whether the interrupted plan (its state file) had every pending trial
    (``check_resume_plan``'s condition). In the derived stage a miss is no user error but a
    source that finished since: the stage runs the trials planned now, those the interrupted
    plan had from their checkpoints."""
    return "hashes" not in state or {t.config_hash for t in pending} <= set(state["hashes"])
