"""``fedsweep sweep``: sweep specs as Ray Tune trials, each an MLflow child run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import (
    DataDirOption,
    ProfileOption,
    SetOption,
    TrackingUriOption,
    clean_errors,
    fail,
)


def sweep(
    specs: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[SPEC]...",
            help="Sweep spec YAML file(s). Default: every spec in sweeps/ that this "
            "code can run (the others are listed with the reason).",
        ),
    ] = None,
    profile: ProfileOption = "quick",
    address: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="Attach to an existing Ray cluster (e.g. 'auto' or 'ray://HOST:10001'); "
            "default: start a local Ray.",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Continue an interrupted sweep (checkpoints, same MLflow runs)."
        ),
    ] = False,
    max_concurrent: Annotated[
        int | None,
        typer.Option(metavar="K", help="At most K trials at once (default: as resources allow)."),
    ] = None,
    set_: SetOption = None,
    data_dir: DataDirOption = None,
    tracking_uri: TrackingUriOption = None,
    sweeps_dir: Annotated[
        Path, typer.Option(metavar="DIR", help="Where specs live (for the default).")
    ] = Path("sweeps"),
) -> None:
    """Run sweep specs as Ray Tune trials (grid x seeds), each trial an MLflow child run.

    Trials whose config already has a finished run are skipped, so re-running a finished sweep
    schedules nothing."""
    from fedsweep.config.load import parse_overrides
    from fedsweep.sweep.runner import run_sweep
    from fedsweep.sweep.spec import SpecError, load_spec, spec_paths

    with clean_errors():
        overrides = parse_overrides(set_)
        if specs:
            for path in specs:  # validate every named spec before anything runs
                load_spec(path)
        else:
            specs = []
            for path in spec_paths(sweeps_dir):
                try:
                    load_spec(path)
                    specs.append(path)
                except SpecError as err:
                    reason = str(err).splitlines()[-1].strip()
                    typer.echo(f"skipping {path}: this code cannot run it yet ({reason})")
            if not specs:
                fail(f"no runnable sweep spec in {sweeps_dir}")
    failed = False
    notes: set[str] = set()

    def echo_once(text: str) -> None:
        if text.startswith("note: ") and text in notes:
            return
        notes.add(text)
        typer.echo(text)

    for path in specs:
        start = time.perf_counter()
        with clean_errors():
            report = run_sweep(
                path,
                profile,
                address=address,
                resume=resume,
                max_concurrent=max_concurrent,
                tracking_uri=tracking_uri,
                data_dir=data_dir,
                overrides=overrides,
                echo=echo_once,
            )
        wall = time.perf_counter() - start
        typer.echo(f"fedsweep sweep: {report.line()} ({wall:.0f} s)")
        for line in report.errors:
            typer.secho(f"  errored: {line}", fg=typer.colors.RED, err=True)
        failed |= bool(report.errored)
    raise typer.Exit(1 if failed else 0)
