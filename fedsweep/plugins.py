"""Plugin modules: code of your own (a τ rule, ...) that fedsweep imports because the command
line names it (``--plugin MODULE``), never because a config or a spec says so.

A plugin is an ordinary Python module that registers its parts when imported, e.g.::

    # mypkg/rules.py
    from fedsweep.components.step_policies.fedveca import register_tau_rule

    def eq15(A, g_norm2, phi):
        ...

    register_tau_rule("eq15", eq15)

and a config names the part (``fedveca.tau_rule: eq15``). A component registered with
``fedsweep.core.registry.register`` works the same way (``sampler: cyclic``), as long as it
adds no config section of its own (the run config's sections are fixed when fedsweep is
imported; a component with new settings is a file under ``fedsweep/components/``). ``fedsweep run CONFIG --plugin
mypkg.rules`` imports the module before the config is read; ``fedsweep sweep ... --plugin
mypkg.rules`` also makes every trial import it (from the folder it was found in, so a module
beside the spec works on a local Ray). A module is found on ``sys.path`` as usual, and the
current folder is searched too (as ``python -m`` does).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path

MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class PluginError(ValueError):
    """A ``--plugin`` module that cannot be found, imported or registered."""


def plugin_root(module: str) -> str | None:
    """The folder to put on ``sys.path`` so that ``module`` imports as it did here (for Ray
    workers, whose working folder is another); None for an installed or built-in module."""
    spec = importlib.util.find_spec(module.split(".")[0])
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return None
    origin = Path(spec.origin)
    top = origin.parent.parent if origin.name == "__init__.py" else origin.parent
    return str(top.resolve())


def load_plugins(modules: list[str] | None) -> list[tuple[str, str | None]]:
    """Import each module (which registers its parts); returns ``[(module, root), ...]`` for
    :func:`load_plugin_list` in other processes. Raises :class:`PluginError` naming the module."""
    out = []
    cwd = str(Path.cwd())
    if modules and cwd not in sys.path:
        sys.path.append(cwd)  # after the installed packages: a local file shadows nothing
    for module in modules or []:
        if not MODULE_NAME.match(module):
            raise PluginError(
                f"--plugin {module!r}: not a module name (allowed: a dotted Python module name "
                "such as mypkg.rules; a file path is not a module name)"
            )
        _import(module)
        out.append((module, plugin_root(module)))
    return out


def load_plugin_list(plugins: list) -> None:
    """Import the plugins a driver loaded (:func:`load_plugins`' list), in a Ray worker."""
    for module, root in plugins or []:
        if root is not None and root not in sys.path:
            sys.path.append(root)
        _import(module)


def _import(module: str) -> None:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        raise PluginError(
            f"--plugin {module!r}: no module named {err.name!r} on the Python path or in the "
            f"current folder ({Path.cwd()})"
        ) from None
    except Exception as err:  # noqa: BLE001 - the plugin's own error, named in one line
        raise PluginError(
            f"--plugin {module!r}: importing it failed: {type(err).__name__}: {err}"
        ) from None
