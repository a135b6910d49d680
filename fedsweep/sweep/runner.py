"""The sweep driver: spec -> trials -> Ray Tune, with MLflow parent/child runs.

Order of work (everything that can fail does so before Ray starts):

1. load and validate the specs, expand them under the profile (``spec.expand``);
2. resolve every path to an absolute one (Ray Tune changes the trials' working directory);
3. check the data: load each data set once in the driver (downloading if needed); when it can
   be neither found nor downloaded, a profile with a ``data_fallback`` for it switches to that
   data set, a profile with ``skip_missing_data`` skips its trials (both stated on the
   figures), any other profile stops with the data error;
4. create the MLflow store and the experiment (a fresh sqlite DB breaks when parallel trials
   create it), skip trials whose config hash already has a finished run, open a parent run;
5. run the remaining trials with a fresh ``ray.tune.Tuner``, with ``--resume`` too: each trial
   finds its checkpoint in a folder fedsweep writes for it (``trials/<config hash>``, see
   ``fedsweep.sweep.trial``) and its MLflow run by parent and config hash, so nothing of Ray's
   saved state (its pickles) is ever read back;
6. a spec with derived curves (``fedsweep.sweep.derive``) runs in two stages under the same
   parent run: 1-5 are stage 0 (every ordinary trial, the same Ray experiment and state file as
   without derived curves); stage 1 then computes each derived trial's values from its source
   trial's finished run and runs those trials in a Ray experiment of their own
   (``<name>-derived``, its own state file and ``--resume``). A derived trial whose source
   failed is not run (``SweepReport.no_source``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from fedsweep import atomic
from fedsweep.compose import HOOKS
from fedsweep.data.datasets import DatasetNotFoundError, load_dataset, resolve_data_root
from fedsweep.data.leash import leash_problems
from fedsweep.engine.device import device_problem
from fedsweep.sweep.spec import SpecError, SweepSpec, Trial, expand, load_spec
from fedsweep.tracking.direct import done_runs_by_hash, load_runs
from fedsweep.tracking.store import (
    check_tracking_uri,
    default_store_dir,
    ensure_experiment,
    get_client,
    resolve_tracking_uri,
    ui_path,
    ui_search_path,
)

STATE_FILE = "fedsweep_sweep.json"
#: in a sweep's folder (``<store>/ray_results/<figure>-<profile>-<key>``), beside STATE_FILE:
#: the trials' checkpoint folders, one per config hash (fedsweep's own), and Ray Tune's
#: experiment (Ray's; removed before every fit and never read back)
TRIALS_DIR = "trials"
RAY_DIR = "ray"


@dataclass
class SweepReport:
    figure: str
    profile: str
    total: int
    skipped: int = 0
    scheduled: int = 0
    finished: int = 0
    errored: int = 0
    parent_run_id: str | None = None
    data_note: str = ""
    data_fallback: str | None = None
    #: trials left out because their data set is missing (``skip_missing_data``)
    unavailable: int = 0
    #: trials not scheduled because another trial of the sweep has the same config
    shared: int = 0
    #: trials stopped unfinished (Ctrl-C / SIGTERM during the sweep; ``--resume`` continues)
    interrupted: int = 0
    #: derived trials not run because their source trial has no finished run (it failed)
    no_source: int = 0
    errors: list[str] = field(default_factory=list)

    def line(self, wall: float | None = None) -> str:
        """One summary line: ``fig [profile]: 16 run, 2 skipped, 0 shared, 0 failed of 18
        trials in 1 min 05 s`` (skipped: a finished run exists; shared: an equal trial's run)."""
        text = (
            f"{self.figure} [{self.profile}]: {self.finished} run, {self.skipped} skipped, "
            f"{self.shared} shared, {self.errored} failed"
        )
        if self.unavailable:
            text += f", {self.unavailable} not run (data missing)"
        if self.no_source:
            text += f", {self.no_source} not run (source run missing)"
        text += f" of {self.total} trials"
        if wall is not None:
            text += f" in {duration(wall)}"
        return text + (f" [ran on {self.data_fallback}]" if self.data_fallback else "")


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = round(max(0.0, seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


# ----------------------------------------------------------------------------- preparation
@dataclass
class DataPlan:
    """What the driver runs on: data set substitutions (fallbacks) and data sets skipped."""

    substitute: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # data set -> first line of the error
    #: trials (panel, curve, seed) left out because their leash data is missing
    skipped_trials: set[tuple] = field(default_factory=set)

    @property
    def note(self) -> str:
        """For the figures and the console; "" when every data set is the configured one."""
        parts = [
            f"{name} could be neither found nor downloaded; this profile ran on {fb} instead"
            for name, fb in sorted(self.substitute.items())
        ]
        return "; ".join([*parts, self.skip_note] if self.skipped else parts)

    @property
    def skip_note(self) -> str:
        return "; ".join(
            f"{name} panels not run: {why}" for name, why in sorted(self.skipped.items())
        )


def check_data(trials: list[Trial], spec: SweepSpec, profile: str, data_root: Path) -> DataPlan:
    """Make sure every data set the trials use loads; plan the profile's fallbacks and skips.

    Mutates nothing: the caller re-expands with ``plan.substitute`` and drops the trials of
    ``plan.skipped``. Raises the data error when the profile allows neither.
    """
    prof = spec.profiles[profile]
    plan = DataPlan()
    for name in sorted({t.config.data.dataset for t in trials}):
        download = all(t.config.data.download for t in trials if t.config.data.dataset == name)
        try:
            load_dataset(name, root=data_root, download=download)
        except DatasetNotFoundError as err:
            fallback = prof.fallback_for(name)
            if fallback is not None:
                load_dataset(fallback, root=data_root, download=download)
                plan.substitute[name] = fallback
            elif prof.skip_missing_data:
                plan.skipped[name] = str(err).strip().splitlines()[0]
            else:
                raise
    weights = {
        t.config.model.resnet_weights_path
        for t in trials
        if t.config.model.name == "resnet18" and t.config.model.resnet_weights == "imagenet"
    }
    for path in sorted(weights, key=str):  # ImageNet ResNet-18 weights: once, in the driver
        from fedsweep.models.resnet import imagenet_weights_problem

        problem = imagenet_weights_problem(path)
        if problem is None:
            continue
        if not prof.skip_missing_data:
            raise SpecError(f"{spec.figure} [{profile}]: {problem}")
        key = "ImageNet ResNet-18 weights"
        plan.skipped.setdefault(key, problem.splitlines()[0])
        plan.skipped_trials.update(
            (t.panel, t.curve, t.seed)
            for t in trials
            if t.config.model.resnet_weights == "imagenet"
            and t.config.model.resnet_weights_path == path
        )
    for t in trials:  # the server's leash data (FedWalk): its folder and classes
        if not any(HOOKS[h].needs_public_data for h in t.config.hooks):
            continue
        if t.config.data.dataset in plan.skipped:
            continue
        problems = leash_problems(t.config.leash, t.config.data)
        if not problems:
            continue
        if not prof.skip_missing_data:
            raise SpecError(f"invalid config ({spec.figure}, {t.curve}):\n" + "\n".join(problems))
        key = f"leash data ({t.config.leash.source})"
        plan.skipped.setdefault(key, problems[0].strip())
        plan.skipped_trials.add((t.panel, t.curve, t.seed))
    return plan


def finished_hashes(client, hashes: set[str]) -> set[str]:
    """Config hashes (among ``hashes``) that already have a finished or diverged run (a sweep
    trial or a single ``fedsweep run``: both carry the ``fedsweep.config_hash`` tag)."""
    return set(done_runs_by_hash(client, hashes))


def finished_runs(client, hashes: set[str]) -> dict:
    """For each config hash (among ``hashes``) with a finished or diverged run, that run (the
    latest started, as the figures pick it)."""
    ids = done_runs_by_hash(client, hashes)
    runs = load_runs(client, (run_id for run_id, _ in ids.values()))
    return {h: runs[run_id] for h, (run_id, _) in ids.items() if run_id in runs}


def trial_runs(client, trials: list[Trial]) -> dict:
    """For each trial's config hash, its finished or diverged run: one tagged with that hash,
    else one tagged with the trial's legacy hash (``Trial.legacy_hash``: hashed, before
    2026-11-25, with base sections the trial does not use)."""
    runs = finished_runs(client, {h for t in trials for h in t.hashes})
    out = {}
    for t in trials:
        found = next((runs[h] for h in t.hashes if h in runs), None)
        if found is not None:
            out.setdefault(t.config_hash, found)
    return out


def finished_trials(client, trials: list[Trial]) -> set[str]:
    """The config hashes of ``trials`` that have a finished or diverged run (under their hash
    or their legacy hash)."""
    done = finished_hashes(client, {h for t in trials for h in t.hashes})
    return {t.config_hash for t in trials if done.intersection(t.hashes)}


# ------------------------------------------------------------------- figure membership
#: tag on every run a figure uses (its own trials and runs reused from other sweeps); the
#: value is the profile(s) it is used under, comma-separated (e.g. ``smoke``)
USED_BY = "fedsweep.used_by."


def used_by_tag(figure: str) -> str:
    return f"{USED_BY}{figure}"


def membership_filter(figure: str, profile: str) -> str:
    """The MLflow search string that lists every run ``figure`` uses under ``profile``, reused
    ones included (UI search box over all experiments, or ``mlflow.search_runs``)."""
    return f"tags.`{used_by_tag(figure)}` LIKE '%{profile}%'"


def record_membership(client, trials: list[Trial], figure: str, profile: str) -> list[tuple]:
    """Tag every finished run that ``trials`` use with ``fedsweep.used_by.<figure>``;
    returns ``[(trial, run), ...]`` in trial order (one entry per config hash)."""
    key = used_by_tag(figure)
    runs = trial_runs(client, trials)
    used, seen = [], set()
    for t in trials:
        run = runs.get(t.config_hash)
        if run is None or t.config_hash in seen:
            continue
        seen.add(t.config_hash)
        used.append((t, run))
        profiles = {p for p in run.data.tags.get(key, "").split(",") if p}
        if profile not in profiles:
            client.set_tag(run.info.run_id, key, ",".join(sorted(profiles | {profile})))
    return used


def membership_note(
    spec: SweepSpec, profile: str, experiment_id: str, used: list[tuple], experiments: dict
) -> str:
    """The parent sweep run's description (markdown): how to list the figure's runs, and a link
    to every run it reuses from another experiment."""
    reused = [(t, r) for t, r in used if r.info.experiment_id != experiment_id]
    search = membership_filter(spec.figure, profile)
    exp_ids = {experiment_id, *(r.info.experiment_id for _, r in used)}
    lines = [
        f"**{spec.title}**, profile `{profile}`: {len(used)} runs, "
        f"{len(used) - len(reused)} in this experiment, {len(reused)} reused from other "
        "experiments (a finished run with the same config hash).",
        "",
        "Every run of this figure, reused ones included: "
        f"[open them]({ui_search_path(exp_ids, search)}), or select their experiments in the "
        "experiment list, *Compare*, and search",
        f"``{search}``",
    ]
    if reused:
        lines += ["", "Reused runs:", ""]
        for t, r in reused:
            exp = experiments.get(r.info.experiment_id, r.info.experiment_id)
            link = ui_path(r.info.experiment_id, r.info.run_id)
            lines.append(f"- {t.run_name}: [{r.info.run_name or r.info.run_id}]({link}) ({exp})")
    return "\n".join(lines)


def find_parent_run(client, experiment_id: str, figure: str, profile: str) -> str | None:
    """The parent run of an earlier sweep of (figure, profile) in the figure's experiment."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=(
            "tags.`fedsweep.kind` = 'sweep' and "
            f"tags.`fedsweep.figure` = '{figure}' and tags.`fedsweep.profile` = '{profile}'"
        ),
        order_by=["attributes.start_time ASC"],
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


#: tag of a derived trial's run: the source run id(s) its values come from, comma-separated
DERIVED_FROM = "fedsweep.derived_from"


def trial_payload(
    trial: Trial,
    spec: SweepSpec,
    tracking_uri: str,
    experiment: str,
    parent_run_id: str,
    fail_at_round: int | tuple[int, str] | None = None,
    plugins: list | None = None,
    state_dir: str | Path | None = None,
) -> dict:
    """What ``fl_trial`` gets; ``state_dir``: the trial's checkpoint folder (None: none)."""
    cfg = trial.config.model_copy(deep=True)
    cfg.threads = max(1, math.floor(spec.resources.cpu))  # torch threads = CPUs Ray gives
    cfg.tracking.uri = tracking_uri
    cfg.tracking.experiment = experiment
    cfg.tracking.run_name = trial.run_name
    return {
        "trial_id": trial.trial_id,
        "config": cfg.model_dump(mode="json"),
        "parent_run_id": parent_run_id,
        "checkpoint_every": spec.checkpoint_every,
        # fault injection (tests): a round, or (round, "enospc") for a full file system
        "fail_at_round": fail_at_round[0] if isinstance(fail_at_round, tuple) else fail_at_round,
        "fail_with": fail_at_round[1] if isinstance(fail_at_round, tuple) else None,
        "state_dir": None if state_dir is None else str(state_dir),
        "plugins": [list(p) for p in plugins or []],  # --plugin modules, imported first
        # a derived trial's readable provenance, logged once as a param at run creation
        "params": {"derived_from": trial.derived_note} if trial.derived_from else {},
        "tags": {
            "mlflow.parentRunId": parent_run_id,
            "fedsweep.figure": trial.figure,
            "fedsweep.profile": trial.profile,
            "fedsweep.curve": trial.curve,
            "fedsweep.panel": trial.panel_id,
            "fedsweep.panel_label": trial.panel_label,
            used_by_tag(trial.figure): trial.profile,
            "fedsweep.seed": str(trial.seed),
            "fedsweep.config_hash": trial.config_hash,
            "fedsweep.trial_id": trial.trial_id,
            **({DERIVED_FROM: ",".join(trial.derived_from)} if trial.derived_from else {}),
        },
    }


# ------------------------------------------------------------------------ parent run
def experiment_description(spec: SweepSpec) -> str:
    """A figure's experiment description: the spec's title, and how to list all its runs."""
    return (
        f"{spec.title}\n\nEvery run this figure uses, reused ones included: search "
        f"``tags.`{used_by_tag(spec.figure)}` IS NOT NULL`` over all experiments "
        "(each sweep's parent run lists them for its profile)."
    )


def parent_tags(spec: SweepSpec, spec_path: Path, profile: str, plan: DataPlan) -> dict:
    return {
        "fedsweep.kind": "sweep",
        "fedsweep.figure": spec.figure,
        "fedsweep.profile": profile,
        "fedsweep.spec": str(spec_path),
        "fedsweep.profile_note": spec.profiles[profile].note,
        "fedsweep.data_note": plan.note,
        "fedsweep.skipped_data": plan.skip_note,
        "fedsweep.status": "running",
    }


def open_parent_run(
    client, experiment_id: str, spec: SweepSpec, profile: str, state: dict | None, tags: dict
) -> str:
    """The parent run of (figure, profile): an interrupted sweep's (its state file, when the
    run still exists in this store's experiment), else the one an earlier sweep created in the
    figure's experiment, else a new one. Re-running a sweep (e.g. after adding a curve)
    attaches the new children to the same parent."""
    parent_run_id = state.get("parent_run_id") if state else None
    if parent_run_id is not None:  # an interrupted sweep: keep its parent run (no duplicates)
        try:
            if client.get_run(parent_run_id).info.experiment_id != experiment_id:
                parent_run_id = None
        except Exception:  # deleted, or never in this store
            parent_run_id = None
    if parent_run_id is None:
        parent_run_id = find_parent_run(client, experiment_id, spec.figure, profile)
    if parent_run_id is None:
        name = f"sweep {spec.figure} [{profile}]"
        return client.create_run(experiment_id, run_name=name, tags=tags).info.run_id
    for key, value in tags.items():  # the notes of this sweep (data, profile) replace the old
        client.set_tag(parent_run_id, key, value)
    return parent_run_id


def close_parent_run(
    client,
    parent_run_id: str,
    experiment_id: str,
    spec: SweepSpec,
    profile: str,
    trials: list[Trial],
    errored: int,
) -> None:
    """Record which runs the figure uses (tags + the parent's description), set its status."""
    used = record_membership(client, trials, spec.figure, profile)
    names = {e.experiment_id: e.name for e in client.search_experiments()}
    note = membership_note(spec, profile, experiment_id, used, names)
    client.set_tag(parent_run_id, "mlflow.note.content", note)
    client.set_tag(parent_run_id, "fedsweep.status", "partial" if errored else "finished")
    client.set_terminated(parent_run_id, "FAILED" if errored else "FINISHED")


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
    data_dir: str | Path | None = None,
    overrides: dict | None = None,
    fail_at: dict[str, int | tuple[int, str]] | None = None,
    verbose: int = 1,
    echo=print,
    listener=None,
    wait: bool = False,
    plugins: list | None = None,
) -> SweepReport:
    """Run one sweep spec under ``profile``. ``fail_at`` (trial_id -> round, or -> (round,
    "enospc") for a full file system) injects crashes.

    One driver per (spec, profile, store) at a time: another one running raises
    :class:`SweepBusyError`, or with ``wait`` this one waits for it to end.

    ``verbose`` is Ray Tune's verbosity (0: silent, 1: its tables); ``echo`` receives the
    driver's own lines; ``listener`` (e.g. ``fedsweep.cli.sweep_console.SweepConsole``) gets
    ``begin(report)`` once the trials are scheduled, then Tune's trial events
    (``fedsweep.sweep.tune_events``). ``plugins``: the ``--plugin`` modules the driver imported
    (``fedsweep.plugins.load_plugins``' list), imported by every trial too."""
    bound_ray_connect(address)  # before anything imports ray
    spec_path = Path(spec_path).resolve()
    spec = load_spec(spec_path)
    data_root = resolve_data_root(data_dir)
    extra = {"data.root": str(data_root), **(overrides or {})}
    trials = expand(spec, profile, extra=extra)
    uri = resolve_tracking_uri(tracking_uri)
    check_tracking_uri(uri, write=True)  # before the data, MLflow and Ray
    if address is None:  # a cluster's workers may have the GPU this machine lacks
        for device in sorted({t.config.device for t in trials}):
            problem = device_problem(device)
            if problem:
                raise SpecError(f"{spec_path}: {problem}")
    if max_concurrent is not None and max_concurrent < 1:
        raise SpecError(f"max_concurrent: got {max_concurrent} (allowed: 1 or more, or None)")
    plan = check_data(trials, spec, profile, data_root)
    data_note = plan.note
    if data_note:
        echo(f"note: {data_note}")
    if plan.substitute:
        trials = expand(spec, profile, extra=extra, substitute=plan.substitute)
    runnable = [
        t
        for t in trials
        if t.config.data.dataset not in plan.skipped
        and (t.panel, t.curve, t.seed) not in plan.skipped_trials
    ]
    report = SweepReport(
        spec.figure,
        profile,
        len(trials),
        data_note=data_note,
        data_fallback=", ".join(sorted(set(plan.substitute.values()))) or None,
        unavailable=len(trials) - len(runnable),
    )
    trials = runnable
    if not trials:
        echo(f"{spec.figure} [{profile}]: no trial can run without its data; nothing to schedule")
        return report

    client = get_client(uri)
    experiment = spec.figure
    experiment_id = ensure_experiment(
        client, experiment, uri, description=experiment_description(spec), overwrite=True
    )
    storage = Path(storage_dir).resolve() if storage_dir else default_store_dir() / "ray_results"
    storage.mkdir(parents=True, exist_ok=True)
    tune_name = ray_experiment_name(spec.figure, profile, uri, spec_path)
    with driver_lock(storage / f"{tune_name}.driver", spec.figure, profile, uri, wait, echo):
        drive = _Drive(
            spec,
            spec_path,
            profile,
            plan,
            client,
            uri,
            experiment_id,
            storage,
            overrides or {},
            extra,
            tune_name,
            resume=resume,
            address=address,
            max_concurrent=max_concurrent,
            fail_at=fail_at or {},
            verbose=verbose,
            echo=echo,
            listener=listener,
            plugins=list(plugins or []),
        )
        return _run_locked(drive, trials, report)


#: suffix of the Ray experiment (and state file) of a sweep's derived stage
DERIVED_STAGE = "-derived"


@dataclass
class _Drive:
    """What the stages of one sweep share (while its driver lock is held)."""

    spec: SweepSpec
    spec_path: Path
    profile: str
    plan: DataPlan
    client: object
    uri: str
    experiment_id: str
    storage: Path
    overrides: dict  # the user's --set (recorded in the state file)
    extra: dict  # what ``expand`` got (--set and data.root): re-expanding derived trials
    tune_name: str  # stage 0's Ray experiment (the name of a sweep without derived curves)
    resume: bool
    address: str | None
    max_concurrent: int | None
    fail_at: dict
    verbose: int
    echo: object
    listener: object
    plugins: list = field(default_factory=list)  # [(module, root)], imported by every trial
    parent_run_id: str | None = None


def _run_locked(drive: _Drive, trials: list[Trial], report: SweepReport) -> SweepReport:
    """The part of :func:`run_sweep` that runs while holding the sweep's driver lock: stage 0
    (every ordinary trial, exactly as a spec without derived curves), then stage 1 (the
    derived trials, resolved from stage 0's runs, in a Ray experiment of their own)."""
    base = [t for t in trials if t.derive is None]
    derived = [t for t in trials if t.derive is not None]
    try:
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
            end_parent_run(drive.client, drive.parent_run_id, "killed" if killed else "failed")
        raise
    return report


def _resolve_stage(drive: _Drive, trials: list[Trial], report: SweepReport) -> list[Trial]:
    """The derived trials with their values computed from their sources' finished runs; those
    whose source has none (it failed) are counted in ``report.no_source`` and named."""
    from fedsweep.sweep.derive import DerivationError, resolve

    runs = trial_runs(drive.client, [t for t in trials if t.derive is None])

    def run_of(config_hash: str) -> str | None:
        run = runs.get(config_hash)
        return run.info.run_id if run is not None else None

    try:
        done = resolve(
            drive.spec,
            drive.profile,
            trials,
            run_of,
            drive.client,
            extra=drive.extra,
            substitute=drive.plan.substitute,
        )
    except DerivationError as err:
        raise SpecError(f"{drive.spec_path}: derived curves: {err}") from None
    report.no_source += len(done.missing)
    by_source: dict[str, list[str]] = {}
    for trial, source in done.missing:
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
) -> None:
    """Run one stage's ``trials`` (0: the ordinary ones, 1: the derived ones) in the stage's
    own Ray experiment and state file (``--resume`` restores each), adding its counts to
    ``report``. ``follow``: the number of derived trials stage 1 runs after stage 0; the last
    stage closes the parent run, recording ``members`` (every trial) as the figure's runs."""
    spec, profile, client, echo = drive.spec, drive.profile, drive.client, drive.echo
    storage = drive.storage
    final = not follow
    tune_name = drive.tune_name + (DERIVED_STAGE if stage else "")
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
    tags = parent_tags(spec, drive.spec_path, profile, drive.plan)
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

    from fedsweep.sweep.trial import disk_full

    path = storage / tune_name
    restore = drive.resume and state is not None
    replanned = bool(restore and stage and not _resumable(state, pending))
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
        check_resume_plan(state, pending, drive.overrides, spec.figure, profile)
        echo(f"resuming {path}")
    elif drive.resume:
        echo(f"note: {tune_name}: nothing to resume in {storage}; starting the trials afresh")
    elif state is not None:
        echo(
            f"note: {tune_name} was interrupted before; continuing its MLflow runs from "
            "round 0 (use --resume to continue from the trials' checkpoints)"
        )
    # Ray first: the parent run is opened only once Ray is up and can run the trials
    init_ray(drive.address)
    check_resources(spec, drive.spec_path)
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
            )
            for t in pending
        ]
        report.scheduled += len(payloads)
        echo(
            f"{spec.figure} [{profile}]: {len(trials)} {'derived ' if stage else ''}trials, "
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
        }
        if restore:  # the resumed trials are the old plan's: keep its record
            if "hashes" in state:
                new_state["hashes"] = sorted(set(state["hashes"]) | set(new_state["hashes"]))
            new_state["overrides"] = state.get("overrides", new_state["overrides"])
        results = _fit(
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
        )
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
        report.finished += finished
        errored = report.errored - errored_before
        interrupted = max(0, len(planned) - finished - errored)
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
        end_parent_run(client, parent_run_id, "killed" if killed else "failed")
        if full is not None:  # one line naming the cause, not a chain of tracebacks
            raise full.at(store_folder(drive.uri) or storage) from None
        raise
    if report.errored == errored_before:  # all in MLflow; Ray's copy of the checkpoints can go
        remove_inside(path, storage, missing_ok=True)


