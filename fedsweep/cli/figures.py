"""``fedsweep figures``: redraw figures from the runs in MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import ProfileOption, TrackingUriOption


def figures(
    figure: Annotated[
        list[str] | None,
        typer.Option("--figure", metavar="ID", help="Figure id(s); default: every figure."),
    ] = None,
    out: Annotated[
        Path, typer.Option(metavar="DIR", help="Output folder (HTML, PNG, index.html).")
    ] = Path("figures"),
    profile: ProfileOption = "quick",
    tracking_uri: TrackingUriOption = None,
    sweeps_dir: Annotated[
        Path, typer.Option(metavar="DIR", help="Where the sweep specs live.")
    ] = Path("sweeps"),
) -> None:
    """Redraw paper figures from the runs in MLflow (mean ± std over seeds), as offline HTML
    and PNG, plus an index.html that checks each of the paper's claims against the data."""
    from dashboards import build_figures
    from fedsweep.tracking.store import resolve_tracking_uri

    results = build_figures(
        resolve_tracking_uri(tracking_uri),
        profile=profile,
        out_dir=out,
        figures=figure or None,
        sweeps_dir=sweeps_dir,
    )
    for res in results:
        typer.echo(f"{res.figure_id}: {res.run_count} runs -> {out}")
    typer.echo(f"index: {(out / 'index.html').resolve()}")
