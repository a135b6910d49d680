"""What every ``fedsweep`` command shares: option types, and one clean error path.

A bad input (config, spec, profile, figure id, filter) ends the command with exit code 2 and one
message on stderr, never a traceback: raise :class:`UsageError` (or let a ``ConfigError`` /
``SpecError`` escape) inside :func:`clean_errors`.
"""

from __future__ import annotations

import inspect
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperCommand, TyperGroup

from fedsweep.core.suggest import closest, did_you_mean  # noqa: F401  (re-exported)

#: exit codes of every command (``fedsweep --help`` lists them: :data:`EXIT_CODES_HELP`)
EXIT_OK = 0
#: a trial (sweep) or a figure (figures) failed, figures drew nothing, or the MLflow UI server
#: stopped on an error
EXIT_FAILED = 1
#: bad input: usage, config, spec, store (missing for a reading command, or broken), port...
EXIT_USAGE = 2
#: a data set that is neither found nor downloadable
EXIT_DATA = 3
#: ``fedsweep run`` ended with status diverged (a non-finite loss); the run is in MLflow
EXIT_DIVERGED = 4
#: 128 + the signal: Ctrl-C (130) or SIGTERM (143); the MLflow runs are marked KILLED
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

EXIT_CODES_HELP = (
    "Exit codes: 0 done (a sweep: every trial finished or diverged); 1 failed (a sweep trial, "
    "a figure, figures that drew nothing, the UI server, or an unexpected error); 2 bad input (option, config, spec, "
    "a missing or broken store, a busy port or sweep); 3 data set missing; 4 diverged "
    "(`fedsweep run`: a non-finite loss; the run is logged); 130 Ctrl-C; 143 SIGTERM."
)


class UsageError(ValueError):
    """A bad command-line input; the message says what was given and what is allowed."""


