"""Reading config and spec YAML: a safe loader that refuses duplicate keys, and one clear error
(file, line, column) for a file that is not YAML text.

PyYAML's ``safe_load`` lets the last of two equal keys win silently (``train:`` twice drops the
first section) and reports a bad file as ``<unicode string>`` in a traceback; :func:`read_yaml`
names the file and the position instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlFileError(ValueError):
    """A file that cannot be read as YAML: the message names the file, line and column."""


class _UniqueKeys:
    """Raises on a key repeated in one mapping (with its line)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)  # merge keys (``<<: *anchor``) may be overridden
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: let PyYAML report it
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {key!r} (first at line {first}, again at line {line})",
                        key_node.start_mark,
                    )
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


class UniqueKeyLoader(_UniqueKeys, yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises on a key repeated in one mapping (with its line)."""


#: the same loader on libyaml's parser where PyYAML has it (parsing in C: the shipped specs
#: load several times faster); the constructor and resolver are PyYAML's Python ones, so the
#: data are the same. An error is reported by :class:`UniqueKeyLoader` (its messages).
FastUniqueKeyLoader = (
    type("FastUniqueKeyLoader", (_UniqueKeys, yaml.CSafeLoader), {})
    if getattr(yaml, "__with_libyaml__", False)
    else None
)


def _position(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    return f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _reason(err: yaml.YAMLError) -> str:
    problem = getattr(err, "problem", None)
    context = getattr(err, "context", None)
    if problem:
        text = f"{context} {problem}" if context and "duplicate key" not in problem else problem
        if "constructor for the tag" in text:  # !!python/object... or any custom tag
            text += (
                " (configs and specs are plain YAML data: tags that build Python objects or "
                "custom types are refused)"
            )
        if "\\t" in text or "'\\t'" in text:
            text += " (YAML does not allow tab characters for indentation; use spaces)"
        return text
    return str(err).splitlines()[0]


def loads(text: str, source: str = "<string>") -> Any:
    """Parse YAML text with :class:`UniqueKeyLoader` (on libyaml's parser where there is one,
    :data:`FastUniqueKeyLoader`); errors name ``source``, line and column."""
    if FastUniqueKeyLoader is not None:
        try:
            return yaml.load(text, Loader=FastUniqueKeyLoader)  # noqa: S506 (a SafeLoader)
        except yaml.YAMLError:
            pass  # reported below, in PyYAML's own words
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        reason = _reason(err)
        what = "" if reason.startswith("duplicate key") else "not valid YAML: "
        raise YamlFileError(f"{source}{_position(err)}: {what}{reason}") from None


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """The parsed YAML of ``path`` (None for an empty file). A binary or non-UTF-8 file, or
    invalid YAML, raises :class:`YamlFileError` naming the file (and line and column)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise YamlFileError(f"cannot read {what} {path}: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlFileError(
            f"{what} {path} is not a text file (byte {err.start}: not UTF-8); expected YAML"
        ) from None
    if "\x00" in text:
        raise YamlFileError(f"{what} {path} is not a text file (it contains NUL bytes)")
    return loads(text, str(path))
