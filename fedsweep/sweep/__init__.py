"""Sweeps: the trials of a figure's plan (``fedsweep.specs``: panels x curves x seeds of run
configs) scheduled by Ray Tune (runner.py), each tracked as an MLflow child run.

The spec language lived here until it became a layer of its own (``fedsweep.specs``, issue 50):
its old module names (``fedsweep.sweep.spec``, ``spec_model``, ``curves``, ...) still import, as
the very modules of ``fedsweep.specs`` (a ``DeprecationWarning`` names the new one), so code and
notebooks written against them keep working."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: an old module of this package -> the module of ``fedsweep.specs`` it is now
MOVED = {
    f"{__name__}.{old}": f"fedsweep.specs.{new}"
    for old, new in {
        "spec": "load",
        "spec_model": "model",
        "curves": "curves",
        "extends": "extends",
        "names": "names",
        "derive": "derive",
        "derivations": "derivations",
        "data_check": "data_check",
    }.items()
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old name of :data:`MOVED` as its new module (the same module object)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        """Nothing to run: the module is the new one, already imported."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())
