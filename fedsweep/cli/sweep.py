"""``fedsweep sweep``: sweep specs as Ray Tune trials, each an MLflow child run."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import (
    DataDirOption,
    MaxConcurrentOption,
    PanelOption,
    PluginOption,
    Profile,
    SeedsOption,
    SetOption,
    TrackingUriOption,
    UsageError,
    check_figure_names,
    check_profile,
    clean_errors,
    complete_figure,
    fail,
    on_sigterm,
)
from fedsweep.cli.early import refuse_sweep_early

#: the most trials one spec may have at the profile without ``--yes`` (the shipped figures have
#: at most 360): building and checking a trial takes about a millisecond, every profile of a
#: spec is checked when it loads, and each trial is a run of minutes or more
MAX_TRIALS = 2000


def sweep(
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="FIGURE",
            help="Figure ids (bherd-fig3a: sweeps/bherd-fig3a.yaml) or sweep spec files. "
            "Default: every spec in sweeps/ that this code can run (the others are listed "
            "with the reason).",
            autocompletion=complete_figure,
            show_default=False,
        ),
    ] = None,
    profile: Annotated[
        Profile | None,
        typer.Option(
            "--profile",
            help="paper (the paper's settings), quick (a 2-core laptop) or smoke (2-3 rounds). "
            "Default: quick for the figures named; every spec (no FIGURE) needs it said.",
            show_default=False,
            metavar="paper|quick|smoke",
            callback=check_profile,
        ),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            envvar="FEDSWEEP_RAY_ADDRESS",
            help="Attach to an existing Ray cluster (e.g. HOST:6380, 'auto' or "
            "'ray://HOST:10001'; fedsweep team up's team.env sets it); default: start a "
            "private local Ray ($RAY_ADDRESS is not used).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Continue an interrupted sweep (checkpoints, same MLflow runs)."
        ),
    ] = False,
    max_concurrent: MaxConcurrentOption = None,
    set_: SetOption = None,
    panel: PanelOption = None,
    seeds: SeedsOption = None,
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            metavar="KEY=V1,V2",
            help="Add one curve per value (several --grid: per combination) to the figure named: "
            "writes the study as a spec file that extends it (studies/<figure>-grid-<digest>.yaml, "
            "or beside a spec file of your own), sweeps that file and reuses every run the "
            "figure has (with --plan: lists its trials, writes nothing). Repeatable.",
        ),
    ] = None,
    data_dir: DataDirOption = None,
    tracking_uri: TrackingUriOption = None,
    sweeps_dir: Annotated[
        Path, typer.Option(metavar="DIR", help="Where specs live (for the default).")
    ] = Path("sweeps"),
    storage: Annotated[
        str | None,
        typer.Option(
            metavar="DIR|URI",
            help="Where the trials' checkpoints live (default: <store dir>/ray_results). On a "
            "multi-node cluster: a folder every node mounts at the same path (NFS), or an "
            "object store, e.g. s3://bucket/prefix (S3-compatible: "
            "?endpoint_override=HOST:PORT&scheme=http), so a trial restarted on another node "
            "finds its checkpoint.",
        ),
    ] = None,
    artifact_root: Annotated[
        str | None,
        typer.Option(
            metavar="URI",
            help="Where new experiments keep their artifacts when --tracking-uri is a "
            "database (postgresql://...): a shared folder or an object-store URI (s3://...). "
            "A tracking server (http://...) decides this itself (mlflow server "
            "--artifacts-destination).",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="When another driver is sweeping the same spec and profile into the same "
            "store, wait for it to end, then run what is left (default: refuse, naming it).",
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show Ray's own output live (trial tables, worker warnings) instead of "
            "writing it to the sweep log.",
        ),
    ] = False,
    plugin: PluginOption = None,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help="List every trial without starting Ray or writing anything: its id, config "
            "hash (and legacy hash), whether a finished run in the store is reused, and the "
            "estimated time from the store's measured rounds.",
        ),
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="With --plan: one JSON object per trial.")
    ] = False,
    until_decided: Annotated[
        bool,
        typer.Option(
            "--until-decided",
            help="Add seeds in batches (new trials; the runs it has are reused) until every "
            "claim of the figure is decided, --max-seeds is reached or --budget is spent; each "
            "open claim is printed with the seeds that would decide it at the spread observed. "
            "The looks are planned (the profile's seeds, then doubling to the cap) and each "
            "judges at the level that keeps the stated 5% error over all of them (Bonferroni); "
            "the report command it prints repeats its seeds and level.",
        ),
    ] = False,
    max_seeds: Annotated[
        int,
        typer.Option(metavar="N", min=2, max=1000, help="With --until-decided: at most N seeds."),
    ] = 10,
    budget: Annotated[
        float | None,
        typer.Option(
            metavar="HOURS",
            help="With --until-decided: no new batch once this much time is spent, or when "
            "the next one would not fit in what is left (by the time a seed took so far).",
        ),
    ] = None,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            help=f"Go ahead with a spec of more than {MAX_TRIALS:,} trials at the profile "
            "(refused without it: checking them alone takes minutes).",
        ),
    ] = False,
) -> None:
    """Run sweep specs as Ray Tune trials (grid x seeds), each trial an MLflow child run.

    Trials whose config already has a finished run are skipped, so re-running a finished sweep
    schedules nothing. The console shows one progress line (sweep i of n, trials done/total,
    running, failed, skipped, the sweep's and the whole command's ETA), one summary line per
    sweep, a table at the end, then each figure's final metrics per curve (mean ± std over
    seeds) and the command that draws it; Ray's own output goes to a log file under
    <store>/ray_results/logs/ (path printed).

    Ctrl-C or SIGTERM stops the trials (checkpoints kept), marks the parent and unfinished runs
    KILLED and exits 130 (143 for SIGTERM); --resume continues from the checkpoints."""
    with clean_errors():
        check_figure_names(names, sweeps_dir)  # a typo: before the heavy imports (torch)
        # an unknown --set key, a bad --tracking-uri or --storage: before them too
        refuse_sweep_early(names, sweeps_dir, set_, plan, tracking_uri, storage)
    from fedsweep.config.load import parse_overrides
    from fedsweep.plugins import load_plugins
    from fedsweep.specs.load import (
        SpecError,
        check_panel_filter,
        find_spec,
        load_spec,
        parse_panel_filter,
        read_spec,
        spec_paths,
    )

    figures: list[str] = []
    # with --plan, the --grid study is planned where it would be written, and not written
    with contextlib.ExitStack() as unwritten, clean_errors():
        plugins = load_plugins(plugin)  # before the specs: they may name a plugin's parts
        if max_concurrent is not None and max_concurrent < 1:
            raise UsageError(
                f"--max-concurrent: got {max_concurrent} (allowed: 1 or more; leave it out to "
                "run as many trials at once as the resources allow)"
            )
        overrides = parse_overrides(set_)
        panels = parse_panel_filter(panel)
        from fedsweep.specs.seeds import parse_seeds

        seed_list = parse_seeds(seeds)
        if panels and not names:
            raise UsageError(
                "--panel: name the spec(s) it applies to (panel axes differ between figures)"
            )
        specs: list[Path] = [find_spec(name, sweeps_dir) for name in names or []]
        check_named_once(names or [], specs)
        if grid:
            if len(specs) != 1:
                raise UsageError("--grid: name the one figure (or spec file) it adds curves to")
            specs = [_grid_study(names[0], specs[0], grid, sweeps_dir, unwritten if plan else None)]
            names = [str(specs[0])]
        if profile is None:
            if not specs and not plan:  # every spec for hours, by accident: ask for it by name
                raise UsageError(
                    "name the figure(s) to sweep, e.g. fedsweep sweep bherd-fig3a --profile "
                    "smoke; every spec in sweeps/ runs only with --profile said (quick: hours on a "
                    "laptop; --plan lists the trials and their estimated time first)"
                )
            profile = "quick"
        if specs:
            for path in specs:  # validate every named spec before anything runs
                spec = read_spec(path)  # its trials counted before they are built
                if seed_list:
                    spec = spec.with_seeds(profile, seed_list)
                if panels:
                    check_panel_filter(spec, profile, panels, str(path))
                check_size(spec, path, profile, panels, yes)
                loaded = load_spec(path)
                check_claims(loaded, path, profile)
                figures.append(loaded.figure)
            check_figures_once(specs, figures)
        else:
            for path in spec_paths(sweeps_dir):
                try:
                    spec = read_spec(path)
                    if seed_list:
                        spec = spec.with_seeds(profile, seed_list)
                    check_size(spec, path, profile, None, yes)
                    loaded = load_spec(path)
                    check_claims(loaded, path, profile)
                    figures.append(loaded.figure)
                    specs.append(path)
                except (SpecError, UsageError) as err:
                    reason = str(err).splitlines()[-1].strip()
                    typer.echo(f"skipping {path}: this code cannot run it yet ({reason})")
            if not specs:
                fail(f"no runnable sweep spec in {sweeps_dir}")
        if json_out and not plan:
            raise UsageError("--json: only with --plan (it prints the plan as JSON)")
        if until_decided and (plan or not names):
            raise UsageError(
                "--until-decided: name the figure(s) whose claims it decides, without --plan"
            )
        if budget is not None and (not until_decided or budget <= 0):
            raise UsageError(f"--budget: got {budget} (allowed: hours > 0, with --until-decided)")
        if plan:
            _print_plans(
                specs,
                profile,
                overrides,
                data_dir,
                tracking_uri,
                max_concurrent,
                json_out,
                panels,
                address,
                seed_list,
            )
            return
    run_args = dict(
        storage_dir=storage,
        artifact_root=artifact_root,
        address=address,
        resume=resume,
        max_concurrent=max_concurrent,
        tracking_uri=tracking_uri,
        data_dir=data_dir,
        overrides=overrides,
        panels=panels or None,
        seeds=seed_list,
        wait=wait,
        plugins=plugins,
    )
    terminated: list[int] = []
    stop = None
    try:
        # (messages outside the capture)
        with clean_errors(), sigterm_as_sigint(terminated) as stop:
            if until_decided:
                failed = _run_until_decided(
                    specs, figures, profile, verbose, run_args, max_seeds, budget, sweeps_dir
                )
            else:
                failed = _run_all(specs, figures, profile, verbose, run_args)
    except KeyboardInterrupt as err:
        _interrupted(err, terminated, specs, profile, panel, storage, tracking_uri, seeds=seeds)
    except Exception as err:
        full = _disk_full(err, tracking_uri)
        if full is None and (terminated or (stop is not None and stop.requested)):
            # Ctrl-C or SIGTERM during an outage of the store: its clean-up writes failed fast
            # (one try each: sigterm_as_sigint), and the stop is still a stop
            from fedsweep.core.errors import first_line

            why = f"the store did not answer the clean-up ({first_line(err, 160)})"
            _interrupted(
                why, terminated, specs, profile, panel, storage, tracking_uri, marked=False,
                seeds=seeds,
            )  # fmt: skip
        if full is None:
            raise
        # a full file system: one line naming it (the runs are ended as far as the store
        # can still be written), not Ray's and MLflow's chains of tracebacks
        typer.secho(f"sweep failed: {full}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    raise typer.Exit(1 if failed else 0)


def _interrupted(
    err, terminated, specs, profile, panel, storage, tracking_uri, marked: bool = True,
    seeds: str | None = None,
) -> None:  # fmt: skip
    """The one line of a sweep stopped by Ctrl-C or SIGTERM (what was done, where the
    checkpoints are, the command that continues it), then exit 130 or 143. ``marked``: False
    when the store could not be written (an outage): the runs are left for the next sweep."""
    from fedsweep.sweep.runner import StoppedBeforeItsRun

    how = "SIGTERM" if terminated else "Ctrl-C"
    detail = f"{err}; " if str(err) else ""
    command = " ".join(
        ["fedsweep sweep", *map(str, specs), "--profile", profile]
        + [f"--panel {p}" for p in panel or []]
        + ([f"--seeds {seeds}"] if seeds else [])
    )
    if isinstance(err, StoppedBeforeItsRun):  # e.g. a driver that waited with --wait
        typer.echo(
            f"interrupted ({how}): {detail}it had opened no parent run (none marked KILLED). "
            f"Run it again with: {command} (and the same options)",
            err=True,
        )
        raise typer.Exit(128 + (signal.SIGTERM if terminated else signal.SIGINT)) from None
    again = f"{command} --resume"
    kept = (
        ""
        if "checkpoints are kept" in detail
        else f"; their checkpoints are kept in {checkpoints_at(storage, tracking_uri)}"
    )
    runs = (
        "the sweep's parent run and its unfinished trials are marked KILLED"
        if marked
        else "the sweep's runs could not be marked KILLED now (the next sweep of the figure "
        "ends those left RUNNING)"
    )
    typer.echo(
        f"interrupted ({how}): {detail}{runs}{kept}. Continue with: {again} (and the same "
        "--set options)",
        err=True,
    )
    raise typer.Exit(128 + (signal.SIGTERM if terminated else signal.SIGINT)) from None


def checkpoints_at(storage: str | None, tracking_uri: str | None) -> str:
    """Where a sweep keeps its trials' checkpoints: ``--storage`` (a folder, or an object store
    such as ``s3://bucket/prefix``, its credentials masked), else ``<store dir>/ray_results``
    (``tracking.store.ray_results_dir``)."""
    from fedsweep.tracking.credentials import redact
    from fedsweep.tracking.store import ray_results_dir, resolve_tracking_uri

    if storage:
        return redact(str(storage))
    try:
        return str(ray_results_dir(resolve_tracking_uri(tracking_uri)))
    except Exception:  # noqa: BLE001 - a hint on the way out
        return "the store's ray_results folder"


def check_named_once(names: list[str], specs: list[Path]) -> None:
    """``fedsweep sweep F F`` (or F and its spec file): each spec once, else :class:`UsageError`
    naming the repeats (it would be planned, and run, twice)."""
    seen: dict[Path, str] = {}
    for name, path in zip(names, specs, strict=True):
        first = seen.get(path.resolve())
        if first is not None:
            same = (
                f"{name!r} is given twice ({path})"
                if first == name
                else f"{first!r} and {name!r} are the same spec ({path})"
            )
            raise UsageError(f"FIGURE: {same}; name each figure once")
        seen[path.resolve()] = name


def check_figures_once(specs: list[Path], figures: list[str]) -> None:
    """Two spec files of one figure id would sweep into one MLflow experiment: refused."""
    for i, figure in enumerate(figures):
        if figure in figures[:i]:
            first = specs[figures.index(figure)]
            raise UsageError(
                f"FIGURE: {first} and {specs[i]} are both figure {figure!r} (one MLflow "
                "experiment); sweep one of them, or give the other its own figure id"
            )


def check_size(spec, path: Path, profile: str, panels, yes: bool) -> None:
    """A spec of more than :data:`MAX_TRIALS` trials at ``profile`` is refused without
    ``--yes``; with it, or where the spec's other profiles are that large (loading checks
    them all), the count is said before the trials are built, which takes a while."""
    from fedsweep.specs.load import PROFILES, trial_count

    count = trial_count(spec, profile, panels)
    if count > MAX_TRIALS and not yes:
        raise UsageError(
            f"{path}: {spec.figure} has {count:,} trials at --profile {profile} (panels x "
            f"curves x seeds), more than {MAX_TRIALS:,}: building and checking them alone takes "
            f"minutes, running them far longer. Add --yes to go ahead, or make the grid smaller "
            f"(profiles.{profile}.grid or .curves, fewer seeds, --panel)"
        )
    total = sum(trial_count(spec, p) for p in PROFILES)
    if total > MAX_TRIALS:
        typer.echo(
            f"{spec.figure}: {count:,} trials at --profile {profile} ({total:,} in its "
            f"{len(PROFILES)} profiles); checking them before anything starts takes a while",
            err=True,
        )


def check_claims(spec, path: Path, profile: str | None = None) -> None:
    """Every claim of the spec is one fedsweep can judge (``dashboards.registry.CRITERIA``):
    an unknown text would sweep for hours and then read "n/a" in every figure; and every
    declared claim can be computed on ``profile`` (a measure's needs, e.g. its target accuracy:
    ``fedsweep.specs.claims.profile_claim_problem``)."""
    from fedsweep.specs.claims import profile_claim_problem
    from fedsweep.specs.load import expand

    def trials():
        return expand(spec, profile)

    problem = profile_claim_problem(spec.claims, profile, spec, trials) if profile else None
    if problem:
        raise UsageError(f"{path}: {problem}")
    from dashboards.registry import claim_problem

    problem = claim_problem(spec.claims)
    if not problem and profile:  # a paper's own measure declares its needs as it registers
        problem = profile_claim_problem(spec.claims, profile, spec, trials)
    if problem:
        raise UsageError(f"{path}: {problem}")


def _disk_full(err: BaseException, tracking_uri: str | None):
    """A full file system in ``err``'s chain (``fedsweep.sweep.trial.disk_full``), naming the
    store's folder when it names no path; else None."""
    from fedsweep.sweep.store_index import store_folder
    from fedsweep.sweep.trial import disk_full
    from fedsweep.tracking.store import default_store_dir, resolve_tracking_uri

    full = disk_full(err)
    if full is None:
        return None
    return full.at(store_folder(resolve_tracking_uri(tracking_uri)) or default_store_dir())


