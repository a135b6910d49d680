"""``fedsweep report``: one reproduction report per paper, from the runs in MLflow."""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import (
    EXIT_FAILED,
    PluginOption,
    ReadProfileOption,
    SeedsOption,
    TrackingUriOption,
    UsageError,
    check_figure_names,
    check_store_exists,
    clean_errors,
    complete_figure,
    fail,
    figure_names,
)


def report(
    profile: ReadProfileOption = None,
    out: Annotated[
        str | None,
        typer.Option(
            metavar="DIR",
            help="Where the reports go: <paper>.md (<id>.md for a study of your own), "
            "claims-<profile>.json (other figures' rows there are kept). Default: "
            "docs/reproduction, or the folder of the study files named by --figure.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace a file in --out that this report did not make (or a report there "
            "that holds figures it does not judge), and a claims file instead of merging.",
        ),
    ] = False,
    figure: Annotated[
        list[str] | None,
        typer.Option(
            "--figure",
            metavar="ID|PATH",
            help="Only these figures: ids or spec files (a study of your own, its claims "
            "declared: docs/how-to/own-claims.md; default: every spec of --sweeps-dir).",
            autocompletion=complete_figure,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Also print the claims as JSON (one object per claim)."),
    ] = False,
    seeds: SeedsOption = None,
    level: Annotated[
        float,
        typer.Option(
            metavar="LEVEL",
            help="Confidence level of the intervals that decide (default 0.95); `sweep "
            "--until-decided` prints the level its sequential rule used.",
            min=0.5,
            max=0.9999,
        ),
    ] = 0.95,
    tracking_uri: TrackingUriOption = None,
    sweeps_dir: Annotated[
        Path, typer.Option(metavar="DIR", help="Where the sweep specs live.")
    ] = Path("sweeps"),
    plugin: PluginOption = None,
) -> None:
    """Write one reproduction report per paper, with a verdict per claim.

    Every figure and claim of the profile, what ran (runs, seeds, regime), the effect with its 95% interval over seeds, the verdict
    (supported, contradicted, inconclusive, not-testable) and a link to the figure; plus
    claims-<profile>.json. Reads the store only (never runs anything). Exit status 1 when a
    figure could not be built, 2 for bad input or a store that does not exist."""
    with clean_errors():
        check_figure_names(figure, sweeps_dir)  # a typo: before the heavy imports
        from fedsweep.specs.seeds import parse_seeds

        seed_list = parse_seeds(seeds)  # a bad value: before the store is read
        check_store_exists(tracking_uri)  # so is a store that does not exist
        from dashboards import FigureSelectionError, build_figures
        from dashboards.build import FigureBuildWarning
        from dashboards.registry import REPORT_SECTIONS
        from dashboards.report import build_meta, write_report
        from fedsweep.core.atomic import OutputWriteError
        from fedsweep.judge.stats import confidence
        from fedsweep.plugins import load_plugins
        from fedsweep.tracking.uri import resolve_tracking_uri

        figure, files = figure_names(figure, sweeps_dir)
        out_dir = report_folder(default_out(files) if out is None else out)
        load_plugins(plugin)
        uri = resolve_tracking_uri(tracking_uri)
        # a spec file outside --sweeps-dir (a researcher's own study, its claims declared):
        # reported beside the folder's figures; its claims checked before the store is read
        from fedsweep.judge.check import claim_problem
        from fedsweep.specs.claims import profile_claim_problem
        from fedsweep.specs.load import expand, load_spec, spec_paths, sweeps_home

        studies = [load_spec(path) for path in files]
        for path, study in zip(files, studies, strict=True):
            problem = claim_problem(study.claims)
            if problem:
                raise UsageError(f"{path}: {problem}")
        if profile is None:
            from fedsweep.cli.figures import store_profile

            profile = store_profile(uri, figure, files)
        for path, study in zip(files, studies, strict=True):
            problem = profile_claim_problem(
                study.claims, profile, study, lambda s=study: expand(s, profile)
            )
            if problem:
                raise UsageError(f"{path}: {problem}")
        from dashboards.report import ReportConflict, report_conflicts, report_files

        ids = figure if figure or files else [p.stem for p in spec_paths(sweeps_dir)]
        try:  # before the store is read; write_report checks again before it writes
            with confidence(level):
                report_conflicts(
                    out_dir, report_files([*ids, *(s.figure for s in studies)], profile), force
                )
        except ReportConflict as err:
            raise UsageError(str(err)) from None
        try:
            with confidence(level), tempfile.TemporaryDirectory(prefix="fedsweep-report-") as tmp:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FigureBuildWarning)
                    results = build_figures(
                        uri,
                        profile=profile,
                        out_dir=tmp,
                        figures=figure or None,
                        sweeps_dir=sweeps_dir,
                        png=False,
                        spec_files=files,
                        require_store=True,
                        seeds=seed_list,
                    )
                    # the specs' labelled readings of the papers beside each figure as
                    # configured, claim by claim (dashboards.readings; issue 35)
                    from dashboards.readings import add_reading_tables

                    add_reading_tables(results, uri, profile, sweeps_dir)

                    # a paper's extra block (FedVeca: its verdicts under R1 against our
                    # reconstruction's damped variant [U], issue 35), from the same store
                    def rebuild(ids: list[str], overrides: dict) -> list:
                        return build_figures(
                            uri,
                            profile=profile,
                            out_dir=Path(tmp) / "again",
                            figures=ids,
                            sweeps_dir=sweeps_dir,
                            png=False,
                            overrides=overrides,
                            require_store=True,
                        )

                    for add_section in REPORT_SECTIONS.values():
                        add_section(results, rebuild, uri, profile, sweeps_dir)
            with confidence(level):
                meta = build_meta(profile, sweeps_home(sweeps_dir).resolve())
                files, rows = write_report(results, out_dir, meta, force=force)
        except (FigureSelectionError, ReportConflict) as err:
            raise UsageError(str(err)) from None
        except OutputWriteError as err:
            fail(str(err), EXIT_FAILED)
    if as_json:
        typer.echo(json.dumps(rows, indent=1, ensure_ascii=False))
    else:
        for path in files:
            typer.echo(f"report: {path}")
    failed = [r.figure_id for r in results if r.error]
    if failed:
        typer.secho(f"{len(failed)} figure(s) failed: {', '.join(failed)}", fg="red", err=True)
        raise typer.Exit(EXIT_FAILED)


def default_out(files: list[Path]) -> str:
    """``--out`` left out: beside the study files named by ``--figure`` (a study of your own
    is reported next to it, never into the repository's docs/reproduction/), else
    docs/reproduction."""
    folders = sorted({str(p.resolve().parent) for p in files})
    if len(folders) > 1:
        raise UsageError(
            f"--out: the studies lie in {len(folders)} folders ({', '.join(folders)}); allowed: "
            "--out DIR, the folder their reports go to"
        )
    return folders[0] if folders else "docs/reproduction"


def report_folder(out: str) -> Path:
    """``--out`` as a folder the reports can be written to, checked without creating it
    (:func:`fedsweep.core.atomic.folder_problem`). The option is a plain string because a
    ``Path`` turns ``--out ''`` into ``.``, which wrote the reports into the current folder."""
    from fedsweep.core.atomic import FOLDER_ALLOWED, folder_problem

    if not out.strip():
        raise UsageError(f"--out {out!r}: empty ({FOLDER_ALLOWED}, e.g. docs/reproduction)")
    problem = folder_problem(out, "--out")
    if problem:
        raise UsageError(problem)
    return Path(out)