def _resumable(state: dict, pending: list[Trial]) -> bool:
    """Whether the interrupted plan (its state file) had every pending trial
    (``check_resume_plan``'s condition). In the derived stage a miss is no user error but a
    source that finished since: the stage runs the trials planned now, those the interrupted
    plan had from their checkpoints."""
    return "hashes" not in state or {t.config_hash for t in pending} <= set(state["hashes"])


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


def end_parent_run(client, parent_run_id: str, status: str) -> None:
    """Mark the parent run (and its children still RUNNING) ``killed`` or ``failed``: no run
    of an ended sweep stays RUNNING. Best effort: a store that fails here does not hide the
    error that ended the sweep."""
    mlflow_status = "KILLED" if status == "killed" else "FAILED"
    with contextlib.suppress(Exception):
        end_running_children(client, parent_run_id, status)
    with contextlib.suppress(Exception):
        client.set_tag(parent_run_id, "fedsweep.status", status)
        client.set_terminated(parent_run_id, mlflow_status)


def store_folder(tracking_uri: str) -> Path | None:
    """The folder of a sqlite store (None for other stores)."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(tracking_uri[len("sqlite:///") :]).parent
    return None


def end_running_children(client, parent_run_id: str, status: str) -> int:
    """End every child run of ``parent_run_id`` that is still RUNNING as ``status`` (``killed``:
    KILLED, else FAILED); returns how many."""
    mlflow_status = "KILLED" if status == "killed" else "FAILED"
    children = client.search_runs(
        [client.get_run(parent_run_id).info.experiment_id],
        filter_string=(
            f"tags.`mlflow.parentRunId` = '{parent_run_id}' and attributes.status = 'RUNNING'"
        ),
        max_results=5000,
    )
    for child in children:
        client.set_tag(child.info.run_id, "fedsweep.status", status)
        client.set_terminated(child.info.run_id, mlflow_status)
    return len(children)


# ------------------------------------------------------------- one driver per sweep
def ray_experiment_name(figure: str, profile: str, tracking_uri: str, spec_path: Path) -> str:
    """Ray Tune's experiment folder of a sweep: ``<figure>-<profile>-<key>``, the key a hash of
    the store's URI and the spec's path, so a sweep never resumes (or removes) the Ray state
    of the same figure in another store."""
    key = hashlib.sha256(f"{tracking_uri}\n{spec_path}".encode()).hexdigest()[:8]
    return f"{figure}-{profile}-{key}"


class SweepBusyError(RuntimeError):
    """Another driver runs this sweep (same spec, profile and store) right now."""


@contextlib.contextmanager
def driver_lock(path: Path, figure: str, profile: str, uri: str, wait: bool, echo):
    """Hold ``path`` (an exclusive ``flock``, released by the OS even on ``kill -9``) while
    driving a sweep; the file says who holds it. A second driver of the same sweep and store
    raises :class:`SweepBusyError` naming the running one, or with ``wait`` blocks until it
    ends. Without ``fcntl`` (Windows) there is no lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        yield
        return
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = _holder_text(handle.read())
            if not wait:
                raise SweepBusyError(
                    f"{figure} [{profile}] is already being swept into {uri} by {holder}; "
                    "a second driver would run the same trials again and remove the first "
                    "one's Ray state. Wait for it (or stop it), or pass --wait to start when "
                    "it has ended (its finished trials are then reused)."
                ) from None
            echo(f"waiting for {holder} to end its sweep of {figure} [{profile}]")
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "store": uri,
        }
        handle.write(json.dumps(info))
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _holder_text(text: str) -> str:
    try:
        info = json.loads(text)
        return f"PID {info['pid']} on {info['host']} (started {info['started']})"
    except (ValueError, KeyError, TypeError):
        return "another process (it has not written its PID yet)"


