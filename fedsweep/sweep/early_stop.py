"""The early-stopping scheduler of a fit whose search trials declare one (``search.scheduler``,
:class:`fedsweep.specs.search.EarlyStop`): Ray Tune's ``ASHAScheduler``, one per population (a
panel cell's search of one curve), so that a search is never compared with another curve's or
another cell's, and ordinary trials of the same fit always continue.

A search trial's payload carries its ``early_stop`` entry (:func:`fedsweep.specs.search.
early_stop_of`): its population, metric, mode, ASHA's settings, and its **rungs**, the rounds at
which the trial always reports (``sweep.trial.TuneReporter``, after writing every round up to it
to the store). Only those reports reach ASHA, so a decision never depends on when a plain
progress report happened to be sent; a report at or after the trial's last round is never
stopped (the run ends as usual). When ASHA stops a trial, Tune ends the trial's function inside
that ``tune.report`` (Ray Tune's function trainables report synchronously); its run is left
open at the rung round, and the driver ends it as stopped early once the fit returns
(:func:`end_stopped`), with the round it stopped at, and removes its checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler


@dataclass(frozen=True)
class Stopped:
    """A search trial the scheduler stopped: its config hash and the rung round."""

    config_hash: str
    round: int


def _entry(trial) -> dict | None:
    payload = (trial.config or {}).get("trial") or {}
    return payload.get("early_stop")


class EarlyStopByGroup(FIFOScheduler):
    """FIFO for every trial; each search population's trials also pass their rung reports to
    an ``ASHAScheduler`` of their own. :attr:`stopped` lists what it stopped (trial id ->
    :class:`Stopped`)."""

    _supports_buffered_results = False  # every decision on the report it is about

    def __init__(self) -> None:
        super().__init__()
        self._groups: dict[str, ASHAScheduler] = {}
        self._of: dict[str, ASHAScheduler] = {}
        self.stopped: dict[str, Stopped] = {}

    def _asha(self, trial) -> ASHAScheduler | None:
        if trial.trial_id in self._of:
            return self._of[trial.trial_id]
        entry = _entry(trial)
        if not entry or not entry.get("rungs"):
            return None
        group = entry["group"]
        if group not in self._groups:
            self._groups[group] = ASHAScheduler(
                time_attr="round",
                metric=entry["metric"],
                mode=entry["mode"],
                # its milestones grace * rf**k up to the last rung (+0.5: a milestone on the
                # last rung survives the float logarithm of its count); never the last round
                max_t=max(entry["rungs"]) + 0.5,
                grace_period=entry["grace_period"],
                reduction_factor=entry["reduction_factor"],
                brackets=1,
                stop_last_trials=False,
            )
        asha = self._of[trial.trial_id] = self._groups[group]
        if trial.trial_id not in asha._trial_info:  # (again, after a retry) its one bracket
            asha.on_trial_add(None, trial)
        return asha

    def on_trial_add(self, tune_controller, trial) -> None:
        self._asha(trial)

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        asha = self._asha(trial)
        entry = _entry(trial)
        at = result.get("round")
        if asha is None or at not in entry["rungs"] or at >= entry["max_t"]:
            return TrialScheduler.CONTINUE
        action = asha.on_trial_result(tune_controller, trial, result)
        if action == TrialScheduler.STOP:
            tags = (trial.config.get("trial") or {}).get("tags") or {}
            self.stopped[trial.trial_id] = Stopped(tags.get("fedsweep.config_hash", ""), int(at))
        return action

    def on_trial_complete(self, tune_controller, trial, result) -> None:
        asha = self._of.pop(trial.trial_id, None)
        if asha is not None and trial.trial_id in asha._trial_info:
            asha.on_trial_remove(tune_controller, trial)

    def on_trial_remove(self, tune_controller, trial) -> None:
        self.on_trial_complete(tune_controller, trial, None)

    def on_trial_error(self, tune_controller, trial) -> None:
        self.on_trial_complete(tune_controller, trial, None)

    def debug_string(self) -> str:
        return f"fedsweep early stopping: {len(self._groups)} ASHA populations"


def needs_scheduler(payloads: list[dict]) -> bool:
    """Whether a fit's trials include one under an early-stopping scheduler."""
    return any((p.get("early_stop") or {}).get("rungs") for p in payloads)


def end_stopped(tracking_uri: str, parent_run_id: str, stopped: list[Stopped]) -> int:
    """End the runs of the trials the scheduler stopped (left open at their rung round by the
    stop): MLflow status FINISHED, ``fedsweep.status: stopped_early`` and the round; how many
    were ended. A trial whose run is not open (it ended meanwhile) is left as it is."""
    from fedsweep.specs.search import STOPPED, STOPPED_AT
    from fedsweep.tracking.direct import STATUS_TAG
    from fedsweep.tracking.runstore import open_store

    store = open_store(tracking_uri)
    ended = 0
    for trial in stopped:
        run_id = store.unfinished_child(parent_run_id, trial.config_hash)
        if run_id is not None:
            store.end_run(run_id, "FINISHED", {STATUS_TAG: STOPPED, STOPPED_AT: str(trial.round)})
            ended += 1
    return ended
