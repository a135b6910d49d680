"""``extends:`` in a sweep spec: find the extended spec (a figure id or a path, kept among the
specs) and merge the chain into one tree (rules: :mod:`fedsweep.specs.load`'s docstring).
"""

from __future__ import annotations

import copy
import difflib
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fedsweep.config.schema import RunConfig
from fedsweep.config.yamlio import YamlFileError, read_yaml
from fedsweep.specs.curves import CurveGrid
from fedsweep.specs.model import SpecError, SweepSpec, figure_id_problem
from fedsweep.specs.names import SHIPPED_SWEEPS

#: where ``extends: <figure id>`` looks after the extending file's own folder (the working
#: directory's ``sweeps/``, then fedsweep's own); with that folder, the only folders an
#: ``extends`` path may point into
SWEEPS_DIRS = (Path("sweeps"), SHIPPED_SWEEPS)
SPEC_SUFFIXES = (".yaml", ".yml")
from fedsweep.specs.names import SPEC_MARKERS  # noqa: E402,F401  (read before heavy imports)

#: the warnings printed so far (each once per process: a command loads a spec several times)
_WARNED: set[str] = set()
#: the specs being checked as claimants of a figure id (a claimant that extends its way back
#: here is not loaded again)
_CHECKING: set[Path] = set()


def _warn(text: str) -> None:
    """One ``warning:`` line on stderr, once per process."""
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"warning: {text}", file=sys.stderr, flush=True)


def shadow_warning(found: Path, ref: str, where: str) -> None:
    """Warn in one line when ``found``, the spec figure id ``ref`` resolved to for ``where``
    (``extends`` in a spec, a command's FIGURE), is not fedsweep's shipped spec of that id but
    a different file of the same id: a local copy that shadows the shipped figure. A copy with
    the same bytes shadows nothing and says nothing."""
    shipped = SWEEPS_DIRS[-1] / f"{ref}.yaml"
    try:
        if not shipped.is_file() or shipped.resolve() == Path(found).resolve():
            return
        if _figure_of(shipped) != ref or shipped.read_bytes() == Path(found).read_bytes():
            return
    except OSError:
        return
    _warn(
        f"{where}: figure id {ref!r} is {found}, not the shipped {shipped}: the local spec "
        "shadows it (give the shipped spec's path to use it, or give yours its own id)"
    )


#: loads a spec file, raising ``SpecError`` (``fedsweep.specs.load.load_spec``, which imports
#: this module and so hands itself in: :func:`spec_tree`'s ``load``)
Loader = Callable[[Path], object]


def _load_problem(candidate: Path, load: Loader | None) -> str:
    """Why ``candidate`` does not load as a spec (first line of its error), "" when it does;
    without ``load``, only its own keys are checked (not its trials)."""
    target = candidate.resolve()
    if target in _CHECKING:
        return "it extends its way back to the spec being resolved"
    _CHECKING.add(target)
    try:
        if load is not None:
            load(candidate)
        else:
            SweepSpec.model_validate(spec_tree(target, ()))
    except ValidationError as err:
        return f"invalid sweep spec {candidate}: {err.errors()[0]['msg']}"
    except SpecError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        return " ".join(lines[:2]) if lines[0].endswith(":") else lines[0]
    except RecursionError:
        return "nested too deeply to be a sweep spec"
    finally:
        _CHECKING.discard(target)
    return ""


def sweep_spec_keys(tree: Any) -> list[str]:
    """The top-level sweep-spec keys of ``tree`` when it looks like a sweep spec rather than a
    run config (a spec marker such as ``figure``/``curves``/``profiles``/``extends``, and more
    spec keys than run-config sections), else ``[]``."""
    if not isinstance(tree, dict):
        return []
    spec_keys = [k for k in tree if k in SweepSpec.model_fields or k == "add_curves"]
    run_keys = [k for k in tree if k in RunConfig.model_fields]
    if any(k in SPEC_MARKERS for k in spec_keys) and len(spec_keys) > len(run_keys):
        return spec_keys
    return []


