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
from fedsweep.sweep.spec import SweepSpec, Trial, expand, load_spec
from fedsweep.tracking.store import (
    default_store_dir,
    ensure_experiment,
    get_client,
    resolve_tracking_uri,
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
    """Config hashes (among ``hashes``) that already have a finished or diverged run."""
    return {
        h for run in done_runs(client) if (h := run.data.tags.get("fedsweep.config_hash")) in hashes
    }


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
    cfg.tracking.run_name = f"{trial.curve} | {trial.panel_id} | seed {trial.seed}"
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
            "fedsweep.seed": str(trial.seed),
            "fedsweep.config_hash": trial.config_hash,
            "fedsweep.trial_id": trial.trial_id,
        },
    }


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
    plan = check_data(trials, spec, profile, data_root)
    data_note = plan.note
    if data_note:
        echo(f"note: {data_note}")
    if plan.substitute:
        trials = expand(spec, profile, extra=extra, substitute=plan.substitute)
    runnable = [t for t in trials if t.config.data.dataset not in plan.skipped]
    note = spec.profiles[profile].note
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

    uri = resolve_tracking_uri(tracking_uri)
    client = get_client(uri)
    experiment = spec.figure
    experiment_id = ensure_experiment(client, experiment, uri)
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
    if not pending:
        echo(
            f"{spec.figure} [{profile}]: all {len(trials)} runnable trials already have a "
            "finished run; nothing to schedule"
        )
        return report

    parent_run_id = None
    if state_path.is_file():  # an interrupted sweep: keep its parent run (no duplicate runs)
        parent_run_id = json.loads(state_path.read_text())["parent_run_id"]
        if not resume:
            echo(
                f"note: {tune_name} was interrupted before; continuing its MLflow runs from "
                "round 0 (use --resume to continue from the trials' checkpoints)"
            )
    if parent_run_id is None:
        parent = client.create_run(
            experiment_id,
            run_name=f"sweep {spec.figure} [{profile}]",
            tags={
                "fedsweep.kind": "sweep",
                "fedsweep.figure": spec.figure,
                "fedsweep.profile": profile,
                "fedsweep.spec": str(spec_path),
                "fedsweep.profile_note": note,
                "fedsweep.data_note": data_note,
                "fedsweep.skipped_data": plan.skip_note,
                "fedsweep.status": "running",
            },
        )
        parent_run_id = parent.info.run_id
    else:
        client.update_run(parent_run_id, status="RUNNING")
    report.parent_run_id = parent_run_id

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
    client.set_tag(
        parent_run_id, "fedsweep.status", "finished" if not report.errored else "partial"
    )
    client.set_terminated(parent_run_id, "FINISHED" if not report.errored else "FAILED")
    if not report.errored:  # everything is in MLflow; Ray's copy of the checkpoints can go
        shutil.rmtree(storage / tune_name, ignore_errors=True)
    return report


def trial_name(trial) -> str:
    """Ray's name for a trial: the fedsweep identity without the figure/profile prefix."""
    tags = trial.config["trial"]["tags"]
    return f"{tags['fedsweep.curve']} | {tags['fedsweep.panel']} | seed {tags['fedsweep.seed']}"


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
            shutil.rmtree(path)
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
