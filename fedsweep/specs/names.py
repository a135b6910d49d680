"""Naming a figure on the command line, checked before anything heavy is imported: a figure
id (``bherd-fig3a``, the stem of ``<sweeps_dir>/<id>.yaml``) or a spec file's path.

A typo is refused here, in the time Python takes to start (about 0.3 s), instead of after
torch, Ray, MLflow and plotly are imported (5-9 s idle, up to 113 s under load, measured on a
2-core machine: issue 48). :func:`fedsweep.specs.load.find_spec` gives the same messages."""

from __future__ import annotations

from pathlib import Path

from fedsweep.core.shipped import resolve_shipped, shipped_copy, shipped_dir

#: fedsweep's own specs (``fedsweep.specs.extends.SWEEPS_DIRS``' last folder), found from any
#: working directory and in an installed package (:mod:`fedsweep.core.shipped`)
SHIPPED_SWEEPS = shipped_dir("sweeps")
#: the commands' default ``--sweeps-dir``
DEFAULT_SWEEPS = Path("sweeps")
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


def sweeps_home(sweeps_dir: str | Path = "sweeps") -> Path:
    """The folder of specs ``sweeps_dir`` means: itself, or, for the default ``sweeps`` in a
    working directory that has no ``sweeps/`` folder, fedsweep's shipped specs (so a figure id
    and "every spec" mean the shipped ones from any folder)."""
    folder = Path(sweeps_dir)
    if folder == DEFAULT_SWEEPS and not folder.is_dir():
        return SHIPPED_SWEEPS
    return folder


def figure_file(figure: str, sweeps_dir: str | Path = "sweeps") -> Path | None:
    """The spec file of figure id ``figure``: ``<sweeps_dir>/<id>.yaml`` (:func:`sweeps_home`),
    else fedsweep's shipped spec of that id; None when neither is a file."""
    for candidate in (
        sweeps_home(sweeps_dir) / f"{figure}.yaml",
        SHIPPED_SWEEPS / f"{figure}.yaml",
    ):
        if candidate.is_file():
            return candidate
    return None


def spec_paths(folder: str | Path = "sweeps") -> list[Path]:
    return sorted(sweeps_home(folder).glob("*.yaml"))


def looks_like_path(name: str) -> bool:
    """``sweeps/x.yaml``, ``x.yml``, ``./x``: a file path, not a figure id."""
    return name.endswith((".yaml", ".yml")) or "/" in name or "\\" in name


def name_problem(name: str | Path, sweeps_dir: str | Path = "sweeps") -> str | None:
    """Why ``name`` names no spec (one line with the nearest id or file), or None when it names
    one: an existing file, or an id with ``<sweeps_dir>/<id>.yaml``."""
    from fedsweep.core.suggest import closest, did_you_mean

    text = str(name)
    path = Path(text)
    folder = sweeps_home(sweeps_dir)
    if path.is_file():
        return None
    ids = [p.stem for p in spec_paths(folder)] if folder.is_dir() else []
    if not looks_like_path(text):
        if figure_file(text, folder) is not None:
            return None
        known = sorted({*ids, *(p.stem for p in SHIPPED_SWEEPS.glob("*.yaml"))})
        allowed = ", ".join(known) if known else f"none ({folder} has no spec)"
        return (
            f"unknown figure id {text!r}{did_you_mean(text, known)}; allowed: {allowed} "
            "(or give a spec file's path)"
        )
    if shipped_copy(text, "sweeps") is not None:
        return None  # sweeps/<id>.yaml from a folder without it: the shipped spec
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
    existing file, else the spec of that figure id: ``<sweeps_dir>/<name>.yaml`` or the shipped
    one, else the shipped copy of a path such as ``sweeps/<id>.yaml``), for a check that comes
    after :func:`name_problem` and before the heavy imports."""
    path = Path(str(name))
    if path.is_file():
        return path
    if not looks_like_path(str(name)):
        return figure_file(str(name), sweeps_dir) or sweeps_home(sweeps_dir) / f"{name}.yaml"
    return shipped_copy(path, "sweeps") or path


def find_spec_file(name: str | Path, sweeps_dir: str | Path = "sweeps") -> Path:
    """:func:`spec_path` for a name :func:`name_problem` accepted, saying on stderr when a path
    that is no file here resolved to fedsweep's shipped copy."""
    text = str(name)
    if looks_like_path(text) and not Path(text).is_file():
        return resolve_shipped(text, "sweeps")
    return spec_path(text, sweeps_dir)


def local_figure_ids(sweeps_dir: str | Path = "sweeps") -> list[str]:
    """The figure ids of the spec files here (``sweeps_dir``, ``studies/``) and fedsweep's
    shipped specs: the ids a command knows without opening a store."""
    ids: set[str] = set()
    for folder in (sweeps_home(sweeps_dir), STUDIES, SHIPPED_SWEEPS):
        if folder.is_dir():
            ids |= {p.stem for p in folder.glob("*.yaml")}
    return sorted(ids)