#: spec files planned but not written (``sweep --grid --plan``): resolved path -> YAML tree
_UNWRITTEN: dict[Path, dict[str, Any]] = {}


@contextmanager
def unwritten_spec(path: Path, tree: dict[str, Any]) -> Iterator[Path]:
    """While inside, ``path`` loads as a spec file holding ``tree`` although nothing is written
    there: ``sweep --grid --plan`` plans the study it would write, at the path it would write
    it to (so its ``extends`` resolves exactly as the written file's would), and writes
    nothing."""
    key = Path(path).resolve()
    _UNWRITTEN[key] = copy.deepcopy(tree)
    try:
        yield Path(path)
    finally:
        _UNWRITTEN.pop(key, None)


def spec_exists(path: Path) -> bool:
    """``path`` is a file, or a spec planned but not written (:func:`unwritten_spec`)."""
    return Path(path).is_file() or Path(path).resolve() in _UNWRITTEN


def _read_tree(path: Path) -> dict[str, Any]:
    unwritten = _UNWRITTEN.get(Path(path).resolve())
    if unwritten is not None:
        return copy.deepcopy(unwritten)
    try:
        tree = read_yaml(path, "sweep spec")
    except YamlFileError as err:
        raise SpecError(f"invalid sweep spec: {err}") from None
    except RecursionError:
        raise SpecError(
            f"invalid sweep spec {path}: nested too deeply to be a sweep spec"
        ) from None
    if tree is None:
        raise SpecError(f"sweep spec {path} is empty")
    if not isinstance(tree, dict):
        raise SpecError(f"invalid sweep spec {path}: top level must be a mapping of spec keys")
    return tree


def _figure_of(path: Path) -> str | None:
    """The figure id ``path`` sets; None for a file that cannot be read or sets none."""
    try:
        tree = read_yaml(path)
    except (YamlFileError, RecursionError):
        return None
    figure = tree.get("figure") if isinstance(tree, dict) else None
    return figure if isinstance(figure, str) else None


def _spec_folders(here: Path) -> list[Path]:
    """The folders ``extends`` in a spec of folder ``here`` may reach, symlinks resolved: ``here``,
    then the ``sweeps/`` folders of :data:`SWEEPS_DIRS` that exist."""
    folders: list[Path] = []
    for folder in (here, *SWEEPS_DIRS):
        folder = folder.resolve()
        if folder.is_dir() and folder not in folders:
            folders.append(folder)
    return folders


def _inside(target: Path, folders: list[Path]) -> bool:
    return any(target.is_relative_to(folder) for folder in folders)


def _claims(candidate: Path, ref: str) -> bool:
    """Whether a file that cannot be read as YAML still is the spec of figure id ``ref``: it is
    named ``<ref>.yaml`` or its text sets ``figure: <ref>`` on a line of its own."""
    if candidate.stem == ref:
        return True
    try:
        text = candidate.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return False
    line = rf"""^figure:[ \t]*(['"]?){re.escape(ref)}\1[ \t]*(#.*)?$"""
    return re.search(line, text, flags=re.MULTILINE) is not None


