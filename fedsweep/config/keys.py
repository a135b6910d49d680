"""The run config's keys without the run config, so that a bad key is refused before torch is
imported (issue 49): ``fedsweep run CONFIG --set nosuch.key=1`` answers in the time Python
takes to start, not after the 1-2 s of torch's import.

``RunConfig`` is assembled from the components' sections (``fedsweep.config.schema``), whose
modules import torch. Its keys (every section's fields, in order: a :data:`KeyTree`) are fixed by
fedsweep's source (a ``--plugin`` module adds no section: ``fedsweep.plugins``), so the first
command that builds ``RunConfig`` writes them to a small JSON index in the user's cache folder,
named by a fingerprint of the package's source files (:func:`save_index`), and later commands
read it back before their heavy imports (:func:`unknown_key_lines`). Without an index for this
source (the first command after an install or an edit) nothing is refused early: the full
validation refuses, and writes the index.

The messages are the full validation's own (``fedsweep.config.load.format_validation_error``:
the same lines, in pydantic's order, with the same did-you-mean from :func:`suggest`, which that
module uses too); only the other problems of a config with unknown keys (a bad value) wait for
the full validation, once the keys are fixed. This module imports nothing beyond the standard
library and ``fedsweep.core``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from fedsweep.core.cache import cache_folder, is_off
from fedsweep.core.suggest import closest

#: section path (``""``: the top level, ``"train"``, ...) -> its keys in the schema's order; a
#: key that is itself a section has an entry of its own (``"data"``)
KeyTree = dict[str, list[str]]

#: the index's format; another one is not read
INDEX_VERSION = 1
#: folder of the index (default: :func:`_cache_dir`); ``0``/``off`` turns the early check off
CACHE_ENV = "FEDSWEEP_KEY_INDEX"


def key_tree(model, path: str = "", out: KeyTree | None = None) -> KeyTree:
    """The :data:`KeyTree` of a pydantic model (``RunConfig``): a field whose annotation is a
    model class is a section (as ``fedsweep.config.load`` walks the schema)."""
    from pydantic import BaseModel

    out = {} if out is None else out
    out[path] = list(model.model_fields)
    for name, field in model.model_fields.items():
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            key_tree(sub, f"{path}.{name}" if path else name, out)
    return out


def section_keys(tree: KeyTree, parts: list[str]) -> list[str] | None:
    """The keys of the section at ``parts`` (``[]``: the top level), None for a value or an
    unknown name."""
    return tree.get(".".join(parts))


def schema_keys(tree: KeyTree, prefix: str = "") -> list[str]:
    """Every dotted key, sections and values, depth first in the schema's order."""
    out: list[str] = []
    for name in tree.get(prefix.rstrip("."), []):
        out.append(prefix + name)
        if prefix + name in tree:
            out += schema_keys(tree, f"{prefix}{name}.")
    return out


def suggest(tree: KeyTree, key: str) -> str:
    """``" (did you mean `bherd.alpha`?)"`` for an unknown dotted key, else the section's keys
    (``"; keys here: ..."``), or "" when its section is no section."""
    *head, last = key.split(".")
    names = section_keys(tree, head)
    if names is None:
        return ""
    prefix = ".".join(head) + "." if head else ""
    best = closest(last, names)
    if best is None:  # e.g. `alpha` given at the top level: look in every section
        every = schema_keys(tree)
        best_full = closest(key, every)
        nested = [k for k in every if k.endswith("." + last)]
        if nested:
            return f" (did you mean `{nested[0]}`?)"
        if best_full:
            return f" (did you mean `{best_full}`?)"
        return f"; keys here: {', '.join(prefix + n for n in names)}"
    return f" (did you mean `{prefix}{best}`?)"


def unknown_line(tree: KeyTree, key: str) -> str:
    """The full validation's line for an unknown key."""
    return f"  field `{key}`: unknown key{suggest(tree, key)}"


