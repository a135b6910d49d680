"""Reading config and spec YAML: a safe loader that refuses duplicate keys, and one clear error
(file, line, column) for a file that is not YAML text.

PyYAML's ``safe_load`` lets the last of two equal keys win silently (``train:`` twice drops the
first section) and reports a bad file as ``<unicode string>`` in a traceback; :func:`read_yaml`
names the file and the position instead.

Every YAML fedsweep reads from a file a user or a store supplies (configs, specs, a run's logged
``config.yaml``) is read here, within bounds: at most :data:`MAX_YAML_BYTES` of text, and a
document of at most :data:`MAX_YAML_NODES` values *as expanded*. An alias (``*name``) repeats
what its anchor (``&name``) holds without copying it, so a few hundred bytes of nested aliases
(a "billion laughs") stand for 10^9 values: PyYAML builds them as shared references in an
instant, and the first thing that walks them (a validation message, a hash, a copy) then runs
for minutes and fills memory. The expanded size is counted on the composed nodes (each shared
node once) before anything is constructed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml


class YamlFileError(ValueError):
    """A file that cannot be read as YAML: the message names the file, line and column."""


class YamlBoundsError(YamlFileError):
    """YAML refused for its size (text or expanded values) or depth, before it is built."""


#: the most text one YAML document may have (the largest spec shipped is 10 kB, a logged
#: run config about 3 kB)
MAX_YAML_BYTES = 8 * 1024 * 1024
#: the most values (scalars, lists, mappings) one document may expand to, aliases counted as
#: often as they are used (the shipped specs have a few thousand)
MAX_YAML_NODES = 200_000


def _expanded_size(root: yaml.Node, source: str) -> int:
    """The number of values ``root`` stands for with every alias expanded, counting each shared
    node once (memo by identity), iteratively; :class:`YamlFileError` above
    :data:`MAX_YAML_NODES`."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes and not done:
            continue
        if isinstance(node, yaml.ScalarNode):
            children: list = []
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:  # a mapping: its keys and values
            children = [item for pair in node.value for item in pair]
        if not done:
            sizes[key] = 1  # provisional: a recursive alias counts once
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        size = 1 + sum(sizes.get(id(child), 1) for child in children)
        if size > MAX_YAML_NODES:
            raise YamlBoundsError(
                f"{source}: refused: the document expands to more than {MAX_YAML_NODES} values "
                "(anchors and aliases: each *name repeats all that &name holds; a config or spec "
                "never needs that many)"
            )
        sizes[key] = size
    return sizes[id(root)]


#: the deepest nesting of lists and mappings a document may have (configs and specs: 6);
#: libyaml's composer recurses in C, and a few thousand ``[`` crash it (a segmentation fault)
MAX_YAML_DEPTH = 100
_LINE_PREFIX = re.compile(r"^[ ?-]*", re.MULTILINE)
_BRACKETS = re.compile(r"[\[\]{}]")


def _depth_bound(text: str) -> int:
    """An upper bound of ``text``'s nesting, from the text alone: a block level is at least one
    column deeper than its parent (a list may sit at its mapping's column: two levels a
    column), compact ``- - x`` levels are in a line's prefix too; flow levels are brackets."""
    block = max((len(m) for m in _LINE_PREFIX.findall(text)), default=0)
    depth = flow = 0
    for bracket in _BRACKETS.findall(text):
        depth += 1 if bracket in "[{" else -1
        flow = max(flow, depth)
    return 2 * block + 2 + flow


def _check_depth(text: str, loader_class: type, source: str) -> None:
    """:class:`YamlBoundsError` when ``text`` nests deeper than :data:`MAX_YAML_DEPTH`, read
    from the parser's events (iterative, in C or Python) before the recursive composer runs.
    Skipped when the text cannot nest that deep (:func:`_depth_bound`: every shipped file)."""
    if _depth_bound(text) <= MAX_YAML_DEPTH:
        return
    loader = loader_class(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise YamlBoundsError(
                        f"{source}: refused: lists and mappings nested more than "
                        f"{MAX_YAML_DEPTH} deep (line {event.start_mark.line + 1})"
                    )
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    finally:
        loader.dispose()


def _load(text: str, loader_class: type, source: str) -> Any:
    """``yaml.load`` with the nesting checked before composing and the expanded size between
    composing and constructing."""
    _check_depth(text, loader_class, source)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, source)
        return loader.construct_document(node)
    finally:
        loader.dispose()


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
    if len(text) > MAX_YAML_BYTES:
        raise YamlBoundsError(
            f"{source}: refused: {len(text)} characters, more than a config or spec has "
            f"(at most {MAX_YAML_BYTES})"
        )
    if FastUniqueKeyLoader is not None:
        try:
            return _load(text, FastUniqueKeyLoader, source)
        except yaml.YAMLError:
            pass  # reported below, in PyYAML's own words
        except RecursionError:
            raise YamlBoundsError(f"{source}: refused: nested too deeply") from None
    try:
        return _load(text, UniqueKeyLoader, source)
    except RecursionError:
        raise YamlBoundsError(f"{source}: refused: nested too deeply") from None
    except yaml.YAMLError as err:
        reason = _reason(err)
        what = "" if reason.startswith("duplicate key") else "not valid YAML: "
        raise YamlFileError(f"{source}{_position(err)}: {what}{reason}") from None


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """The parsed YAML of ``path`` (None for an empty file). A binary or non-UTF-8 file, or
    invalid YAML, raises :class:`YamlFileError` naming the file (and line and column)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:  # at most one byte past the cap (a FIFO, /dev/zero)
            raw = f.read(MAX_YAML_BYTES + 1)
    except OSError as err:
        raise YamlFileError(f"cannot read {what} {path}: {err.strerror or err}") from None
    if len(raw) > MAX_YAML_BYTES:
        raise YamlBoundsError(
            f"{what} {path}: refused: larger than a config or spec is (at most {MAX_YAML_BYTES} "
            "bytes)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlFileError(
            f"{what} {path} is not a text file (byte {err.start}: not UTF-8); expected YAML"
        ) from None
    if "\x00" in text:
        raise YamlFileError(f"{what} {path} is not a text file (it contains NUL bytes)")
    return loads(text, str(path))
