"""The config hash: a stable id of everything in a run config that can change its numbers.

Sweeps reuse a finished run whose ``fedsweep.config_hash`` tag equals a trial's hash, figures and
comparisons group runs by it, and every tracked run (``fedsweep run`` or a sweep trial) carries
it. Changing what enters the hash orphans every finished run: keep it as it is. Keys that were
renamed since are mapped back to their old place before hashing (``legacy_layout``).

Only the sections of the components a config uses enter the hash (``compose.config_sections``):
``bherd.alpha`` cannot change a run whose selector is ``none``, so it cannot split such runs into
two hashes. Until 2026-11-25 every section entered it; a config that set a section it did not use
(a sweep's shared ``base:``, e.g. Fig. 3a's FedAvg (RR) curve under a ``bherd:`` base) was hashed
with it, and :func:`legacy_config_hash` still computes that hash, so those finished runs are found
(a sweep ``Trial.legacy_hash``; figures and ``sweep --plan`` look under both).

A setting of a used section that the section's own choice does not read
(:data:`UNREAD_SETTINGS`: ``data.quantity_skew_exponent`` without ``data.quantity_skew:
powerlaw``) cannot change a run either, and leaves the hash the same way.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel

from fedsweep.components.compose import config_sections
from fedsweep.config.schema import RENAMED, RunConfig

#: config keys that do not change a run's numbers (excluded from the config hash)
HASH_EXCLUDED = ("name", "threads", "device", "tracking", "data.root", "data.download")


#: settings read only when another key of their section has one of some values: dotted key ->
#: (that key, the values it is read with). Set otherwise, they cannot change a run: ``run`` and
#: ``validate`` refuse them, the hash and a sweep's trials leave them out (:func:`drop_unused`).
UNREAD_SETTINGS = {"data.quantity_skew_exponent": ("data.quantity_skew", ("powerlaw",))}


def setting_value(config: BaseModel, key: str):
    """The value of dotted ``key`` in ``config`` (``data.quantity_skew``)."""
    for part in key.split("."):
        config = getattr(config, part)
    return config


def unread_settings(config: RunConfig) -> list[str]:
    """The keys of :data:`UNREAD_SETTINGS` that ``config`` sets away from their default although
    its choice does not read them (``data.quantity_skew_exponent: 0.5`` with
    ``data.quantity_skew: none``)."""
    out = []
    for key, (choice, readers) in UNREAD_SETTINGS.items():
        section, name = key.rsplit(".", 1)
        changed = setting_value(config, section).model_dump(exclude_defaults=True)
        if setting_value(config, choice) not in readers and name in changed:
            out.append(key)
    return out


def config_hash(config: RunConfig) -> str:
    """Stable hash of everything in a config that can change its numbers: the values that differ
    from the schema defaults (so adding a field whose default keeps the old behaviour orphans no
    finished run) in the general sections and the sections of the components in use, less the
    settings their section's choices do not read (:func:`unread_settings`)."""
    tree = config.model_dump(mode="json", exclude_defaults=True)
    for section in unused_sections(config):
        tree.pop(section, None)
    for key in unread_settings(config):
        section, name = key.rsplit(".", 1)
        tree.get(section, {}).pop(name, None)
        if tree.get(section) == {}:
            tree.pop(section)
    return _digest(config, tree)


def legacy_config_hash(config: RunConfig) -> str:
    """The hash before 2026-11-25: every section's non-default values, used or not. Equal to
    :func:`config_hash` unless the config sets a section none of its components reads."""
    return _digest(config, config.model_dump(mode="json", exclude_defaults=True))


def unused_sections(config: RunConfig) -> list[str]:
    """The component sections of the schema that no component of ``config`` reads (in schema
    order), e.g. ``bherd`` when the selector is ``none``."""
    used = set(config_sections(config))
    return [
        name
        for name, value in config
        if name not in used and isinstance(value, BaseModel) and name not in HASH_EXCLUDED
    ]


def drop_unused(config: RunConfig) -> RunConfig:
    """``config`` with every section it does not use, and every setting it does not read
    (:func:`unread_settings`), back at its defaults (a sweep's shared ``base:`` sets sections
    some curves do not use: those curves run and log without them)."""
    unused = unused_sections(config)
    unread = unread_settings(config)
    if not unused and not unread:
        return config
    update = {name: type(getattr(config, name))() for name in unused}
    for key in unread:
        section, name = key.rsplit(".", 1)
        owner = update.get(section, getattr(config, section))
        default = type(owner).model_fields[name].default
        update[section] = owner.model_copy(update={name: default})
    return config.model_copy(update=update)


def _digest(config: RunConfig, tree: dict) -> str:
    tree = legacy_layout(config, tree)
    for key in HASH_EXCLUDED:
        node, *rest = key.split(".")
        if rest:
            tree.get(node, {}).pop(rest[0], None)
            if tree.get(node) == {}:
                tree.pop(node)
        else:
            tree.pop(node, None)
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def legacy_layout(config: RunConfig, tree: dict) -> dict:
    """The non-default config ``tree`` with renamed keys where finished runs had them: FedNova's
    server momentum was ``fednova.gmf`` and SCAFFOLD's ``η_g`` was ``scaffold.server_lr``
    before the server step became a component (``server_sgd.momentum`` / ``server_sgd.lr``;
    ``fedsweep.config.schema.RENAMED``)."""
    if config.server_optimizer != "sgd" or "server_sgd" not in tree:
        return tree
    sgd = tree["server_sgd"]
    for (section, old), (owner, new) in RENAMED.items():
        if config.algorithm == owner and new in sgd:
            tree.setdefault(section, {})[old] = sgd.pop(new)
    if not sgd:
        tree.pop("server_sgd")
    return tree
