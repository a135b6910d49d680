"""``fedsweep robustness``: a figure's claims judged along one more config axis (a verdict map).

The figure's sweep runs once per axis value (the value as a ``--set`` override; trials whose
config hash already has a finished run are reused, so a second call runs nothing), then
:mod:`dashboards.robustness` draws the map: claims x axis values, each cell the verdict with its
effect and 95% interval. Every input (the figure, the axis key and values, the panels, the
profile) is checked before Ray or MLflow starts: one line and exit 2.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from fedsweep.cli.common import (
    EXIT_FAILED,
    DataDirOption,
    MaxConcurrentOption,
    PanelOption,
    PluginOption,
    ProfileOption,
    TrackingUriOption,
    UsageError,
    check_figure_names,
    clean_errors,
    fail,
)

AXIS_EXAMPLE = "e.g. --axis train.lr=1e-5,1e-4,1e-3"


def robustness(
    figure: Annotated[
        str,
        typer.Argument(
            metavar="FIGURE",
            help="A figure id (a spec in --sweeps-dir, e.g. bherd-fig3a) or a sweep spec file.",
        ),
    ],
    axis: Annotated[
        list[str],
        typer.Option(
            "--axis",
            metavar="KEY=V1,V2,...",
            help="The config key to vary and its values, each a --set value (YAML), "
            f"{AXIS_EXAMPLE}: a key the figure's trials read that changes their runs (not "
            "one its panels or curves set). One axis: given twice, refused.",
        ),
    ],
    profile: ProfileOption = "quick",
    panel: PanelOption = None,
    out: Annotated[
        Path,
        typer.Option(
            metavar="DIR", help="Where the map goes: <figure>--<key>.md/.json/.html/.png."
        ),
    ] = Path("docs/reproduction/robustness"),
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help="Per axis value, what the sweep would run and reuse (no Ray, nothing written).",
        ),
    ] = False,
    no_run: Annotated[
        bool,
        typer.Option(
            "--no-run", help="Draw the map from the runs in the store only (run nothing)."
        ),
    ] = False,
    max_concurrent: MaxConcurrentOption = None,
    data_dir: DataDirOption = None,
    tracking_uri: TrackingUriOption = None,
    sweeps_dir: Annotated[
        Path, typer.Option(metavar="DIR", help="Where the figure ids' specs live.")
    ] = Path("sweeps"),
    plugin: PluginOption = None,
) -> None:
    """Judge a figure's claims along one more config axis: a verdict map.

    Runs the figure's sweep once per --axis value (reusing every run the store already has, by
    config hash), then writes a map of claims x axis values, each cell the verdict (supported,
    contradicted, inconclusive, not-testable) with its effect, 95% interval and seeds; ★ marks
    the value the profile runs as configured. `fedsweep report` embeds the maps found in
    <report dir>/robustness/. Exit status 1 when a trial or the figure failed (the map is
    still written), 2 for bad input."""
    with clean_errors():
        check_figure_names([figure], sweeps_dir)  # a typo: before the heavy imports
    from fedsweep.plugins import load_plugins
    from fedsweep.specs.load import check_panel_filter, find_spec, load_spec, parse_panel_filter
    from fedsweep.tracking.uri import check_tracking_uri, resolve_tracking_uri

    with clean_errors():
        if plan and no_run:
            raise UsageError("--plan and --no-run: choose one (--plan runs nothing either)")
        if max_concurrent is not None and max_concurrent < 1:
            raise UsageError(f"--max-concurrent: got {max_concurrent} (allowed: 1 or more)")
        plugins = load_plugins(plugin)
        spec_path = find_spec(figure, sweeps_dir)
        spec = load_spec(spec_path)
        panels = parse_panel_filter(panel) or None
        if panels:
            check_panel_filter(spec, profile, panels, str(spec_path))
        check_claims(spec, spec_path, profile)
        key, values = parse_axis(one_axis(axis))
        check_axis_key(spec, profile, key)
        check_axis_reads(spec, profile, key)  # seed: named so before any plan of a value

        from dashboards.robustness import configured_columns

        configured = configured_columns(spec, profile, key, values, panels)
        check_axis_changes(spec, profile, key, values, panels)
        uri = resolve_tracking_uri(tracking_uri)
        if plan:
            _print_plans(
                spec_path, profile, key, values, configured, panels, data_dir, uri, max_concurrent
            )
            return
        if not no_run:
            check_tracking_uri(uri, write=True)
    command = command_line(figure, spec_path, sweeps_dir, key, values, profile, panel)
    failed = False
    if not no_run:
        run_args = dict(
            max_concurrent=max_concurrent,
            tracking_uri=uri,
            data_dir=data_dir,
            panels=panels,
            plugins=plugins,
        )
        failed = _run_columns(
            spec_path, spec.figure, profile, key, values, configured, run_args, command
        )
    with clean_errors():
        from dashboards.build import FigureSelectionError
        from dashboards.export import OutputFolderError
        from dashboards.robustness import build_map, update_report
        from dashboards.verdict_map import write_map
        from fedsweep.core.atomic import OutputWriteError

        try:
            vmap = build_map(
                uri,
                spec_path,
                profile,
                key,
                values,
                panels=panels,
                command=command,
                configured=configured,
            )
            files = write_map(vmap, out)
            report = update_report(out, vmap)
        except (FigureSelectionError, OutputFolderError) as err:
            raise UsageError(str(err)) from None
        except OutputWriteError as err:
            fail(str(err), EXIT_FAILED)
    typer.echo("")
    typer.echo(vmap.markdown(png=False).rstrip("\n"))
    for path in files:
        typer.echo(f"map: {path}")
    if report is not None:
        typer.echo(f"report: {report} (its Claim robustness section)")
    broken = [c.value.text for c in vmap.columns if c.error]
    if broken:
        typer.secho(
            f"the figure failed to build at {key}={', '.join(broken)} (see the map)",
            fg="red",
            err=True,
        )
    raise typer.Exit(EXIT_FAILED if failed or broken else 0)


# ------------------------------------------------------------------------------ the inputs
def split_values(raw: str) -> list[str]:
    """``"1e-5,1e-4"`` -> ``["1e-5", "1e-4"]``; commas inside brackets or quotes stay
    (``"[1,2],[3,4]"`` -> two values)."""
    parts, depth, quote, current = [], 0, "", ""
    for ch in raw:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        current += ch
    parts.append(current.strip())
    return parts


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """``"train.lr=1e-5,1e-4"`` -> ``("train.lr", [AxisValue("1e-5", "1e-5"), ...])``: each
    value parsed as a ``--set`` value (``fedsweep.config.load.parse_overrides``)."""
    from dashboards.verdict_map import AxisValue
    from fedsweep.config.load import ConfigError, parse_overrides

    key, sep, raw = text.partition("=")
    key = key.strip()
    texts = split_values(raw) if sep else []
    if not key or not texts or any(not t for t in texts):
        raise UsageError(f"--axis: got {text!r} (allowed: KEY=V1,V2,..., {AXIS_EXAMPLE})")
    values = []
    for t in texts:
        try:
            value = parse_overrides([f"{key}={t}"])[key]
        except ConfigError as err:
            raise UsageError(f"--axis {key}={t}: {err}") from None
        values.append(AxisValue(t, value))
    seen = set()
    for t in texts:
        if t in seen:
            raise UsageError(f"--axis {key}: the value {t} is given twice")
        seen.add(t)
    return key, values


def one_axis(axes: list[str]) -> str:
    """The one ``--axis`` given: a second one would silently replace the first (a map has one
    axis; a product of two is a map per value of the other, each its own command)."""
    if len(axes) > 1:
        raise UsageError(
            f"--axis given {len(axes)} times ({'; '.join(axes)}): a verdict map has one axis "
            "(allowed: one --axis KEY=V1,V2,...; for a second key, one map per value of it, "
            "each of a spec of your own that sets it in base: (extends: FIGURE))"
        )
    return axes[0]


def check_claims(spec, spec_path: Path, profile: str) -> None:
    """A map is the figure's claims x the axis values: a spec without claims (or with one no
    criterion judges, or one that cannot be computed on ``profile``) has nothing to map, and
    would run its sweeps for nothing."""
    from fedsweep.judge.check import claim_problem
    from fedsweep.specs.claims import profile_claim_problem

    if not spec.claims:
        raise UsageError(
            f"{spec_path}: {spec.figure} has no claims: a verdict map judges a figure's claims "
            "along the axis, so there is nothing to map (allowed: a figure with claims:; "
            "fedsweep sweep --set KEY=VALUE runs it at other values)"
        )
    from fedsweep.specs.load import expand

    trials = lambda: expand(spec, profile)  # noqa: E731
    problem = profile_claim_problem(spec.claims, profile, spec, trials) or claim_problem(
        spec.claims
    )
    if problem:
        raise UsageError(f"{spec_path}: {problem}")


def check_axis_changes(spec, profile: str, key: str, values, panels) -> None:
    """Each axis value must give other runs than the others: a key no run's numbers depend
    on (``seed``, set per trial by the figure's seeds; ``name``, ``tracking.*`` and the other
    keys left out of the config hash) or two values that are one (``0.1`` and ``1e-1``) would
    map the same runs under several headings."""
    from fedsweep.specs.figure import figure_plan

    check_axis_reads(spec, profile, key)
    seen: dict[tuple, str] = {}
    for value in values:
        plan = figure_plan(spec, profile, extra={key: value.value}, panels=panels)
        hashes = tuple(plan.config_hashes)
        if hashes in seen:
            raise UsageError(
                f"--axis {key}={seen[hashes]},{value.text}: the two values give the same runs "
                f"(the same config hashes): {key} does not change the runs of {spec.figure} "
                "there; give values that differ, or vary a key its trials read"
            )
        seen[hashes] = value.text


def check_axis_reads(spec, profile: str, key: str) -> None:
    """Refuse ``seed`` (set per trial by the figure's seeds) and the keys the config hash
    leaves out: no run's numbers depend on them."""
    from fedsweep.config.hashing import HASH_EXCLUDED

    if key == "seed":
        raise UsageError(
            f"--axis seed: the seeds of {spec.figure} set each trial's seed (a verdict is over "
            "them), so the values change no run; vary another key (the seeds: the spec's "
            f"seeds or profiles.{profile}.seeds)"
        )
    excluded = next((k for k in HASH_EXCLUDED if key == k or key.startswith(k + ".")), None)
    if excluded is not None:
        raise UsageError(
            f"--axis {key}: {excluded} cannot change a run's numbers (keys left out of the "
            f"config hash: {', '.join(HASH_EXCLUDED)}); vary a key that does"
        )


def check_axis_key(spec, profile: str, key: str) -> None:
    """Refuse a key the figure itself varies: one its curves set (its comparison: one value for
    every curve would erase it) or a panel axis sets (choose panels with ``--panel``)."""
    from fedsweep.specs.load import key_setters, overlaps

    if key in spec.panels:
        raise UsageError(
            f"--axis {key}: a panel axis of {spec.figure} (its panels compare its values); "
            f"choose panels with --panel {key}=..., vary another key"
        )
    axes, _ = key_setters(spec, profile, key)
    if axes:
        raise UsageError(
            f"--axis {key}: the panels of {spec.figure}'s axis {axes[0]} set it (its panels "
            f"compare them); choose panels with --panel {axes[0]}=..., vary another key"
        )
    prof = spec.profiles[profile]
    setters = [
        c.label
        for c in spec.curve_list()
        if any(
            overlaps(key, k)
            for k in (
                *c.set,
                *(c.derive.set if c.derive is not None else ()),
                *prof.curve_set.get(c.label, {}),
            )
        )
    ]
    if setters:
        raise UsageError(
            f"--axis {key}: the curves of {spec.figure} set it ({', '.join(setters)}): one value "
            "for every curve would erase what the figure compares; vary another key"
        )


def command_line(figure, spec_path: Path, sweeps_dir: Path, key, values, profile, panel) -> str:
    """The command that makes the map (a figure id as typed; a path without this machine's
    folders), for the map's last line."""
    from dashboards.report import _clean
    from fedsweep.specs.names import figure_file

    by_id = Path(spec_path) == figure_file(str(figure), sweeps_dir)
    shown = figure if by_id else _clean(str(spec_path))
    parts = [
        "fedsweep robustness",
        shown,
        f"--axis {key}={','.join(v.text for v in values)}",
        f"--profile {profile}",
        *(f"--panel {p}" for p in panel or []),
    ]
    return " ".join(parts)


# ------------------------------------------------------------------------------ --plan
def _print_plans(spec_path, profile, key, values, configured, panels, data_dir, uri, workers):
    """Per axis value, the sweep's plan (``fedsweep.sweep.plan``): no Ray, no writes."""
    from dashboards.verdict_map import STAR
    from fedsweep.sweep.plan import DERIVED, REUSE, RUN, plan_sweep, summary_line
    from fedsweep.sweep.report import duration

    to_run = reused = derived = total = unestimated = 0
    wall = 0.0
    stuck = ""
    for value, star in zip(values, configured, strict=True):
        plan = plan_sweep(
            spec_path,
            profile,
            tracking_uri=uri,
            data_dir=data_dir,
            overrides={key: value.value},
            max_concurrent=workers,
            panels=panels,
        )
        mark = f" {STAR}" if star else ""
        typer.echo(f"{key}={value.text}{mark}: {summary_line(plan)}")
        if plan.data_note:
            typer.echo(f"  note: {plan.data_note}")
        to_run += plan.count(RUN)
        reused += plan.count(REUSE)
        derived += plan.count(DERIVED)
        total += len(plan.trials)
        unestimated += plan.unestimated
        wall += plan.wall_s
        stuck = stuck or plan.never_starts
    line = (
        f"total: {total} trials over {len(values)} values of {key}: {to_run} to run, "
        f"{reused} reused"
        + (f", {derived} derived (they run after their sources)" if derived else "")
    )
    if stuck:
        line += "; no trial can ever start here (see above)"
    elif to_run > unestimated:
        line += f"; ≈ {duration(wall)} of wall time where measured"
    if unestimated:
        line += f"; {unestimated} trials without a measured run to estimate from"
    typer.echo(line)


# ------------------------------------------------------------------------------ running
def _run_columns(spec_path, figure, profile, key, values, configured, run_args, command) -> bool:
    """Run the figure's sweep once per axis value under one console (as ``fedsweep sweep``
    does for several specs); True when a trial failed. Ctrl-C / SIGTERM: exit 130 / 143."""
    from dashboards.verdict_map import STAR
    from fedsweep.cli.sweep_console import SweepConsole, ray_output_to
    from fedsweep.cli.sweep_stop import disk_full_at, sigterm_as_sigint
    from fedsweep.sweep.ray_backend import shutdown_ray
    from fedsweep.sweep.runner import run_sweep
    from fedsweep.tracking.uri import default_store_dir

    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_path = (
        default_store_dir() / "ray_results" / "logs" / f"{figure}-{key}-{profile}-{stamp}.log"
    )
    ray_was_up = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    terminated: list[int] = []
    failed = False
    try:
        with clean_errors(), sigterm_as_sigint(terminated), ray_output_to(log_path) as (out, err):
            console = SweepConsole(len(values), profile, out, err, tee=sys.stdout)
            console.print(f"Ray's output (trial tables, worker warnings) goes to {log_path}")
            try:
                for index, value in enumerate(values, 1):
                    name = f"{figure} {key}={value.text}" + (
                        f" {STAR}" if configured[index - 1] else ""
                    )
                    print(f"\n===== [{index}/{len(values)}] {name} [{profile}] =====", flush=True)
                    console.begin_sweep(index, name)
                    start = time.perf_counter()
                    try:
                        report = run_sweep(
                            spec_path,
                            profile,
                            overrides={key: value.value},
                            echo=console.echo,
                            listener=console,
                            **run_args,
                        )
                    finally:
                        console.stop_live()
                    report.figure = name  # the table's row names the axis value
                    console.end_sweep(report, time.perf_counter() - start)
                    for line in report.errors:
                        console.error(f"  failed: {line}")
                    failed |= bool(report.errored)
                console.print_table()
            finally:
                if not ray_was_up:
                    shutdown_ray()
    except KeyboardInterrupt as err:
        how = "SIGTERM" if terminated else "Ctrl-C"
        detail = f"{err}; " if str(err) else ""
        typer.echo(
            f"interrupted ({how}): {detail}the unfinished trials' runs are marked KILLED. "
            f"Continue with: {command} (the finished runs are reused)",
            err=True,
        )
        raise typer.Exit(128 + (signal.SIGTERM if terminated else signal.SIGINT)) from None
    except Exception as err:
        full = disk_full_at(err, run_args.get("tracking_uri"))
        if full is None:
            raise
        typer.secho(f"robustness failed: {full}", fg=typer.colors.RED, err=True)
        raise typer.Exit(EXIT_FAILED) from None
    return failed
