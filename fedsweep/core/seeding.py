"""Per-purpose random streams derived from one root seed (docs/algorithms.md §1.6).

Each purpose (partition, model init, each client's batch order, client selection, ...) gets its
own ``numpy.random.SeedSequence`` child, keyed by a fixed purpose id, so adding a purpose or a
client never shifts another stream.
"""

from __future__ import annotations

import numpy as np
import torch

PURPOSES = {
    "partition": 0,
    "model_init": 1,
    "client_order": 2,
    "selection": 3,
    "divfl_greedy": 4,
    "leash_sampler": 5,
    "leash_head": 6,
    "leash_eval": 7,
}


def seed_sequence(root_seed: int, purpose: str, *keys: int) -> np.random.SeedSequence:
    if purpose not in PURPOSES:
        raise ValueError(f"unknown random purpose {purpose!r}; known: {', '.join(PURPOSES)}")
    return np.random.SeedSequence(entropy=root_seed, spawn_key=(PURPOSES[purpose], *keys))


def numpy_rng(root_seed: int, purpose: str, *keys: int) -> np.random.Generator:
    return np.random.default_rng(seed_sequence(root_seed, purpose, *keys))


def torch_seed(root_seed: int, purpose: str, *keys: int) -> int:
    state = seed_sequence(root_seed, purpose, *keys).generate_state(2, np.uint32)
    return int(state[0]) << 31 ^ int(state[1])


def torch_generator(root_seed: int, purpose: str, *keys: int) -> torch.Generator:
    """A CPU generator (index permutations are drawn on the CPU, then moved)."""
    return torch.Generator().manual_seed(torch_seed(root_seed, purpose, *keys))
