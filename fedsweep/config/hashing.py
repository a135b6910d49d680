"""The config hash: a stable id of everything in a run config that can change its numbers.

Sweeps reuse a finished run whose ``fedsweep.config_hash`` tag equals a trial's hash, figures and
comparisons group runs by it, and every tracked run (``fedsweep run`` or a sweep trial) carries
it. Changing what enters the hash orphans every finished run: keep it as it is. Keys that were
renamed since are mapped back to their old place before hashing (``legacy_layout``).
"""

from __future__ import annotations

import hashlib
import json

from fedsweep.config.schema import RENAMED, RunConfig

#: config keys that do not change a run's numbers (excluded from the config hash)
HASH_EXCLUDED = ("name", "threads", "device", "tracking", "data.root", "data.download")


def config_hash(config: RunConfig) -> str:
    """Stable hash of everything in a config that can change its numbers.

    Only values that differ from the schema defaults enter the hash, so adding a new config
    field (with a default that keeps the old behaviour) does not orphan finished runs.
    """
    tree = legacy_layout(config, config.model_dump(mode="json", exclude_defaults=True))
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
