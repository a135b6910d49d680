"""Load a run config from YAML, apply ``--set key=value`` overrides, validate, explain errors."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from fedsweep.config import keys
from fedsweep.config.hashing import UNREAD_SETTINGS, drop_unused, unread_settings, unused_sections
from fedsweep.config.schema import (
    RENAMED,
    RunConfig,
    expand_blocks,
    feasibility_errors,
    numeric_bounds,
    slot_key,
)
from fedsweep.config.yamlio import YamlFileError, loads, read_yaml
from fedsweep.core.registry import SLOTS
from fedsweep.core.section import _numeric_kind
from fedsweep.core.shipped import resolve_shipped, shipped_dir
from fedsweep.core.suggest import closest

#: pydantic's error types of a numeric bound (ge/gt/le/lt): the message adds the allowed range
BOUND_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")
#: top-level keys that name a component (did-you-mean over their registries)
SLOT_FIELDS = ("algorithm", "selector", "sampler", "server_optimizer", "step_policy", "lr_schedule")


class ConfigError(ValueError):
    """A config that cannot run; the message names the field, the value and what is allowed."""


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``["train.lr=0.01", "bherd.alpha=0.3"]`` -> ``{"train.lr": 0.01, ...}`` (YAML-typed values)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"override {item!r} is not of the form key=value (e.g. train.lr=0.01)"
            )
        try:
            out[key.strip()] = loads(raw, f"override {item!r}") if raw.strip() else None
        except YamlFileError as err:
            raise ConfigError(str(err)) from None
    return out


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    """Set ``tree["a"]["b"] = value`` for ``key = "a.b"``, creating sections as needed."""
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(
                f"cannot set {key!r}: {part!r} is a value, not a section{suggest_key(key)}"
            )
        node = child
    node[parts[-1]] = value


def _model_at(model: type[BaseModel], parts: list[str]) -> type[BaseModel] | None:
    """The section model at ``parts`` (``["bherd"]`` -> BHerdConfig), or None for a value."""
    for part in parts:
        field = model.model_fields.get(part)
        sub = field.annotation if field is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return None
        model = sub
    return model


def schema_keys(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[str]:
    """Every dotted key of the run schema: sections and their values (``bherd``, ``bherd.alpha``)."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        out.append(prefix + name)
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out += schema_keys(sub, f"{prefix}{name}.")
    return out


def schema_field(key: str):
    """The pydantic ``FieldInfo`` of a dotted value key (``bherd.alpha``), or None."""
    *head, last = key.split(".")
    model = _model_at(RunConfig, head)
    field = model.model_fields.get(last) if model is not None else None
    if field is None or _model_at(RunConfig, key.split(".")) is not None:
        return None  # unknown, or a section rather than a value
    return field


def run_keys() -> keys.KeyTree:
    """The run schema's :data:`~fedsweep.config.keys.KeyTree`; the first call in a process
    also writes the index that lets commands refuse unknown keys before importing torch
    (:func:`write_key_index`)."""
    global _RUN_KEYS
    if _RUN_KEYS is None:
        _RUN_KEYS = keys.key_tree(RunConfig)
        write_key_index()
    return _RUN_KEYS


def write_key_index() -> None:
    """Write this source's key index unless it exists (:func:`fedsweep.config.keys.save_index`)."""
    renamed = [f"{section}.{old}" for section, old in RENAMED]
    keys.save_index(run_keys(), renamed, list(SLOTS))


_RUN_KEYS: keys.KeyTree | None = None


def suggest_key(key: str) -> str:
    """``" (did you mean `bherd.alpha`?)"`` for an unknown dotted key, else the section's keys
    (:func:`fedsweep.config.keys.suggest`, which the early check before torch's import uses)."""
    return keys.suggest(run_keys(), key)


def allowed_values(key: str) -> tuple | None:
    """The allowed values of a Literal-typed key (``data.dataset``), else None."""
    field = schema_field(key)
    if field is None:
        return None
    ann = field.annotation
    options = (ann,) if get_origin(ann) is Literal else get_args(ann)
    values: list = []
    for opt in options:
        if get_origin(opt) is Literal:
            values += list(get_args(opt))
    return tuple(v for v in values if v is not None) or None


def _registry_names(field: str) -> list[str]:
    from fedsweep.components.compose import SLOTS

    return list(SLOTS.get(field, {}))