# ------------------------------------------------------------------ resume and Ray state
def read_state(state_path: Path, uri: str, echo) -> dict | None:
    """The state file of an interrupted sweep of this store, or None (no file, an unreadable
    one, or one written for another store: never resumed)."""
    if not state_path.is_file():
        return None
    try:
        state = json.loads(state_path.read_text())
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
    state: dict, pending: list[Trial], overrides: dict, figure: str, profile: str
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
        f"{k}: {old_sets.get(k, '(unset)')} -> {new_sets.get(k, '(unset)')}"
        for k in sorted(set(old_sets) | set(new_sets))
        if old_sets.get(k) != new_sets.get(k)
    ]
    what = "; ".join(changed) if changed else "the spec or its profile changed"
    raise ResumeMismatchError(
        f"--resume: {len(now - saved)} of the {len(now)} trials planned now for {figure} "
        f"[{profile}] are not among the interrupted sweep's (--set {what}). Resume with the "
        "same options as before, or run without --resume to start these trials afresh "
        "(finished runs are reused either way)."
    )


def check_resources(spec: SweepSpec, spec_path: Path) -> None:
    """Fail now, not with trials PENDING forever, when no Ray node can hold one trial's
    ``resources`` (CPUs and GPUs per trial) ; the message says what the cluster has."""
    import ray

    cpu, gpu = spec.resources.cpu, spec.resources.gpu
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    if any(n.get("CPU", 0) >= cpu and n.get("GPU", 0) >= gpu for n in nodes):
        return
    best = max(nodes, key=lambda n: (n.get("GPU", 0), n.get("CPU", 0)), default={})
    total_cpu = sum(n.get("CPU", 0) for n in nodes)
    total_gpu = sum(n.get("GPU", 0) for n in nodes)
    raise SpecError(
        f"{spec_path}: resources: each trial asks for cpu={cpu:g}, gpu={gpu:g}, but no Ray "
        f"node has that much (largest node: {best.get('CPU', 0):g} CPUs, "
        f"{best.get('GPU', 0):g} GPUs; {len(nodes)} node(s), {total_cpu:g} CPUs and "
        f"{total_gpu:g} GPUs in all). Lower resources.cpu / resources.gpu in the spec, or "
        "attach to a cluster that has them (--address)."
    )