def _spec_of_figure(
    ref: str, folder: Path, path: Path, folders: list[Path], load: Loader | None = None
) -> Path | None:
    """The one spec of ``folder`` whose figure id is ``ref``, None when there is none. Files
    that cannot be read as YAML are skipped, unless one is that spec (:func:`_claims`): then its
    error is raised; two specs with the figure id are an error naming both. Where several files
    claim the id and exactly one loads as a spec, the broken ones (invalid YAML or an invalid
    spec: a work-in-progress copy) are skipped with one warning each. Only ``<ref>.yaml`` and
    files whose text contains ``ref`` are read, and none that resolves outside ``folders``."""
    me = path.resolve()
    found: dict[Path, Path] = {}  # resolved -> as listed
    broken: list[tuple[Path, str]] = []
    for candidate in sorted(folder.glob("*.y*ml")):
        target = candidate.resolve()
        if (
            candidate.suffix not in SPEC_SUFFIXES
            or target == me
            or target in found
            or not _inside(target, folders)
            or not target.is_file()
        ):
            continue
        try:
            if candidate.stem != ref and ref.encode() not in target.read_bytes():
                continue
            tree = read_yaml(candidate, "sweep spec")
        except OSError:
            continue
        except (YamlFileError, RecursionError) as err:
            if _claims(candidate, ref):
                broken.append((candidate, str(err) or "nested too deeply to be a sweep spec"))
            continue
        if isinstance(tree, dict) and tree.get("figure") == ref:
            found[target] = candidate
    if len(found) + len(broken) > 1:  # one may be a broken copy: only specs that load count
        for target, candidate in list(found.items()):
            problem = _load_problem(candidate, load)
            if problem:
                del found[target]
                broken.append((candidate, problem))
        if len(found) == 1:
            (chosen,) = found.values()
            for candidate, problem in broken:
                _warn(
                    f"{path}: extends {ref!r}: skipped {candidate}, which sets figure {ref!r} "
                    f"but is not a valid spec ({problem}); using {chosen}"
                )
            return next(iter(found))
    claimants = [*found.values(), *(c for c, _ in broken)]
    if len(claimants) > 1:
        names = ", ".join(str(c) for c in sorted(claimants))
        raise SpecError(
            f"{path}: key `extends`: figure id {ref!r} is claimed by {len(claimants)} specs in "
            f"{folder}: {names}; give each its own figure id, or extend one by its path "
            f"(extends: {claimants[0].name})"
        )
    if broken:
        candidate, problem = broken[0]
        raise SpecError(
            f"{path}: key `extends`: the spec of figure id {ref!r}, {candidate}, cannot be "
            f"read: {problem}"
        )
    return next(iter(found), None)


