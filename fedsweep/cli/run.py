"""``fedsweep run`` and ``fedsweep validate``: one run config."""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import (
    EXIT_DIVERGED,
    EXIT_FAILED,
    ConfigArg,
    DataDirOption,
    PluginOption,
    SetOption,
    TrackingUriOption,
    clean_errors,
    fail,
    on_sigterm,
)
from fedsweep.cli.early import refuse_run_early
from fedsweep.core.shipped import resolve_shipped

SUMMARY_WIDTH = 100
#: exit status of ``fedsweep run`` stopped by SIGTERM (128 + 15, as a shell reports a process
#: ended by that signal): the MLflow run is recorded KILLED first, as for Ctrl-C
EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler, ``timeout``, ``docker stop``) during ``fedsweep run``: a
    KeyboardInterrupt, so the tracking layer ends the MLflow run KILLED exactly as for Ctrl-C."""


#: seconds a SIGTERM during training waits for the end of the round before it interrupts
TERM_GRACE_S = 2.0


class TermSignal:
    """SIGTERM or Ctrl-C during ``fedsweep run`` ends the run at a safe point: during training
    at the end of the round, after its metrics are written (an exception inside an MLflow write
    leaves the sqlite store locked, and the KILLED status could not be written), or after
    :data:`TERM_GRACE_S` when the round takes longer; before training, at once. SIGTERM raises
    :class:`Terminated` (a second one is ignored), Ctrl-C KeyboardInterrupt (a second one at
    once)."""

    def __init__(self) -> None:
        self.pending: type[BaseException] | None = None
        self.in_loop = False

    def on_signal(self, signum, frame) -> None:
        exc = Terminated if signum == signal.SIGTERM else KeyboardInterrupt
        if signum == signal.SIGTERM:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the KILLED status be written
        if not self.in_loop or self.pending is not None or not hasattr(signal, "setitimer"):
            self.pending = None
            raise exc()
        self.pending = exc
        signal.signal(signal.SIGALRM, self._late)
        signal.setitimer(signal.ITIMER_REAL, TERM_GRACE_S)

    def _late(self, signum, frame) -> None:
        self.check(timer=False)

    def done(self) -> None:
        """Training is over: drop a pending signal and its timer."""
        if self.pending is not None:
            self.pending = None
            signal.setitimer(signal.ITIMER_REAL, 0)
        self.in_loop = False

    def check(self, timer: bool = True) -> None:
        """At a round boundary (or when the grace time is over): raise what is pending."""
        exc, self.pending = self.pending, None
        if exc is not None:
            if timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
            raise exc()


@contextmanager
def sigterm_as_interrupt() -> Iterator[TermSignal]:
    """While inside, SIGTERM and Ctrl-C end the run at a safe point (:class:`TermSignal`; the
    caller reports round boundaries to it); see :func:`fedsweep.cli.common.on_sigterm`."""
    term = TermSignal()
    try:
        previous_int = signal.signal(signal.SIGINT, term.on_signal)
    except ValueError:  # not the main thread
        previous_int = None
    try:
        with on_sigterm(term.on_signal):
            yield term
    finally:
        if previous_int is not None:
            signal.signal(signal.SIGINT, previous_int)


def _load(
    config: Path,
    overrides: list[str] | None,
    data_dir: str | None,
    tracking_uri: str | None,
    plugins: list[str] | None = None,
):
    """The validated config; a bad one raises ConfigError (callers wrap in ``clean_errors``).
    ``plugins``: the ``--plugin`` modules, imported first (they register parts a config names)."""
    from fedsweep.config.load import load_config, parse_overrides
    from fedsweep.plugins import load_plugins

    load_plugins(plugins)

    sets = parse_overrides(overrides)
    if data_dir:
        sets["data.root"] = str(Path(data_dir).resolve())
    if tracking_uri:
        sets["tracking.uri"] = tracking_uri
    return load_config(config, sets)


def _check_runnable(cfg) -> None:
    """What only the machine decides, before any data or MLflow: the device exists, the
    tracking store can be written. Raises ConfigError / TrackingUriError (one sentence)."""
    from fedsweep.config.load import ConfigError
    from fedsweep.core.device import device_problem
    from fedsweep.tracking.uri import check_tracking_uri, resolve_tracking_uri

    problem = device_problem(cfg.device)
    if problem:
        raise ConfigError(problem)
    if cfg.tracking.enabled:
        # a password in the URI moves into the environment here; the run's logger records the
        # clean URI (tracking.run_logger: nothing logs or prints the password)
        check_tracking_uri(resolve_tracking_uri(cfg.tracking.uri), write=True)


def _num(value: float) -> str:
    """4 decimals, or 4 significant digits for huge values (a diverging loss), or nan/inf."""
    if not math.isfinite(value) or abs(value) < 1e4:
        return f"{value:.4f}"
    return f"{value:.4g}"


def summary_lines(tracked, wall: float, training: float) -> list[str]:
    """The run's summary within 80 columns: status, rounds and the final test metrics; the wall
    time since the command started, the training time and the train loss; the run id; then
    the store (its path is as long as it is) and the next steps."""
    res = tracked.result
    final = res.final
    head = [f"status={res.status}", f"rounds={res.rounds}"]
    for key in ("test_acc", "test_loss"):
        if key in final:
            head.append(f"{key}={_num(final[key])}")
    lines = ["fedsweep run: " + " ".join(head)]
    detail = [f"time={wall:.1f}s", f"training={training:.1f}s"]
    if "train_loss" in final:
        detail.append(f"train_loss={_num(final['train_loss'])}")
    lines.append("  " + " ".join(detail))
    if tracked.run_id:
        lines.append(f"  mlflow_run_id={tracked.run_id}")
    if getattr(tracked, "blowup", None):
        lines.append(f"  loss blew up (finite, tag fedsweep.loss_blowup): {tracked.blowup}")
    if tracked.run_id:
        lines.append(f"  store={tracked.tracking_uri}")
        lines += next_steps(tracked.run_id, tracked.tracking_uri)
    return lines


def next_steps(run_id: str, tracking_uri: str | None) -> list[str]:
    """What to do with a finished run: its curves without the UI, or the UI."""
    from fedsweep.tracking.uri import resolve_tracking_uri

    store = ""  # the store the commands find by themselves (./mlruns or $MLFLOW_TRACKING_URI)
    if tracking_uri and tracking_uri != resolve_tracking_uri(None):
        from fedsweep.tracking.credentials import redact

        store = f" --tracking-uri {redact(tracking_uri)}"
    from fedsweep.cli.common import ui_hint

    ui = ui_hint(tracking_uri, store)
    return [
        f"next: fedsweep compare {run_id}{store}  (its curves)",
        f"      {ui}" + ("" if ui.startswith("open ") else "  (every run in the MLflow UI)"),
    ]


def run(
    config: ConfigArg,
    set_: SetOption = None,
    data_dir: DataDirOption = None,
    tracking_uri: TrackingUriOption = None,
    no_track: Annotated[bool, typer.Option("--no-track", help="Do not log to MLflow.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            metavar="NAME",
            help="MLflow run name. Default: the config's name, or with --set overrides a name "
            "built from them, e.g. 'bherd-fedavg svm mnist case2 α=0.3'.",
        ),
    ] = None,
    plugin: PluginOption = None,
) -> None:
    """Run one FL experiment: train, evaluate every round, log everything to MLflow.

    Exit status 0 when the run finished, 4 when it diverged (a non-finite loss; the run is
    logged with status diverged), 2 for bad input, 3 for a missing data set, 1 for a full disk
    (one line naming where; the run is marked FAILED). Ctrl-C or SIGTERM ends the MLflow run as
    KILLED (tag fedsweep.status=killed) and exits 130 or 143."""
    started = time.perf_counter()
    config = resolve_shipped(config, "configs")  # configs/x.yaml from any folder
    try:
        with sigterm_as_interrupt() as term:
            tracked, wall, training = _run(
                config, set_, data_dir, tracking_uri, no_track, quiet, name, started, term, plugin
            )
    except Terminated:
        typer.echo("fedsweep run: terminated (SIGTERM); the MLflow run is marked KILLED", err=True)
        raise typer.Exit(EXIT_TERMINATED) from None
    except typer.Exit:
        raise
    except Exception as err:
        full = _disk_full(err, tracking_uri)
        if full is None:
            raise
        fail(full, EXIT_FAILED)
    for line in summary_lines(tracked, wall, training):
        typer.echo(line)
    if tracked.result.status == "diverged":  # logged, but not a success: scripts must see it
        raise typer.Exit(EXIT_DIVERGED)


def _disk_full(err: BaseException, tracking_uri: str | None) -> str | None:
    """One line for a run stopped by a full file system (``ENOSPC``, or SQLite's "database or
    disk is full" from the store), naming where; None for any other error. The run itself was
    ended FAILED by its abort (a status update needs no new space). Imports nothing for an
    error that is no full disk (the sweep module imports torch)."""
    import errno

    stack, seen, full = [err], set(), False
    while stack and not full:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        full = isinstance(e, OSError) and e.errno == errno.ENOSPC
        full = full or "disk is full" in str(e).lower()
        stack += [e.__cause__, e.__context__]
    if not full:
        return None
    from fedsweep.sweep.trial import disk_full

    error = disk_full(err)
    if error is None:
        return None
    if not error.path:
        from fedsweep.tracking.uri import resolve_tracking_uri, sqlite_path

        db = sqlite_path(resolve_tracking_uri(tracking_uri))
        error = error.at(db.parent if db is not None else Path.cwd())
    return (
        f"fedsweep run: {error}; free space there, or name another store (--tracking-uri); "
        "a run that had started is marked FAILED"
    )


def _run(
    config, set_, data_dir, tracking_uri, no_track, quiet, name, started, term=None, plugins=None
):
    """The body of ``fedsweep run``: (TrackedResult, wall time, training time)."""
    from fedsweep.cli.progress import RunProgress

    progress = RunProgress(enabled=not quiet, start=started)
    # clean_errors outside the progress: the status line is gone before an error is printed
    with clean_errors(), progress:
        progress.stage("reading the config")
        # an unknown key, a bad tracking URI: refused before torch's and MLflow's imports
        refuse_run_early(config, set_, data_dir, tracking_uri, no_track)
        cfg = _load(config, set_, data_dir, tracking_uri, plugins)
        if no_track:
            cfg.tracking.enabled = False
        from fedsweep.config.load import parse_overrides
        from fedsweep.tracking.naming import run_name

        _check_runnable(cfg)
        cfg.name = name or cfg.tracking.run_name or run_name(cfg, parse_overrides(set_))
        cfg.tracking.run_name = cfg.name
        progress.rounds = cfg.train.rounds

        from fedsweep.tracking.tracked_run import run_tracked

        term = term or TermSignal()

        def on_start(run, run_id):
            progress.on_start(run, run_id)
            term.in_loop = True

        def on_round(t, metrics, result):
            progress.on_round(t, metrics, result)
            term.check()  # a SIGTERM during this round ends the run here

        tracked = run_tracked(cfg, on_start=on_start, on_round=on_round, on_stage=progress.stage)
        term.done()  # a SIGTERM after the last round: the run has finished anyway
    return tracked, progress.wall, progress.training


def _refuse_sweep_spec(config: Path) -> None:
    """``fedsweep validate`` on a sweep spec: one UsageError pointing to ``fedsweep sweep``
    (instead of an "unknown key" line for each of the spec's keys). A file that cannot be read
    is left to :func:`_load`, which names the problem."""
    from fedsweep.cli.common import UsageError
    from fedsweep.config.yamlio import YamlBoundsError, YamlFileError, read_yaml

    try:
        tree = read_yaml(config, "config file") if config.is_file() else None
    except YamlBoundsError as err:  # too large to read twice: refused here, before the imports
        raise UsageError(str(err)) from None
    except (YamlFileError, RecursionError):
        return
    from fedsweep.specs.load import sweep_spec_keys
    from fedsweep.specs.names import sweep_spec_refusal

    refusal = sweep_spec_refusal(config, tree, "validate") if sweep_spec_keys(tree) else None
    if refusal:
        raise UsageError(refusal)


def validate(config: ConfigArg, set_: SetOption = None, plugin: PluginOption = None) -> None:
    """Validate a config (with overrides), print it resolved, its config hash and OK.

    Defaults are filled in; only the sections the config's algorithm and selector use are
    printed (plus the general ones: data, model, train, eval, tracking)."""
    import yaml

    config = resolve_shipped(config, "configs")  # configs/x.yaml from any folder
    with clean_errors():
        _refuse_sweep_spec(config)  # first: a file refused for its size costs no heavy import
        cfg = _load(config, set_, None, None, plugin)
    from fedsweep.components.compose import config_sections, method_label
    from fedsweep.specs.load import config_hash

    tree = cfg.model_dump(mode="json")
    sections = config_sections(cfg)
    shown = {k: v for k, v in tree.items() if not isinstance(v, dict) or k in sections}
    hidden = [k for k, v in tree.items() if isinstance(v, dict) and k not in sections]
    typer.echo(yaml.safe_dump(shown, sort_keys=False).rstrip())
    if hidden:
        typer.echo(f"# not used by {method_label(cfg)}: {', '.join(hidden)}")
    typer.echo(f"config hash: {config_hash(cfg)}")
    typer.echo("OK")
