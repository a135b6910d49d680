"""``fedsweep figures``: redraw figures from the runs in MLflow."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import (
    EXIT_FAILED,
    PluginOption,
    ReadProfileOption,
    SeedsOption,
    SetOption,
    TrackingUriOption,
    UsageError,
    check_figure_names,
    clean_errors,
    complete_figure,
    fail,
    figure_names,
)

FORMAT_CHOICES = ("png", "pdf", "svg")


def figures(
    figure: Annotated[
        list[str] | None,
        typer.Option(
            "--figure",
            metavar="ID|PATH",
            help="A figure id (bherd-fig3a: a spec in --sweeps-dir) or a spec file; "
            "repeatable. Default: every spec there (or only the --spec files when given).",
            autocompletion=complete_figure,
        ),
    ] = None,
    spec: Annotated[
        list[Path] | None,
        typer.Option(
            "--spec",
            metavar="PATH",
            help="Draw this sweep spec (any file, e.g. your own study outside sweeps/) with "
            "the generic layout, or its paper builder for a paper figure id. Repeatable.",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option(metavar="DIR", help="Output folder (HTML, images, index.html).")
    ] = Path("figures"),
    profile: ReadProfileOption = None,
    band: Annotated[
        str,
        typer.Option(
            metavar="std|sem|none",
            help="Band around the seed mean: std (±1 standard deviation), sem (±1 standard "
            "error) or none.",
        ),
    ] = "std",
    diff_from: Annotated[
        str | None,
        typer.Option(
            metavar="LABEL",
            help="Draw every curve minus this curve's seed mean (per panel and round), e.g. "
            "--diff-from 'FedAvg (RR)'.",
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            metavar="KEY",
            help="Metric(s) to draw instead of the spec's, e.g. --metric train_loss, or "
            "--metric 'client/{i}/dist' for Fig. 4d's ÷k_i form. Repeatable.",
        ),
    ] = None,
    image_format: Annotated[
        list[str] | None,
        typer.Option(
            "--format",
            metavar="png|pdf|svg",
            help="Image formats beside the HTML (default: png, pdf and svg; needs Chromium).",
        ),
    ] = None,
    set_: SetOption = None,
    seeds: SeedsOption = None,
    ui_url: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="MLflow UI address for the experiment links (default: the tracking server "
            "for an http(s) --tracking-uri, else $FEDSWEEP_UI_URL, else the address of a "
            "`fedsweep ui` serving this store, else http://127.0.0.1:5000).",
        ),
    ] = None,
    tracking_uri: TrackingUriOption = None,
    sweeps_dir: Annotated[
        Path, typer.Option(metavar="DIR", help="Where the sweep specs live.")
    ] = Path("sweeps"),
    plugin: PluginOption = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Keep drawing: redraw whenever a run of these figures ends (while a sweep "
            "runs); the pages reload themselves. Ctrl-C stops and leaves them static.",
        ),
    ] = False,
    every: Annotated[
        int, typer.Option(metavar="SECONDS", help="With --watch: how often to look.")
    ] = 10,
) -> None:
    """Draw figures from the runs in MLflow: seed means with bands, as HTML, PNG, PDF, SVG.

    Draws the paper figures and any sweep spec of your own (--spec), and merges them into
    index.html, which checks each of the paper's claims against the data. Exit status 1 when a
    figure could not be drawn (the others are written; its previous files are kept), when no
    figure has a run in the store (nothing drawn) or a file could not be written, 2 for bad
    input (an unknown --metric included) or a store that does
    not exist (this command never creates one)."""
    with clean_errors():
        check_figure_names(figure, sweeps_dir)  # a typo: before the heavy imports
        from fedsweep.specs.seeds import parse_seeds

        seed_list = parse_seeds(seeds)  # a bad value: before the store is read
        from dashboards import FigureOptions, FigureSelectionError, build_figures
        from dashboards.build import FigureBuildWarning
        from fedsweep.config.load import parse_overrides
        from fedsweep.core.atomic import OutputWriteError
        from fedsweep.plugins import load_plugins
        from fedsweep.tracking.uri import resolve_tracking_uri

        load_plugins(plugin)  # parts a spec names (a tau rule of your own)
        overrides = parse_overrides(set_) if set_ else {}

        uri = resolve_tracking_uri(tracking_uri)
        ids, files = figure_names(figure, sweeps_dir)
        spec = [*(spec or []), *files]
        if profile is None:
            profile = store_profile(uri, ids, spec)

        options = FigureOptions(band=band, diff_from=diff_from, metrics=tuple(metric or ()))
        if every < 1:
            raise UsageError(f"--every: got {every} (allowed: seconds >= 1, with --watch)")

    def draw(options: FigureOptions, quiet: bool = False, png: bool = True) -> tuple[list, int]:
        """Build the figures once (``png``: with their images); print what was drawn (unless
        ``quiet``); the results and how many failed."""
        with clean_errors():
            try:
                with warnings.catch_warnings():  # a failed figure's error is printed once
                    warnings.simplefilter("ignore", FigureBuildWarning)
                    results = build_figures(
                        uri,
                        profile=profile,
                        out_dir=out,
                        figures=ids or None,
                        sweeps_dir=sweeps_dir,
                        spec_files=spec,
                        options=options,
                        png=png,
                        images=tuple(image_format or FORMAT_CHOICES),
                        ui_url=ui_url,
                        overrides=overrides,
                        require_store=True,  # reading never creates a store nor "0 runs"
                        seeds=seed_list,
                    )
            except FigureSelectionError as err:
                raise UsageError(str(err)) from None
            except OutputWriteError as err:  # a full disk, a file-size limit: old files stay
                fail(str(err), EXIT_FAILED)
        failed = sum(bool(r.error) for r in results)
        if not quiet:
            _print_drawn(results, out, uri, profile, set_, tracking_uri)
        return results, failed

    if watch:
        _watch(draw, options, every, uri, out, ids)
        return
    results, failed = draw(options)
    if failed:  # the others are drawn; the exit status says not all of them
        typer.secho(f"{failed} figure(s) failed (see above)", fg=typer.colors.RED, err=True)
        raise typer.Exit(EXIT_FAILED)
    if drew_nothing(results):  # "nothing drawn" (printed above) is no success for a script
        raise typer.Exit(EXIT_FAILED)


def drew_nothing(results) -> bool:
    """No figure has a run: the store has none of them at the profile (a wrong --profile,
    --tracking-uri or --set, or a sweep not run yet). ``figures`` then exits 1, not 0
    (docs/concepts/exit-codes.md); ``--watch`` goes on watching for the runs to come."""
    return bool(results) and all(r.run_count == 0 for r in results)


def _print_drawn(results, out: Path, uri: str, profile: str, set_, tracking_uri) -> None:
    """What each figure drew, what is missing and how to run it, the index."""
    failed = 0
    busy = sweeping_now(uri, [r.figure_id for r in results if r.missing > 0], profile)
    for res in results:
        files = ", ".join(p.name for p in res.files) or "no files"
        if res.error:
            kept = ", ".join(p.name for p in res.kept)
            files = f"nothing drawn; kept the previous build's {kept}" if kept else "nothing drawn"
        _echo_wrapped(f"{res.figure_id}: {res.run_count} runs -> {out}:", files)
        if res.error:
            failed += 1
            typer.secho(f"  error: {res.error}", fg=typer.colors.RED, err=True)
        elif res.figure_id in busy:  # runs missing because a sweep of it runs right now
            typer.echo(
                f"  {res.missing} of {res.expected_runs} runs missing at --profile {profile}: "
                f"{res.figure_id} [{profile}] is being swept into this store now, by "
                f"{busy[res.figure_id]}; wait for it with "
                f"{_sweep_command(res.figure_id, profile, set_, tracking_uri)} --wait (it "
                "returns when that sweep ends, reusing its runs), then draw again"
            )
        elif res.missing > 0:  # a partial (or empty) figure: say what is missing and how to run it
            typer.echo(
                f"  {res.missing} of {res.expected_runs} runs missing at --profile {profile}; "
                f"run them: {_sweep_command(res.figure_id, profile, set_, tracking_uri)}"
            )
    typer.echo(f"index: {(out / 'index.html').resolve()}")
    if not failed and drew_nothing(results):
        why = " yet (being swept now: see above)" if busy else ""
        typer.echo(
            f"nothing drawn: the store {uri} has no runs of these figures at --profile "
            f"{profile}{why}"
        )


def _watch(draw, options, every: int, uri: str, out: Path, ids: list[str] | None = None) -> None:
    """``--watch``: draw, then again whenever a run of the figures' experiments ends
    (:func:`store_state`, polled every ``every`` seconds), the pages reloading themselves as
    often; Ctrl-C or SIGTERM draws once more as static pages and exits 0. With the figures
    named (``ids``), the store's state is read before the first drawing, so a run that ends
    while it draws is a change (read after it, it was missed: seen as a watcher that never
    redrew)."""
    import dataclasses
    import time

    from fedsweep.cli.common import on_sigterm

    live = dataclasses.replace(options, reload_s=every)
    # the store's state before the first drawing: a run that ends while it draws (or before
    # the first poll) is a change, never the baseline (read after the drawing, it was missed)
    last = store_state(uri, list(ids)) if ids else None
    results, _ = draw(live, png=False)  # the images once, when it stops
    names = [r.figure_id for r in results]
    if last is None:
        last = store_state(uri, names)
    typer.echo(
        f"watching {uri} every {every} s: the pages above redraw as runs end and reload "
        "themselves; Ctrl-C stops (and leaves them static)"
    )

    def stop(signum, frame) -> None:
        raise KeyboardInterrupt

    try:
        with on_sigterm(stop):
            while True:
                time.sleep(every)
                now = store_state(uri, names)
                if now != last:
                    results, failed = draw(live, quiet=True, png=False)
                    runs = sum(r.run_count for r in results)
                    stamp = time.strftime("%H:%M:%S")
                    typer.echo(
                        f"{stamp} redrawn: {runs} runs" + (f", {failed} failed" if failed else "")
                    )
                    last = now
    except KeyboardInterrupt:
        draw(options, quiet=True)
        typer.echo("stopped watching; the pages are static again")


def store_state(uri: str, figures: list[str]) -> tuple:
    """What changes when a run of one of ``figures``' experiments starts or ends: per
    experiment, the newest run's end time and id and how many runs are RUNNING (two small
    queries each; a store that cannot say is read as unchanged)."""
    from fedsweep.tracking.connect import get_client

    try:
        client = get_client(uri, create=False)
    except Exception:  # noqa: BLE001 - the next poll tries again
        return ()
    state = []
    for name in figures:
        try:
            exp = client.get_experiment_by_name(name)
            if exp is None:
                state.append((name, None))
                continue
            newest = client.search_runs(
                [exp.experiment_id], max_results=1, order_by=["attributes.end_time DESC"]
            )
            running = client.search_runs(
                [exp.experiment_id], "attributes.status = 'RUNNING'", max_results=1000
            )
            head = newest[0].info if newest else None
            state.append((name, head and (head.run_id, head.end_time), len(running)))
        except Exception:  # noqa: BLE001 - an outage: unchanged until it answers again
            state.append((name, "?"))
    return tuple(state)


def sweeping_now(uri: str, figures: list[str], profile: str) -> dict[str, str]:
    """The figures among ``figures`` whose sweep at ``profile`` holds its driver lease in the
    store now (``sweep.locking.store_driver_lease``), with who runs it (``PID 123 on host
    (since ...)``). Reading only; a store that cannot say is taken as having none."""
    if not figures:
        return {}
    from fedsweep.tracking.leases import Leases, describe, lease_name

    try:
        leases = Leases(uri)
        holders = {f: leases.holder(lease_name("driver", f"{f}.{profile}")) for f in figures}
    except Exception:  # noqa: BLE001 - a hint, never a reason to fail the figures
        return {}
    return {f: describe(h) for f, h in holders.items() if h}


def store_profile(uri: str, ids: list[str], spec_files: list[Path]) -> str:
    """``--profile`` left out: the profile of the store's newest swept run of the figures
    (every figure when none is named), printed with the other profiles the store has."""
    from fedsweep.specs.load import load_spec
    from fedsweep.sweep.swept import swept_profiles

    wanted = ids + [load_spec(p).figure for p in spec_files]
    found = swept_profiles(uri, wanted or None)
    if not found:
        typer.echo("profile: quick (the store has no swept runs of these figures)")
        return "quick"
    chosen = found[0].profile
    others = [s.profile for s in found[1:]]
    also = f"; it also has {', '.join(others)} runs: add --profile {others[0]}" if others else ""
    typer.echo(f"profile: {chosen} (the store's newest sweep of these figures{also})")
    return chosen


def _sweep_command(figure: str, profile: str, set_: list[str] | None, uri: str | None) -> str:
    parts = ["fedsweep sweep", figure, "--profile", profile]
    parts += [f"--set {s}" for s in set_ or []]
    if uri:
        from fedsweep.tracking.credentials import redact

        parts += ["--tracking-uri", redact(uri)]
    return " ".join(parts)


def _echo_wrapped(head: str, items: str) -> None:
    """``head items`` on one line when it fits the terminal, else ``items`` wrapped below it
    (a file name is never split, even one longer than the line)."""
    import shutil
    import textwrap

    width = shutil.get_terminal_size((80, 24)).columns
    if len(head) + 1 + len(items) <= width:
        typer.echo(f"{head} {items}")
        return
    typer.echo(head)
    wrapped = textwrap.fill(
        items,
        width,
        initial_indent="  ",
        subsequent_indent="  ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    typer.echo(wrapped)
