"""Log one FL run to MLflow: params, tags, per-round metrics (batched: one write per
``FLUSH_EVERY_S`` seconds of rounds, one transaction), the resolved config and the per-client
record arrays as artifacts, through the store's interface (``tracking.runstore``: ``sqlite3``
on a local SQLite store, so a sweep trial never imports MLflow; MLflow's client otherwise)."""

from __future__ import annotations

import contextlib
import functools
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from fedsweep.config.load import flatten
from fedsweep.tracking.runstore import MAX_PARAMS as MAX_PARAMS  # (tests import it here)
from fedsweep.tracking.runstore import open_store
from fedsweep.tracking.uri import resolve_tracking_uri

#: the resolved config of a run, its last write at creation (``tracking.provenance`` reads it)
CONFIG_FILE = "config.yaml"
#: seconds of rounds gathered into one metrics write (a write to a SQLite store costs about
#: 30 ms, as much as a 20-round smoke trial's round; a round longer than this is written alone)
FLUSH_EVERY_S = 2.0
#: metric values held at most before a write, however short the rounds (the run's memory stays
#: bounded: thousands of clients' per-client metrics in 2 s of rounds were megabytes)
FLUSH_ROWS = 5000
#: MLflow 3.17's UI groups metric charts into sections by key prefix (``client/0/dist`` ->
#: section ``client/0``) and draws the prefixed sections first, sorted, and the unprefixed
#: "Model metrics" (``test_acc``, ``test_loss``, ...) last (``getBaseChartAndSectionConfigs`` in
#: ``mlflow/server/js/build/static/js/main.*.js``). So every global metric is also logged as
#: ``Global/<key>``: a section that sorts before ``client/0`` (``G`` < ``c``), so the run page
#: and the chart view open on the global curves. The original keys stay (figures read them).
GLOBAL_SECTION = "Global"

STATUS_TO_MLFLOW = {
    "finished": "FINISHED",
    "diverged": "FINISHED",
    "failed": "FAILED",
    "killed": "KILLED",
}


