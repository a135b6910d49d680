"""The Ray Tune trainable: one trial = one whole FL run, tracked as an MLflow child run.

The trial reports once per round (``tune.report``) and attaches a checkpoint of the full FL
state (global model, method/selector state, batch cursors and RNG streams, records, MLflow run
id) every ``checkpoint_every`` rounds and at the end. On a restart (Ray retry after a crash, or
``fedsweep sweep --resume`` after the driver was killed) it continues from the checkpoint in the
same MLflow run; without a checkpoint it adopts the unfinished child run of the same parent and
config hash, so a sweep never duplicates a run.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch

from fedsweep.config.schema import RunConfig
from fedsweep.tracking.store import get_client
from fedsweep.tracking.tracked_run import TrackedRun

STATE_FILE = "fl_state.pt"
META_FILE = "meta.json"
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
        run_id = adoptable_run(
            config.tracking.uri, payload["parent_run_id"], payload["tags"]["fedsweep.config_hash"]
        )
    tracked = TrackedRun(config, tags=payload["tags"], run_id=run_id, state=state)
    every = payload["checkpoint_every"]
    # fault injection (tests): crash at this round, unless this attempt was restored from a
    # checkpoint (so a retried trial gets past it)
    fail_at = payload.get("fail_at_round") if state is None else None

    def on_round(t, metrics, result):
        if fail_at is not None and t == fail_at:
            raise InjectedFailure(f"injected failure at round {t} ({payload['trial_id']})")
        report = {k: metrics[k] for k in REPORTED if k in metrics}
        report["round"] = t
        last = t == config.train.rounds or result.status != "finished"
        if t % every == 0 or last:
            with tempfile.TemporaryDirectory() as tmp:
                torch.save(tracked.run.state_dict(), Path(tmp) / STATE_FILE)
                (Path(tmp) / META_FILE).write_text(json.dumps({"mlflow_run_id": tracked.run_id}))
                tune.report(report, checkpoint=tune.Checkpoint.from_directory(tmp))
        else:
            tune.report(report)

    tracked.execute(on_round)


def load_state(path: str | Path) -> dict:
    """A checkpointed FL state, read with ``weights_only=True``: tensors, plain Python values
    and containers only, so a tampered checkpoint cannot run code when loaded."""
    return torch.load(path, map_location="cpu", weights_only=True)


def _restore(checkpoint) -> tuple[dict | None, str | None]:
    if checkpoint is None:
        return None, None
    with checkpoint.as_directory() as folder:
        state = load_state(Path(folder) / STATE_FILE)
        meta = json.loads((Path(folder) / META_FILE).read_text())
    return state, meta["mlflow_run_id"]


def adoptable_run(tracking_uri: str, parent_run_id: str, config_hash: str) -> str | None:
    """An unfinished child run of ``parent_run_id`` with this config hash, if one exists."""
    client = get_client(tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(
        experiments,
        filter_string=(
            f"tags.`mlflow.parentRunId` = '{parent_run_id}' and "
            f"tags.`fedsweep.config_hash` = '{config_hash}'"
        ),
    )
    for run in runs:
        if run.data.tags.get("fedsweep.status") not in ("finished", "diverged"):
            return run.info.run_id
    return None
