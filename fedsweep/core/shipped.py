"""fedsweep's shipped sweep specs and run configs, found from any working directory.

The files live once, in the repository's ``sweeps/`` and ``configs/``; ``fedsweep/shipped/``
links to them (``sweeps -> ../../sweeps``), and a wheel carries copies there (pyproject's
package-data), so a checkout, an editable install and an installed package find them alike.
Where links are not made (a Windows checkout without ``core.symlinks``), a checkout's own
folders are used.

A command resolves a name the user gave in this order: a path that exists relative to the
working directory; then ``./sweeps`` (``--sweeps-dir``) for a figure id; then the shipped copy.
Outputs (the store, figures, reports, studies) stay relative to the working directory.

Nothing here imports beyond the standard library (the commands ask before their heavy imports)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

Kind = Literal["sweeps", "configs"]
#: the ``fedsweep`` package folder
PACKAGE = Path(__file__).resolve().parents[1]
SUFFIXES = (".yaml", ".yml")
#: the notes printed so far (each once per process: a command resolves a name several times)
_NOTED: set[str] = set()


def shipped_dir(kind: Kind) -> Path:
    """The folder of fedsweep's shipped ``sweeps`` or ``configs`` (symlinks resolved: in a
    checkout, the repository's own folder)."""
    linked = PACKAGE / "shipped" / kind
    if linked.is_dir():
        return linked.resolve()
    return PACKAGE.parent / kind  # a checkout whose links are plain files


def shipped_copy(name: str | Path, kind: Kind) -> Path | None:
    """The shipped file a relative name that is no file here means, or None: ``configs/x.yaml``
    (``sweeps/x.yaml`` for ``kind="sweeps"``); for a config also a bare ``x.yaml`` or ``x``
    (``demo-mnist5k``: a spec's bare name is its figure id, a bare file name gets a "did you
    mean")."""
    path = Path(name)
    if path.is_absolute() or path.is_file():
        return None
    parts = path.parts
    if len(parts) == 2 and parts[0] == kind:
        parts = parts[1:]
    elif kind != "configs":
        return None
    if len(parts) != 1 or parts[0] in ("", ".", ".."):
        return None
    stem = parts[0]
    names = [stem] if stem.endswith(SUFFIXES) else [f"{stem}.yaml"]
    for candidate in (shipped_dir(kind) / n for n in names):
        if candidate.is_file():
            return candidate
    return None


def shipped_note(given: str | Path, used: Path) -> None:
    """One line on stderr (once per process): a name that is no file here resolved to the
    shipped copy."""
    text = f"note: no {given} here; using fedsweep's shipped {used}"
    if text not in _NOTED:
        _NOTED.add(text)
        print(text, file=sys.stderr, flush=True)


def resolve_shipped(name: str | Path, kind: Kind) -> Path:
    """``name`` as a path: itself when it is a file here (or names no shipped file), else the
    shipped copy, said on stderr (:func:`shipped_note`)."""
    used = shipped_copy(name, kind)
    if used is None:
        return Path(name)
    shipped_note(name, used)
    return used