# ------------------------------------------------------------------------------ the index
def _cache_dir() -> Path | None:
    """:data:`CACHE_ENV`, else ``config-keys`` beside MLflow's schema template when its folder
    is set (``FEDSWEEP_SCHEMA_CACHE``: the test session's own), else the user cache dir's."""
    schema = os.environ.get("FEDSWEEP_SCHEMA_CACHE", "").strip()
    if not os.environ.get(CACHE_ENV, "").strip() and schema and not is_off(schema):
        return Path(schema).expanduser() / "config-keys"
    return cache_folder(CACHE_ENV, "config-keys")


@functools.cache
def fingerprint() -> str:
    """A hash of the package's source files (path, size, modification time): any edit, install
    or upgrade gives another index."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(str(root).encode())
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                digest.update(
                    f"{os.path.relpath(path, root)}:{st.st_size}:{st.st_mtime_ns};".encode()
                )
    return digest.hexdigest()[:16]


def index_path() -> Path | None:
    folder = _cache_dir()
    return None if folder is None else folder / f"run-config-keys-{fingerprint()}.json"


def save_index(tree: KeyTree, renamed: list[str], slots: list[str]) -> None:
    """Write the index of this source (atomically; best effort: a cache folder that cannot be
    written leaves the early check off). ``renamed``: old dotted keys the schema still takes
    (``fednova.gmf``); ``slots``: the top-level keys that take a component block."""
    from fedsweep.core import atomic

    path = index_path()
    if path is None or path.is_file():
        return
    body = {"version": INDEX_VERSION, "keys": tree, "renamed": renamed, "slots": slots}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, json.dumps(body))
        for old in path.parent.glob("run-config-keys-*.json"):  # of an earlier source
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass


def load_index() -> dict | None:
    """The index of this source, None when there is none (or it cannot be read)."""
    path = index_path()
    if path is None:
        return None
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("version") != INDEX_VERSION:
        return None
    return body


# ------------------------------------------------------------------------------ the check
class _CannotTell(Exception):
    """Only the full validation can judge this config (a component block, a slot's setting)."""


def unknown_key_lines(tree: Any, overrides: dict[str, Any] | None = None) -> list[str] | None:
    """The full validation's lines for the unknown keys of a raw config ``tree`` with dotted
    ``overrides`` (``--set``), in its order; ``[]`` when every key is known; None when this
    cannot be told without the run config: no index for this source, or a config that needs the
    components to read (a component block, ``--set server_optimizer.lr=...``, a value where a
    section would be)."""
    index = load_index()
    if index is None or not isinstance(tree, dict):
        return None
    keys: KeyTree = index["keys"]
    renamed = set(index.get("renamed", ()))
    slots = set(index.get("slots", ()))
    try:
        merged = _with_overrides(tree, overrides or {}, slots)
        return _check(merged, keys, renamed, slots, [])
    except _CannotTell:
        return None


def _with_overrides(tree: dict, overrides: dict[str, Any], slots: set[str]) -> dict:
    """``tree`` with the overrides set as ``fedsweep.config.load.set_dotted`` sets them (the
    full validation's key order: a new key after the file's)."""
    import copy

    out = copy.deepcopy(tree)
    for key, value in overrides.items():
        parts = key.split(".")
        if parts[0] in slots and len(parts) > 1:
            raise _CannotTell  # a component's setting: its section comes from the registry
        node = out
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise _CannotTell  # set_dotted's own message
            node = child
        node[parts[-1]] = value
    return out


def _check(node: dict, keys: KeyTree, renamed: set[str], slots: set[str], path: list[str]):
    """pydantic's order: the section's fields in schema order (a section's problems where it
    stands), then the keys it does not know, in the order given."""
    here = keys[".".join(path)]
    if any(not isinstance(k, str) for k in node):
        raise _CannotTell
    if not path:
        for slot in slots:  # a component block: its keys go to the registry's sections
            value = node.get(slot)
            items = value if isinstance(value, list) else [value]
            if any(isinstance(v, dict) for v in items):
                raise _CannotTell
    lines: list[str] = []
    for name in here:
        sub = path + [name]
        if ".".join(sub) in keys and isinstance(node.get(name), dict):
            lines += _check(node[name], keys, renamed, slots, sub)
    for name in node:
        if name not in here and ".".join(path + [name]) not in renamed:
            lines.append(unknown_line(keys, ".".join(path + [name])))
    return lines