def _print_plans(
    specs,
    profile,
    overrides,
    data_dir,
    tracking_uri,
    max_concurrent,
    as_json,
    panels=None,
    address=None,
    seeds=None,
):
    """``--plan``: each spec's trials and what the sweep would do with them (no Ray, no
    writes; ``fedsweep.sweep.plan``)."""
    import json

    from fedsweep.sweep.plan import RUN, plan_sweep, summary_line
    from fedsweep.sweep.report import duration

    plans = []
    for path in specs:
        plan = plan_sweep(
            path,
            profile,
            tracking_uri=tracking_uri,
            data_dir=data_dir,
            overrides=overrides,
            max_concurrent=max_concurrent,
            panels=panels or None,
            address=address,
            seeds=seeds,
        )
        plans.append(plan)
        if as_json:
            for row in plan.trials:
                typer.echo(json.dumps(row.as_json(), sort_keys=True))
            continue
        typer.echo(summary_line(plan))
        if plan.data_note:
            typer.echo(f"  note: {plan.data_note}")
        for row in plan.trials:
            if row.status == RUN:
                detail = f"≈ {duration(row.estimate_s)}" if row.estimate_s is not None else ""
                detail += f" ({row.note})" if row.note and detail else ""
            elif row.run_id is not None:
                detail = f"run {row.run_id}" + (
                    " (by its legacy hash)" if row.matched_by == "legacy hash" else ""
                )
            else:
                detail = row.note
            legacy = row.legacy_hash or "-"
            typer.echo(
                f"  {row.status:<8} {row.config_hash:<16} {legacy:<16} {row.trial_id}"
                + (f"  {detail}" if detail else "")
            )
    if not as_json and len(plans) > 1:
        to_run = sum(p.count(RUN) for p in plans)
        reused = sum(p.count("reuse") for p in plans)
        derived = sum(p.count("derived") for p in plans)
        wall = sum(p.wall_s for p in plans if not p.never_starts)
        stuck = sum(bool(p.never_starts) for p in plans)
        typer.echo(
            f"total: {sum(len(p.trials) for p in plans)} trials in {len(plans)} sweeps: "
            f"{to_run} to run, {reused} reused, {derived} derived; ≈ {duration(wall)} of "
            "wall time where measured (the sweeps run one after the other)"
            + (f"; {stuck} of the sweeps can never start here (see above)" if stuck else "")
        )


