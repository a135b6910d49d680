"""fedsweep's folders in the user's cache (``platformdirs``' user cache dir, else
``~/.cache/fedsweep``): the downloaded data, the parsed mnist-5k table, MLflow's schema template,
the config key index. Each has an environment variable that names another folder or turns the
cache off (``0``, ``off``, ``false``, ``no``)."""

from __future__ import annotations

import os
from pathlib import Path

#: the values of a cache's environment variable that turn it off
OFF = ("0", "off", "false", "no")


def is_off(value: str) -> bool:
    """Whether an environment variable's ``value`` turns a cache off."""
    return value.strip().lower() in OFF


def user_cache(name: str) -> Path:
    """``<user cache dir>/fedsweep/<name>`` (``platformdirs``), else ``~/.cache/fedsweep/<name>``."""
    try:
        import platformdirs
    except ImportError:
        return Path.home() / ".cache" / "fedsweep" / name
    return Path(platformdirs.user_cache_dir("fedsweep")) / name


def cache_folder(env: str, name: str) -> Path | None:
    """The folder ``$env`` names, None where it turns the cache off, else :func:`user_cache`
    ``(name)`` when it is unset or empty."""
    value = os.environ.get(env, "").strip()
    if is_off(value):
        return None
    return Path(value).expanduser() if value else user_cache(name)
