"""Run one FL config end to end and track it in MLflow (or not, with ``tracking.enabled``).

``TrackedRun`` is shared by ``fedsweep run`` and the sweep trials. A trial may continue an
existing MLflow run (``run_id``) from a checkpoint (``state``); rounds that the run already
logged are not logged again (the engine is deterministic, so they would carry the same values).
A tracked run's memory does not grow with its rounds: metrics are written every few seconds,
and the per-round records go to a :class:`~fedsweep.tracking.records.RecordSpool` on disk
every few rounds (or are dropped with ``tracking.log_records: false``).
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fedsweep.components.compose import DEFAULTS
from fedsweep.config.hashing import config_hash
from fedsweep.config.schema import RunConfig
from fedsweep.engine.observers import Observer
from fedsweep.experiment import FLRun, RunResult, run_federated
from fedsweep.tracking.records import DRAIN_EVERY, RecordSpool
from fedsweep.tracking.run_logger import MlflowRunLogger, git_commit

#: key of a checkpointed state that holds the record spool's rows (``RecordSpool.state``)
SPOOL_KEY = "record_spool"

#: tag of a finished run whose test loss grew past ``tracking.blowup_factor`` x its first value
BLOWUP_TAG = "fedsweep.loss_blowup"
BLOWUP_KEY = "test_loss"


@dataclass
class TrackedResult:
    result: RunResult
    run_id: str | None
    tracking_uri: str | None
    #: the ``fedsweep.loss_blowup`` text when the loss blew up (finite), else None
    blowup: str | None = None


class BlowupWatch(Observer):
    """Watches a run's test loss for a *finite* divergence: a value above ``factor`` x the first
    one (e.g. a CNN at lr 100 that ends "finished" at test loss 3.2e6, chance accuracy).
    Non-finite values are the engine's ``diverged`` status, not this. The largest value counts
    (not only the last): one exploded round already ruins the seed-mean curve and its AUC."""

    def __init__(self, factor: float | None, key: str = BLOWUP_KEY):
        self.factor, self.key = factor, key
        self.first: tuple[int, float] | None = None
        self.worst: tuple[int, float] | None = None

    def on_round(self, t, metrics, result) -> None:
        self.add(t, metrics)

    def add(self, t: int, metrics: dict[str, float]) -> None:
        value = metrics.get(self.key)
        if value is None or not math.isfinite(value):
            return
        if self.first is None or t < self.first[0]:
            self.first = (t, value)
        if self.worst is None or value > self.worst[1]:
            self.worst = (t, value)

    def text(self) -> str | None:
        """E.g. "test_loss 3.2e+06 at round 12 > 1000 x round 1 (2.3)", None when no blow-up."""
        if self.factor is None or self.first is None or self.worst is None:
            return None
        (r1, first), (rw, worst) = self.first, self.worst
        if first <= 0 or worst <= self.factor * first:
            return None
        return f"{self.key} {worst:.3g} at round {rw} > {self.factor:g} x round {r1} ({first:.3g})"


def run_tags(run: FLRun) -> dict[str, str]:
    cfg = run.config
    return {
        "fedsweep.status": "running",
        # every run, single or swept: sweeps reuse and figures/comparisons group runs by it
        "fedsweep.config_hash": config_hash(cfg),
        "fedsweep.algorithm": cfg.algorithm,
        "fedsweep.selector": cfg.selector,
        "fedsweep.dataset": cfg.data.dataset,
        "fedsweep.dataset_source": run.dataset.source,
        "fedsweep.partition": cfg.data.partition,
        "fedsweep.partition_hash": run.partition_hash,
        "fedsweep.git_commit": git_commit(),
        "fedsweep.device": str(run.device),
        "fedsweep.threads": str(run.threads),
        "fedsweep.clients.num_samples": json.dumps([c.num_samples for c in run.clients]),
        "fedsweep.clients.num_steps": json.dumps([c.num_steps for c in run.clients]),
        **component_tags(cfg),
        **cfg.tracking.tags,
    }


def component_tags(cfg: RunConfig) -> dict[str, str]:
    """The round's other slots, tagged only when not the default (older runs have none)."""
    out = {}
    for slot in ("sampler", "server_optimizer", "step_policy", "lr_schedule"):
        if getattr(cfg, slot) != DEFAULTS[slot]:
            out[f"fedsweep.{slot}"] = getattr(cfg, slot)
    return out


class MlflowObserver(Observer):
    """Logs every round not logged before (a resumed run skips the rounds it has), then the
    records, the blow-up tag and the final status; an abort ends the run KILLED/FAILED."""

    def __init__(
        self,
        logger: MlflowRunLogger,
        run: FLRun,
        watch: BlowupWatch,
        logged_until: int,
        records=None,
    ) -> None:
        self.logger, self.run, self.watch = logger, run, watch
        self.logged_until = logged_until
        self.records = records or run.record_arrays  # () -> the record arrays to log
        self.blowup: str | None = None

    def on_round(self, t, metrics, result) -> None:
        if t > self.logged_until:
            self.logger.log_round(t, metrics)

    def on_end(self, result: RunResult) -> None:
        self.blowup = self.watch.text() if result.status == "finished" else None
        try:
            if self.run.config.tracking.log_records:
                self.logger.log_arrays(self.records(), "records")
            tags = {BLOWUP_TAG: self.blowup} if self.blowup is not None else None
            self.logger.end(result.status, tags)
        except Exception:  # the records or the end cannot be written (a full disk)
            self.logger.end_failed()
            raise

    def on_abort(self, kind: str) -> None:
        self.logger.end(kind)


