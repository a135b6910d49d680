"""The sweeps of one ``fedsweep sweep`` run one after the other under one console
(:mod:`fedsweep.cli.sweep_console`; Ray's output to a log file), then the end: the sweeps'
table, each figure's metrics and the commands that draw the figures and browse the runs.
``--until-decided`` runs them in batches of seeds until the figure's claims are decided
(:mod:`fedsweep.cli.until_decided`)."""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from pathlib import Path

import typer


def run_until_decided(
    specs, figures, profile: str, verbose: bool, run_args: dict, cap: int, budget
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
            failed |= run_all([path], [figure], profile, verbose, {**run_args, "seeds": seeds})
            return failed

        def judge(seeds: list[int], level: float, path=path) -> list[dict]:
            return _claim_rows(path, profile, uri, seeds, level, run_args)

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


def _claim_rows(path, profile, uri, seeds, level, run_args) -> list[dict]:
    """The claims of the figure of ``path`` at ``seeds``, judged at ``level`` from the store
    (``fedsweep report``'s rows, with ``seeds_needed``): the judge alone, nothing drawn."""
    from dashboards.report import judged_rows
    from fedsweep.judge.stats import confidence
    from fedsweep.judge.store import RunIndex
    from fedsweep.specs.figure import figure_plan
    from fedsweep.specs.load import load_spec
    from fedsweep.tracking.connect import get_client
    from fedsweep.tracking.uri import resolve_tracking_uri

    spec = load_spec(path).with_seeds(profile, seeds)
    plan = figure_plan(spec, profile, extra=run_args.get("overrides") or None)
    client = get_client(resolve_tracking_uri(uri), create=False)
    with confidence(level):
        return judged_rows(plan, client, RunIndex.load(client))


def run_all(specs, figures, profile: str, verbose: bool, run_args: dict) -> bool:
    """Run the sweeps one after the other under one console; True when a trial failed."""
    from fedsweep.cli.sweep_console import SweepConsole, ray_output_to
    from fedsweep.sweep.ray_backend import shutdown_ray
    from fedsweep.sweep.runner import run_sweep

    name = figures[0] if len(specs) == 1 else "sweep"
    log_path = _log_path(name, profile, run_args)
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


def _log_path(name: str, profile: str, run_args: dict) -> Path:
    """The file Ray's output of the command goes to: ``<folder>/logs/<name>-<profile>-<time>.log``,
    the folder being ``--storage`` where it is on this machine, else the store's
    ``ray_results`` (the sweeps' Ray state), else the default store's (a store folder that
    cannot be made: the sweep refuses the URI, exit 2)."""
    from fedsweep.sweep.remote_state import is_remote
    from fedsweep.tracking.uri import default_store_dir, ray_results_dir, resolve_tracking_uri

    stamp = time.strftime("%Y%m%d-%H%M%S")
    storage = run_args.get("storage_dir")
    results = Path(storage) if storage and not is_remote(storage) else None
    # the log stays on this machine, beside the sweeps' Ray state (<store dir>/ray_results)
    results = results or ray_results_dir(resolve_tracking_uri(run_args.get("tracking_uri")))
    try:
        (results / "logs").mkdir(parents=True, exist_ok=True)
    except OSError:  # a store folder that cannot be made: run_sweep refuses the URI (exit 2)
        results = default_store_dir() / "ray_results"
    return results / "logs" / f"{name}-{profile}-{stamp}.log"


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
    from fedsweep.tracking.uri import resolve_tracking_uri

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