class UnsafeRemovalError(RuntimeError):
    """A folder to remove that is not strictly inside the store's ray_results folder."""


def remove_inside(path: Path, root: Path, *, missing_ok: bool = False) -> None:
    """``shutil.rmtree(path)``, only when ``path`` resolves (symlinks followed) to a folder
    strictly inside ``root`` (the store's ray_results); anything else raises
    :class:`UnsafeRemovalError` and removes nothing."""
    root_real = Path(root).resolve()
    target = Path(path).resolve()
    if target == root_real or root_real not in target.parents:
        raise UnsafeRemovalError(
            f"refusing to remove {path} (resolves to {target}): not inside {root_real}"
        )
    if Path(path).is_symlink():  # inside, but a link: remove the link, not what it points to
        Path(path).unlink()
        return
    if not target.exists() and missing_ok:
        return
    shutil.rmtree(target, ignore_errors=missing_ok)


def trial_name(trial) -> str:
    """Ray's name for a trial: the MLflow run name (``α=0.3 · Case 2 · seed 1``)."""
    return trial.config["trial"]["config"]["tracking"]["run_name"]


def trial_dirname(trial) -> str:
    return f"trial_{trial.trial_id}"


class RayUnavailableError(RuntimeError):
    """The Ray cluster named by ``--address`` cannot be reached."""