def format_validation_error(err: ValidationError, source: str) -> str:
    """One line per error: the field, the bad value, what is allowed, and the nearest allowed
    key or value ("did you mean")."""
    lines = [f"invalid config ({source}):"]
    for e in err.errors():
        field = ".".join(str(p) for p in e["loc"])
        value = e.get("input")
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            lines.append(keys.unknown_line(run_keys(), field))
            continue
        if e["type"] == "literal_error" and isinstance(value, str):
            best = closest(value, [str(v) for v in allowed_values(field) or ()])
            if best is not None:
                msg += f" (did you mean {best!r}?)"
        if e["type"] == "finite_number" and schema_field(field) is not None:
            msg += f" (allowed: a finite number{numeric_bounds(schema_field(field))})"
        if e["type"] in BOUND_ERRORS and schema_field(field) is not None:
            info = schema_field(field)
            kind = _numeric_kind(info.annotation) or "a number"
            msg += f" (allowed: {kind}{numeric_bounds(info)})"
        if field in SLOT_FIELDS and isinstance(value, str):
            best = closest(value, _registry_names(field))
            if best is not None and best != value:
                msg += f" (did you mean {best!r}?)"
        if not field:  # a check across fields (e.g. selector x algorithm)
            lines.append(f"  {msg.removeprefix('Value error, ')}")
            continue
        section = isinstance(value, dict) and schema_field(field) is None
        shown = "" if section else f" got {value!r}:"
        lines.append(f"  field `{field}`:{shown} {msg}")
    return "\n".join(lines)


#: override keys that come from options other than ``--set`` (``--data-dir``, ``--tracking-uri``)
OPTION_KEYS = ("data.root", "tracking.uri")


def blame_overrides(text: str, source: str, overrides: dict[str, Any], header: str) -> str:
    """``text`` (a config error of ``source``) with ``header`` as its first line when every field
    it names is one a ``--set`` override sets: a typo on the command line is not the file's
    (issue 52). Else ``text`` as it is."""
    fields = re.findall(r"field `([^`]+)`", text)
    keys = [k for k in overrides if k not in OPTION_KEYS]

    def from_set(field: str) -> bool:
        return any(
            field == k or field.startswith(k + ".") or k.startswith(field + ".") for k in keys
        )

    if fields and all(from_set(f) for f in fields):
        return text.replace(f"invalid config ({source}):", header, 1)
    return text


def build_config(
    tree: dict[str, Any],
    overrides: dict[str, Any] | None = None,
    source: str = "config",
    files: bool = True,
    unused: Literal["refuse", "keep"] = "refuse",
) -> RunConfig:
    """Validate a raw dict (plus dotted overrides) into a RunConfig, or raise ConfigError.
    ``files=False``: skip the checks that look at the file system (a sweep spec's profiles).

    ``unused="refuse"`` (one config: ``run``, ``validate``): a value set for a component the
    config does not use (``bherd.alpha`` with ``selector: none``) cannot change the run, so it
    is an error (:func:`unused_problems`); a section of the file that only an override made
    unused (``--set selector=none`` on a BHerd config) is dropped. ``"keep"``: the sections
    stay as given (a sweep spec's shared ``base:`` drops them per trial; stored runs' params
    list every section)."""
    run_keys()  # once per process: the key index of the early refusals (fedsweep.config.keys)
    try:  # component blocks (``server_optimizer: {name: adam, lr: 0.1}``) to their sections
        base = expand_blocks(copy.deepcopy(dict(tree or {})))  # never the caller's dicts
        tree = copy.deepcopy(base)
        overrides = _slot_overrides(tree, overrides or {})
        tree = expand_blocks(tree)
    except ValueError as err:
        raise ConfigError(f"invalid config ({source}):\n  {err}") from None
    header = f"invalid --set (applied to {source}):"
    try:
        config = RunConfig.model_validate(tree)
    except ValidationError as err:
        text = format_validation_error(err, source)
        raise ConfigError(blame_overrides(text, source, overrides or {}, header)) from None
    problems = feasibility_errors(config, files=files)
    if unused == "refuse":
        problems += unused_problems(config, base, overrides or {})
        problems += unread_problems(config, base, overrides or {})
    if problems:
        text = "\n".join([f"invalid config ({source}):", *problems])
        raise ConfigError(blame_overrides(text, source, overrides or {}, header))
    return drop_unused(config) if unused == "refuse" else config


