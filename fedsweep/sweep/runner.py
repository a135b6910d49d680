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
:mod:`~fedsweep.sweep.ray_backend` (Ray up and down, the trials' payloads),
:mod:`~fedsweep.sweep.tune_fit` (the Tune fit), :mod:`~fedsweep.sweep.stage` (one stage: plan,
resume, fit, tally) and :mod:`~fedsweep.sweep.report` (the report); this module checks the
inputs and drives the stages.
"""

from __future__ import annotations

import contextlib
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
    driver_lock,
    ray_experiment_name,
    store_driver_lease,
)
from fedsweep.sweep.ray_backend import (  # noqa: F401  (init_ray, shutdown_ray: re-exported)
    abandon_start,
    bound_ray_connect,
    check_storage,
    init_ray,  # fedsweep.bench.floor_trial imports it and shutdown_ray from here
    shutdown_ray,
    start_ray,
)
from fedsweep.sweep.remote_state import is_remote
from fedsweep.sweep.report import SweepReport
from fedsweep.sweep.stage import SEARCH_STAGE, Drive, SweepInterrupted, run_stage
from fedsweep.sweep.store_index import (
    end_parent_run,
    experiment_description,
    trial_runs,
)
from fedsweep.tracking import retries
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.direct import tagged_done_hashes
from fedsweep.tracking.outage import brief_requests
from fedsweep.tracking.store import ensure_experiment, ensure_panel_views
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
    verbose: int = 1,
    echo=print,
    listener=None,
    wait: bool = False,
    plugins: list | None = None,
    panels: dict[str, list[str]] | None = None,
    seeds: list[int] | None = None,
) -> SweepReport:
    """Run one sweep spec under ``profile``.

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
    uri = resolve_tracking_uri(tracking_uri)
    check_tracking_uri(uri, write=True)  # before the data, MLflow and Ray
    _check_inputs(spec_path, figure.trials, address, max_concurrent, storage_dir, artifact_root)
    figure = figure.with_data(data_root)
    report = _new_report(figure, profile, echo)
    trials = figure.runnable
    if not trials:
        echo(f"{spec.figure} [{profile}]: no trial can run without its data; nothing to schedule")
        return report

    tune_name = ray_experiment_name(spec.figure, profile, uri, spec_path)
    storage, remote = _sweep_storage(storage_dir, uri, tune_name, echo)
    waited: list = []  # the holder this driver waited for (--wait), if any
    with (
        retries.watching(echo),  # a tracking server's outage: one line, not silence
        _no_parent_run_said(spec.figure, profile, lambda: report.parent_run_id, waited),
        driver_lock(storage / f"{tune_name}.driver", spec.figure, profile, uri, wait, echo, waited),
    ):
        # Ray comes up while the store opens (MLflow's import alone is seconds), when this
        # sweep will schedule a trial (start_ray_early): every input is checked by now
        if start_ray_early(trials, uri):
            start_ray(address)
        try:
            client, experiment_id = _open_experiment(spec, figure, uri, artifact_root, echo)
            with store_driver_lease(uri, spec.figure, profile, wait, echo, waited):
                drive = Drive(
                    spec, spec_path, profile, figure, client, uri, experiment_id, storage,
                    overrides or {}, tune_name, resume=resume, address=address,
                    max_concurrent=max_concurrent, verbose=verbose, echo=echo,
                    listener=listener, plugins=list(plugins or []),
                    panels=panel_filter_text(panels), remote=remote,
                )  # fmt: skip
                return _run_locked(drive, trials, report)
        except BaseException:
            abandon_start()  # failed before it waited for Ray: no Ray left starting behind
            raise


def _sweep_storage(storage_dir: str | Path | None, uri: str, tune_name: str, echo):
    """``(storage, remote)``: the folder of the sweep's Ray experiments, state files and
    driver lock (made now), and the object store holding the trials' checkpoints with a
    remote ``--storage`` (else None): Ray Tune's folder, the sweep's state file and the
    driver's lock stay on this machine (fedsweep.sweep.remote_state)."""
    remote = str(storage_dir) if is_remote(storage_dir) else None
    storage = (
        Path(str(storage_dir).removeprefix("file://")).resolve()
        if storage_dir and not remote
        else sweep_folder(uri, tune_name, echo)
    )
    storage.mkdir(parents=True, exist_ok=True)
    return storage, remote


def _check_inputs(
    spec_path: Path,
    trials: list[Trial],
    address: str | None,
    max_concurrent: int | None,
    storage_dir: str | Path | None,
    artifact_root: str | None,
) -> None:
    """The inputs :func:`run_sweep` checks before the data, MLflow and Ray: the trials'
    devices, ``max_concurrent``, ``--storage`` and ``--artifact-root`` (:class:`SpecError`)."""
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


def _new_report(figure: FigurePlan, profile: str, echo) -> SweepReport:
    """The sweep's report, before anything ran: its trials, the data check's note (said now)."""
    data_note = figure.data.note
    if data_note:
        echo(f"note: {data_note}")
    trials = figure.trials
    return SweepReport(
        figure.spec.figure,
        profile,
        len(trials),
        data_note=data_note,
        data_fallback=", ".join(sorted(set(figure.substitute.values()))) or None,
        unavailable=len(trials) - len(figure.runnable),
    )


def _open_experiment(
    spec: SweepSpec, figure: FigurePlan, uri: str, artifact_root: str | None, echo
):
    """``(client, experiment id)``: the store's client and the figure's experiment, created
    (or its description brought up to date) now, with a saved view per panel of ``figure``."""
    client = get_client(uri)
    experiment_id = ensure_experiment(
        client,
        spec.figure,
        uri,
        description=experiment_description(spec),
        overwrite=True,
        artifacts=artifact_root,
    )
    # one saved view per panel: MLflow draws all of a view's runs in each chart
    labels = {t.panel_id: t.panel_label for t in figure.trials}
    ensure_panel_views(client, experiment_id, list(labels.items()))
    where = client.get_experiment(experiment_id).artifact_location
    if artifact_root and where != store_artifact_root(uri, artifact_root):
        echo(
            f"note: the experiment {spec.figure} keeps its artifacts where it was created: {where}"
        )
    return client, experiment_id


@contextlib.contextmanager
def _no_parent_run_said(figure: str, profile: str, parent_run_id, waited: list):
    """A stop (Ctrl-C, SIGTERM) before the sweep opened its parent run (``parent_run_id()``,
    None before there is one), e.g. while it waited for another driver: raised as
    :class:`StoppedBeforeItsRun`, so the command does not say it marked a run KILLED."""
    try:
        yield
    except KeyboardInterrupt as err:
        if isinstance(err, SweepInterrupted) or parent_run_id():
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


def _run_locked(drive: Drive, trials: list[Trial], report: SweepReport) -> SweepReport:
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
            run_stage(drive, base, base, report, 0)
            return report
        run_stage(drive, base, base, report, 0, follow=len(derived))
        resolved = _resolve_stage(drive, trials, report)
        run_stage(drive, resolved, base + resolved, report, 1)
    except BaseException as err:
        # on every way out (between the stages too) the parent run and the trials' runs still
        # RUNNING end KILLED or FAILED: no run of an ended sweep stays RUNNING
        if report.parent_run_id is not None:
            killed = isinstance(err, KeyboardInterrupt)
            with brief_requests() if killed else contextlib.nullcontext():  # outage: no wait
                end_parent_run(drive.client, report.parent_run_id, "killed" if killed else "failed")
        raise
    return report


def _run_searched(
    drive: Drive, trials: list[Trial], base: list[Trial], derived: list[Trial], report
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
    run_stage(drive, base + searched, base, report, 0, follow=len(derived))
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
        run_stage(drive, pending, base, report, 1, follow=len(derived), suffix=SEARCH_STAGE)
    for panel, label in state.open:
        drive.echo(
            f"{drive.spec.figure} [{drive.profile}]: the search of {label} ({panel}) has a "
            "trial without a finished run (it failed): not running its tuned curve"
        )
    resolved = _resolve_stage(drive, trials, report, quiet_tuned=True)
    run_stage(drive, resolved, base + searched + resolved, report, 1)


def _resolve_stage(
    drive: Drive, trials: list[Trial], report: SweepReport, quiet_tuned: bool = False
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


class StoppedBeforeItsRun(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a sweep before it opened its parent run (it waited for another
    driver of the figure, or had not started its trials): none of its runs is marked KILLED,
    there are none."""
