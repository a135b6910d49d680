"""``fedsweep sweep``: sweep specs as Ray Tune trials, each an MLflow child run.

The command reads as its steps: refuse a bad input early (:mod:`fedsweep.cli.early`), choose
and check the specs (:mod:`fedsweep.cli.sweep_specs`), print the plan and stop (``--plan``:
:mod:`fedsweep.cli.sweep_plan`), or run the sweeps and summarise them
(:mod:`fedsweep.cli.sweep_run`), a stop or a full disk said in one line
(:mod:`fedsweep.cli.sweep_stop`).
"""

from __future__ import annotations

import contextlib
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
)
from fedsweep.cli.early import refuse_sweep_early
from fedsweep.cli.sweep_specs import MAX_TRIALS

FiguresArgument = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="FIGURE",
        help="Figure ids (bherd-fig3a: sweeps/bherd-fig3a.yaml) or sweep spec files. "
        "Default: every spec in sweeps/ that this code can run (the others are listed "
        "with the reason).",
        autocompletion=complete_figure,
        show_default=False,
    ),
]
SweepProfileOption = Annotated[
    Profile | None,
    typer.Option(
        "--profile",
        help="paper (the paper's settings), quick (a 2-core laptop) or smoke (2-3 rounds). "
        "Default: quick for the figures named; every spec (no FIGURE) needs it said.",
        show_default=False,
        metavar="paper|quick|smoke",
        callback=check_profile,
    ),
]
AddressOption = Annotated[
    str | None,
    typer.Option(
        metavar="ADDRESS",
        envvar="FEDSWEEP_RAY_ADDRESS",
        help="Attach to an existing Ray cluster (e.g. HOST:6380, 'auto' or "
        "'ray://HOST:10001'; fedsweep team up's team.env sets it); default: start a "
        "private local Ray ($RAY_ADDRESS is not used).",
    ),
]
ResumeOption = Annotated[
    bool,
    typer.Option("--resume", help="Continue an interrupted sweep (checkpoints, same MLflow runs)."),
]
GridOption = Annotated[
    list[str] | None,
    typer.Option(
        "--grid",
        metavar="KEY=V1,V2",
        help="Add one curve per value (several --grid: per combination) to the figure named: "
        "writes the study as a spec file that extends it (studies/<figure>-grid-<digest>.yaml, "
        "or beside a spec file of your own), sweeps that file and reuses every run the "
        "figure has (with --plan: lists its trials, writes nothing). Repeatable.",
    ),
]
SweepsDirOption = Annotated[
    Path, typer.Option(metavar="DIR", help="Where specs live (for the default).")
]
StorageOption = Annotated[
    str | None,
    typer.Option(
        metavar="DIR|URI",
        help="Where the trials' checkpoints live (default: <store dir>/ray_results). On a "
        "multi-node cluster: a folder every node mounts at the same path (NFS), or an "
        "object store, e.g. s3://bucket/prefix (S3-compatible: "
        "?endpoint_override=HOST:PORT&scheme=http), so a trial restarted on another node "
        "finds its checkpoint.",
    ),
]
ArtifactRootOption = Annotated[
    str | None,
    typer.Option(
        metavar="URI",
        help="Where new experiments keep their artifacts when --tracking-uri is a "
        "database (postgresql://...): a shared folder or an object-store URI (s3://...). "
        "A tracking server (http://...) decides this itself (mlflow server "
        "--artifacts-destination).",
    ),
]
WaitOption = Annotated[
    bool,
    typer.Option(
        "--wait",
        help="When another driver is sweeping the same spec and profile into the same "
        "store, wait for it to end, then run what is left (default: refuse, naming it).",
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Show Ray's own output live (trial tables, worker warnings) instead of "
        "writing it to the sweep log.",
    ),
]
PlanOption = Annotated[
    bool,
    typer.Option(
        "--plan",
        help="List every trial without starting Ray or writing anything: its id, config "
        "hash (and legacy hash), whether a finished run in the store is reused, and the "
        "estimated time from the store's measured rounds.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="With --plan: one JSON object per trial.")]
UntilDecidedOption = Annotated[
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
]
MaxSeedsOption = Annotated[
    int,
    typer.Option(metavar="N", min=2, max=1000, help="With --until-decided: at most N seeds."),
]
BudgetOption = Annotated[
    float | None,
    typer.Option(
        metavar="HOURS",
        help="With --until-decided: no new batch once this much time is spent, or when "
        "the next one would not fit in what is left (by the time a seed took so far).",
    ),
]
YesOption = Annotated[
    bool,
    typer.Option(
        "--yes",
        help=f"Go ahead with a spec of more than {MAX_TRIALS:,} trials at the profile "
        "(refused without it: checking them alone takes minutes).",
    ),
]


def sweep(
    names: FiguresArgument = None,
    profile: SweepProfileOption = None,
    address: AddressOption = None,
    resume: ResumeOption = False,
    max_concurrent: MaxConcurrentOption = None,
    set_: SetOption = None,
    panel: PanelOption = None,
    seeds: SeedsOption = None,
    grid: GridOption = None,
    data_dir: DataDirOption = None,
    tracking_uri: TrackingUriOption = None,
    sweeps_dir: SweepsDirOption = Path("sweeps"),
    storage: StorageOption = None,
    artifact_root: ArtifactRootOption = None,
    wait: WaitOption = False,
    verbose: VerboseOption = False,
    plugin: PluginOption = None,
    plan: PlanOption = False,
    json_out: JsonOption = False,
    until_decided: UntilDecidedOption = False,
    max_seeds: MaxSeedsOption = 10,
    budget: BudgetOption = None,
    yes: YesOption = False,
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
    from fedsweep.cli.sweep_plan import print_plans
    from fedsweep.cli.sweep_run import run_all, run_until_decided
    from fedsweep.cli.sweep_specs import choose_specs
    from fedsweep.cli.sweep_stop import one_line_stops
    from fedsweep.config.load import parse_overrides
    from fedsweep.plugins import load_plugins
    from fedsweep.specs.load import parse_panel_filter
    from fedsweep.specs.seeds import parse_seeds

    # with --plan, the --grid study is planned where it would be written, and not written
    with contextlib.ExitStack() as unwritten, clean_errors():
        plugins = load_plugins(plugin)  # before the specs: they may name a plugin's parts
        _check_max_concurrent(max_concurrent)
        overrides = parse_overrides(set_)
        panels = parse_panel_filter(panel)
        seed_list = parse_seeds(seeds)
        chosen = choose_specs(
            names, sweeps_dir, profile, panels, seed_list, grid, yes, plan, unwritten
        )
        _check_with_options(names, plan, json_out, until_decided, budget)
        if plan:
            print_plans(
                chosen.specs, chosen.profile, overrides, data_dir, tracking_uri,
                max_concurrent, json_out, panels, address, seed_list,
            )  # fmt: skip
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
    specs, figures, profile = chosen.specs, chosen.figures, chosen.profile
    with one_line_stops(specs, profile, panel, storage, tracking_uri, seeds):
        if until_decided:
            failed = run_until_decided(
                specs, figures, profile, verbose, run_args, max_seeds, budget
            )
        else:
            failed = run_all(specs, figures, profile, verbose, run_args)
    raise typer.Exit(1 if failed else 0)


def _check_max_concurrent(max_concurrent: int | None) -> None:
    """``--max-concurrent`` below 1: :class:`UsageError` (exit 2)."""
    if max_concurrent is not None and max_concurrent < 1:
        raise UsageError(
            f"--max-concurrent: got {max_concurrent} (allowed: 1 or more; leave it out to "
            "run as many trials at once as the resources allow)"
        )


def _check_with_options(names, plan: bool, json_out: bool, until_decided: bool, budget) -> None:
    """The options that go only with others (``--json`` with ``--plan``; ``--until-decided``
    with figures named and without ``--plan``; ``--budget`` with ``--until-decided``):
    :class:`UsageError` (exit 2) otherwise."""
    if json_out and not plan:
        raise UsageError("--json: only with --plan (it prints the plan as JSON)")
    if until_decided and (plan or not names):
        raise UsageError(
            "--until-decided: name the figure(s) whose claims it decides, without --plan"
        )
    if budget is not None and (not until_decided or budget <= 0):
        raise UsageError(f"--budget: got {budget} (allowed: hours > 0, with --until-decided)")