@contextmanager
def sigterm_as_sigint(seen: list[int]):
    """While inside, SIGTERM (a scheduler, ``timeout``, ``docker stop``) acts as Ctrl-C: during
    the trials Ray Tune stops them gracefully (checkpoints saved), elsewhere it raises
    KeyboardInterrupt; either way the sweep's runs end KILLED. ``seen`` records it. After
    either signal every MLflow request is tried once (``tracking.outage.brief_once_stopped``):
    the clean-up of a sweep stopped during an outage of the store took MLflow's retries,
    minutes. Yields whether a stop was asked for (``.requested``)."""
    from fedsweep.tracking.outage import brief_once_stopped, relay_sigint, stop_requested

    def on_term(signum, frame):
        seen.append(signum)
        stop_requested()
        signal.raise_signal(signal.SIGINT)

    previous = signal.getsignal(signal.SIGINT)
    with brief_once_stopped() as stop, on_sigterm(on_term):
        relay_sigint()  # Ctrl-C outside a fit (Ray Tune's fit wraps its own: sweep.ray_backend)
        try:
            yield stop
        finally:
            with contextlib.suppress(ValueError, TypeError):  # not the main thread
                signal.signal(signal.SIGINT, previous)


def _grid_study(
    name: str,
    path: Path,
    grid: list[str],
    sweeps_dir: Path,
    unwritten: contextlib.ExitStack | None = None,
) -> Path:
    """``--grid``: the study the command line means, written as a spec file
    (:mod:`fedsweep.specs.grid_study`) and checked; its path. A study that does not load is
    removed again (its error is the spec's, exit 2). ``unwritten`` (``--plan``, which writes
    nothing): the study is not written but loads from its path while that stack is open."""
    from fedsweep.specs.extends import unwritten_spec
    from fedsweep.specs.grid_study import parse_grids, study_place, study_tree, write_study
    from fedsweep.specs.load import load_spec
    from fedsweep.specs.names import SHIPPED_SWEEPS

    grids = parse_grids(grid)
    parent = load_spec(path)
    # a figure of ./sweeps or fedsweep's own (from any folder): its study goes to ./studies
    shipped = not Path(name).is_file() and (
        Path(sweeps_dir).resolve() == Path("sweeps").resolve()
        or Path(path).resolve().parent == SHIPPED_SWEEPS
    )
    tree = study_tree(parent.figure, parent.title, grids)
    if unwritten is not None:
        place, tree = study_place(path, shipped, tree)
        planned = unwritten.enter_context(unwritten_spec(place, tree))
        load_spec(planned)
        typer.echo(
            f"the study this sweep would run: {planned} (--plan writes nothing; without "
            "--plan the sweep writes it there)",
            err=True,  # stdout stays the plan (--json: one JSON object a line)
        )
        return planned
    written = write_study(path, parent.figure, shipped, tree)
    try:
        load_spec(written)
    except Exception:
        written.unlink(missing_ok=True)
        raise
    typer.echo(
        f"wrote {written}: the study this sweep runs (rerun, extend or draw it by this path)"
    )
    return written


