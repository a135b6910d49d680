"""The Ray Tune trainable: one trial = one whole FL run, tracked as an MLflow child run.

The trial reports its progress to Tune (``tune.report``) at most every few seconds, and a
checkpoint of the full FL state (global model, method/selector state, batch cursors and RNG
streams, records, MLflow run id) every ``checkpoint_every`` rounds and at the end. On a restart (Ray retry after a crash, or
``fedsweep sweep --resume`` after the driver was killed) it continues from the checkpoint in the
same MLflow run; without a checkpoint it adopts the unfinished child run of the same parent and
config hash, or, when that run already ended (the driver died before Tune recorded it), reports
and returns without running: a sweep never duplicates a run.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import torch

from fedsweep.config.schema import RunConfig
from fedsweep.engine.client_state import externalize, internalize
from fedsweep.engine.observers import Observer
from fedsweep.tracking.direct import DONE_STATUSES
from fedsweep.tracking.store import get_client
from fedsweep.tracking.tracked_run import TrackedRun

STATE_FILE = "fl_state.pt"
META_FILE = "meta.json"
#: per-client state (``engine.client_state``): one file per client and change, in the trial
#: folder beside the checkpoints; each checkpoint lists the files it uses in CLIENT_FILES
CLIENT_STATE_DIR = "client_state"
CLIENT_FILES = "client_files.json"
#: metrics forwarded to Ray (everything goes to MLflow; Ray only needs a few for its tables)
REPORTED = ("test_loss", "test_acc", "train_loss", "train_acc", "round_time")


class InjectedFailure(RuntimeError):
    """Raised on purpose by the fault-injection hook (tests of crash handling)."""


def fl_trial(params: dict) -> None:
    from ray import tune

    payload = params["trial"]
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    config = RunConfig.model_validate(payload["config"])
    state, run_id = _restore(tune.get_checkpoint())
    if run_id is None:
        run_id, ended = sibling_runs(
            config.tracking.uri, payload["parent_run_id"], payload["tags"]["fedsweep.config_hash"]
        )
        if run_id is None and ended is not None:
            # This trial's run already ended, but Ray's experiment state never saw it: the driver
            # was killed between the run's last round and Tune's next snapshot (a short trial can
            # start and finish between two). Running it again would duplicate the run.
            tune.report({"round": config.train.rounds, "already_ended": 1})
            return
    tracked = TrackedRun(
        config, tags=payload["tags"], params=payload.get("params"), run_id=run_id, state=state
    )
    # fault injection (tests): crash at this round, unless this attempt was restored from a
    # checkpoint (so a retried trial gets past it)
    fail_at = payload.get("fail_at_round") if state is None else None
    reporter = TuneReporter(tracked, payload["checkpoint_every"], fail_at, payload["trial_id"])
    tracked.execute(observers=[reporter])


#: seconds between two plain progress reports to Ray Tune (every round still goes to MLflow;
#: checkpoint rounds and the last round are always reported)
REPORT_EVERY_S = 2.0


class TuneReporter(Observer):
    """Reports to Ray Tune with a checkpoint of the full FL state (and the MLflow run id) every
    ``every`` rounds and at the last round; between those, a plain progress report at most
    every :data:`REPORT_EVERY_S` seconds (a report is a round trip to the driver, which writes
    Tune's result files: short rounds spent more time reporting than training)."""

    def __init__(
        self, tracked: TrackedRun, every: int, fail_at: int | None = None, label: str = ""
    ) -> None:
        self.tracked, self.every, self.fail_at, self.label = tracked, every, fail_at, label
        self._last_report = time.monotonic()

    def on_round(self, t, metrics, result) -> None:
        from ray import tune

        if self.fail_at is not None and t == self.fail_at:
            raise InjectedFailure(f"injected failure at round {t} ({self.label})")
        report = {k: metrics[k] for k in REPORTED if k in metrics}
        report["round"] = t
        last = t == self.tracked.config.train.rounds or result.status != "finished"
        if t % self.every == 0 or last:
            # every round up to the checkpoint is in the store before the checkpoint exists (a
            # restored trial does not log the rounds the store has again)
            self.tracked.flush()
            trial_dir = Path(tune.get_context().get_trial_dir())
            with tempfile.TemporaryDirectory() as tmp:
                # per-client tensors go to their own files, each written once per change
                state, files = externalize(
                    self.tracked.run.state_dict(), trial_dir / CLIENT_STATE_DIR
                )
                torch.save(state, Path(tmp) / STATE_FILE)
                (Path(tmp) / CLIENT_FILES).write_text(json.dumps(sorted(files)))
                meta = {"mlflow_run_id": self.tracked.run_id}
                (Path(tmp) / META_FILE).write_text(json.dumps(meta))
                tune.report(report, checkpoint=tune.Checkpoint.from_directory(tmp))
            prune_states(trial_dir)
            self._last_report = time.monotonic()
        elif time.monotonic() - self._last_report >= REPORT_EVERY_S:
            tune.report(report)
            self._last_report = time.monotonic()


def load_state(path: str | Path) -> dict:
    """A checkpointed FL state, read with ``weights_only=True``: tensors, plain Python values
    and containers only, so a tampered checkpoint cannot run code when loaded."""
    return torch.load(path, map_location="cpu", weights_only=True)


#: checkpoints of a trial that keep their FL state file; older ones keep only ``meta.json``
KEEP_STATES = 2
CHECKPOINT_GLOB = "checkpoint_*"


def prune_states(trial_dir: str | Path, keep: int = KEEP_STATES) -> None:
    """Delete the FL state file of every checkpoint of ``trial_dir`` but the newest ``keep``.

    Ray keeps every checkpoint folder (``CheckpointConfig(num_to_keep=None)``): with Ray deleting
    old checkpoints itself, a ``kill -9`` of the driver between its deletion of checkpoint k and
    its next experiment-state snapshot (which still named k) made ``--resume`` fail that trial
    ("Could not recover from checkpoint as it does not exist on storage anymore"; seen once in
    the kill test under load). The folders stay (a few bytes each) and only the heavy state goes,
    so a restore always finds the folder Ray names, and ``_restore`` then takes the newest state
    that exists. Per-client files (``CLIENT_STATE_DIR``) that no remaining state lists go too."""
    folders = sorted(Path(trial_dir).glob(CHECKPOINT_GLOB))
    for folder in folders[:-keep] if keep > 0 else folders:
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


def _restore(checkpoint) -> tuple[dict | None, str | None]:
    """The FL state and MLflow run id of ``checkpoint``. When its state file was pruned, the
    newest state of the same trial (a later round: the run is deterministic and rounds already
    logged are not logged again); with none left, no state (the run restarts from round 0 in
    the same MLflow run)."""
    if checkpoint is None:
        return None, None
    with checkpoint.as_directory() as folder:
        folder = Path(folder)
        meta = json.loads((folder / META_FILE).read_text())
        candidates = [folder / STATE_FILE] + [
            f / STATE_FILE for f in sorted(folder.parent.glob(CHECKPOINT_GLOB), reverse=True)
        ]
        state = next((load_state(c) for c in candidates if c.is_file()), None)
        if state is not None:
            state = internalize(state, folder.parent / CLIENT_STATE_DIR)
    return state, meta["mlflow_run_id"]


def sibling_runs(
    tracking_uri: str, parent_run_id: str, config_hash: str
) -> tuple[str | None, str | None]:
    """The child runs of ``parent_run_id`` with this config hash: (an unfinished one to adopt,
    one that ended: finished or diverged), each ``None`` when there is none."""
    client = get_client(tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(
        experiments,
        filter_string=(
            f"tags.`mlflow.parentRunId` = '{parent_run_id}' and "
            f"tags.`fedsweep.config_hash` = '{config_hash}'"
        ),
    )
    unfinished = ended = None
    for run in runs:
        if run.data.tags.get("fedsweep.status") in DONE_STATUSES:
            ended = ended or run.info.run_id
        else:
            unfinished = unfinished or run.info.run_id
    return unfinished, ended
