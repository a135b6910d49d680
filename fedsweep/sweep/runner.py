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
5. run the remaining trials with ``ray.tune.Tuner`` (or ``Tuner.restore`` with ``--resume``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from fedsweep.data.datasets import DatasetNotFoundError, load_dataset, resolve_data_root
from fedsweep.engine.device import device_problem
from fedsweep.sweep.spec import SpecError, SweepSpec, Trial, expand, load_spec
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
    return plan


def done_runs(client):
    """Every run whose ``fedsweep.status`` is finished or diverged (both are results), all
    experiments. MLflow's search has no ``IN`` for tags, hence one query per status."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    for status in ("finished", "diverged"):
        token = None
        while True:
            page = client.search_runs(
                experiments,
                filter_string=f"tags.`fedsweep.status` = '{status}'",
                max_results=5000,
                page_token=token,
            )
            yield from page
            token = page.token
            if not token:
                break


def finished_hashes(client, hashes: set[str]) -> set[str]:
    """Config hashes (among ``hashes``) that already have a finished or diverged run (a sweep
    trial or a single ``fedsweep run``: both carry the ``fedsweep.config_hash`` tag)."""
    return set(finished_runs(client, hashes))


def finished_runs(client, hashes: set[str]) -> dict:
    """For each config hash (among ``hashes``) with a finished or diverged run, that run (the
    latest started, as the figures pick it)."""
    out: dict = {}
    for run in done_runs(client):
        h = run.data.tags.get("fedsweep.config_hash")
        if h in hashes:
            old = out.get(h)
            if old is None or (run.info.start_time or 0) >= (old.info.start_time or 0):
                out[h] = run
    return out


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
    runs = finished_runs(client, {t.config_hash for t in trials})
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


def trial_payload(
    trial: Trial,
    spec: SweepSpec,
    tracking_uri: str,
    experiment: str,
    parent_run_id: str,
    fail_at_round: int | None = None,
) -> dict:
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
        "fail_at_round": fail_at_round,
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
    client, experiment_id: str, spec: SweepSpec, profile: str, state_path: Path, tags: dict
) -> str:
    """The parent run of (figure, profile): an interrupted sweep's (its state file), else the
    one an earlier sweep created in the figure's experiment, else a new one. Re-running a sweep
    (e.g. after adding a curve) attaches the new children to the same parent."""
    parent_run_id = None
    if state_path.is_file():  # an interrupted sweep: keep its parent run (no duplicate runs)
        parent_run_id = json.loads(state_path.read_text())["parent_run_id"]
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
    fail_at: dict[str, int] | None = None,
    verbose: int = 1,
    echo=print,
    listener=None,
) -> SweepReport:
    """Run one sweep spec under ``profile``. ``fail_at`` (trial_id -> round) injects crashes.

    ``verbose`` is Ray Tune's verbosity (0: silent, 1: its tables); ``echo`` receives the
    driver's own lines; ``listener`` (e.g. ``fedsweep.cli.sweep_console.SweepConsole``) gets
    ``begin(report)`` once the trials are scheduled, then Tune's trial events
    (``fedsweep.sweep.tune_events``)."""
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
    runnable = [t for t in trials if t.config.data.dataset not in plan.skipped]
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
    tune_name = f"{spec.figure}-{profile}"
    state_path = storage / tune_name / STATE_FILE

    done = finished_hashes(client, {t.config_hash for t in trials})
    report.skipped = sum(t.config_hash in done for t in trials)
    # Trials with equal configs share one run (e.g. a pooled centralized baseline drawn in
    # every Case panel): schedule each config once.
    unique: dict[str, Trial] = {}
    for t in trials:
        if t.config_hash not in done:
            unique.setdefault(t.config_hash, t)
    pending = list(unique.values())
    report.shared = len(trials) - report.skipped - len(pending)
    parent_run_id = open_parent_run(
        client,
        experiment_id,
        spec,
        profile,
        state_path,
        parent_tags(spec, spec_path, profile, plan),
    )
    report.parent_run_id = parent_run_id
    if not pending:
        close_parent_run(client, parent_run_id, experiment_id, spec, profile, trials, errored=0)
        echo(
            f"{spec.figure} [{profile}]: all {len(trials)} runnable trials already have a "
            "finished run; nothing to schedule"
        )
        return report

    if state_path.is_file() and not resume:
        echo(
            f"note: {tune_name} was interrupted before; continuing its MLflow runs from "
            "round 0 (use --resume to continue from the trials' checkpoints)"
        )
    client.update_run(parent_run_id, status="RUNNING")

    fail_at = fail_at or {}
    payloads = [
        trial_payload(t, spec, uri, experiment, parent_run_id, fail_at.get(t.trial_id))
        for t in pending
    ]
    report.scheduled = len(payloads)
    echo(
        f"{spec.figure} [{profile}]: {len(trials)} trials, {report.skipped} already finished, "
        f"scheduling {len(payloads)} (parent MLflow run {parent_run_id})"
        + (f"; {report.shared} share a run with an equal trial" if report.shared else "")
    )

    results = _fit(
        payloads,
        spec,
        storage,
        tune_name,
        state_path,
        parent_run_id,
        resume,
        address,
        max_concurrent,
        verbose,
        echo,
        report,
        listener,
    )
    for res in results:
        if res.error is not None:
            report.errored += 1
            report.errors.append(f"{res.config['trial']['trial_id']}: {res.error}")
        else:
            report.finished += 1
    close_parent_run(
        client, parent_run_id, experiment_id, spec, profile, trials, errored=report.errored
    )
    if not report.errored:  # everything is in MLflow; Ray's copy of the checkpoints can go
        remove_inside(storage / tune_name, storage, missing_ok=True)
    return report


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


def init_ray(address: str | None) -> bool:
    """Start (or attach to) Ray unless it runs already; True when this call started it."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return False
    kwargs = {"include_dashboard": False, "configure_logging": True, "logging_level": "WARNING"}
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(**kwargs)
    return True


def shutdown_ray() -> None:
    """Stop the Ray this process started (or detach from a cluster), if it runs: its last
    forwarded worker lines are printed now, not after the caller's console is done."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _fit(
    payloads,
    spec,
    storage: Path,
    tune_name: str,
    state_path: Path,
    parent_run_id: str,
    resume: bool,
    address,
    max_concurrent,
    verbose,
    echo,
    report: SweepReport | None = None,
    listener=None,
):
    from ray import tune

    from fedsweep.sweep.trial import fl_trial
    from fedsweep.sweep.tune_events import TrialEvents, listening

    init_ray(address)
    trainable = tune.with_resources(
        fl_trial, {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}
    )
    path = storage / tune_name
    if resume and tune.Tuner.can_restore(str(path)):
        echo(f"resuming {path}")
        # the restored run config brings back its own (stateless) TrialEvents callback
        tuner = tune.Tuner.restore(
            str(path), trainable=trainable, resume_unfinished=True, resume_errored=True
        )
    else:
        if path.exists():  # a stale Ray experiment of the same name: start its schedule afresh
            remove_inside(path, storage)
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
                name=tune_name,
                storage_path=str(storage),
                failure_config=tune.FailureConfig(max_failures=spec.max_failures),
                checkpoint_config=tune.CheckpointConfig(num_to_keep=2),
                verbose=verbose,
                callbacks=[TrialEvents()],
            ),
        )
    path.mkdir(parents=True, exist_ok=True)
    state_path.write_text(json.dumps({"parent_run_id": parent_run_id}))
    if listener is not None and report is not None:
        listener.begin(report)
    with listening(listener):
        return tuner.fit()