@functools.cache
def git_commit() -> str:
    """The fedsweep source tree's commit (``unknown`` outside a git checkout), with ``-dirty``
    when tracked files differ from it; read once per process (two ``git`` processes: a sweep
    worker tags every trial's run with it), as its code was imported once."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
        commit = out.stdout.strip()
        if out.returncode == 0 and commit:
            dirty = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=here,
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


class MlflowRunLogger:
    """One run's writes, through the store's interface (``tracking.runstore.open_store``:
    ``sqlite3`` on a local SQLite store, MLflow's client otherwise)."""

    def __init__(self, tracking_uri: str | None, experiment: str):
        self.tracking_uri = resolve_tracking_uri(tracking_uri)
        self.store = open_store(self.tracking_uri, experiment)
        self.experiment_id = self.store.ensure_experiment(experiment)
        self.run_id: str | None = None
        #: the run's artifact location
        self.artifact_uri: str | None = None
        #: (key, value, timestamp ms, step) of the rounds not yet written
        self._pending: list[tuple[str, float, int, int]] = []
        self._flushed_at = time.monotonic()
        #: (key, step) the adopted run holds past its last whole round (``guard_rewrites``)
        self._have: set[tuple[str, int]] = set()

    @property
    def client(self):
        """MLflow's client of the store (a local SQLite store's imports MLflow when first
        asked for)."""
        return self.store.client

    def start(
        self,
        config: dict,
        tags: dict[str, str],
        run_name: str | None = None,
        run_id: str | None = None,
        params: dict[str, str] | None = None,
    ) -> str:
        """Create the run (or reopen ``run_id`` when resuming) and log its params (the
        config's, then ``params``) and tags."""
        config = _without_secrets(config, self.tracking_uri)
        if run_id is not None:
            self.run_id = run_id
            self.artifact_uri = self.store.artifact_uri(run_id)
            self.store.reopen_run(run_id)
            self.set_tags(tags)
            # a run whose creator was killed between its creation and its config.yaml (the
            # last write of a start): the params and config it lacks, so that a sweep can tell
            # it is this config's run (tracking.provenance)
            if CONFIG_FILE not in self.store.list_artifacts(run_id, self.artifact_uri):
                self._log_config(config, params)
        else:
            self.run_id, self.artifact_uri = self.store.create_run(
                self.experiment_id, tags, run_name
            )
            try:
                self._log_config(config, params)
            except Exception:  # a full disk after the run's row: the run ends FAILED
                self.end_failed()
                raise
        return self.run_id

    def end_failed(self) -> None:
        """End the run FAILED, as far as the store still takes writes, while another error
        (the one that stopped the run, e.g. a full disk) is on its way up: never left
        RUNNING by an error that is not a kill."""
        with contextlib.suppress(Exception):
            self.end("failed")

    def _log_config(self, config: dict, extra: dict[str, str] | None = None) -> None:
        """The run's params (the flattened config, then ``extra``; values logged before are
        logged again unchanged, which MLflow accepts) and its ``config.yaml``, written last."""
        params = [(k, _param_str(v)) for k, v in sorted(flatten(config).items())]
        params += [(k, str(v)) for k, v in (extra or {}).items()]
        self.store.write_params(self.run_id, params)
        self.log_text(yaml.safe_dump(config, sort_keys=False), CONFIG_FILE)

    def metric_history(self, key: str) -> list[tuple[int, float]]:
        """``(step, value)`` of every value of the run's metric ``key``, in MLflow's order."""
        return self.store.metric_history(self.run_id, key)

    def last_logged_step(self, key: str = "round_time") -> int:
        """The last round this run logged (0 if none); every round logs ``round_time``."""
        return max((step for step, _ in self.metric_history(key)), default=0)

    def guard_rewrites(self, logged_until: int) -> None:
        """Make logging idempotent per (key, step) for an adopted run: the (key, step) pairs
        it already holds after ``logged_until`` (a round written in part: a tracking server's
        ``log_batch`` requests of one flush are not one transaction, and an attempt that was
        killed between two of them left half a round) are not written again. Only keys whose
        latest step is past ``logged_until`` are read back."""
        for key in self.store.keys_past(self.run_id, logged_until):
            for step, _ in self.metric_history(key):
                if step > logged_until:
                    self._have.add((key, step))

    def set_tags(self, tags: dict[str, str]) -> None:
        self.store.set_tags(self.run_id, tags)

    def log_round(self, step: int, metrics: dict[str, float]) -> None:
        """A round's metrics, written with the rounds before it once ``FLUSH_EVERY_S`` seconds
        have passed since the last write or ``FLUSH_ROWS`` values wait (``flush``; ``end``
        writes the rest). A sweep trial flushes before each checkpoint, so every round up to a
        checkpoint is in the store."""
        now = int(time.time() * 1000)
        rows = [(k, float(v), now, step) for k, v in metrics.items()]
        rows += [
            (f"{GLOBAL_SECTION}/{k}", float(v), now, step)
            for k, v in metrics.items()
            if "/" not in k
        ]
        if self._have:  # an adopted run's half-written round: those rows are there already
            rows = [r for r in rows if (r[0], r[3]) not in self._have]
        self._pending += rows
        if len(self._pending) >= FLUSH_ROWS or time.monotonic() - self._flushed_at >= FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        """Write the pending rounds' metrics (one transaction on a SQL store)."""
        items, self._pending = self._pending, []
        self.store.write_metrics(self.run_id, items)
        self._flushed_at = time.monotonic()

    def log_text(self, text: str, artifact_file: str) -> None:
        self.store.log_text(self.run_id, self.artifact_uri, text, artifact_file)

    def log_arrays(self, arrays: dict[str, np.ndarray], artifact_path: str) -> None:
        """Each array as its own compressed ``.npz`` (key ``data``) under ``artifact_path``."""
        if not arrays:
            return
        with tempfile.TemporaryDirectory() as tmp:
            for name, arr in arrays.items():
                np.savez_compressed(Path(tmp) / f"{name}.npz", data=arr)
            self.store.log_artifacts(self.run_id, self.artifact_uri, tmp, artifact_path)

    def end(self, status: str, tags: dict[str, str] | None = None) -> None:
        """Write the pending rounds, then set ``tags`` and the ``fedsweep.status`` tag and end
        the run with the status's MLflow status (one transaction on a SQL store). A failed
        or killed run ends even when its pending rounds cannot be written (a full disk: the
        error that stopped it is on its way up)."""
        try:
            self.flush()
        except Exception:
            if status in ("finished", "diverged"):
                raise
        self.store.end_run(
            self.run_id,
            STATUS_TO_MLFLOW[status],
            {**(tags or {}), "fedsweep.status": status},
        )


def _without_secrets(config: dict, clean_uri: str) -> dict:
    """``config`` with a password in its ``tracking.uri`` replaced by the clean URI (the
    params and ``config.yaml`` never hold a credential; fedsweep.tracking.credentials)."""
    from fedsweep.tracking.credentials import redact

    uri = (config.get("tracking") or {}).get("uri")
    if not isinstance(uri, str) or redact(uri) == uri:
        return config
    return {**config, "tracking": {**config["tracking"], "uri": clean_uri}}


def _param_str(value) -> str:
    text = "null" if value is None else str(value)
    return text[:6000]
