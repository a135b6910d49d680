"""The sweep driver: spec -> trials -> Ray Tune, with MLflow parent/child runs.

Order of work (every input is checked before Ray starts):

1. load and validate the specs, build the figure's plan under the profile (its trials:
   ``fedsweep.specs.figure.figure_plan``);
2. resolve every path to an absolute one (Ray Tune changes the trials' working directory);
3. check the data: load each data set once in the driver (downloading if needed; the embedded
   mnist-5k: its file is there); when it can be neither found nor downloaded, a profile with a
   ``data_fallback`` for it switches to that data set, a profile with ``skip_missing_data``
   skips its trials (both stated on the figures), any other profile stops with the data error;
4. take the driver's lock; start Ray in the background (``ray_backend.start_ray``) when a trial
   will run by the store's tags alone (:func:`start_ray_early`, read without MLflow), so that
   Ray comes up while the driver imports MLflow and opens the store (issue 49: the seconds of
   both overlap); create the MLflow store and the experiment (a fresh sqlite DB breaks when
   parallel trials create it), take the store's claim, skip trials whose config hash already
   has a finished run; once Ray is up (its start waited for, and its error raised, here), open
   a parent run. A failure before that wait stops the Ray being started (``abandon_start``);
5. run the remaining trials with a fresh ``ray.tune.Tuner``, with ``--resume`` too: each trial
   finds its checkpoint in a folder fedsweep writes for it (``trials/<config hash>``, see
   ``fedsweep.sweep.trial``) and its MLflow run by parent and config hash, so nothing of Ray's
   saved state (its pickles) is ever read back;
6. a spec with derived curves (``fedsweep.specs.derive``) runs in two stages under the same
   parent run: 1-5 are stage 0 (every ordinary trial, the same Ray experiment and state file as
   without derived curves); stage 1 then computes each derived trial's values from its source
   trial's finished run and runs those trials in a Ray experiment of their own
   (``<name>-derived``, its own state file and ``--resume``). A derived trial whose source
   failed is not run (``SweepReport.no_source``);
7. a spec with searches (``search:`` on a curve, ``fedsweep.specs.search``) runs the search
   trials with stage 0 (a random search: all of them; an adaptive one: its first batch, the
   later batches in ``<name>-search`` stages, each asked once the earlier runs are in the
   store), then the tuned curves (the best search trial's config over the seeds) with the
   derived stage (:func:`_run_searched`).

The figure's plan (its trials, step 3's data check, the derived trials' resolution) comes from
the spec layer (:mod:`fedsweep.specs.figure`); the parts of the run live beside this module:
:mod:`~fedsweep.sweep.store_index` (finished runs by hash, figure membership, the parent run),
:mod:`~fedsweep.sweep.locking` (one driver per sweep, the state file, ``--resume`` checks),
:mod:`~fedsweep.sweep.ray_backend` (Ray up and down, the Tune fit) and
:mod:`~fedsweep.sweep.report` (the report); this module drives the stages.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from fedsweep.core.device import device_problem
from fedsweep.data.datasets import resolve_data_root
from fedsweep.specs.derivations import DerivationError
from fedsweep.specs.figure import FigurePlan, figure_plan
from fedsweep.specs.load import (
    SpecError,
    SweepSpec,
    Trial,
    load_spec,
    panel_filter_text,
)
from fedsweep.sweep.locking import (
    STATE_FILE,
    check_resume_plan,
    driver_lock,
    ray_experiment_name,
    read_state,
    resumable,
    store_driver_lease,
)
from fedsweep.sweep.ray_backend import (  # noqa: F401  (shutdown_ray: re-exported)
    RAY_DIR,
    TRIALS_DIR,
    abandon_start,
    bound_ray_connect,
    check_resources,
    check_storage,
    cluster_warnings,
    fit_trials,
    init_ray,
    remove_inside,
    shutdown_ray,  # fedsweep.bench.floor_trial imports it and init_ray from here
    start_ray,
    trial_payload,
    where_it_trains,
)
from fedsweep.sweep.remote_state import RemoteFolder, is_remote, join_uri, storage_env
from fedsweep.sweep.report import SweepReport
from fedsweep.sweep.store_index import (
    close_parent_run,
    end_parent_run,
    end_running_children,
    experiment_description,
    finished_hashes,
    finished_trials,
    open_parent_run,
    parent_tags,
    store_folder,
    trial_runs,
)
from fedsweep.tracking import retries
from fedsweep.tracking.artifact_probe import artifact_env
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.direct import tagged_done_hashes
from fedsweep.tracking.outage import brief_requests
from fedsweep.tracking.store import ensure_experiment
from fedsweep.tracking.uri import artifact_root as store_artifact_root
from fedsweep.tracking.uri import (
    check_tracking_uri,
    default_store_dir,
    ray_results_dir,
    resolve_tracking_uri,
    sqlite_path,
)


# ------------------------------------------------------------------------------ running
def run_sweep(
    spec_path: str | Path,
    profile: str = "quick",
    *,
    address: str | None = None,
    resume: bool = False,
    max_concurrent: int | None = None,
    tracking_uri: str | None = None,
    storage_dir: str | Path | None = None,
    artifact_root: str | None = None,
    data_dir: str | Path | None = None,
    overrides: dict | None = None,
    fail_at: dict[str, int | tuple[int, str]] | None = None,
    verbose: int = 1,
    echo=print,
    listener=None,
    wait: bool = False,
    plugins: list | None = None,
    panels: dict[str, list[str]] | None = None,
    seeds: list[int] | None = None,
) -> SweepReport:
    """Run one sweep spec under ``profile``. ``fail_at`` (trial_id -> round, or -> (round,
    "enospc") for a full file system) injects crashes.

    One driver per (spec, profile, store) at a time: another one running raises
    :class:`SweepBusyError`, or with ``wait`` this one waits for it to end.

    ``verbose`` is Ray Tune's verbosity (0: silent, 1: its tables); ``echo`` receives the
    driver's own lines; ``listener`` (e.g. ``fedsweep.cli.sweep_console.SweepConsole``) gets
    ``begin(report)`` once the trials are scheduled, then Tune's trial events
    (``fedsweep.sweep.tune_events``). ``plugins``: the ``--plugin`` modules the driver imported
    (``fedsweep.plugins.load_plugins``' list), imported by every trial too. ``panels``
    (``--panel``, axis -> values) runs only those panels; the parent run's
    ``fedsweep.panel_filter`` tag says so, and the figures draw the others as not run.
    ``seeds`` (``--seeds``) runs those seeds instead of the profile's, in every panel."""
    bound_ray_connect(address)  # before anything imports ray
    spec_path = Path(spec_path).resolve()
    spec = load_spec(spec_path)
    data_root = resolve_data_root(data_dir)
    extra = {"data.root": str(data_root), **(overrides or {})}
    figure = figure_plan(spec, profile, extra=extra, panels=panels, seeds=seeds)
    spec = figure.spec  # with --seeds: the profile's seeds replaced
    trials = figure.trials
    uri = resolve_tracking_uri(tracking_uri)
    check_tracking_uri(uri, write=True)  # before the data, MLflow and Ray
    if address is None:  # a cluster's workers may have the GPU this machine lacks
        for device in sorted({t.config.device for t in trials}):
            problem = device_problem(device)
            if problem:
                raise SpecError(f"{spec_path}: {problem}")
    if max_concurrent is not None and max_concurrent < 1:
        raise SpecError(f"max_concurrent: got {max_concurrent} (allowed: 1 or more, or None)")
    check_storage(storage_dir)
    if artifact_root:  # an object store: one file written and deleted now, not after training
        from fedsweep.tracking.artifact_probe import ArtifactRootError, check_artifact_root

        try:
            check_artifact_root(artifact_root)
        except ArtifactRootError as err:
            raise SpecError(str(err)) from None
    figure = figure.with_data(data_root)
    data_note = figure.data.note
    if data_note:
        echo(f"note: {data_note}")
    trials = figure.trials
    runnable = figure.runnable
    report = SweepReport(
        spec.figure,
        profile,
        len(trials),
        data_note=data_note,
        data_fallback=", ".join(sorted(set(figure.substitute.values()))) or None,
        unavailable=len(trials) - len(runnable),
    )
    trials = runnable
    if not trials:
        echo(f"{spec.figure} [{profile}]: no trial can run without its data; nothing to schedule")
        return report

    remote = str(storage_dir) if is_remote(storage_dir) else None
    # an object store holds the trials' checkpoints; Ray Tune's folder, the sweep's state file
    # and the driver's lock stay on this machine (fedsweep.sweep.remote_state)
    tune_name = ray_experiment_name(spec.figure, profile, uri, spec_path)
    storage = (
        Path(str(storage_dir).removeprefix("file://")).resolve()
        if storage_dir and not remote
        else sweep_folder(uri, tune_name, echo)
    )
    storage.mkdir(parents=True, exist_ok=True)
    drive = None
    waited: list = []  # the holder this driver waited for (--wait), if any
    with (
        retries.watching(echo),  # a tracking server's outage: one line, not silence
        _no_parent_run_said(spec.figure, profile, lambda: drive, waited),
        driver_lock(storage / f"{tune_name}.driver", spec.figure, profile, uri, wait, echo, waited),
    ):
        # Ray comes up while the store opens (MLflow's import alone is seconds), when this
        # sweep will schedule a trial (start_ray_early): every input is checked by now
        if start_ray_early(trials, uri):
            start_ray(address)
        try:
            client = get_client(uri)
            experiment_id = ensure_experiment(
                client,
                spec.figure,
                uri,
                description=experiment_description(spec),
                overwrite=True,
                artifacts=artifact_root,
            )
            where = client.get_experiment(experiment_id).artifact_location
            if artifact_root and where != store_artifact_root(uri, artifact_root):
                echo(
                    f"note: the experiment {spec.figure} keeps its artifacts where it was "
                    f"created: {where}"
                )
            with store_driver_lease(uri, spec.figure, profile, wait, echo, waited):
                drive = _Drive(
                    spec,
                    spec_path,
                    profile,
                    figure,
                    client,
                    uri,
                    experiment_id,
                    storage,
                    overrides or {},
                    tune_name,
                    resume=resume,
                    address=address,
                    max_concurrent=max_concurrent,
                    fail_at=fail_at or {},
                    verbose=verbose,
                    echo=echo,
                    listener=listener,
                    plugins=list(plugins or []),
                    panels=panel_filter_text(panels),
                    remote=remote,
                )
                return _run_locked(drive, trials, report)
        except BaseException:
            abandon_start()  # failed before it waited for Ray: no Ray left starting behind
            raise


@contextlib.contextmanager
def _no_parent_run_said(figure: str, profile: str, drive, waited: list):
    """A stop (Ctrl-C, SIGTERM) before the sweep opened its parent run (``drive()``'s, None
    before there is one), e.g. while it waited for another driver: raised as
    :class:`StoppedBeforeItsRun`, so the command does not say it marked a run KILLED."""
    try:
        yield
    except KeyboardInterrupt as err:
        if isinstance(err, SweepInterrupted) or getattr(drive(), "parent_run_id", None):
            raise
        from fedsweep.tracking.leases import describe

        holder = waited[-1] if waited else None  # the store claim's tags, or the lock's text
        who = describe(holder) if isinstance(holder, dict) else holder
        why = (
            f"stopped while waiting for {who} to end its sweep"
            if waited
            else "stopped before it opened its parent run"
        )
        raise StoppedBeforeItsRun(f"{figure} [{profile}]: {why}") from None


def start_ray_early(trials: list[Trial], uri: str) -> bool:
    """Whether to start Ray before the store is opened: when some ordinary trial of the sweep
    has no done run in a local SQLite store by its tags alone (read without MLflow,
    ``tracking.direct.tagged_done_hashes``; the provenance check only ever finds fewer), it
    will be scheduled. Not for other stores (a server or database, read through MLflow) nor a
    store that cannot be read so: their sweeps start Ray once they know, as a sweep whose
    trials are all done never starts it."""
    db = sqlite_path(uri)
    if db is None:
        return False
    base = [t for t in trials if t.derive is None]
    done = tagged_done_hashes(db, {h for t in base for h in t.hashes})
    return done is not None and any(not done.intersection(t.hashes) for t in base)


def sweep_folder(uri: str, tune_name: str, echo) -> Path:
    """Where a sweep without ``--storage`` keeps Ray's state: ``<store dir>/ray_results``
    (``tracking.uri.ray_results_dir``), except for a sweep interrupted before 2026-11-28
    whose state is still where sweeps kept it then (``$FEDSWEEP_STORE_DIR`` or
    ``./mlruns``, ``/ray_results``): it goes on there (said in one note), so ``--resume``
    finds its checkpoints."""
    folder = ray_results_dir(uri)
    old = default_store_dir() / "ray_results"
    if old != folder and (old / tune_name / STATE_FILE).is_file():
        if not (folder / tune_name / STATE_FILE).is_file():
            echo(
                f"note: {tune_name}: its Ray state is in {old}, where sweeps kept it before "
                f"2026-11-28; it goes on there (new sweeps of this store use {folder})"
            )
            return old
    return folder


#: suffix of the Ray experiment (and state file) of a sweep's derived stage
DERIVED_STAGE = "-derived"


@dataclass
class _Drive:
    """What the stages of one sweep share (while its driver lock is held)."""

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
    fail_at: dict
    verbose: int
    echo: object
    listener: object
    plugins: list = field(default_factory=list)  # [(module, root)], imported by every trial
    panels: str = ""  # the --panel filter as typed ("" = every panel), recorded and tagged
    remote: str | None = None  # --storage on an object store: the trials' checkpoints there
    parent_run_id: str | None = None

    def remote_folder(self, *parts: str):
        """The :class:`RemoteFolder` of ``parts`` under the remote storage (None without)."""
        if self.remote is None:
            return None
        return RemoteFolder(join_uri(self.remote, *parts))


def _run_locked(drive: _Drive, trials: list[Trial], report: SweepReport) -> SweepReport:
    """The part of :func:`run_sweep` that runs while holding the sweep's driver lock: stage 0
    (every ordinary trial, exactly as a spec without derived curves), then stage 1 (the
    derived trials, resolved from stage 0's runs, in a Ray experiment of their own)."""
    base = [t for t in trials if t.derive is None]
    derived = [t for t in trials if t.derive is not None]
    try:
        if drive.figure.search_curves:
            _run_searched(drive, trials, base, derived, report)
            return report
        if not derived:
            _run_stage(drive, base, base, report, 0)
            return report
        _run_stage(drive, base, base, report, 0, follow=len(derived))
        resolved = _resolve_stage(drive, trials, report)
        _run_stage(drive, resolved, base + resolved, report, 1)
    except BaseException as err:
        # on every way out (between the stages too) the parent run and the trials' runs still
        # RUNNING end KILLED or FAILED: no run of an ended sweep stays RUNNING
        if drive.parent_run_id is not None:
            killed = isinstance(err, KeyboardInterrupt)
            with brief_requests() if killed else contextlib.nullcontext():  # outage: no wait
                end_parent_run(drive.client, drive.parent_run_id, "killed" if killed else "failed")
        raise
    return report


#: suffix of the Ray experiment (and state file) of an adaptive search's later batches
SEARCH_STAGE = "-search"


def _run_searched(
    drive: _Drive, trials: list[Trial], base: list[Trial], derived: list[Trial], report
) -> None:
    """A figure with searches (:mod:`fedsweep.specs.search`): stage 0 runs the ordinary
    trials with the searches' first trials (a random search's all of them), the later batches
    of an adaptive search run in stages of their own (``-search``), each asked once the
    earlier ones' runs are in the store; then the derived stage (the tuned curves, and any
    other derived curve) as in :func:`_run_locked`."""
    from fedsweep.specs.search import store_lookup

    lookup = store_lookup(drive.client)
    state = drive.figure.search_state(lookup)
    searched = list(state.trials)
    report.total += len(searched)
    _run_stage(drive, base + searched, base, report, 0, follow=len(derived))
    ran = {t.config_hash for t in state.pending}  # a trial that failed is not run again
    while True:
        state = drive.figure.search_state(lookup)
        new = [t for t in state.trials if t.config_hash not in {s.config_hash for s in searched}]
        report.total += len(new)
        searched += new
        pending = [t for t in state.pending if t.config_hash not in ran]
        if not pending:  # every search finished, or a trial failed (no point asked after it)
            break
        ran.update(t.config_hash for t in pending)
        _run_stage(drive, pending, base, report, 1, follow=len(derived), suffix=SEARCH_STAGE)
    for panel, label in state.open:
        drive.echo(
            f"{drive.spec.figure} [{drive.profile}]: the search of {label} ({panel}) has a "
            "trial without a finished run (it failed): not running its tuned curve"
        )
    resolved = _resolve_stage(drive, trials, report, quiet_tuned=True)
    _run_stage(drive, resolved, base + searched + resolved, report, 1)


def _resolve_stage(
    drive: _Drive, trials: list[Trial], report: SweepReport, quiet_tuned: bool = False
) -> list[Trial]:
    """The derived trials with their values computed from their sources' finished runs; those
    whose source has none (it failed) are counted in ``report.no_source`` and named."""
    runs = trial_runs(drive.client, [t for t in trials if t.derive is None])

    def run_of(config_hash: str) -> str | None:
        run = runs.get(config_hash)
        return run.info.run_id if run is not None else None

    try:
        done = drive.figure.resolve(run_of, drive.client, trials)
    except DerivationError as err:
        raise SpecError(f"{drive.spec_path}: derived curves: {err}") from None
    report.no_source += len(done.missing)
    by_source: dict[str, list[str]] = {}
    for trial, source in done.missing:
        if quiet_tuned and trial.derive is not None and trial.derive.tuned:
            continue  # said once per search by _run_searched
        name = source.run_name if source is not None else f"{trial.derive.from_} (not run)"
        by_source.setdefault(name, []).append(trial.curve)
    for name, curves in by_source.items():
        drive.echo(
            f"{drive.spec.figure} [{drive.profile}]: {name} has no finished run (it failed): "
            f"not running its derived {', '.join(curves)}"
        )
    return done.derived


def _run_stage(
    drive: _Drive,
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
    stage closes the parent run, recording ``members`` (every trial) as the figure's runs."""
    spec, profile, client, echo = drive.spec, drive.profile, drive.client, drive.echo
    storage = drive.storage
    final = not follow
    if suffix is None:
        suffix = DERIVED_STAGE if stage else ""
    tune_name = drive.tune_name + suffix
    state_path = storage / tune_name / STATE_FILE
    done = finished_trials(client, trials)
    skipped = sum(t.config_hash in done for t in trials)
    report.skipped += skipped
    # Trials with equal configs share one run (e.g. a pooled centralized baseline drawn in
    # every Case panel): schedule each config once.
    unique: dict[str, Trial] = {}
    for t in trials:
        if t.config_hash not in done:
            unique.setdefault(t.config_hash, t)
    pending = list(unique.values())
    shared = len(trials) - skipped - len(pending)
    report.shared += shared
    tags = parent_tags(spec, drive.spec_path, profile, drive.figure.data, drive.panels)
    remote = drive.remote_folder(tune_name)  # the sweep's folder on an object store, or None
    if remote is not None:  # the state lives beside the trials' checkpoints there
        where = join_uri(drive.remote, tune_name, STATE_FILE)
        state = read_state(where, drive.uri, echo, text=remote.read_text(STATE_FILE))
    else:
        state = read_state(state_path, drive.uri, echo)
    if not pending:
        parent_run_id = _parent(drive, state, tags)
        report.parent_run_id = parent_run_id
        if final:
            try:
                _close(drive, members, report)
            except BaseException:
                end_parent_run(client, parent_run_id, "failed")
                raise
        if final and not report.scheduled:  # a derived stage says it for the whole sweep
            echo(
                f"{spec.figure} [{profile}]: all {len(members)} runnable trials already have a "
                "finished run; nothing to schedule"
            )
        return

    from fedsweep.sweep.trial import REUSED_KEY, disk_full

    path = storage / tune_name
    restore = drive.resume and state is not None
    replanned = bool(restore and stage and not resumable(state, pending))
    if replanned:
        # derived trials that the interrupted plan did not have (a source that had failed has
        # finished since, or the spec's derived curves changed): run the trials planned now,
        # those the interrupted plan had from their checkpoints (found by config hash)
        echo(
            f"note: {tune_name}: the derived trials differ from the interrupted plan (a source "
            "run finished since, or the spec changed); running the derived trials planned now, "
            "the interrupted ones from their checkpoints"
        )
    elif restore:
        check_resume_plan(state, pending, drive.overrides, spec.figure, profile, drive.panels)
        echo(f"resuming {path}")
    elif drive.resume:
        echo(f"note: {tune_name}: nothing to resume in {storage}; starting the trials afresh")
    elif state is not None:
        echo(
            f"note: {tune_name} was interrupted before; continuing its MLflow runs from "
            "round 0 (use --resume to continue from the trials' checkpoints)"
        )
    # Tune's modules load while Ray may still be starting (start_ray): not in both threads
    import ray.tune  # noqa: F401

    # Ray first: the parent run is opened only once Ray is up and can run the trials
    init_ray(drive.address)
    echo(where_it_trains(drive.address))
    check_resources(spec, drive.spec_path)
    for line in cluster_warnings(drive.uri, None if drive.remote else storage):
        echo(line)
    parent_run_id = _parent(drive, state, tags)
    report.parent_run_id = parent_run_id
    errored_before = report.errored
    try:
        client.update_run(parent_run_id, status="RUNNING")
        client.set_tag(parent_run_id, "fedsweep.status", "running")
        payloads = [
            trial_payload(
                t,
                spec,
                drive.uri,
                spec.figure,
                parent_run_id,
                drive.fail_at.get(t.trial_id),
                drive.plugins,
                state_dir=path / TRIALS_DIR / t.config_hash,
                state_remote=(
                    join_uri(drive.remote, tune_name, TRIALS_DIR, t.config_hash)
                    if drive.remote
                    else None
                ),
            )
            for t in pending
        ]
        report.scheduled += len(payloads)
        echo(
            f"{spec.figure} [{profile}]: {len(trials)} {_stage_word(stage, suffix)}trials, "
            f"{skipped} already finished, scheduling {len(payloads)} (parent MLflow run "
            f"{parent_run_id})"
            + (f"; {shared} share a run with an equal trial" if shared else "")
            + (f"; {follow} derived trials follow" if follow else "")
        )
        new_state = {
            "parent_run_id": parent_run_id,
            "tracking_uri": drive.uri,
            "spec": str(drive.spec_path),
            "profile": profile,
            "overrides": {k: v for k, v in drive.overrides.items() if k != "data.root"},
            "hashes": sorted({t.config_hash for t in pending}),
            "panels": drive.panels,
        }
        if restore:  # the resumed trials are the old plan's: keep its record
            if "hashes" in state:
                new_state["hashes"] = sorted(set(state["hashes"]) | set(new_state["hashes"]))
            new_state["overrides"] = state.get("overrides", new_state["overrides"])
        if remote is not None:
            if not restore:  # a stale sweep's remote checkpoints are not used
                remote.delete()
            remote.write_text(STATE_FILE, json.dumps(new_state))
        from fedsweep.sweep.early_stop import EarlyStopByGroup, needs_scheduler

        # search trials under ASHA: one ASHA per search population, FIFO for the others
        scheduler = EarlyStopByGroup() if needs_scheduler(payloads) else None
        results = fit_trials(
            payloads,
            spec,
            storage,
            tune_name,
            state_path,
            new_state,
            restore,
            drive.max_concurrent,
            drive.verbose,
            report,
            drive.listener,
            echo,
            # an object storage's and the artifact store's (endpoint, region) variables,
            # handed over with the credentials (Ray's object store, never a runtime_env)
            env={**(storage_env() if drive.remote else {}), **artifact_env()} or None,
            scheduler=scheduler,
        )
        stopped = 0
        if scheduler is not None and scheduler.stopped:
            from fedsweep.sweep.early_stop import end_stopped

            # their runs were left open at the rung round by the stop: ended as stopped early
            stopped = end_stopped(drive.uri, parent_run_id, list(scheduler.stopped.values()))
            report.stopped += stopped
        full = []  # the trials that failed on a full file system: one line for all of them
        for res in results:
            if res.error is not None:
                report.errored += 1
                which = (res.config or {}).get("trial", {}).get("trial_id", res.path)
                cause = disk_full(res.error)
                if cause is not None:
                    full.append(cause)
                else:
                    report.errors.append(f"{which}: {res.error}")
        if full:
            where = full[0].at(store_folder(drive.uri) or storage)
            report.errors.insert(0, f"{len(full)} of {len(payloads)} trials: {where}")
            with contextlib.suppress(Exception):  # room for the status writes (never read)
                remove_inside(path / RAY_DIR, storage, missing_ok=True)
        # a trial Tune stopped on Ctrl-C / SIGTERM has neither an error nor a finished run
        # (a restored Tune experiment also lists the trials that had finished before)
        planned = {t.config_hash for t in pending}
        finished = len(finished_hashes(client, planned))
        # trials that found their config trained by another sweep meanwhile (the claim on it,
        # fedsweep.tracking.leases) reused that run: shared, not run
        reused = sum(bool((r.metrics or {}).get(REUSED_KEY)) for r in results)
        report.finished += finished - reused + stopped
        report.shared += reused
        errored = report.errored - errored_before
        interrupted = max(0, len(planned) - finished - errored - stopped)
        report.interrupted += interrupted
        if interrupted:
            raise SweepInterrupted(
                f"{spec.figure} [{profile}]: interrupted with {interrupted} of "
                f"{len(payloads)} trials unfinished; their checkpoints are kept in {path}"
            )
        if final:
            _close(drive, members, report)
    except BaseException as err:
        killed = isinstance(err, KeyboardInterrupt)
        full = None if killed else disk_full(err)
        if full is not None:  # room for the status writes: Ray's folder is never read back
            with contextlib.suppress(Exception):
                remove_inside(path / RAY_DIR, storage, missing_ok=True)
        # stopped (Ctrl-C, SIGTERM) during an outage: one quick try, not minutes of retries
        with brief_requests() if killed else contextlib.nullcontext():
            end_parent_run(client, parent_run_id, "killed" if killed else "failed")
        if full is not None:  # one line naming the cause, not a chain of tracebacks
            raise full.at(store_folder(drive.uri) or storage) from None
        raise
    if report.errored == errored_before:  # all in MLflow; Ray's copy of the checkpoints can go
        remove_inside(path, storage, missing_ok=True)
        if remote is not None:
            remote.delete()


def _stage_word(stage: int, suffix: str) -> str:
    if suffix == SEARCH_STAGE:
        return "search "
    return "derived " if stage else ""


def _close(drive: _Drive, members: list[Trial], report: SweepReport) -> None:
    """Close the sweep's parent run after its last stage, recording ``members`` (every trial of
    every stage) as the figure's runs. A child run still RUNNING now belongs to no trial that
    runs (its trial ended without closing it, e.g. its worker was killed): it ends FAILED."""
    left = end_running_children(drive.client, drive.parent_run_id, "failed")
    if left:
        drive.echo(
            f"note: {drive.spec.figure} [{drive.profile}]: {left} trial run(s) left RUNNING by "
            "a trial that ended without closing them are marked FAILED"
        )
    close_parent_run(
        drive.client,
        drive.parent_run_id,
        drive.experiment_id,
        drive.spec,
        drive.profile,
        members,
        errored=report.errored,
    )


def _parent(drive: _Drive, state: dict | None, tags: dict) -> str:
    """The sweep's parent run: the one an earlier stage of this sweep opened, else
    :func:`open_parent_run`'s."""
    if drive.parent_run_id is None:
        drive.parent_run_id = open_parent_run(
            drive.client, drive.experiment_id, drive.spec, drive.profile, state, tags
        )
    return drive.parent_run_id


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a sweep's trials before they finished (Ray Tune stops
    gracefully and returns): the parent and the unfinished trials' runs are marked KILLED and
    the checkpoints kept for ``fedsweep sweep --resume``."""


class StoppedBeforeItsRun(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a sweep before it opened its parent run (it waited for another
    driver of the figure, or had not started its trials): none of its runs is marked KILLED,
    there are none."""
