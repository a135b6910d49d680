"""The Ray Tune trainable: one trial = one whole FL run, tracked as an MLflow child run.

The trial reports its progress to Tune (``tune.report``) at most every few seconds, and writes
a checkpoint of the full FL state (global model, method/selector state, batch cursors and RNG
streams, records, MLflow run id) every ``checkpoint_every`` rounds and at the end, into its own
folder, which fedsweep owns and finds from the trial's config hash alone
(``<store>/ray_results/<sweep>/trials/<config hash>/checkpoint_<round>``, written atomically:
a temporary folder renamed into place). Ray keeps no checkpoint and restores nothing: a trial
that starts (the first attempt, a Ray retry after a crash, or ``fedsweep sweep --resume`` after
the driver was killed) takes the newest checkpoint of its folder that loads (read with
``torch.load(weights_only=True)``; one that does not is set aside with a warning) and continues
in the same MLflow run, the unfinished child run of the same parent and config hash; without a
checkpoint it starts at round 0 in that run (rounds already logged are not logged again). When
that run already ended (the driver died before it saw the end) it reports and returns without
running: a sweep never duplicates a run.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import time
from pathlib import Path

import torch

from fedsweep.config.schema import RunConfig
from fedsweep.engine.client_state import externalize, internalize
from fedsweep.engine.observers import Observer
from fedsweep.tracking import retries
from fedsweep.tracking.leases import describe, hold, holder_tags, lease_name
from fedsweep.tracking.outage import patiently
from fedsweep.tracking.provenance import verified_done_runs
from fedsweep.tracking.records import RecordSpool
from fedsweep.tracking.runstore import open_store
from fedsweep.tracking.tracked_run import SPOOL_KEY, TrackedRun

STATE_FILE = "fl_state.pt"
META_FILE = "meta.json"
#: per-client state (``engine.client_state``): one file per client and change, in the trial
#: folder beside the checkpoints; each checkpoint lists the files it uses in CLIENT_FILES
CLIENT_STATE_DIR = "client_state"
CLIENT_FILES = "client_files.json"
#: the trial's record spool (``tracking.records``), beside the checkpoints
RECORDS_DIR = "records"
#: metrics forwarded to Ray (everything goes to MLflow; Ray only needs a few for its tables)
REPORTED = ("test_loss", "test_acc", "train_loss", "train_acc", "round_time")
#: tag of a run whose trial went on from a checkpoint: the checkpoint's round (the latest
#: attempt's; a retry after a crash, a lost node, or ``--resume``)
RESUMED_TAG = "fedsweep.resumed_at_round"
#: key of a trial's last report when it reused the run another sweep trained meanwhile
REUSED_KEY = "reused_run"
#: key of a trial's report that carries a warning for the driver's console (a checkpoint set
#: aside); ``sweep.tune_events`` forwards it
NOTE_KEY = "fedsweep_note"  # = tune_events.NOTE_KEY (that module imports Ray at its top)


class StoreFullError(OSError):
    """A write of the trial (checkpoint, MLflow store) failed because its file system is full
    (``ENOSPC``, or SQLite's "database or disk is full"). The message names the path."""

    def __init__(self, path: str | Path | None, detail: str = ""):
        super().__init__(errno.ENOSPC, _full_text(path, detail))
        self.path = None if path is None else str(path)
        self.detail = detail

    def at(self, path: str | Path) -> StoreFullError:
        """This error, naming ``path`` when it names no path yet (e.g. the store's folder for
        SQLite's "database or disk is full")."""
        return self if self.path else StoreFullError(path, self.detail)

    def __str__(self) -> str:
        return self.strerror

    def __reduce__(self):  # pickled by Ray to the driver
        return (_store_full, (self.path, self.strerror, self.detail))


def _store_full(path, text, detail=""):
    err = StoreFullError(None, detail)
    err.path, err.strerror = path, text
    return err


def _full_text(path, detail: str) -> str:
    """``the store's file system is full at /x/y (0 MB free of 60 MB): no space left on
    device``; the free space is that of the nearest existing folder of ``path``."""
    where = usage = ""
    if path:
        where = f" at {path}"
        folder = Path(path)
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            disk = shutil.disk_usage(folder)
            usage = f" ({disk.free / 2**20:.0f} MB free of {disk.total / 2**20:.0f} MB)"
        except OSError:
            pass
    text = f"the store's file system is full{where}{usage}: no space left on device"
    return text + (f" ({detail})" if detail else "")


def fl_trial(params: dict, secrets: dict | None = None) -> None:
    """One trial; ``secrets``: the driver's tracking credentials (environment variables,
    ``credentials.secret_env``), handed over through Ray's object store."""
    from ray import tune

    payload = params["trial"]
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    if secrets:
        from fedsweep.tracking.credentials import apply_env

        apply_env(secrets)
    if payload.get("plugins"):  # the driver's --plugin modules register parts the config names
        from fedsweep.plugins import load_plugin_list

        load_plugin_list(payload["plugins"])
    config = RunConfig.model_validate(payload["config"])
    config_hash = payload["tags"]["fedsweep.config_hash"]

    def waiting(holder: dict) -> None:  # another sweep (maybe on another machine) trains it
        text = (
            f"note: config {config_hash[:12]} is being trained by {describe(holder)} "
            f"({holder.get('figure', '?')}: {holder.get('run_name', '?')}); waiting to reuse its run"
        )
        print(text, flush=True)
        tune.report({"round": 0, NOTE_KEY: text})

    # the lease on this config, in the store: no config is trained twice at once, by any sweep
    # on any machine sharing the store (fedsweep.tracking.leases)
    tags = holder_tags(
        f"{payload['parent_run_id']}/{payload['trial_id']}",
        figure=payload["tags"].get("fedsweep.figure", ""),
        run_name=config.tracking.run_name or "",
    )

    def outage(text: str) -> None:  # the store is unreachable: waited out, not a failure
        print(text, flush=True)
        tune.report({"round": 0, NOTE_KEY: text})

    uri = config.tracking.uri
    with hold(uri, lease_name("trial", config_hash), tags, wait=True, on_wait=waiting, say=outage):
        # MLflow's client, or sqlite3 on a local SQLite store: this process then never imports
        # MLflow (seconds of CPU per trial actor; tracking.runstore)
        store = patiently(lambda: open_store(uri), uri, outage)
        done = patiently(lambda: verified_done_runs(store, [config_hash]), uri, outage).get(
            config_hash
        )
        if done is not None:
            # done since this sweep was planned: by another sweep (maybe while this trial
            # waited for its lease; REUSED_KEY), or by this one's earlier attempt whose end
            # the driver never saw: running it again would duplicate the run
            parent = store.run_tag(done[0], "mlflow.parentRunId")
            own = parent == payload["parent_run_id"]
            tune.report({"round": config.train.rounds, "already_ended" if own else REUSED_KEY: 1})
            return
        _leased_trial(payload, config)


def _leased_trial(payload: dict, config: RunConfig) -> None:
    """The trial, once it holds the lease on its config."""
    state_dir = Path(payload["state_dir"]) if payload.get("state_dir") else None
    config_hash = payload["tags"]["fedsweep.config_hash"]
    remote = None
    if state_dir is not None and payload.get("state_remote"):
        # checkpoints on an object store: this node's folder starts as the store's copy
        from fedsweep.sweep.remote_state import RemoteFolder

        remote = RemoteFolder(payload["state_remote"])
        remote.pull(state_dir)
    try:
        state, run_id = _state_to_resume(payload, config, state_dir)
        tags = dict(payload["tags"])
        if state is not None:  # provenance: this attempt went on from a checkpoint
            tags[RESUMED_TAG] = str(int(state["round"]))
        tracked = TrackedRun(
            config,
            tags=tags,
            params=payload.get("params"),
            run_id=run_id,
            state=state,
            # the per-round records, on disk beside the checkpoints (cut back to a restored one)
            records_dir=state_dir / RECORDS_DIR if state_dir else None,
        )
        reporter = TuneReporter(tracked, payload["checkpoint_every"], state_dir=state_dir)
        reporter.config_hash = config_hash
        reporter.rungs = frozenset((payload.get("early_stop") or {}).get("rungs") or ())
        reporter.remote = remote
        watchers = plugin_observers(payload, state_dir, resumed=state is not None)
        with retries.watching(reporter.notes.append):  # to the driver with the next report
            tracked.execute(observers=[*watchers, reporter])
        if state_dir is not None:  # the run ended (finished or diverged): no resume needs it
            shutil.rmtree(state_dir, ignore_errors=True)
            if remote is not None:
                remote.delete()
    except Exception as err:
        full = disk_full(err)
        if full is not None:  # one line for the driver, not Ray's chain of tracebacks
            raise full from None
        raise


def _state_to_resume(payload: dict, config: RunConfig, state_dir: Path | None):
    """``(state, run_id)``: the newest checkpoint of the trial's folder that loads (None: start
    at round 0) and its unfinished MLflow run (None: a new one). A checkpoint set aside, one
    whose records are missing, or one of another run is said (printed, and reported to the
    driver's console) and not resumed."""
    from ray import tune

    config_hash = payload["tags"]["fedsweep.config_hash"]
    notes: list[str] = []
    state, saved_run = (
        restore_newest(state_dir, warn=notes.append, config_hash=config_hash)
        if state_dir
        else (None, None)
    )
    # (a run of this config that already ended was found by fl_trial, under the lease)
    run_id = unfinished_sibling(config.tracking.uri, payload["parent_run_id"], config_hash)
    if state is not None and not RecordSpool(state_dir / RECORDS_DIR).fits(state.get(SPOOL_KEY)):
        notes.append(
            f"{state_dir / RECORDS_DIR}: the per-round records of the checkpoint of round "
            f"{state['round']} are missing; starting at round 0"
        )
        state = None
    if state is not None and saved_run != run_id:
        # a checkpoint of another run (one deleted since, or of an earlier sweep's parent):
        # not this run's rounds; start at round 0 in the run found
        notes.append(
            f"{state_dir}: the newest checkpoint belongs to MLflow run {saved_run}, not to "
            f"{run_id or 'a new run'}; starting at round 0"
        )
        state = None
    for note in notes:
        print(f"warning: {note}", flush=True)
    if notes:
        done = int(state["round"]) if state is not None else 0
        tune.report({"round": done, NOTE_KEY: "\n".join(notes)})
    return state, run_id


#: the function a ``--plugin`` module may define to watch the rounds of every trial of the sweep
PLUGIN_OBSERVERS = "trial_observers"


def plugin_observers(payload: dict, state_dir: Path | None, resumed: bool) -> list[Observer]:
    """The observers the trial's ``--plugin`` modules add to it, before its reporter: each
    module's ``trial_observers(trial_id, state_dir, resumed)``, when it defines one (``resumed``:
    this attempt goes on from a checkpoint). The tests' crashes on purpose come this way
    (``tests.faults``): the payload carries no test field."""
    out: list[Observer] = []
    for module, _root in payload.get("plugins") or []:
        make = getattr(sys.modules.get(module), PLUGIN_OBSERVERS, None)
        if make is not None:
            out.extend(make(payload["trial_id"], state_dir, resumed))
    return out


#: seconds between two plain progress reports to Ray Tune (every round still goes to MLflow;
#: checkpoint rounds and the last round are always reported)
REPORT_EVERY_S = 2.0


class TuneReporter(Observer):
    """Reports to Ray Tune and writes a checkpoint of the full FL state (and the MLflow run id)
    into ``state_dir`` every ``every`` rounds and at the last round; between those, a plain
    progress report at most every :data:`REPORT_EVERY_S` seconds (a report is a round trip to
    the driver, which writes Tune's result files: short rounds spent more time reporting than
    training)."""

    def __init__(
        self, tracked: TrackedRun, every: int, state_dir: str | Path | None = None
    ) -> None:
        self.tracked, self.every = tracked, every
        self.state_dir = None if state_dir is None else Path(state_dir)
        #: the checkpoints' mirror on an object store (``remote_state.RemoteFolder``), or None
        self.remote = None
        #: the trial's config hash, written into every checkpoint (issue 53)
        self.config_hash: str | None = None
        self._last_report = time.monotonic()
        #: lines for the driver's console (``retries.watching``), sent with the next report
        self.notes: list[str] = []
        #: the rounds at which a search trial reports to its early-stopping scheduler
        #: (``sweep.early_stop``): always, after every round up to it is in the store (a stop
        #: ends this trial inside that report)
        self.rungs: frozenset[int] = frozenset()

    def on_round(self, t, metrics, result) -> None:
        from ray import tune

        report = {k: metrics[k] for k in REPORTED if k in metrics}
        report["round"] = t
        if self.notes:
            report[NOTE_KEY] = "\n".join(dict.fromkeys(self.notes))
            self.notes.clear()
        last = t == self.tracked.config.train.rounds or result.status != "finished"
        if (t % self.every == 0 or last) and self.state_dir is not None:
            # every round up to the checkpoint is in the store before the checkpoint exists (a
            # restored trial does not log the rounds the store has again)
            self.tracked.flush()
            save_checkpoint(
                self.state_dir, self.tracked.state_dict(), self.tracked.run_id, t, self.config_hash
            )
            if self.remote is not None:  # the object store's copy, before Tune hears of it
                self.remote.push(self.state_dir)
            tune.report(report)
            self._last_report = time.monotonic()
        elif t in self.rungs:
            self.tracked.flush()
            tune.report(report)
            self._last_report = time.monotonic()
        elif NOTE_KEY in report or time.monotonic() - self._last_report >= REPORT_EVERY_S:
            tune.report(report)
            self._last_report = time.monotonic()


# ----------------------------------------------------------------------------- checkpoints
#: checkpoints of a trial that keep their FL state file; older ones keep only ``meta.json``
KEEP_STATES = 2
CHECKPOINT_GLOB = "checkpoint_*"


def checkpoint_name(round_: int) -> str:
    return f"checkpoint_{round_:06d}"


#: key of the trial's config hash in a checkpoint's state file (and in its ``meta.json``): a
#: checkpoint of another trial (a copied or swapped file) is never resumed (issue 53)
OWNER_KEY = "fedsweep_config_hash"


def save_checkpoint(
    state_dir: str | Path,
    state: dict,
    run_id: str | None,
    round_: int,
    config_hash: str | None = None,
) -> Path:
    """Write ``state`` (an ``FLRun.state_dict``) as ``state_dir/checkpoint_<round>``: built in a
    temporary folder and renamed into place (a reader sees a whole checkpoint or none), per-client
    tensors in their own files (``client_state``, each written once per change); then prune.
    The trial's ``config_hash`` goes into the state file and ``meta.json`` with the round, so a
    restore can tell a checkpoint of another trial (:func:`restore_newest`). A full file system
    raises :class:`StoreFullError` naming the folder."""
    state_dir = Path(state_dir)
    final = state_dir / checkpoint_name(round_)
    tmp = state_dir / f".tmp-{final.name}-{os.getpid()}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        state, files = externalize(state, state_dir / CLIENT_STATE_DIR)
        meta = {"mlflow_run_id": run_id, "round": round_}
        if config_hash is not None:
            state = {**state, OWNER_KEY: config_hash}
            meta["config_hash"] = config_hash
        with open(tmp / STATE_FILE, "wb") as handle:  # a file object: ENOSPC stays an OSError
            torch.save(state, handle)
        (tmp / CLIENT_FILES).write_text(json.dumps(sorted(files)))
        (tmp / META_FILE).write_text(json.dumps(meta))
        if final.exists():  # this round again (a retry from an older checkpoint): replace it
            old = state_dir / f".old-{final.name}-{os.getpid()}"
            os.replace(final, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, final)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if err.errno == errno.ENOSPC:
            raise StoreFullError(state_dir) from None
        raise
    prune_states(state_dir)
    return final


def load_state(path: str | Path) -> dict:
    """A checkpointed FL state, read with ``weights_only=True``: tensors, plain Python values
    and containers only, so a tampered checkpoint cannot run code when loaded."""
    return torch.load(path, map_location="cpu", weights_only=True)


def prune_states(trial_dir: str | Path, keep: int = KEEP_STATES) -> None:
    """Delete the FL state file of every checkpoint of ``trial_dir`` but the newest ``keep``
    that have one (a checkpoint folder keeps its small ``meta.json``), and the per-client files
    (``CLIENT_STATE_DIR``) that no remaining state lists: a trial's disk use stays that of
    ``keep`` states."""
    folders = sorted(Path(trial_dir).glob(CHECKPOINT_GLOB))
    with_state = [f for f in folders if (f / STATE_FILE).is_file()]
    for folder in with_state[:-keep] if keep > 0 else with_state:
        (folder / STATE_FILE).unlink(missing_ok=True)
    side = Path(trial_dir) / CLIENT_STATE_DIR
    if not side.is_dir():
        return
    used: set[str] = set()  # the per-client files a remaining state refers to
    for folder in folders:
        listing = folder / CLIENT_FILES
        if (folder / STATE_FILE).is_file() and listing.is_file():
            used.update(json.loads(listing.read_text()))
    for path in side.iterdir():
        if path.name not in used:
            path.unlink(missing_ok=True)


class CorruptCheckpoint(ValueError):
    """A checkpoint whose state does not load (torch refuses it, a file it lists is missing or
    unreadable, or it is not an FL state)."""


class ForeignCheckpoint(CorruptCheckpoint):
    """A checkpoint that loads but belongs to another trial: its state file or ``meta.json``
    names another config hash, or its state is of another round than its folder."""


def _meta(folder: Path) -> dict:
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _folder_round(folder: Path) -> int | None:
    digits = folder.name.rpartition("_")[2]
    return int(digits) if digits.isdigit() else None


def _check_owner(state: dict, folder: Path, config_hash: str | None) -> None:
    """Raise :class:`ForeignCheckpoint` unless the checkpoint in ``folder`` is this trial's:
    the config hash in its state file and in its ``meta.json`` (when written, i.e. since issue
    53) is ``config_hash``, and the state's round is the folder's and ``meta.json``'s."""
    meta = _meta(folder)
    owners = {h for h in (state.pop(OWNER_KEY, None), meta.get("config_hash")) if h is not None}
    if config_hash is not None and owners - {config_hash}:
        other = ", ".join(sorted(owners - {config_hash}))
        raise ForeignCheckpoint(
            f"it belongs to another trial: config hash {other}, this trial's is {config_hash}"
        )
    rounds = {r for r in (_folder_round(folder), meta.get("round")) if r is not None}
    if rounds - {int(state["round"])}:
        raise ForeignCheckpoint(
            f"its state is of round {int(state['round'])}, its folder and meta.json say "
            f"{', '.join(map(str, sorted(rounds)))}: it belongs to another checkpoint"
        )


def _load_checkpoint(folder: Path, config_hash: str | None = None) -> dict:
    try:
        state = load_state(folder / STATE_FILE)
        if not isinstance(state, dict) or "round" not in state or "w" not in state:
            raise CorruptCheckpoint("not an FL state: no round or model")
        _check_owner(state, folder, config_hash)
        return internalize(state, folder.parent / CLIENT_STATE_DIR)
    except CorruptCheckpoint:
        raise
    except Exception as err:  # torch's UnpicklingError, RuntimeError (no zip), EOFError, OSError
        # the first sentence only: torch's message goes on to advise weights_only=False
        first = (str(err).strip().splitlines() or [""])[0].split(". ")[0][:160]
        raise CorruptCheckpoint(f"{type(err).__name__}: {first}") from None


def set_aside(path: Path) -> Path:
    """Rename a checkpoint file that does not load to ``<name>.corrupt-<time>`` (kept for a
    look, never read again); returns the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, target)
    return target


def _meta_run(folder: Path) -> str | None:
    """The MLflow run id a checkpoint folder names (None when its ``meta.json`` is unreadable)."""
    try:
        return json.loads((folder / META_FILE).read_text())["mlflow_run_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def restore_folder(folder: str | Path, warn=None) -> tuple[dict | None, str | None]:
    """The FL state and MLflow run id of the checkpoint ``folder``. When its state file was
    pruned (or does not load), the newest state of the same trial that loads: a later round
    (the run is deterministic and rounds already logged are not logged again) or an earlier one;
    with none left, no state (the run restarts from round 0 in the same MLflow run). A state
    that does not load is set aside (:func:`set_aside`) and ``warn(text)`` told, once per file."""
    folder = Path(folder)
    run_id = _meta_run(folder)
    others = sorted(folder.parent.glob(CHECKPOINT_GLOB), reverse=True)
    state, _ = _newest_loading([folder] + [f for f in others if f != folder], warn)
    return state, run_id


def restore_newest(
    state_dir: str | Path, warn=None, config_hash: str | None = None
) -> tuple[dict | None, str | None]:
    """The newest state of the trial folder ``state_dir`` that loads and the MLflow run id its
    checkpoint names; without a state that loads, ``None`` and the newest checkpoint's run id;
    ``(None, None)`` without a checkpoint. A state that does not load, or that belongs to
    another trial than ``config_hash`` (:func:`_check_owner`), is set aside (:func:`set_aside`)
    and ``warn(text)`` told, once per file."""
    folders = sorted(Path(state_dir).glob(CHECKPOINT_GLOB), reverse=True)
    state, folder = _newest_loading(folders, warn, config_hash)
    if folder is not None:
        return state, _meta_run(folder)
    return None, next((r for r in map(_meta_run, folders) if r is not None), None)


def _newest_loading(
    folders: list[Path], warn, config_hash: str | None = None
) -> tuple[dict | None, Path | None]:
    """The state of the first of ``folders`` whose state loads (and is ``config_hash``'s
    trial's), and that folder."""
    for folder in folders:
        path = folder / STATE_FILE
        if not path.is_file():
            continue
        try:
            if _meta_run(folder) is None:
                raise CorruptCheckpoint(f"its {META_FILE} is unreadable")
            return _load_checkpoint(folder, config_hash), folder
        except CorruptCheckpoint as err:
            target = set_aside(path)
            if warn is not None:
                what = (
                    "is not this trial's" if isinstance(err, ForeignCheckpoint) else "does not load"
                )
                warn(
                    f"checkpoint {path} {what} ({err}); set aside as {target.name}, "
                    "continuing from the previous good checkpoint, or round 0 without one"
                )
    return None, None


def _restore(checkpoint, warn=None) -> tuple[dict | None, str | None]:
    """:func:`restore_folder` of a checkpoint given as an object with ``as_directory()`` (e.g.
    a ``ray.tune.Checkpoint`` of the layout above), or ``(None, None)`` for None."""
    if checkpoint is None:
        return None, None
    with checkpoint.as_directory() as folder:
        return restore_folder(folder, warn)


# ------------------------------------------------------------------------------ disk full
#: SQLite's text for a full disk (``SQLITE_FULL``), in MLflow's and SQLAlchemy's messages
SQLITE_FULL = "database or disk is full"


def disk_full(err: BaseException | None) -> StoreFullError | None:
    """A :class:`StoreFullError` when ``err`` or an exception it carries (cause, context, a Ray
    error's ``cause``) is a full file system: ``ENOSPC`` (with the path when known) or SQLite's
    "database or disk is full"; else None."""
    seen: set[int] = set()
    stack = [err]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if type(e) is StoreFullError:  # not Ray's wrapper class (its text is a traceback)
            return e
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return StoreFullError(e.filename)
        if SQLITE_FULL in str(e).lower():
            return StoreFullError(None, "the MLflow store: " + SQLITE_FULL)
        stack += [e.__cause__, e.__context__, getattr(e, "cause", None)]
    return None


# --------------------------------------------------------------------------- sibling runs
def unfinished_sibling(tracking_uri: str, parent_run_id: str, config_hash: str) -> str | None:
    """An unfinished child run of ``parent_run_id`` with this config hash (to adopt), or None.
    (A finished or diverged one is found before, by ``fl_trial``, with any parent.)"""
    return open_store(tracking_uri).unfinished_child(parent_run_id, config_hash)