def _slot_overrides(tree: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Apply ``overrides`` to ``tree``; returns them with every ``slot.key`` (the chosen
    component's setting, ``--set server_optimizer.lr=0.1``) as its section's key
    (``fedopt.lr``). A slot's new component is set first, so its settings go to its sections."""
    out: dict[str, Any] = {}
    order = sorted(overrides, key=lambda k: not (k in SLOTS and "." not in k))
    for key in order:
        head, _, rest = key.partition(".")
        target = slot_key(tree, head, rest) if head in SLOTS and rest else key
        set_dotted(tree, target, overrides[key])
        out[target] = overrides[key]
    return out


def unused_problems(config: RunConfig, tree: dict[str, Any], overrides: dict[str, Any]) -> list:
    """One line per value set for a section no component of ``config`` reads and different
    from its default: given by an override, or in the file ``tree`` when the file's own
    components do not read it either (a section only an override made unused is not a problem:
    it is dropped)."""
    from fedsweep.components.compose import config_sections, readers_text, section_readers

    out = []
    own = set(config_sections(tree))  # the sections the file's own choice of components read
    for section in unused_sections(config):
        # values equal to the defaults change nothing, not even the hash (a saved config.yaml
        # lists every section): only the others are problems
        changed = getattr(config, section).model_dump(exclude_defaults=True)
        given = [
            f"{section}.{name}"
            for name in changed
            if section in overrides or f"{section}.{name}" in overrides
        ]
        block = tree.get(section)
        if isinstance(block, dict) and section not in own:
            given += [
                f"{section}.{k}" for k in block if k in changed and f"{section}.{k}" not in given
            ]
        if not given:
            continue
        slots = dict.fromkeys(slot for slot, _ in section_readers(section))
        choices = readers_text(section)
        current = "; ".join(
            f"{slot} is {getattr(config, slot)!r}"
            if slot != "hooks"
            else f"hooks are {config.hooks}"
            for slot in slots
        )
        for key in given:
            out.append(
                f"  field `{key}`: set, but this config does not use section `{section}` "
                f"(read only by {choices}; here {current}): it cannot change the run. Remove "
                f"it, or choose a component that reads it"
            )
    return out


def unread_problems(config: RunConfig, tree: dict[str, Any], overrides: dict[str, Any]) -> list:
    """One line per setting that ``config``'s choice in its section does not read
    (``fedsweep.config.hashing.unread_settings``: ``data.quantity_skew_exponent`` without
    ``data.quantity_skew: powerlaw``), given by an override or in the file ``tree`` when the
    file's own choice does not read it either (as :func:`unused_problems` does for sections)."""
    out = []
    for key in unread_settings(config):
        choice, readers = UNREAD_SETTINGS[key]
        section, name = key.rsplit(".", 1)
        block = tree.get(section)
        block = block if isinstance(block, dict) else {}
        default = type(getattr(config, section)).model_fields[choice.rsplit(".", 1)[1]].default
        own = block.get(choice.rsplit(".", 1)[1], default)
        given = key in overrides or section in overrides or (name in block and own not in readers)
        if not given:
            continue
        value = getattr(getattr(config, section), name)
        current = getattr(getattr(config, section), choice.rsplit(".", 1)[1])
        out.append(
            f"  field `{key}`: got {value!r}, but {choice} is {current!r}: it is read only with "
            f"{choice} {' or '.join(readers)}, so it cannot change the run. Remove it, or set "
            f"{choice}={readers[0]}"
        )
    return out


def load_config(path: str | Path, overrides: list[str] | dict[str, Any] | None = None) -> RunConfig:
    path = resolve_shipped(path, "configs")  # configs/x.yaml from any folder: the shipped copy
    if not path.is_file():
        near = [p.name for p in path.parent.glob("*.y*ml")] if path.parent.is_dir() else []
        best = closest(path.name, near)
        hint = f" (did you mean {str(path.parent / best)!r}?)" if best else ""
        shipped = [p.name for p in shipped_dir("configs").glob("*.yaml")]
        if not best and not path.is_absolute() and closest(path.name, shipped):
            hint = (
                f" (did you mean 'configs/{closest(path.name, shipped)}', shipped with fedsweep?)"
            )
        raise ConfigError(f"config file not found: {path}{hint}")
    try:
        tree = read_yaml(path, "config file")
    except YamlFileError as err:
        raise ConfigError(str(err)) from None
    if tree is None:
        raise ConfigError(
            f"config file {path} is empty; it would run every default (full MNIST, 500 rounds): "
            "write the sections you mean (see configs/)"
        )
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: top level must be a mapping of config sections")
    if isinstance(overrides, list):
        overrides = parse_overrides(overrides)
    return build_config(tree, overrides, source=str(path))


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dict -> dotted keys (for MLflow params and sweep grids)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out
