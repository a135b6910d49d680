"""``fedsweep sweep FIGURE --grid KEY=V1,V2 [--grid ...]``: a study from the command line
(issue 52, item 3).

Hydra users sweep with ``-m bherd.alpha=0.1,0.2``; a figure here is a spec file. ``--grid``
writes the spec the command line means, an extension of the figure that adds one curve per
combination of the grids' values (the cartesian product, the first ``--grid`` outermost), and
the sweep runs that file: the study can be rerun, extended or drawn by its path, and every run
the figure already has is reused (the same configs have the same hashes). The file's name and
figure id are the figure's plus a short digest of the grids, so the same command line gives
the same study (and reuses its runs) however often it is typed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from fedsweep.specs.model import SpecError
from fedsweep.specs.names import STUDIES
from fedsweep.specs.search import not_varied

#: where a study of a shipped figure is written (a spec file's study goes beside that file)
STUDIES_DIR = STUDIES


def parse_grids(items: list[str]) -> dict[str, list[Any]]:
    """``["bherd.alpha=0.2,0.4", "train.lr=0.01,0.1"]`` -> ``{key: [values]}`` (each value read
    as YAML, as ``--set`` reads it). Raises :class:`SpecError` naming the bad item."""
    from fedsweep.config.yamlio import YamlFileError, loads

    grids: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        parts = [p.strip() for p in raw.split(",")] if sep else []
        if not key or not parts or not all(parts):
            raise SpecError(
                f"--grid: got {item!r} (allowed: KEY=V1,V2[,...], e.g. --grid bherd.alpha=0.2,0.4)"
            )
        if key in grids:
            raise SpecError(f"--grid: {key!r} given twice (one --grid per key)")
        why = not_varied(key)
        if why:
            raise SpecError(
                f"--grid {item!r}: --grid cannot vary {key}: it is {why} (allowed: any other "
                "config key, e.g. --grid bherd.alpha=0.2,0.4)"
            )
        try:
            values = [loads(p, f"--grid {item!r}") for p in parts]
        except YamlFileError as err:
            raise SpecError(f"--grid: {err}") from None
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            raise SpecError(f"--grid: {item!r} names a value twice")
        grids[key] = values
    return grids


def study_tree(parent: str, parent_title: str, grids: dict[str, list[Any]]) -> dict[str, Any]:
    """The spec ``--grid`` means: ``extends: parent``, its own figure id, one curve per
    combination of the grids' values, labelled ``key=value`` by their last key segment."""
    digest = hashlib.sha256(
        json.dumps([parent, grids], sort_keys=True, default=str).encode()
    ).hexdigest()[:6]
    short = {key: key.rsplit(".", 1)[-1] for key in grids}
    label = " ".join(f"{short[k]}={{{k}}}" for k in grids)
    values = "; ".join(f"{k} ∈ {{{', '.join(map(str, v))}}}" for k, v in grids.items())
    return {
        "extends": parent,
        "figure": f"{parent[: 64 - 12]}-grid-{digest}",
        "title": f"{parent_title}: + {values}",
        "add_curves": [{"grid": {k: list(v) for k, v in grids.items()}, "label": label}],
    }


def study_place(
    parent_path: Path, shipped: bool, tree: dict[str, Any]
) -> tuple[Path, dict[str, Any]]:
    """Where the study ``tree`` goes, so that its ``extends`` finds the parent, and the tree to
    write there: ``studies/`` for a shipped figure (named by its id), beside the parent's file
    for a spec of one's own (``extends`` then names that file)."""
    if shipped:
        folder = STUDIES_DIR
    else:
        folder = parent_path.resolve().parent
        tree = {**tree, "extends": parent_path.name}
    return folder / f"{tree['figure']}.yaml", tree


def write_study(parent_path: Path, parent_figure: str, shipped: bool, tree: dict) -> Path:
    """Write ``tree`` (atomically) at :func:`study_place`. The path written."""
    import yaml

    from fedsweep.core import atomic

    path, tree = study_place(parent_path, shipped, tree)
    header = (
        f"# written by `fedsweep sweep {parent_figure} --grid ...`: the study that command ran;\n"
        "# rerun it with `fedsweep sweep <this file>`, extend it, or draw it with\n"
        "# `fedsweep figures --spec <this file>`\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, header + yaml.safe_dump(tree, sort_keys=False, allow_unicode=True))
    return path