def _run_until_decided(
    specs, figures, profile: str, verbose: bool, run_args: dict, cap: int, budget, sweeps_dir
) -> bool:
    """``--until-decided``, figure by figure (``fedsweep.cli.until_decided``): the real sweep
    as the batch, the figure's claims from the store (as ``fedsweep report`` judges them) as the
    judge; True when a trial failed (the loop then stops)."""
    from fedsweep.cli.until_decided import level_text, summary_lines, until_decided
    from fedsweep.specs.load import load_spec
    from fedsweep.specs.seeds import seeds_text

    uri = run_args.get("tracking_uri")
    failed = False
    for path, figure in zip(specs, figures, strict=True):
        spec = load_spec(path)
        prof = spec.profiles[profile]
        start = run_args.get("seeds") or (prof.seeds if prof.seeds is not None else spec.seeds)

        def run_batch(seeds: list[int], path=path, figure=figure) -> bool:
            nonlocal failed
            failed |= _run_all([path], [figure], profile, verbose, {**run_args, "seeds": seeds})
            return failed

        def judge(seeds: list[int], level: float, path=path) -> list[dict]:
            return _claim_rows(path, profile, uri, seeds, level, run_args, sweeps_dir)

        outcome = until_decided(
            start, cap, run_batch, judge,
            budget_s=budget * 3600 if budget is not None else None, echo=typer.echo,
        )  # fmt: skip
        command = (
            f"fedsweep report --figure {_figure_name(path, figure)} --profile {profile} --seeds "
            f"{seeds_text(outcome.seeds)} --level {level_text(outcome.level)}{_store_option(uri)}"
        )
        for line in summary_lines(outcome, command):
            typer.echo(line)
    return failed