#: seconds an ``--address`` has to accept a connection
RAY_CONNECT_TIMEOUT_S = 5.0


#: Ray's connection retries, bounded for ``--address``: 1 attempt of at most 5 s (+2 s for the
#: GCS RPC) instead of 20 attempts of ~41 s (820 s measured for a closed port, Ray 2.60). Read
#: by Ray at import time, so set only when ``ray`` is not imported yet.
RAY_CONNECT_ENV = {
    "RAY_NUM_REDIS_GET_RETRIES": "1",
    "RAY_py_gcs_connect_timeout_s": "5",
    "RAY_gcs_rpc_server_connect_timeout_s": "2",
}


def bound_ray_connect(address: str | None) -> None:
    """With ``--address``, make an unreachable cluster fail in ~10 s (user settings win)."""
    import sys

    if address and "ray" not in sys.modules:
        for key, value in RAY_CONNECT_ENV.items():
            os.environ.setdefault(key, value)


def check_ray_address(address: str) -> None:
    """Fail in seconds when nothing listens at a ``HOST:PORT`` / ``ray://HOST:PORT`` address
    (``ray.init`` would retry for minutes). ``auto`` and other forms are left to Ray."""
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), RAY_CONNECT_TIMEOUT_S).close()
    except OSError as err:
        why = (
            f"no answer within {RAY_CONNECT_TIMEOUT_S:g} s"
            if isinstance(err, TimeoutError)
            else (err.strerror or str(err))
        )
        raise RayUnavailableError(
            f"--address {address}: cannot reach a Ray cluster there ({why}); start one "
            "(ray start --head) or leave --address out to run on a local Ray"
        ) from None


