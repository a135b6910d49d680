"""The Ray Tune fit of one stage of a sweep (:func:`fit_trials`): what it needs is one
:class:`FitRequest`; the trials run in a fresh Tune experiment, their credentials handed over
through Ray's object store, Tune's trial events forwarded to the sweep's console
(:class:`_Notes`). Ray must be up (``ray_backend.init_ray``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from fedsweep.core import atomic
from fedsweep.specs.load import SweepSpec
from fedsweep.sweep.ray_backend import (
    RAY_DIR,
    TRIALS_DIR,
    plain_trial_workers,
    remove_inside,
    secrets_kept_from_ray,
    trial_dirname,
    trial_name,
)
from fedsweep.sweep.report import SweepReport
from fedsweep.tracking.outage import relay_sigint


@dataclass(frozen=True)
class FitRequest:
    """One stage's fit: its trials, where Tune keeps them, the state file, how to run them."""

    payloads: list[dict]  # ``ray_backend.trial_payload``'s, one per trial
    spec: SweepSpec  # its resources (per trial) and max_failures
    storage: Path  # the sweep's folder of Ray experiments (ray_results, or --storage)
    tune_name: str  # the stage's Ray experiment: ``storage / tune_name``
    state_path: Path  # the stage's state file, written before the fit
    state: dict  # what it holds (``--resume`` checks it)
    restore: bool  # --resume: keep the trials' checkpoint folders (else removed first)
    max_concurrent: int | None = None
    verbose: int = 1  # Ray Tune's verbosity
    report: SweepReport | None = None  # counts the restarts; handed to ``listener.begin``
    listener: object = None  # the sweep's console (``tune_events``), or None
    echo: object = None  # the driver's lines, or None
    #: variables the trials need besides the tracking credentials (an object storage's),
    #: handed over with them
    env: dict | None = None
    #: Tune's trial scheduler (``sweep.early_stop.EarlyStopByGroup`` for search trials that
    #: declare one; None: FIFO)
    scheduler: object = None


def fit_trials(request: FitRequest):
    """Run the request's trials with a fresh Ray Tune experiment; Ray must be up. With
    ``restore`` (``--resume``) the trials' checkpoint folders (``TRIALS_DIR``) are kept and each
    trial goes on from its newest checkpoint; without, they are removed first. Ray's own
    experiment folder (``RAY_DIR``, its pickles included) is removed before the fit and never
    read: Ray restores nothing, a resumed sweep is a new experiment over the pending trials."""
    from ray import tune

    from fedsweep.sweep.trial import fl_trial
    from fedsweep.tracking.credentials import secret_env

    with secrets_kept_from_ray() as held, plain_trial_workers():
        secrets = {**secret_env(), **held, **(request.env or {})}
        # credentials reach trials on other nodes through Ray's object store, never through a
        # trial's config (which Ray writes to disk) nor its runtime_env (which Ray logs):
        # fedsweep.tracking.credentials, secrets_kept_from_ray
        function = tune.with_parameters(fl_trial, secrets=secrets) if secrets else fl_trial
        return _fit(function, request)


def _fit(function, request: FitRequest):
    from ray import tune

    from fedsweep.sweep.tune_events import TrialEvents, listening

    spec, storage = request.spec, request.storage
    trainable = tune.with_resources(
        function, {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}
    )
    path = storage / request.tune_name
    if not request.restore and path.exists():  # a stale sweep folder: its checkpoints unused
        remove_inside(path, storage)
    if (path / RAY_DIR).exists():  # an earlier fit's Ray experiment: never read back
        remove_inside(path / RAY_DIR, storage)
    tuner = tune.Tuner(
        trainable,
        param_space={"trial": tune.grid_search(request.payloads)},
        tune_config=tune.TuneConfig(
            max_concurrent_trials=request.max_concurrent,
            reuse_actors=True,
            scheduler=request.scheduler,
            trial_name_creator=trial_name,
            trial_dirname_creator=trial_dirname,
        ),
        run_config=tune.RunConfig(
            name=RAY_DIR,
            storage_path=str(path),
            # a retried trial goes on from its newest checkpoint, which it finds itself
            failure_config=tune.FailureConfig(max_failures=spec.max_failures),
            verbose=request.verbose,
            callbacks=[TrialEvents()],
        ),
    )
    (path / TRIALS_DIR).mkdir(parents=True, exist_ok=True)
    # a --resume sees old or new, never half
    atomic.write_text(request.state_path, json.dumps(request.state))
    listener, report = request.listener, request.report
    if listener is not None and report is not None:
        listener.begin(report)
    with listening(_Notes(listener, request.echo, report)):
        return tuner.fit()


