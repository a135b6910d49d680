"""The checks of ``fedsweep sweep`` before anything runs: which specs it sweeps (the figures
named, a ``--grid`` study of one, or every runnable spec in ``sweeps/``), each spec's size, its
claims and its figure id, refused in one line (exit 2) before Ray or MLflow starts."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import typer

from fedsweep.cli.common import UsageError, fail

#: the most trials one spec may have at the profile without ``--yes`` (the shipped figures have
#: at most 360): building and checking a trial takes about a millisecond, every profile of a
#: spec is checked when it loads, and each trial is a run of minutes or more
MAX_TRIALS = 2000


@dataclass(frozen=True)
class SweepSpecs:
    """What a ``fedsweep sweep`` sweeps: its spec files, each one's figure id, the profile."""

    specs: list[Path]
    figures: list[str]
    profile: str


def choose_specs(
    names: list[str] | None,
    sweeps_dir: Path,
    profile: str | None,
    panels,
    seeds: list[int] | None,
    grid: list[str] | None,
    yes: bool,
    plan: bool,
    unwritten: contextlib.ExitStack,
) -> SweepSpecs:
    """The specs the command line names (``--grid``: the study of the one named), else every
    spec in ``sweeps_dir`` that this code can run (the others are said and skipped); each one
    checked before anything runs. ``profile`` None: quick for the figures named. ``plan``
    (``--plan`` writes nothing): a ``--grid`` study loads from its path while ``unwritten`` is
    open, unwritten."""
    from fedsweep.specs.load import find_spec

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
    if profile is None:
        if not specs and not plan:  # every spec for hours, by accident: ask for it by name
            raise UsageError(
                "name the figure(s) to sweep, e.g. fedsweep sweep bherd-fig3a --profile "
                "smoke; every spec in sweeps/ runs only with --profile said (quick: hours on a "
                "laptop; --plan lists the trials and their estimated time first)"
            )
        profile = "quick"
    if not specs:
        return _runnable_specs(sweeps_dir, profile, seeds, yes)
    # validate every named spec before anything runs
    figures = [_checked_figure(path, profile, seeds, panels, yes) for path in specs]
    check_figures_once(specs, figures)
    return SweepSpecs(specs, figures, profile)


def _runnable_specs(sweeps_dir: Path, profile: str, seeds, yes: bool) -> SweepSpecs:
    """Every spec in ``sweeps_dir`` that passes :func:`_checked_figure`; each other one is one
    line saying why it is skipped. None at all: exit 2."""
    from fedsweep.specs.load import SpecError, spec_paths

    specs, figures = [], []
    for path in spec_paths(sweeps_dir):
        try:
            figures.append(_checked_figure(path, profile, seeds, None, yes))
            specs.append(path)
        except (SpecError, UsageError) as err:
            reason = str(err).splitlines()[-1].strip()
            typer.echo(f"skipping {path}: this code cannot run it yet ({reason})")
    if not specs:
        fail(f"no runnable sweep spec in {sweeps_dir}")
    return SweepSpecs(specs, figures, profile)


def _checked_figure(path: Path, profile: str, seeds, panels, yes: bool) -> str:
    """The figure id of the spec ``path``, once its ``--seeds``, ``--panel``, size
    (:func:`check_size`) and claims (:func:`check_claims`) are checked at ``profile``."""
    from fedsweep.specs.load import check_panel_filter, load_spec, read_spec

    spec = read_spec(path)  # its trials counted before they are built
    if seeds:
        spec = spec.with_seeds(profile, seeds)
    if panels:
        check_panel_filter(spec, profile, panels, str(path))
    check_size(spec, path, profile, panels, yes)
    loaded = load_spec(path)
    check_claims(loaded, path, profile)
    return loaded.figure


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
    """Every claim of the spec is one fedsweep can judge (its measures and guards registered:
    ``fedsweep.judge.check.claim_problem``), else it would sweep for hours and then read "n/a"
    in every figure; and every
    declared claim can be computed on ``profile`` (a measure's needs, e.g. its target accuracy:
    ``fedsweep.specs.claims.profile_claim_problem``)."""
    from fedsweep.specs.claims import profile_claim_problem
    from fedsweep.specs.load import expand

    def trials():
        return expand(spec, profile)

    problem = profile_claim_problem(spec.claims, profile, spec, trials) if profile else None
    if problem:
        raise UsageError(f"{path}: {problem}")
    from fedsweep.judge.check import claim_problem

    problem = claim_problem(spec.claims)
    if not problem and profile:  # a paper's own measure declares its needs as it registers
        problem = profile_claim_problem(spec.claims, profile, spec, trials)
    if problem:
        raise UsageError(f"{path}: {problem}")


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