def init_ray(address: str | None) -> bool:
    """Start (or attach to) Ray unless it runs already; True when this call started it."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:  # also when Ray is up already: never run on another cluster than the one named
        check_ray_address(address)
    if ray.is_initialized():
        return False
    kwargs = {"include_dashboard": False, "configure_logging": True, "logging_level": "WARNING"}
    with keep_sigterm_handler():
        _connect(ray, address, kwargs)
    return True


@contextlib.contextmanager
def keep_sigterm_handler():
    """``ray.init`` installs a C-level SIGTERM handler in the driver that aborts the process
    (exit -6, no clean-up); put back the Python handler that was there before (``fedsweep
    sweep`` turns SIGTERM into a graceful stop with every run marked KILLED)."""
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _connect(ray, address: str | None, kwargs: dict) -> None:
    if address:
        check_ray_address(address)
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, ValueError) as err:  # ValueError: ray:// without ray[client]
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise RayUnavailableError(f"--address {address}: {first}") from None
    else:
        ray.init(**kwargs)
        from fedsweep.sweep import ray_watchdog

        ray_watchdog.start()  # a kill -9 of this driver leaves no Ray process behind


def shutdown_ray() -> None:
    """Stop the Ray this process started (or detach from a cluster), if it runs: its last
    forwarded worker lines are printed now, not after the caller's console is done."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    from fedsweep.sweep import ray_watchdog

    ray_watchdog.stop()