def _claim_rows(path, profile, uri, seeds, level, run_args, sweeps_dir) -> list[dict]:
    """The claims of the figure of ``path`` at ``seeds``, judged at ``level`` from the store
    (``fedsweep report``'s rows, with ``seeds_needed``)."""
    import tempfile
    import warnings

    from dashboards import build_figures
    from dashboards.build import FigureBuildWarning
    from dashboards.report import claim_rows
    from dashboards.verdicts import confidence

    with confidence(level), tempfile.TemporaryDirectory(prefix="fedsweep-decide-") as tmp:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FigureBuildWarning)
            results = build_figures(
                uri, profile=profile, out_dir=tmp, spec_files=[path], sweeps_dir=sweeps_dir,
                png=False, extras=False, require_store=True, seeds=seeds,
                overrides=run_args.get("overrides") or None,
            )  # fmt: skip
        return claim_rows(results)


def _run_all(specs, figures, profile: str, verbose: bool, run_args: dict) -> bool:
    """Run the sweeps one after the other under one console; True when a trial failed."""
    from fedsweep.cli.sweep_console import SweepConsole, ray_output_to
    from fedsweep.sweep.ray_backend import shutdown_ray
    from fedsweep.sweep.runner import run_sweep
    from fedsweep.tracking.store import default_store_dir, ray_results_dir, resolve_tracking_uri

    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = figures[0] if len(specs) == 1 else "sweep"
    from fedsweep.sweep.remote_state import is_remote

    storage = run_args.get("storage_dir")
    results = Path(storage) if storage and not is_remote(storage) else None
    # the log stays on this machine, beside the sweeps' Ray state (<store dir>/ray_results)
    results = results or ray_results_dir(resolve_tracking_uri(run_args.get("tracking_uri")))
    try:
        (results / "logs").mkdir(parents=True, exist_ok=True)
    except OSError:  # a store folder that cannot be made: run_sweep refuses the URI (exit 2)
        results = default_store_dir() / "ray_results"
    log_path = results / "logs" / f"{name}-{profile}-{stamp}.log"
    ray_was_up = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    capture = nullcontext((sys.stdout, sys.stderr)) if verbose else ray_output_to(log_path)
    failed = False
    with capture as (out, err):
        console = SweepConsole(
            len(specs),
            profile,
            out,
            err,
            live=False if verbose else None,
            tee=None if verbose else sys.stdout,  # the log file while captured
        )
        if not verbose:
            console.print(
                f"Ray's output (trial tables, worker warnings) goes to {_shown_path(log_path)}"
            )
        console.plan = _command_plan(console, specs, profile, run_args)
        # issue 52, item 5: the figures drawn live while the trials run, in another terminal
        live = next_commands(specs, figures, profile, run_args.get("tracking_uri"),
                             run_args.get("seeds"))[0]  # fmt: skip
        console.print(
            f"live figures (another terminal): {live} --watch, then open figures/index.html"
        )
        reports = []
        try:
            for index, (path, figure) in enumerate(zip(specs, figures, strict=True), 1):
                print(f"\n===== [{index}/{len(specs)}] {figure} [{profile}] =====", flush=True)
                console.begin_sweep(index, figure)
                start = time.perf_counter()
                try:
                    report = run_sweep(
                        path, profile, echo=console.echo, listener=console, **run_args
                    )
                finally:
                    console.stop_live()
                console.end_sweep(report, time.perf_counter() - start)
                reports.append(report)
                for line in report.errors:
                    console.error(f"  failed: {line}")
                failed |= bool(report.errored)
            console.print_table()
            _print_end(console, specs, reports, profile, run_args)
        finally:
            if not ray_was_up:  # Ray's last forwarded lines go to the log, not after the table
                shutdown_ray()
    return failed


