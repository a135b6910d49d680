"""The components of a round, one file each, registered with ``fedsweep.core.registry``:
base methods (``algorithms/``), upload selectors, client samplers, server optimizers, step
policies, learning-rate schedules and post-aggregation hooks. ``compose.py`` says which compose."""

from __future__ import annotations

import importlib
import pkgutil

_LOADED = False


def load_components() -> None:
    """Import every module under ``fedsweep/components/`` once, so each component registers
    itself (a new component is a new file: nothing else lists it)."""
    global _LOADED
    if _LOADED:
        return
    for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        if info.name != f"{__name__}.compose":
            importlib.import_module(info.name)
    _LOADED = True