def _fit(
    payloads,
    spec,
    storage: Path,
    tune_name: str,
    state_path: Path,
    state: dict,
    restore: bool,
    max_concurrent,
    verbose,
    report: SweepReport | None = None,
    listener=None,
    echo=None,
):
    """Run the trials with a fresh Ray Tune experiment; Ray must be up. With ``restore``
    (``--resume``) the trials' checkpoint folders (``TRIALS_DIR``) are kept and each trial goes
    on from its newest checkpoint; without, they are removed first. Ray's own experiment folder
    (``RAY_DIR``, its pickles included) is removed before the fit and never read: Ray restores
    nothing, a resumed sweep is a new experiment over the pending trials."""
    from ray import tune

    from fedsweep.sweep.trial import fl_trial
    from fedsweep.sweep.tune_events import TrialEvents, listening

    trainable = tune.with_resources(
        fl_trial, {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}
    )
    path = storage / tune_name
    if not restore and path.exists():  # a stale sweep folder: its checkpoints are not used
        remove_inside(path, storage)
    if (path / RAY_DIR).exists():  # an earlier fit's Ray experiment: never read back
        remove_inside(path / RAY_DIR, storage)
    tuner = tune.Tuner(
        trainable,
        param_space={"trial": tune.grid_search(payloads)},
        tune_config=tune.TuneConfig(
            max_concurrent_trials=max_concurrent,
            reuse_actors=True,
            trial_name_creator=trial_name,
            trial_dirname_creator=trial_dirname,
        ),
        run_config=tune.RunConfig(
            name=RAY_DIR,
            storage_path=str(path),
            # a retried trial goes on from its newest checkpoint, which it finds itself
            failure_config=tune.FailureConfig(max_failures=spec.max_failures),
            verbose=verbose,
            callbacks=[TrialEvents()],
        ),
    )
    (path / TRIALS_DIR).mkdir(parents=True, exist_ok=True)
    atomic.write_text(state_path, json.dumps(state))  # a --resume sees old or new, never half
    if listener is not None and report is not None:
        listener.begin(report)
    with listening(_Notes(listener, echo)):
        return tuner.fit()


class _Notes:
    """The listener of a fit: Tune's trial events go to ``listener``; a trial's warning (a
    checkpoint set aside) goes to ``listener.trial_note`` when it has one, else to ``echo``."""

    def __init__(self, listener, echo):
        self.listener, self.echo = listener, echo

    def trial_event(self, event, trials, trial) -> None:
        if self.listener is not None:
            self.listener.trial_event(event, trials, trial)

    def trial_note(self, trial, text: str) -> None:
        note = getattr(self.listener, "trial_note", None)
        if note is not None:
            note(trial, text)
        elif self.echo is not None:
            for line in text.splitlines():
                self.echo(f"warning: {trial}: {line}")
