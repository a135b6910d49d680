"""``fedsweep bundle``: one figure's evidence as one archive; ``fedsweep verify``: check such an
archive on another machine (``dashboards.bundle``; docs/how-to/bundles.md)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    DataDirOption,
    PluginOption,
    ReadProfileOption,
    TrackingUriOption,
    UsageError,
    check_figure_names,
    check_store_exists,
    clean_errors,
    complete_figure,
    fail,
)


def bundle(
    figure: Annotated[
        str,
        typer.Argument(
            metavar="FIGURE",
            help="A figure id (bherd-fig4e: a spec in --sweeps-dir) or a spec file.",
            autocompletion=complete_figure,
        ),
    ],
    profile: ReadProfileOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help="The archive to write (default: <figure>-<profile>.fedsweep.tar.gz here); "
            "a folder: that file in it.",
        ),
    ] = None,
    png: Annotated[
        bool, typer.Option("--png", help="Also bundle the figure as PNG (needs Chromium).")
    ] = False,
    tracking_uri: TrackingUriOption = None,
    sweeps_dir: Annotated[
        Path, typer.Option(metavar="DIR", help="Where the sweep specs live.")
    ] = Path("sweeps"),
    plugin: PluginOption = None,
) -> None:
    """Write a figure's evidence as one archive another lab can check with `fedsweep verify`.

    The archive holds the spec (its extends chain resolved), every run's config, config hash
    and metric history, the claims with their verdicts, the figure and this machine's
    environment, each member's SHA-256 in its manifest. Reads the store only. Exit status 1
    when the figure has no runs or could not be built, 2 for bad input or a store that does
    not exist."""
    with clean_errors():
        check_figure_names([figure], sweeps_dir)  # a typo: before the heavy imports
        check_store_exists(tracking_uri)
        from dashboards.bundle import bundle_name, make_bundle
        from fedsweep.core.atomic import OutputWriteError
        from fedsweep.plugins import load_plugins
        from fedsweep.specs.load import find_spec, load_spec
        from fedsweep.tracking.uri import resolve_tracking_uri

        load_plugins(plugin)
        uri = resolve_tracking_uri(tracking_uri)
        path = find_spec(figure, sweeps_dir)
        if profile is None:
            from fedsweep.cli.figures import store_profile

            profile = store_profile(uri, [], [path])
        name = bundle_name(load_spec(path).figure, profile)
        target = out if out is not None else Path(name)
        if target.is_dir():
            target = target / name
        if not target.parent.is_dir():
            raise UsageError(f"--out {target}: its folder {target.parent} does not exist")
        try:
            written, manifest = make_bundle(path, profile, uri, target, png=png)
        except OutputWriteError as err:
            fail(str(err), EXIT_FAILED)
        except ValueError as err:
            if type(err) is not ValueError:
                raise
            fail(str(err), EXIT_FAILED)
    typer.echo(
        f"bundle: {written} ({manifest['figure']} at --profile {profile}: {manifest['runs']} "
        f"runs of {manifest['expected_runs']}, seeds {manifest['seeds']})"
    )
    typer.echo(f"check it anywhere: fedsweep verify {written}")


def verify(
    bundle_path: Annotated[
        Path,
        typer.Argument(metavar="BUNDLE", help="A bundle written by `fedsweep bundle`."),
    ],
    sample: Annotated[
        int,
        typer.Option(
            metavar="K",
            min=0,
            help="Rerun K trials drawn at random (0: none, only the verdicts; all of them "
            "when K is at least their count).",
        ),
    ] = 3,
    seed: Annotated[
        int | None,
        typer.Option(
            metavar="S",
            min=0,
            help="Draw the trials with this seed (default: a new one, printed, so the same "
            "draw can be repeated).",
            show_default=False,
        ),
    ] = None,
    data_dir: DataDirOption = None,
    plugin: PluginOption = None,
) -> None:
    """Check a bundle: its members' SHA-256s, its verdicts rebuilt from its run table, and K
    sampled trials rerun here and compared metric by metric, round by round.

    Bit-identical where this machine's torch build and CPU capability are the bundle's, else
    within a tolerance per metric (docs/how-to/bundles.md). A mismatch names the trial, the
    metric and the first round that differs. Exit status 0 when everything matched, 1 on a
    mismatch, 2 for a bad or tampered bundle (the member is named)."""
    with clean_errors():
        from fedsweep.core.archive import BundleError

        try:
            from dashboards.bundle import read_bundle

            loaded = read_bundle(bundle_path)
        except BundleError as err:
            fail(str(err), EXIT_USAGE)
        from fedsweep.plugins import load_plugins

        load_plugins(plugin)
        seed = secrets.randbelow(10**6) if seed is None else seed
        _print_head(loaded)
        from dashboards.bundle import environment, same_build, verify_bundle

        exact = same_build(environment(), loaded.environment)
        typer.echo(
            "environment: "
            + (
                "the bundle's torch build and CPU capability: metrics must be bit-identical"
                if exact
                else f"differs from the bundle's ({_env_text(loaded.environment)}; here "
                f"{_env_text(environment())}): metrics within tolerance"
            )
        )
        typer.echo(
            f"trials: rerunning {min(sample, _count(loaded))} of {_count(loaded)} with --seed "
            f"{seed} (repeat: fedsweep verify {bundle_path} --sample {sample} --seed {seed})"
        )
        try:
            check = verify_bundle(loaded, sample, seed, data_dir=data_dir, on_trial=_print_trial)
        except BundleError as err:
            fail(str(err), EXIT_USAGE)
    typer.echo("verdicts rebuilt from the bundle's run table:")
    for row in check.claims:
        mark = "match" if row.matched else "MISMATCH"
        typer.echo(f"  {row.key}: bundle {row.bundled}, rebuilt {row.rebuilt}  {mark}")
    if not check.claims:
        typer.echo("  (the figure declares no claims)")
    problems = check.mismatches
    for problem in problems:
        typer.secho(f"mismatch: {problem.text}", fg=typer.colors.RED, err=True)
    trials = len(check.sampled)
    matched = sum(t.mismatch is None for t in check.sampled)
    claims = sum(c.matched for c in check.claims)
    summary = f"{matched} of {trials} trials and {claims} of {len(check.claims)} claims matched"
    if problems:
        typer.secho(f"verify: {summary}: {len(problems)} mismatch(es)", fg="red", err=True)
        raise typer.Exit(EXIT_FAILED)
    typer.echo(f"verify: all matched ({summary})")


def _count(loaded) -> int:
    from dashboards.bundle import unique_runs

    return len(unique_runs(loaded.runs))


def _print_head(loaded) -> None:
    m = loaded.manifest
    typer.echo(
        f"bundle {loaded.path}: {loaded.figure} at --profile {loaded.profile}, "
        f"{len(loaded.runs)} runs, seeds {m.get('seeds')}, made {m.get('created')} by fedsweep "
        f"{m.get('fedsweep_version')} (commit {m.get('git_commit')})"
    )
    typer.echo(f"members: {len(loaded.members)} match the manifest's SHA-256")


def _env_text(env: dict) -> str:
    t = env.get("torch") or {}
    return f"torch {t.get('version')}, CPU capability {t.get('cpu_capability')}"


def _print_trial(result) -> None:
    from dashboards.bundle import trial_label

    run = result.run
    mark = "match" if result.mismatch is None else "MISMATCH"
    typer.echo(
        f"  {trial_label(run)} ({run['config_hash'][:12]}): {result.metrics} metrics x "
        f"{result.rounds} rounds  {mark}"
    )
