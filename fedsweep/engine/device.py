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


def switched_on(name: str) -> bool:
    """An environment switch that is on unless set to ``0``, ``false``, ``off`` or ``no``."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "off", "no")


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


def numba_threads() -> None:
    """Give numba's parallel loops the threads torch has (the run's ``threads``, or the CPUs
    Ray gave the trial), and keep torch's.

    numba's first ``set_num_threads`` starts its OpenMP pool, which sets the calling thread's
    OpenMP thread count to ``NUMBA_NUM_THREADS`` (all CPUs); numba and torch share the same
    libgomp, so torch then ran the rest of the first run in a process on all CPUs: in a sweep,
    the first trial of every worker used 2 threads on its 1 CPU, and two such trials took 5x
    their time (measured: 17.7 s for 100 rounds instead of 3.4 s)."""
    import numba

    n = torch.get_num_threads()
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