def resolve_extends(ref: Any, path: Path, load: Loader | None = None) -> Path:
    """The spec file ``extends: ref`` in ``path`` names: a path relative to ``path``'s folder
    (``*.yaml``/``*.yml`` or containing ``/``) that resolves (symlinks and ``..`` included)
    inside that folder or a ``sweeps/`` folder, else a figure id of exactly one spec in
    ``path``'s folder or, when it has none, in ``sweeps/`` (the working directory's, then
    fedsweep's own). Anything else is a :class:`SpecError` saying what is allowed. ``load``
    tells a broken copy among several files of one figure id from the spec
    (:func:`_spec_of_figure`)."""
    path = Path(path)
    here = path.resolve().parent
    folders = _spec_folders(here)
    allowed = (
        "allowed: a figure id of a spec in the spec's folder or sweeps/ (e.g. bherd-fig3a), or "
        "a path to a .yaml spec inside " + " or ".join(str(f) for f in folders)
    )
    if not isinstance(ref, str) or not ref:
        raise SpecError(f"{path}: key `extends`: got {ref!r}; {allowed}")
    if ref.endswith(SPEC_SUFFIXES) or "/" in ref:
        target = (here / ref).resolve()
        if not _inside(target, folders):
            raise SpecError(
                f"{path}: key `extends`: {ref!r} is outside the spec's folder and sweeps/ (it "
                f"resolves to {target}); {allowed}"
            )
        if target.suffix not in SPEC_SUFFIXES:
            raise SpecError(f"{path}: key `extends`: {ref!r} is not a .yaml file; {allowed}")
        if not target.is_file():
            raise SpecError(f"{path}: key `extends`: spec file {ref!r} not found ({target})")
        return target
    if figure_id_problem(ref):
        raise SpecError(
            f"{path}: key `extends`: {ref!r} is neither a figure id nor a path to a .yaml spec; "
            f"{allowed}"
        )
    for folder in folders:
        found = _spec_of_figure(ref, folder, path, folders, load)
        if found is not None:
            shadow_warning(found, ref, f"{path}: extends")
            return found
    known: dict[str, Path] = {}
    for folder in folders:
        for candidate in sorted(folder.glob("*.y*ml")):
            target = candidate.resolve()
            if _inside(target, folders) and target.is_file() and target != path.resolve():
                figure = _figure_of(target)
                if figure is not None:
                    known.setdefault(figure, candidate)
    close = difflib.get_close_matches(ref, list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise SpecError(
        f"{path}: key `extends`: no spec with figure id {ref!r} in {path.parent} or sweeps/"
        f"{hint}; known: {', '.join(sorted(known)) or 'none'}"
    )


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _curve_dicts(curves: Any, where: str) -> list[dict[str, Any]]:
    """A spec's ``curves`` (a list, a ``{key, values}`` grid or a product grid) as a list of
    curve dicts and product grids."""
    if isinstance(curves, list):
        return list(curves)
    if isinstance(curves, dict) and "grid" in curves:
        return [curves]
    try:
        grid = CurveGrid.model_validate(curves)
    except ValidationError as err:
        raise SpecError(f"{where}: key `curves`: {err.errors()[0]['msg']}") from None
    return [c.model_dump(exclude_defaults=True) for c in grid.curve_list()]


def spec_tree(
    path: Path,
    chain: tuple[Path, ...],
    levels: list[tuple[Path, dict[str, Any]]] | None = None,
    load: Loader | None = None,
) -> dict[str, Any]:
    """The spec's YAML with its ``extends`` chain resolved (rules: the module docstring).
    ``levels`` gets (file, its tree resolved so far) for each spec of the chain, the first
    (the one that extends nothing) first; ``load``: see :func:`resolve_extends`."""
    tree = _read_tree(path)
    ref = tree.pop("extends", None)
    added = tree.pop("add_curves", None)
    if ref is None:
        if added is not None:
            raise SpecError(f"{path}: key `add_curves` needs `extends` (the spec to add to)")
        if levels is not None:
            levels.append((path, tree))
        return tree
    parent_path = resolve_extends(ref, path, load)
    if parent_path in (*chain, path):
        cycle = " -> ".join(str(p) for p in (*chain, path, parent_path))
        raise SpecError(f"{path}: key `extends`: circular extension ({cycle})")
    parent = spec_tree(parent_path, (*chain, path), levels, load)
    for key in ("figure", "title"):
        if not tree.get(key):
            raise SpecError(
                f"{path}: key `{key}`: an extension must set its own {key} (it extends "
                f"{parent.get('figure')!r}, whose {key} is {parent.get(key)!r})"
            )
    if tree["figure"] == parent.get("figure"):
        raise SpecError(
            f"{path}: key `figure`: {tree['figure']!r} is the figure id of the spec it extends; "
            "give the extension its own (it becomes its MLflow experiment)"
        )
    merged = _deep_merge(parent, {k: v for k, v in tree.items() if k != "curves"})
    curves = tree.get("curves", parent.get("curves"))
    if added is not None:
        if not isinstance(added, list) or not added:
            raise SpecError(f"{path}: key `add_curves`: expected a non-empty list of curves")
        curves = _curve_dicts(curves, str(path)) + added
        labels = [c.get("label") for c in curves if isinstance(c, dict) and "grid" not in c]
        repeated = sorted({lab for lab in labels if labels.count(lab) > 1}, key=str)
        if repeated:
            raise SpecError(
                f"{path}: key `add_curves`: curve label(s) {repeated} already in "
                f"{parent.get('figure')!r}; labels must be unique"
            )
    merged["curves"] = curves
    merged["extends"] = parent.get("figure")
    if levels is not None:
        levels.append((path, merged))
    return merged
