"""Per-client state in checkpoints, written in proportion to what changed.

Some components keep one tensor per client (SCAFFOLD's control variates ``c_i``, §2.5): at
ResNet-18 scale 45 MB each, so a checkpoint that rewrote all of them every time would be
gigabytes. A component returns such state from ``state_dict`` as a *client table*: a plain dict
``{MARK: 1, "tensors": {client: tensor}, "versions": {client: round it last changed}}`` (plain
containers, so ``torch.load(weights_only=True)`` reads it). Held in memory or saved with
``torch.save`` it is an ordinary dict. A sweep trial's checkpoint writer (``sweep/trial.py``)
instead ``externalize``\\ s every client table: each ``(client, version)`` goes to its own file in
a folder beside the checkpoints, written only if no earlier checkpoint wrote it, and the
checkpoint keeps the file names. ``internalize`` reads them back on restore.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

MARK = "__client_state__"


def client_table(tensors: dict[int, torch.Tensor], versions: dict[int, int]) -> dict:
    """A client table of the tensors on the CPU (``versions[k]``: the round client ``k``'s
    entry changed). CPU tensors are referenced, not copied: a component must replace a client's
    tensor when it changes, never write into it (a copy of 100 ResNet-18 ``c_i`` would double
    the run's memory at every checkpoint)."""
    return {
        MARK: 1,
        "tensors": {k: v.detach().cpu() for k, v in sorted(tensors.items())},
        "versions": {k: int(versions.get(k, 0)) for k in sorted(tensors)},
    }


def is_client_table(node) -> bool:
    return isinstance(node, dict) and node.get(MARK) == 1


def externalize(state: dict, folder: str | Path, path: str = "") -> tuple[dict, set[str]]:
    """``state`` with every client table's tensors replaced by file names under ``folder``
    (written when missing), and the set of file names it refers to."""
    folder = Path(folder)
    used: set[str] = set()

    def walk(node, where: str):
        if is_client_table(node):
            files = {}
            for k, tensor in node["tensors"].items():
                name = f"{where or 'state'}-{k}-v{node['versions'][k]}.pt"
                target = folder / name
                if not target.is_file():
                    folder.mkdir(parents=True, exist_ok=True)
                    tmp = target.with_suffix(f".tmp{os.getpid()}")
                    try:
                        with open(tmp, "wb") as handle:  # a file object: ENOSPC is an OSError
                            torch.save(tensor, handle)
                        os.replace(tmp, target)  # a reader never sees half a file
                    finally:
                        tmp.unlink(missing_ok=True)
                files[k] = name
                used.add(name)
            return {MARK: 1, "files": files, "versions": dict(node["versions"])}
        if isinstance(node, dict):
            return {k: walk(v, f"{where}.{k}" if where else str(k)) for k, v in node.items()}
        return node

    return walk(state, path), used


def internalize(state: dict, folder: str | Path) -> dict:
    """The inverse of ``externalize``: file names back to tensors."""
    folder = Path(folder)

    def walk(node):
        if is_client_table(node) and "files" in node:
            tensors = {
                k: torch.load(folder / name, map_location="cpu", weights_only=True)
                for k, name in node["files"].items()
            }
            return {MARK: 1, "tensors": tensors, "versions": dict(node["versions"])}
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        return node

    return walk(state)
