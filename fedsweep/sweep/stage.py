"""One stage of a sweep (``sweep.runner`` drives the stages): its trials in a Ray experiment
and state file of its own, run in four steps, each a function of its own:

1. plan (:func:`_plan_stage`): the trials with a finished run are skipped, equal configs share
   one run; what is left is pending;
2. resume (:func:`_resume_stage`, :func:`_start_stage`): the state file an interrupted run of
   the stage left, what ``--resume`` restores of it (said, and checked against the plan); Ray
   up, then the sweep's parent run opened (or an earlier stage's kept);
3. fit (:func:`_fit_stage`): the trials' payloads and the stage's state file, then Ray Tune's
   fit (:func:`fit_trials`, one :class:`FitRequest`);
4. tally (:func:`_tally`): the counts in the :class:`SweepReport`; the last stage closes the
   parent run (:func:`_close`), a stage that failed or was stopped ends it.

What the stages of one sweep read is one frozen :class:`Drive`; what each step hands the next
is a small frozen value (:class:`_StagePlan`, :class:`_StageState`, :class:`_Fitted`); what
they change is the report (its counts, and the parent run's id once it is open).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from fedsweep.specs.figure import FigurePlan
from fedsweep.specs.load import SweepSpec, Trial
from fedsweep.sweep.locking import STATE_FILE, check_resume_plan, read_state, resumable
from fedsweep.sweep.ray_backend import (
    RAY_DIR,
    TRIALS_DIR,
    check_resources,
    cluster_warnings,
    init_ray,
    remove_inside,
    trial_payload,
    where_it_trains,
)
from fedsweep.sweep.remote_state import RemoteFolder, join_uri, storage_env
from fedsweep.sweep.report import SweepReport
from fedsweep.sweep.store_index import (
    close_parent_run,
    end_parent_run,
    end_running_children,
    finished_hashes,
    finished_trials,
    open_parent_run,
    parent_tags,
    store_folder,
)
from fedsweep.sweep.tune_fit import FitRequest, fit_trials
from fedsweep.tracking.artifact_probe import artifact_env
from fedsweep.tracking.outage import brief_requests

#: suffix of the Ray experiment (and state file) of a sweep's derived stage
DERIVED_STAGE = "-derived"


@dataclass(frozen=True)
class Drive:
    """What the stages of one sweep read (while its driver lock is held); what they change is
    the :class:`SweepReport` (its counts, and the parent run's id once it is open)."""

    spec: SweepSpec
    spec_path: Path
    profile: str
    figure: FigurePlan  # the trials, their data check, and how derived trials are resolved
    client: object
    uri: str
    experiment_id: str
    storage: Path
    overrides: dict  # the user's --set (recorded in the state file)
    tune_name: str  # stage 0's Ray experiment (the name of a sweep without derived curves)
    resume: bool
    address: str | None
    max_concurrent: int | None
    verbose: int
    echo: object
    listener: object
    plugins: list = field(default_factory=list)  # [(module, root)], imported by every trial
    panels: str = ""  # the --panel filter as typed ("" = every panel), recorded and tagged
    remote: str | None = None  # --storage on an object store: the trials' checkpoints there

    def remote_folder(self, *parts: str):
        """The :class:`RemoteFolder` of ``parts`` under the remote storage (None without)."""
        if self.remote is None:
            return None
        return RemoteFolder(join_uri(self.remote, *parts))


#: suffix of the Ray experiment (and state file) of an adaptive search's later batches
SEARCH_STAGE = "-search"


@dataclass(frozen=True)
class _StagePlan:
    """What a stage runs (:func:`_plan_stage`): its trials, the pending ones among them."""

    stage: int  # 0: the ordinary trials, 1: derived (or a search's later batch)
    suffix: str  # of the stage's Ray experiment: "", DERIVED_STAGE or SEARCH_STAGE
    tune_name: str  # the stage's Ray experiment (and state file)
    trials: list[Trial]
    pending: list[Trial]  # to run: one per config hash without a finished run
    skipped: int  # trials with a finished run
    shared: int  # trials whose config an earlier pending trial has
    follow: int  # derived trials a later stage runs (0: this is the last stage)
    tags: dict  # the parent run's

    @property
    def final(self) -> bool:
        """The sweep's last stage: it closes the parent run."""
        return not self.follow


@dataclass(frozen=True)
class _StageState:
    """Where a stage's Ray experiment is and what an interrupted run of it left
    (:func:`_resume_stage`)."""

    path: Path  # the stage's folder: storage / tune_name
    state_path: Path  # its state file
    state: dict | None  # the state file of an interrupted run of the stage, or None
    remote: RemoteFolder | None  # the stage's folder on an object store, or None
    restore: bool  # --resume with a state to resume: the trials go on from their checkpoints


@dataclass(frozen=True)
class _Fitted:
    """What a stage's fit returned (:func:`_fit_stage`)."""

    payloads: list[dict]
    results: object  # Ray Tune's ResultGrid
    stopped: list  # the search trials the early-stopping scheduler stopped (early_stop.Stopped)


def run_stage(
    drive: Drive,
    trials: list[Trial],
    members: list[Trial],
    report: SweepReport,
    stage: int,
    *,
    follow: int = 0,
    suffix: str | None = None,
) -> None:
    """Run one stage's ``trials`` (0: the ordinary ones, 1: the derived ones) in the stage's
    own Ray experiment and state file (``--resume`` restores each), adding its counts to
    ``report``. ``follow``: the number of derived trials stage 1 runs after stage 0; the last
    stage closes the parent run, recording ``members`` (every trial) as the figure's runs.

    In order: plan (what runs, what is reused), resume (the state an interrupted run left,
    said and checked), fit (Ray Tune), tally (the counts; the last stage closes the parent
    run)."""
    plan = _plan_stage(drive, trials, report, stage, follow, suffix)
    where = _resume_stage(drive, plan)
    if not plan.pending:
        _nothing_to_run(drive, plan, where, members, report)
        return
    _start_stage(drive, plan, where)
    parent_run_id = _parent(drive, report, where.state, plan.tags)
    errored_before = report.errored
    try:
        fitted = _fit_stage(drive, plan, where, report, parent_run_id)
        _tally(drive, plan, where, fitted, report, errored_before)
        if plan.final:
            _close(drive, members, report)
    except BaseException as err:
        full = _end_failed_stage(drive, where, parent_run_id, err)
        if full is not None:  # one line naming the cause, not a chain of tracebacks
            raise full from None
        raise
    if report.errored == errored_before:  # all in MLflow; Ray's copy of the checkpoints can go
        remove_inside(where.path, drive.storage, missing_ok=True)
        if where.remote is not None:
            where.remote.delete()


def _plan_stage(
    drive: Drive,
    trials: list[Trial],
    report: SweepReport,
    stage: int,
    follow: int,
    suffix: str | None,
) -> _StagePlan:
    """The stage's plan: its trials with a finished run are skipped (``report.skipped``), and
    trials with equal configs share one run (e.g. a pooled centralized baseline drawn in every
    Case panel: ``report.shared``), so each pending config is scheduled once."""
    if suffix is None:
        suffix = DERIVED_STAGE if stage else ""
    done = finished_trials(drive.client, trials)
    skipped = sum(t.config_hash in done for t in trials)
    report.skipped += skipped
    unique: dict[str, Trial] = {}
    for t in trials:
        if t.config_hash not in done:
            unique.setdefault(t.config_hash, t)
    pending = list(unique.values())
    shared = len(trials) - skipped - len(pending)
    report.shared += shared
    tags = parent_tags(drive.spec, drive.spec_path, drive.profile, drive.figure.data, drive.panels)
    return _StagePlan(
        stage, suffix, drive.tune_name + suffix, trials, pending, skipped, shared, follow, tags
    )


def _resume_stage(drive: Drive, plan: _StagePlan) -> _StageState:
    """The stage's folder and the state file an interrupted run of it left (on the object
    store beside the trials' checkpoints with a remote ``--storage``), if any."""
    path = drive.storage / plan.tune_name
    remote = drive.remote_folder(plan.tune_name)  # the sweep's folder on an object store, or None
    if remote is not None:  # the state lives beside the trials' checkpoints there
        where = join_uri(drive.remote, plan.tune_name, STATE_FILE)
        state = read_state(where, drive.uri, drive.echo, text=remote.read_text(STATE_FILE))
    else:
        state = read_state(path / STATE_FILE, drive.uri, drive.echo)
    restore = bool(drive.resume and state is not None)
    return _StageState(path, path / STATE_FILE, state, remote, restore)


def _nothing_to_run(
    drive: Drive, plan: _StagePlan, where: _StageState, members: list[Trial], report
) -> None:
    """A stage whose every trial has a finished run: the parent run is opened (or the earlier
    stage's kept); the last stage closes it."""
    parent_run_id = _parent(drive, report, where.state, plan.tags)
    if plan.final:
        try:
            _close(drive, members, report)
        except BaseException:
            end_parent_run(drive.client, parent_run_id, "failed")
            raise
    if plan.final and not report.scheduled:  # a derived stage says it for the whole sweep
        drive.echo(
            f"{drive.spec.figure} [{drive.profile}]: all {len(members)} runnable trials already "
            "have a finished run; nothing to schedule"
        )


def _start_stage(drive: Drive, plan: _StagePlan, where: _StageState) -> None:
    """Before a stage's parent run: what ``--resume`` finds said (and checked against the
    plan), then Ray up (the parent run is opened only once Ray can run the trials)."""
    echo, tune_name = drive.echo, plan.tune_name
    replanned = bool(where.restore and plan.stage and not resumable(where.state, plan.pending))
    if replanned:
        # derived trials that the interrupted plan did not have (a source that had failed has
        # finished since, or the spec's derived curves changed): run the trials planned now,
        # those the interrupted plan had from their checkpoints (found by config hash)
        echo(
            f"note: {tune_name}: the derived trials differ from the interrupted plan (a source "
            "run finished since, or the spec changed); running the derived trials planned now, "
            "the interrupted ones from their checkpoints"
        )
    elif where.restore:
        check_resume_plan(
            where.state, plan.pending, drive.overrides, drive.spec.figure, drive.profile,
            drive.panels,
        )  # fmt: skip
        echo(f"resuming {where.path}")
    elif drive.resume:
        echo(f"note: {tune_name}: nothing to resume in {drive.storage}; starting the trials afresh")
    elif where.state is not None:
        echo(
            f"note: {tune_name} was interrupted before; continuing its MLflow runs from "
            "round 0 (use --resume to continue from the trials' checkpoints)"
        )
    # the trial's modules (torch's) and Tune's load while Ray may still be starting
    # (start_ray): Tune's not in both threads
    import ray.tune  # noqa: F401

    import fedsweep.sweep.trial  # noqa: F401

    init_ray(drive.address)
    echo(where_it_trains(drive.address))
    check_resources(drive.spec, drive.spec_path)
    for line in cluster_warnings(drive.uri, None if drive.remote else drive.storage):
        echo(line)


def _fit_stage(
    drive: Drive, plan: _StagePlan, where: _StageState, report: SweepReport, parent_run_id: str
) -> _Fitted:
    """The parent run RUNNING, the pending trials scheduled (said in one line), the stage's
    state file written, and the trials run by Ray Tune (:func:`fit_trials`)."""
    drive.client.update_run(parent_run_id, status="RUNNING")
    drive.client.set_tag(parent_run_id, "fedsweep.status", "running")
    payloads = [_payload(drive, plan, t, parent_run_id) for t in plan.pending]
    report.scheduled += len(payloads)
    drive.echo(
        f"{drive.spec.figure} [{drive.profile}]: {len(plan.trials)} "
        f"{_stage_word(plan.stage, plan.suffix)}trials, {plan.skipped} already finished, "
        f"scheduling {len(payloads)} (parent MLflow run {parent_run_id})"
        + (f"; {plan.shared} share a run with an equal trial" if plan.shared else "")
        + (f"; {plan.follow} derived trials follow" if plan.follow else "")
    )
    state = _state_record(drive, plan, where, parent_run_id)
    if where.remote is not None:
        if not where.restore:  # a stale sweep's remote checkpoints are not used
            where.remote.delete()
        where.remote.write_text(STATE_FILE, json.dumps(state))
    from fedsweep.sweep.early_stop import EarlyStopByGroup, needs_scheduler

    # search trials under ASHA: one ASHA per search population, FIFO for the others
    scheduler = EarlyStopByGroup() if needs_scheduler(payloads) else None
    request = FitRequest(
        payloads, drive.spec, drive.storage, plan.tune_name, where.state_path, state,
        where.restore, drive.max_concurrent, drive.verbose, report, drive.listener, drive.echo,
        # an object storage's and the artifact store's (endpoint, region) variables, handed
        # over with the credentials (Ray's object store, never a runtime_env)
        env={**(storage_env() if drive.remote else {}), **artifact_env()} or None,
        scheduler=scheduler,
    )  # fmt: skip
    results = fit_trials(request)
    stopped = list(scheduler.stopped.values()) if scheduler is not None else []
    return _Fitted(payloads, results, stopped)


def _payload(drive: Drive, plan: _StagePlan, trial: Trial, parent_run_id: str) -> dict:
    """What the trial gets (:func:`trial_payload`), with its checkpoint folder in the stage's."""
    return trial_payload(
        trial,
        drive.spec,
        drive.uri,
        drive.spec.figure,
        parent_run_id,
        drive.plugins,
        state_dir=drive.storage / plan.tune_name / TRIALS_DIR / trial.config_hash,
        state_remote=(
            join_uri(drive.remote, plan.tune_name, TRIALS_DIR, trial.config_hash)
            if drive.remote
            else None
        ),
    )


def _state_record(drive: Drive, plan: _StagePlan, where: _StageState, parent_run_id: str):
    """The stage's state file (``locking.read_state``; ``--resume`` checks its plan)."""
    state = {
        "parent_run_id": parent_run_id,
        "tracking_uri": drive.uri,
        "spec": str(drive.spec_path),
        "profile": drive.profile,
        "overrides": {k: v for k, v in drive.overrides.items() if k != "data.root"},
        "hashes": sorted({t.config_hash for t in plan.pending}),
        "panels": drive.panels,
    }
    if where.restore:  # the resumed trials are the old plan's: keep its record
        if "hashes" in where.state:
            state["hashes"] = sorted(set(where.state["hashes"]) | set(state["hashes"]))
        state["overrides"] = where.state.get("overrides", state["overrides"])
    return state


def _tally(
    drive: Drive,
    plan: _StagePlan,
    where: _StageState,
    fitted: _Fitted,
    report: SweepReport,
    errored_before: int,
) -> None:
    """A stage's counts in ``report``: trials stopped early, failed (those on a full file
    system in one line), finished, reused from another sweep; a trial that neither finished
    nor failed was interrupted (:class:`SweepInterrupted`, its checkpoint kept)."""
    from fedsweep.sweep.trial import REUSED_KEY, disk_full

    stopped = 0
    if fitted.stopped:
        from fedsweep.sweep.early_stop import end_stopped

        # their runs were left open at the rung round by the stop: ended as stopped early
        stopped = end_stopped(drive.uri, report.parent_run_id, fitted.stopped)
        report.stopped += stopped
    full = []  # the trials that failed on a full file system: one line for all of them
    for res in fitted.results:
        if res.error is not None:
            report.errored += 1
            which = (res.config or {}).get("trial", {}).get("trial_id", res.path)
            cause = disk_full(res.error)
            if cause is not None:
                full.append(cause)
            else:
                report.errors.append(f"{which}: {res.error}")
    if full:
        at = full[0].at(store_folder(drive.uri) or drive.storage)
        report.errors.insert(0, f"{len(full)} of {len(fitted.payloads)} trials: {at}")
        with contextlib.suppress(Exception):  # room for the status writes (never read)
            remove_inside(where.path / RAY_DIR, drive.storage, missing_ok=True)
    # a trial Tune stopped on Ctrl-C / SIGTERM has neither an error nor a finished run
    # (a restored Tune experiment also lists the trials that had finished before)
    planned = {t.config_hash for t in plan.pending}
    finished = len(finished_hashes(drive.client, planned))
    # trials that found their config trained by another sweep meanwhile (the claim on it,
    # fedsweep.tracking.leases) reused that run: shared, not run
    reused = sum(bool((r.metrics or {}).get(REUSED_KEY)) for r in fitted.results)
    report.finished += finished - reused + stopped
    report.shared += reused
    errored = report.errored - errored_before
    interrupted = max(0, len(planned) - finished - errored - stopped)
    report.interrupted += interrupted
    if interrupted:
        raise SweepInterrupted(
            f"{drive.spec.figure} [{drive.profile}]: interrupted with {interrupted} of "
            f"{len(fitted.payloads)} trials unfinished; their checkpoints are kept in {where.path}"
        )


def _end_failed_stage(drive: Drive, where: _StageState, parent_run_id: str, err):
    """A stage that stopped (Ctrl-C, SIGTERM: KILLED) or failed (FAILED): its parent run
    ended so; a full file system is returned (naming the store's folder) for the caller to
    raise as one line."""
    from fedsweep.sweep.trial import disk_full

    killed = isinstance(err, KeyboardInterrupt)
    full = None if killed else disk_full(err)
    if full is not None:  # room for the status writes: Ray's folder is never read back
        with contextlib.suppress(Exception):
            remove_inside(where.path / RAY_DIR, drive.storage, missing_ok=True)
    # stopped (Ctrl-C, SIGTERM) during an outage: one quick try, not minutes of retries
    with brief_requests() if killed else contextlib.nullcontext():
        end_parent_run(drive.client, parent_run_id, "killed" if killed else "failed")
    return None if full is None else full.at(store_folder(drive.uri) or drive.storage)


def _stage_word(stage: int, suffix: str) -> str:
    if suffix == SEARCH_STAGE:
        return "search "
    return "derived " if stage else ""


def _close(drive: Drive, members: list[Trial], report: SweepReport) -> None:
    """Close the sweep's parent run after its last stage, recording ``members`` (every trial of
    every stage) as the figure's runs. A child run still RUNNING now belongs to no trial that
    runs (its trial ended without closing it, e.g. its worker was killed): it ends FAILED."""
    left = end_running_children(drive.client, report.parent_run_id, "failed")
    if left:
        drive.echo(
            f"note: {drive.spec.figure} [{drive.profile}]: {left} trial run(s) left RUNNING by "
            "a trial that ended without closing them are marked FAILED"
        )
    close_parent_run(
        drive.client,
        report.parent_run_id,
        drive.experiment_id,
        drive.spec,
        drive.profile,
        members,
        errored=report.errored,
    )


def _parent(drive: Drive, report: SweepReport, state: dict | None, tags: dict) -> str:
    """The sweep's parent run (``report.parent_run_id``): the one an earlier stage of this
    sweep opened, else :func:`open_parent_run`'s."""
    if report.parent_run_id is None:
        report.parent_run_id = open_parent_run(
            drive.client, drive.experiment_id, drive.spec, drive.profile, state, tags
        )
    return report.parent_run_id


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a sweep's trials before they finished (Ray Tune stops
    gracefully and returns): the parent and the unfinished trials' runs are marked KILLED and
    the checkpoints kept for ``fedsweep sweep --resume``."""