def fail(message: str, code: int = EXIT_USAGE) -> None:
    from fedsweep.tracking.credentials import redact

    typer.secho(redact(message), fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


#: the bad-input errors (module, class) that :func:`clean_errors` turns into one line, exit 2
_USAGE_ERRORS = (
    ("fedsweep.config.load", "ConfigError"),
    ("fedsweep.specs.model", "SpecError"),
    ("fedsweep.specs.seeds", "SeedsError"),
    ("fedsweep.tracking.uri", "TrackingUriError"),
    ("fedsweep.sweep.locking", "SweepBusyError"),
    ("fedsweep.sweep.locking", "ResumeMismatchError"),
    ("fedsweep.sweep.ray_backend", "RayUnavailableError"),
    ("fedsweep.plugins", "PluginError"),
    ("fedsweep.data.safe_files", "UnsafeDataFileError"),
)


def _loaded(pairs) -> tuple[type, ...]:
    """The classes of ``pairs`` whose modules are imported: an exception can only be of a class
    already imported, so the check imports nothing (importing them all up front cost every
    command torch's import, 1.2 s, before its first check)."""
    out = []
    for module, name in pairs:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            out.append(cls)
    return tuple(out)


@contextmanager
def clean_errors() -> Iterator[None]:
    """Turn the known bad-input errors into one red message and exit code 2 (3 for data, 1
    when Ray's local node does not come up)."""
    try:
        yield
    except Exception as err:
        if isinstance(err, (UsageError, *_loaded(_USAGE_ERRORS))):
            fail(str(err), EXIT_USAGE)
        if isinstance(err, _loaded([("fedsweep.data.datasets", "DatasetNotFoundError")])):
            fail(str(err), EXIT_DATA)
        if isinstance(err, _loaded([("fedsweep.sweep.ray_backend", "RayStartError")])):
            fail(str(err), EXIT_FAILED)  # nothing wrong with the input: Ray did not come up
        raise


def _fold_long_words() -> None:
    """typer's option table cuts a word longer than its help column with "…" (at 80 columns:
    ``sqlite:///<cwd>/mlruns/mlflo…``); fold such a word onto the next line instead, so no
    help text is lost. typer (pinned) builds each option's help as rich ``Text`` items in
    ``rich_utils._get_parameter_help``; tests/cli/test_cli_polish.py renders every command's
    help at 80 columns and fails if anything is cut again."""
    from rich.text import Text
    from typer import rich_utils

    build = rich_utils._get_parameter_help
    if getattr(build, "_fedsweep_folds", False):
        return

    def folded(*args, **kwargs):
        columns = build(*args, **kwargs)
        for item in getattr(columns, "renderables", []):
            if isinstance(item, Text):
                item.overflow = "fold"
        return columns

    folded._fedsweep_folds = True  # type: ignore[attr-defined]
    rich_utils._get_parameter_help = folded


_fold_long_words()


def complete_figure(incomplete: str) -> list[str]:
    """Shell completion of a figure argument: the ids of the specs in ./sweeps, or fedsweep's
    shipped ones where there is no ./sweeps (a spec's id is its file name)."""
    from fedsweep.specs.names import spec_paths

    return [p.stem for p in spec_paths() if p.stem.startswith(incomplete)]


def ui_hint(tracking_uri: str | None, store_option: str = "") -> str:
    """The command line that shows the runs in MLflow's UI: for a tracking server (team mode,
    ``http(s)://``) its own UI at its real address, which ``fedsweep ui`` cannot serve, else
    ``fedsweep ui`` (with ``store_option``, e.g. `` --tracking-uri URI``)."""
    from fedsweep.tracking.credentials import redact, scheme
    from fedsweep.tracking.uri import resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    if scheme(uri) in ("http", "https"):
        return f"open {redact(uri).rstrip('/')}/#/experiments  (the tracking server's MLflow UI)"
    return f"fedsweep ui{store_option}"


def check_figure_names(names: list[str] | None, sweeps_dir: Path) -> None:
    """Refuse a figure argument that names no spec (:class:`UsageError`, the nearest id or
    file) before a command's heavy imports: a typo costs the Python start, not torch's, Ray's,
    MLflow's and plotly's imports (``fedsweep.specs.names``)."""
    from fedsweep.specs.names import name_problem

    for name in names or []:
        problem = name_problem(name, sweeps_dir)
        if problem:
            raise UsageError(problem)


def check_store_exists(tracking_uri: str | None) -> None:
    """Refuse a local store that does not exist (:class:`UsageError`, the message reading
    commands give) before ``report``'s heavy imports: it never creates one, and a mistyped path
    costs the Python start, not torch's, plotly's and MLflow's imports and the specs'
    expansion. (``figures`` checks its options first, which needs them.)"""
    from fedsweep.tracking.uri import missing_store_message, resolve_tracking_uri, store_missing

    uri = resolve_tracking_uri(tracking_uri)
    if store_missing(uri):
        raise UsageError(missing_store_message(uri))


def figure_names(names: list[str] | None, sweeps_dir: Path) -> tuple[list[str], list[Path]]:
    """A command's figure arguments (ids or spec paths, :func:`fedsweep.specs.load.find_spec`)
    as (figure ids of ``sweeps_dir``'s specs, other spec files). A path to
    ``<sweeps_dir>/<id>.yaml`` is the id; an id is returned as given (the command checks it
    against the figures it knows, with a "did you mean")."""
    from fedsweep.specs.load import find_spec, looks_like_path
    from fedsweep.specs.names import figure_file, sweeps_home

    ids: list[str] = []
    files: list[Path] = []
    for name in names or []:
        if not looks_like_path(name) and not Path(name).is_file():
            path = figure_file(name, sweeps_dir)  # a shipped spec ./sweeps lacks: as its file
            if path is None or path.parent == sweeps_home(sweeps_dir):
                ids.append(name)
                continue
        path = find_spec(name, sweeps_dir)
        in_folder = sweeps_home(sweeps_dir) / f"{path.stem}.yaml"
        if in_folder.is_file() and in_folder.resolve() == path.resolve():
            ids.append(path.stem)
        else:
            files.append(path)
    return ids, files


def _plain_help(params: list) -> list:
    """typer 0.29 prints a ``<bool>`` placeholder after every flag (``--help`` included) and a
    type (``<file>``, ``<list[Path]>``) after arguments that already have a metavar: show
    neither. Options that take a value keep their metavar (``KEY=VALUE``, ``DIR``, ...)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""  # an empty metavar: nothing in the type column
        elif getattr(param, "param_type_name", "") == "argument" and param.metavar:
            param.display_type_rich = lambda ctx: None
    return params


_LIST_ITEM = re.compile(r"^(\s|[-*•] |\d+[.)] |\x08)")  # \x08: click's no-rewrap mark


def reflow(text: str | None) -> str | None:
    """A docstring as help text: its hard line breaks joined within each paragraph, so the
    terminal wraps it at its own width (typer 0.29 keeps the source's breaks, which at 80
    columns read as ragged half-lines). Paragraphs (blank lines), list items and indented
    lines keep their own line."""
    if not text:
        return text
    paragraphs = []
    for para in inspect.cleandoc(text).split("\n\n"):
        lines: list[str] = []
        for line in para.splitlines():
            if lines and not _LIST_ITEM.match(line):
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
            else:
                lines.append(line)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


class Command(TyperCommand):
    """A fedsweep command: typer's, with :func:`_plain_help` and :func:`reflow`
    (use ``app.command(cls=Command)``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.help = reflow(self.help)

    def get_params(self, ctx):
        return _plain_help(super().get_params(ctx))


class Group(TyperGroup):
    """The ``fedsweep`` group: typer's, with :func:`_plain_help` and :func:`reflow`
    (``typer.Typer(cls=Group)``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.help = reflow(self.help)

    def get_params(self, ctx):
        return _plain_help(super().get_params(ctx))


#: the profiles of a sweep spec (``paper``: the paper's settings; ``quick``: a 2-core laptop;
#: ``smoke``: 2-3 rounds, for tests). The value is a plain ``str``.
PROFILES = ("paper", "quick", "smoke")
#: ``--profile``'s value: one of PROFILES, checked by :func:`check_profile` (a plain ``str``
#: option, so a typo gets a did-you-mean rather than click's list of choices)
Profile = str


def check_profile(value: str | None) -> str | None:
    """``--profile``'s callback: the value, or the error naming the nearest profile."""
    if value is None or value in PROFILES:
        return value
    best = closest(value, list(PROFILES))
    hint = f"did you mean {best!r}? " if best else ""
    raise typer.BadParameter(f"got {value!r}; {hint}allowed: {', '.join(PROFILES)}")


ProfileOption = Annotated[
    Profile,
    typer.Option(
        "--profile",
        help="paper (the paper's settings), quick (a 2-core laptop) or smoke (2-3 rounds).",
        metavar="paper|quick|smoke",
        callback=check_profile,
    ),
]
#: ``--profile`` of a reading command: default, the profile the store's runs were swept at
ReadProfileOption = Annotated[
    Profile | None,
    typer.Option(
        "--profile",
        help="paper (the paper's settings), quick (a 2-core laptop) or smoke (2-3 rounds). "
        "Default: the profile of the store's newest sweep of these figures (printed).",
        show_default=False,
        metavar="paper|quick|smoke",
        callback=check_profile,
    ),
]

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        metavar="KEY=VALUE",
        help="Override one config value, dotted key=YAML value, e.g. --set bherd.alpha=0.3 "
        "--set data.partition=case2. Repeatable.",
    ),
]
PanelOption = Annotated[
    list[str] | None,
    typer.Option(
        "--panel",
        metavar="AXIS=ID",
        help="Run only the panels with this value of a panel axis, e.g. --panel setting=svm-mnist "
        "(the figure's other panels are drawn as not run); AXIS=ID1,ID2 or repeated for several "
        "values, several axes all apply.",
    ),
]
SeedsOption = Annotated[
    str | None,
    typer.Option(
        "--seeds",
        metavar="SEEDS",
        help="Seeds instead of the profile's, in every panel: a count (10: seeds 0-9), a range "
        "(0-9) or a list (0,1,5 or 0-4,7). More seeds of the same configs: the runs of the seeds "
        "the profile has are reused.",
        show_default=False,
    ),
]
MaxConcurrentOption = Annotated[
    int | None,
    typer.Option(metavar="K", help="At most K trials at once (default: as resources allow)."),
]
ConfigArg = Annotated[
    Path,
    typer.Argument(
        help="Run config YAML (see configs/).", exists=False, dir_okay=False, metavar="CONFIG"
    ),
]
PluginOption = Annotated[
    list[str] | None,
    typer.Option(
        "--plugin",
        metavar="MODULE",
        help="Import this Python module first (it registers your own parts, e.g. a FedVeca "
        "tau rule; a sweep's trials import it too). A config only names registered parts and "
        "never imports code. Repeatable.",
    ),
]
TrackingUriOption = Annotated[
    str | None,
    typer.Option(
        metavar="URI",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else "
        "sqlite:///<cwd>/mlruns/mlflow.db).",
    ),
]
DataDirOption = Annotated[
    str | None,
    typer.Option(
        metavar="DIR",
        help="Data folder in torchvision's layout (overrides data.root and $FEDSWEEP_DATA_DIR).",
    ),
]


@contextmanager
def on_sigterm(handler) -> Iterator[None]:
    """While inside, SIGTERM (a scheduler, ``timeout``, ``docker stop``) calls
    ``handler(signum, frame)``; the previous handler is restored on the way out. Outside the
    main thread (no signal handlers there) this does nothing."""
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
