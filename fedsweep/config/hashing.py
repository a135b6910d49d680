"""The config hash: a stable id of everything in a run config that can change its numbers.

Sweeps reuse a finished run whose ``fedsweep.config_hash`` tag equals a trial's hash, figures and
comparisons group runs by it, and every tracked run (``fedsweep run`` or a sweep trial) carries
it. Changing what enters the hash orphans every finished run: keep it as it is.
"""

from __future__ import annotations

import hashlib
import json

from fedsweep.config.schema import RunConfig

#: config keys that do not change a run's numbers (excluded from the config hash)
HASH_EXCLUDED = ("name", "threads", "device", "tracking", "data.root", "data.download")


def config_hash(config: RunConfig) -> str:
    """Stable hash of everything in a config that can change its numbers.

    Only values that differ from the schema defaults enter the hash, so adding a new config
    field (with a default that keeps the old behaviour) does not orphan finished runs.
    """
    tree = config.model_dump(mode="json", exclude_defaults=True)
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
