"""``fedsweep run`` and ``fedsweep validate``: one run config."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import (
    ConfigArg,
    DataDirOption,
    SetOption,
    TrackingUriOption,
    clean_errors,
)


def _load(
    config: Path, overrides: list[str] | None, data_dir: str | None, tracking_uri: str | None
):
    from fedsweep.config.load import load_config, parse_overrides

    with clean_errors():
        sets = parse_overrides(overrides)
        if data_dir:
            sets["data.root"] = str(Path(data_dir).resolve())
        if tracking_uri:
            sets["tracking.uri"] = tracking_uri
        return load_config(config, sets)


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
) -> None:
    """Run one FL experiment: train, evaluate every round, log everything to MLflow."""
    cfg = _load(config, set_, data_dir, tracking_uri)
    if no_track:
        cfg.tracking.enabled = False
    from fedsweep.config.load import parse_overrides
    from fedsweep.tracking.naming import run_name

    cfg.name = name or cfg.tracking.run_name or run_name(cfg, parse_overrides(set_))
    cfg.tracking.run_name = cfg.name

    from fedsweep.cli.progress import RunProgress
    from fedsweep.tracking.tracked_run import run_tracked

    progress = RunProgress(cfg.train.rounds, enabled=not quiet)
    with clean_errors(), progress:
        tracked = run_tracked(cfg, on_start=progress.on_start, on_round=progress.on_round)
    res = tracked.result
    final = res.final
    parts = [f"status={res.status}", f"rounds={res.rounds}"]
    for key in ("train_loss", "test_loss", "test_acc"):
        if key in final:
            parts.append(f"{key}={final[key]:.4f}")
    parts.append(f"time={progress.elapsed:.1f}s")
    if tracked.run_id:
        parts.append(f"mlflow_run_id={tracked.run_id}")
        parts.append(f"store={tracked.tracking_uri}")
    typer.echo("fedsweep run: " + " ".join(parts))


def validate(config: ConfigArg, set_: SetOption = None) -> None:
    """Validate a config (with overrides) and print it fully resolved, defaults included."""
    import yaml

    cfg = _load(config, set_, None, None)
    typer.echo(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