def _shown_path(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it (a shorter line)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _command_plan(console, specs, profile: str, run_args: dict) -> list:
    """Every sweep's plan (``fedsweep.sweep.plan``: its trials and estimated time), for the
    console's totals and whole-command ETA; None for a spec whose plan fails (the sweep then
    reports the problem itself). Several sweeps: one line with the command's totals."""
    from fedsweep.cli.sweep_console import PlannedSweep
    from fedsweep.sweep.plan import plan_sweep
    from fedsweep.sweep.report import duration

    planned, plans, earlier = [], [], set()
    for path in specs:
        try:
            plan = plan_sweep(
                path,
                profile,
                tracking_uri=run_args.get("tracking_uri"),
                data_dir=run_args.get("data_dir"),
                overrides=run_args.get("overrides"),
                max_concurrent=run_args.get("max_concurrent"),
                panels=run_args.get("panels"),
                address=run_args.get("address"),
                seeds=run_args.get("seeds"),
            )
        except Exception:  # noqa: BLE001 - the sweep itself names what is wrong
            planned.append(None)
            continue
        plans.append(plan)
        planned.append(PlannedSweep.of(plan, earlier))
    if len(specs) > 1 and len(plans) == len(specs):
        to_run = sum(p.to_run for p in planned)
        wall = sum(p.wall_s for p in planned)
        line = (
            f"plan: {sum(len(p.trials) for p in plans)} trials in {len(plans)} sweeps, "
            f"{to_run} to run"
        )
        if wall > 0:
            line += f", ≈ {duration(wall)} where measured"
        console.print(line)
    return planned


def _print_end(console, specs, reports, profile: str, run_args: dict) -> None:
    """After the sweeps' table: each figure's metrics table (``fedsweep.sweep.summary``), then
    the commands that draw the figures and browse the runs."""
    from fedsweep.core.errors import first_line
    from fedsweep.data.datasets import resolve_data_root
    from fedsweep.sweep.summary import figure_summary

    uri = run_args.get("tracking_uri")
    extra = {
        "data.root": str(resolve_data_root(run_args.get("data_dir"))),
        **(run_args.get("overrides") or {}),
    }
    for path, report in zip(specs, reports, strict=False):
        try:
            summary = figure_summary(
                path, profile, tracking_uri=uri, extra=extra, seeds=run_args.get("seeds")
            )
        except Exception as err:  # noqa: BLE001 - the runs are in the store either way
            console.print(f"{report.figure} [{profile}]: no metrics table ({first_line(err)})")
            continue
        console.print_summary(summary)
    console.print()
    console.print("Next: draw the figures, then browse the runs in MLflow's UI:")
    figures = [report.figure for report in reports]
    for command in next_commands(specs, figures, profile, uri, run_args.get("seeds")):
        console.print(f"  {command}", wrap=False)


def _store_option(tracking_uri: str | None) -> str:
    """`` --tracking-uri URI`` where the store is not the default one, else ""."""
    from fedsweep.tracking.store import resolve_tracking_uri

    if tracking_uri and resolve_tracking_uri(tracking_uri) != resolve_tracking_uri(None):
        return f" --tracking-uri {resolve_tracking_uri(tracking_uri)}"
    return ""


def _figure_name(path, figure: str) -> str:
    """How a command names the figure of spec ``path``: its id where the id names that spec
    here (``sweeps/<id>.yaml``, else fedsweep's shipped spec), else the spec's path."""
    from fedsweep.specs.names import figure_file

    default = figure_file(figure)
    same = default is not None and default.resolve() == Path(path).resolve()
    return figure if same else str(path)


def next_commands(
    specs, figures, profile: str, tracking_uri: str | None, seeds: list[int] | None = None
) -> list[str]:
    """``fedsweep figures`` for what was swept (a figure by its id where ``sweeps/<id>.yaml``
    is its spec, else by its spec's path) and ``fedsweep ui``, with ``--tracking-uri`` where
    the store is not the default one and the sweep's ``--seeds``."""
    from fedsweep.specs.seeds import seeds_text

    store = _store_option(tracking_uri)
    names = [f"--figure {_figure_name(p, f)}" for p, f in zip(specs, figures, strict=True)]
    from fedsweep.cli.common import ui_hint

    return [
        f"fedsweep figures {' '.join(names)} --profile {profile}{store}"
        + (f" --seeds {seeds_text(seeds)}" if seeds else ""),
        ui_hint(tracking_uri, store),
    ]
