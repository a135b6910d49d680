"""Naming a figure on the command line, checked before anything heavy is imported: a figure
id (``bherd-fig3a``, the stem of ``<sweeps_dir>/<id>.yaml``) or a spec file's path.

A typo is refused here, in the time Python takes to start (about 0.3 s), instead of after
torch, Ray, MLflow and plotly are imported (5-9 s idle, up to 113 s under load, measured on a
2-core machine: issue 48). :func:`fedsweep.specs.load.find_spec` gives the same messages."""

from __future__ import annotations

from pathlib import Path

#: fedsweep's own specs (``fedsweep.specs.extends.SWEEPS_DIRS``' last folder)
SHIPPED_SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
#: where ``sweep --grid`` writes a shipped figure's study (``fedsweep.specs.grid_study``)
STUDIES = Path("studies")

#: top-level keys that make a YAML file a sweep spec (a run config has none of them)
SPEC_MARKERS = ("figure", "extends", "add_curves", "base", "panels", "curves", "profiles")


def sweep_spec_refusal(path, tree, command: str) -> str | None:
    """The one line a run-config command (``fedsweep run``, ``validate``) answers a sweep spec
    with, pointing to ``fedsweep sweep``; None when ``tree`` has no sweep-spec key."""
    keys = [k for k in tree if k in SPEC_MARKERS] if isinstance(tree, dict) else []
    if not keys:
        return None
    return (
        f"{path}: this is a sweep spec (top-level keys {', '.join(keys)}), not a run config: "
        f"use `fedsweep sweep {path} --profile P` (P: paper, quick or smoke; --plan lists its "
        f"trials first); `fedsweep {command}` takes one run config (see configs/)"
    )


def spec_paths(folder: str | Path = "sweeps") -> list[Path]:
    return sorted(Path(folder).glob("*.yaml"))


def looks_like_path(name: str) -> bool:
    """``sweeps/x.yaml``, ``x.yml``, ``./x``: a file path, not a figure id."""
    return name.endswith((".yaml", ".yml")) or "/" in name or "\\" in name


def name_problem(name: str | Path, sweeps_dir: str | Path = "sweeps") -> str | None:
    """Why ``name`` names no spec (one line with the nearest id or file), or None when it names
    one: an existing file, or an id with ``<sweeps_dir>/<id>.yaml``."""
    from fedsweep.core.suggest import closest, did_you_mean

    text = str(name)
    path = Path(text)
    folder = Path(sweeps_dir)
    if path.is_file():
        return None
    ids = [p.stem for p in spec_paths(folder)] if folder.is_dir() else []
    if not looks_like_path(text):
        if (folder / f"{text}.yaml").is_file():
            return None
        allowed = ", ".join(ids) if ids else f"none ({folder} has no spec)"
        return (
            f"unknown figure id {text!r}{did_you_mean(text, ids)}; allowed: {allowed} "
            "(or give a spec file's path)"
        )
    parent = path.parent
    near = closest(path.name, [p.name for p in parent.glob("*.y*ml")] if parent.is_dir() else [])
    if near:
        hint = f" (did you mean {str(parent / near)!r}?)"
    elif path.stem in ids:
        hint = f" (did you mean {str(folder / (path.stem + '.yaml'))!r}?)"
    else:
        figure = closest(path.stem, ids)
        hint = f" (did you mean the figure {figure!r}?)" if figure else ""
    return f"sweep spec not found: {text}{hint}"


def spec_path(name: str | Path, sweeps_dir: str | Path = "sweeps") -> Path:
    """The spec file ``name`` names, as :func:`fedsweep.specs.load.find_spec` finds it (an
    existing file, else ``<sweeps_dir>/<name>.yaml``), for a check that comes after
    :func:`name_problem` and before the heavy imports."""
    path = Path(str(name))
    return path if path.is_file() else Path(sweeps_dir) / f"{name}.yaml"


def local_figure_ids(sweeps_dir: str | Path = "sweeps") -> list[str]:
    """The figure ids of the spec files here (``sweeps_dir``, ``studies/``) and fedsweep's
    shipped specs: the ids a command knows without opening a store."""
    ids: set[str] = set()
    for folder in (Path(sweeps_dir), STUDIES, SHIPPED_SWEEPS):
        if folder.is_dir():
            ids |= {p.stem for p in folder.glob("*.yaml")}
    return sorted(ids)
