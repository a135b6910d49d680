"""``fedsweep ui``: the MLflow web UI for the project's store."""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Annotated

import typer

from fedsweep.cli.common import TrackingUriOption


def ui(
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 5000,
    host: Annotated[
        str, typer.Option(metavar="HOST", help="Interface to bind (loopback by default).")
    ] = "127.0.0.1",
    tracking_uri: TrackingUriOption = None,
) -> None:
    """Serve the MLflow web UI for the project's store on http://HOST:PORT."""
    from fedsweep.tracking.store import prepare_store, resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    prepare_store(uri)
    exe = shutil.which("mlflow") or sys.executable
    cmd = [exe] if exe != sys.executable else [exe, "-m", "mlflow"]
    cmd += ["ui", "--backend-store-uri", uri, "--host", host, "--port", str(port)]
    typer.echo(f"MLflow UI for {uri} at http://{host}:{port}  (Ctrl-C to stop)")
    raise typer.Exit(subprocess.call(cmd))