class TrackedRun:
    """Build the run (data errors surface here, before anything is logged), open its MLflow
    run, then ``execute`` it, logging every round; a crash is recorded as ``failed``."""

    def __init__(
        self,
        config: RunConfig,
        *,
        dataset=None,
        tags: dict[str, str] | None = None,
        run_id: str | None = None,
        state: dict | None = None,
        on_stage=None,
        params: dict[str, str] | None = None,
        records_dir: str | Path | None = None,
    ):
        """``params``: extra params beside the config's, logged once when the run is created
        (a derived sweep trial's provenance, ``derived_from``); a resumed run has them.
        ``records_dir``: the folder of the record spool (a sweep trial's, kept with its
        checkpoints); default a temporary one, removed when the run ends."""
        self.config = config
        self.run = FLRun(config, dataset=dataset, on_stage=on_stage)
        if state is not None:
            self.run.load_state_dict(state)
        self.spool: RecordSpool | None = None
        self._spooled = config.tracking.enabled and config.tracking.log_records
        if self._spooled and records_dir is not None:
            self.spool = RecordSpool(records_dir)
            self.spool.restore((state or {}).get(SPOOL_KEY))  # rows after the checkpoint go
        self.logger: MlflowRunLogger | None = None
        self.logged_until = 0
        if config.tracking.enabled:
            if on_stage is not None:
                on_stage("opening the MLflow run")
            self.logger = MlflowRunLogger(config.tracking.uri, config.tracking.experiment)
            self.logger.start(
                config.model_dump(mode="json"),
                {**run_tags(self.run), **(tags or {})},
                run_name=config.tracking.run_name or config.name,
                run_id=run_id,
                params=params if run_id is None else None,
            )
            if run_id is not None:
                # the last round with round_time may lack keys logged after it (a flush cut
                # between two requests): from that round on, only missing (key, step) rows
                self.logged_until = max(0, self.logger.last_logged_step() - 1)
                self.logger.guard_rewrites(self.logged_until)
        self.watch = BlowupWatch(config.tracking.blowup_factor)
        if self.logger is not None and run_id is not None:  # resumed: the rounds logged before
            for step, value in self.logger.metric_history(BLOWUP_KEY):
                self.watch.add(step, {BLOWUP_KEY: value})

    @property
    def run_id(self) -> str | None:
        return self.logger.run_id if self.logger else None

    def flush(self) -> None:
        """Write the rounds' metrics the logger still holds and the records the run holds
        (before a checkpoint)."""
        if self.logger is not None:
            self.logger.flush()
        self.drain()

    def drain(self) -> None:
        """Move the run's records to the spool (or drop them when they are not logged)."""
        if self.spool is not None:
            self.spool.drain(self.run)
        elif self.config.tracking.enabled:  # log_records off: nothing reads them
            self.run.records, self.run.record_rounds = {}, {}

    def state_dict(self) -> dict:
        """The run's state for a checkpoint, with the spool's rows (call after :meth:`flush`)."""
        state = self.run.state_dict()
        if self.spool is not None:
            state[SPOOL_KEY] = self.spool.state()
        return state

    def record_arrays(self) -> dict:
        """The run's records stacked over rounds (``FLRun.record_arrays``' layout)."""
        if self.spool is None:
            return self.run.record_arrays()
        self.spool.drain(self.run)
        return self.spool.arrays(self.run.round)

    def execute(self, on_round=None, observers=()) -> TrackedResult:
        """Train, with the blow-up watch, the MLflow logger, ``on_round`` and ``observers``
        observing every round, in that order."""
        chain = [self.watch]
        if self.logger is not None:
            chain.append(
                MlflowObserver(
                    self.logger, self.run, self.watch, self.logged_until, self.record_arrays
                )
            )
        chain.append(_Drain(self))
        own = self._spooled and self.spool is None  # a temporary spool for this call
        if own:
            self.spool = RecordSpool(tempfile.mkdtemp(prefix="fedsweep-records-"))
        try:
            result = run_federated(self.run, [*self.run.watches(), *chain, on_round, *observers])
        finally:
            if own:  # its records are logged (or the run failed): the folder goes
                self.spool.remove()
                self.spool = None
        blowup = self.watch.text() if result.status == "finished" else None
        uri = self.logger.tracking_uri if self.logger else None
        return TrackedResult(result, self.run_id, uri, blowup)


class _Drain(Observer):
    """Moves the run's records out of memory every :data:`DRAIN_EVERY` rounds."""

    def __init__(self, tracked: TrackedRun) -> None:
        self.tracked = tracked

    def on_round(self, t, metrics, result) -> None:
        if t % DRAIN_EVERY == 0:
            self.tracked.drain()


def run_tracked(
    config: RunConfig, on_start=None, on_round=None, dataset=None, on_stage=None
) -> TrackedResult:
    """One tracked run from scratch (what ``fedsweep run`` does); ``on_stage(text)`` is told
    what set-up is doing (loading data, building the model, opening the MLflow run)."""
    tracked = TrackedRun(config, dataset=dataset, on_stage=on_stage)
    if on_start is not None:
        on_start(tracked.run, tracked.run_id)
    return tracked.execute(on_round)
