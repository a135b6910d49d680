"""Device and CPU-thread selection for one run."""

from __future__ import annotations

import os

import torch


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False")
    return torch.device(name)


def device_problem(name: str, field: str = "device") -> str | None:
    """One sentence when config ``device`` cannot run on this machine (``cuda`` without a GPU),
    else None."""
    if name == "cuda" and not torch.cuda.is_available():
        return (
            f"field `{field}`: got 'cuda': no CUDA device is available on this machine "
            "(allowed here: cpu, auto)"
        )
    return None


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def set_threads(threads: int | None) -> int:
    """Pin torch's intra-op threads (a trial must use exactly the CPUs it was given)."""
    n = threads or available_cpus()
    torch.set_num_threads(n)
    return n
