"""The architecture is the import graph: layers import only downward and no module imports
itself back through others (docs/concepts/architecture.md, "Package layout"). Read from the code
with ``ast``: every import, also those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: from the ground up; a module may import its own layer and the ones below
LAYERS = [
    ("core", ("fedsweep.core",)),
    ("data, models", ("fedsweep.data", "fedsweep.models", "fedsweep.compat")),
    ("engine", ("fedsweep.engine",)),
    ("components", ("fedsweep.components",)),
    ("config", ("fedsweep.config",)),
    ("experiment", ("fedsweep.experiment", "fedsweep.plugins")),
    ("tracking", ("fedsweep.tracking",)),
    ("specs", ("fedsweep.specs",)),
    ("sweep, judge", ("fedsweep.sweep", "fedsweep.judge")),
    ("team", ("fedsweep.team",)),
    ("dashboards", ("dashboards",)),
    ("api", ("fedsweep.api",)),
    ("cli", ("fedsweep.cli", "fedsweep.__main__")),
    ("bench", ("fedsweep.bench", "fedsweep.warmup")),
]


def _modules() -> dict[str, Path]:
    out = {}
    for top in ("fedsweep", "dashboards"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The project modules ``path`` imports (``from a.b import c`` counts ``a.b.c`` when that is
    a module, else ``a.b``; a package's ``__init__`` that only hands names on is not followed
    through ``from package import module``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                for a in node.names
            ]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _layer(module: str) -> int | None:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def test_every_module_has_a_layer():
    assert [m for m in MODULES if m != "fedsweep" and _layer(m) is None] == []


def test_imports_run_only_downward():
    up = [
        f"{a} ({LAYERS[_layer(a)][0]}) imports {b} ({LAYERS[_layer(b)][0]})"
        for a, targets in GRAPH.items()
        if a != "fedsweep"
        for b in sorted(targets)
        if b != "fedsweep" and _layer(b) > _layer(a)
    ]
    assert up == []


def test_no_import_circles():
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert circles == []


def test_papers_stand_on_the_generic_dashboards_only():
    """A paper's figures and claims import the generic dashboards, never another paper; only the
    registry collects the papers."""
    wrong = []
    for a, targets in GRAPH.items():
        paper = a.split(".")[2] if a.startswith("dashboards.papers.") else None
        for b in targets:
            if not b.startswith("dashboards.papers.") or b == "dashboards.papers":
                continue
            other = b.split(".")[2]
            if (paper is None and a != "dashboards.registry") or (paper and other != paper):
                wrong.append(f"{a} imports {b}")
    assert wrong == []
    assert any(b.startswith("dashboards.papers") for b in GRAPH["dashboards.registry"])