class _Notes:
    """The listener of a fit: Tune's trial events go to ``listener``; a trial's note goes to
    ``listener.trial_note`` when it has one, else to ``echo`` (``warning:`` unless the note
    says ``note:``). Faults get one line each and are counted in ``report``: a trial that
    Ray restarts (``recover``: it goes on from its newest checkpoint) and a Ray node lost
    (polled every :data:`NODE_POLL_S` seconds of Tune's loop)."""

    def __init__(self, listener, echo, report: SweepReport | None = None):
        self.listener, self.echo, self.report = listener, echo, report
        self._nodes: dict[str, str] | None = None  # alive node id -> address
        self._polled = 0.0

    def trial_event(self, event, trials, trial) -> None:
        # Tune's SIGINT handler (installed for the fit) first makes the clean-up brief, as
        # SIGTERM does: a Ctrl-C during an outage spent MLflow's retries, minutes, on it
        relay_sigint()
        if event == "recover" and trial is not None:
            if self.report is not None:
                self.report.restarts += 1
            why = _first_error_line(trial)
            self._say(
                f"note: trial {trial} failed{f' ({why})' if why else ''}; Ray restarts it, "
                "from its newest checkpoint"
            )
        if event == "step":
            self._watch_nodes()
        if self.listener is not None:
            self.listener.trial_event(event, trials, trial)

    def _watch_nodes(self) -> None:
        import time

        now = time.monotonic()
        if now - self._polled < NODE_POLL_S:
            return
        self._polled = now
        try:
            import ray

            alive = {
                n["NodeID"]: n.get("NodeManagerAddress", "?") for n in ray.nodes() if n.get("Alive")
            }
        except Exception:  # noqa: BLE001 - a display must never stop a sweep
            return
        if self._nodes is not None:
            for node_id, address in self._nodes.items():
                if node_id not in alive:
                    self._say(
                        f"note: Ray node {address} ({node_id[:8]}) was lost; its trials restart "
                        f"on the other nodes from their checkpoints ({len(alive)} node(s) left)"
                    )
        self._nodes = alive

    def _say(self, text: str) -> None:
        if self.echo is not None:
            self.echo(text)

    def trial_note(self, trial, text: str) -> None:
        note = getattr(self.listener, "trial_note", None)
        if note is not None:
            note(trial, text)
        elif self.echo is not None:
            for line in text.splitlines():
                if line.startswith("note: "):
                    self.echo(f"note: {trial}: {line[len('note: ') :]}")
                else:
                    self.echo(f"warning: {trial}: {line}")


#: seconds between two looks at the Ray cluster's nodes during a fit
NODE_POLL_S = 5.0


def _first_error_line(trial) -> str:
    """The last line of a Tune trial's error (the exception), or "" when Ray has none yet."""
    try:
        text = trial.get_error() if hasattr(trial, "get_error") else None
        if not text and getattr(trial, "error_file", None):
            text = Path(trial.error_file).read_text()
        lines = [ln for ln in str(text or "").strip().splitlines() if ln.strip()]
        return lines[-1].strip()[:200] if lines else ""
    except Exception:  # noqa: BLE001
        return ""
