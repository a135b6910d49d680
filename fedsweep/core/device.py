"""Device and CPU-thread selection for one run."""

from __future__ import annotations

import ctypes
import os
import platform

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


#: ``FEDSWEEP_MALLOC=0`` leaves the C allocator as it is (:func:`keep_freed_memory`)
MALLOC_ENV = "FEDSWEEP_MALLOC"
#: glibc's ``mallopt`` parameters (``malloc.h``)
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
#: free memory at the top of the heap that the process keeps (above it, the heap is trimmed)
KEEP_FREED_BYTES = 1 << 30
_kept: bool | None = None


def keep_freed_memory() -> bool:
    """Let freed tensor memory be reused by the next tensors instead of returned to the OS
    (glibc only; once per process; True when it is in effect).

    glibc serves every allocation above its mmap threshold (32 MiB at most) with fresh pages
    from ``mmap`` and unmaps them on ``free``, so each large tensor of every round (a ResNet-18
    gradient or model difference, 45 MB; a CNN's activations when it evaluates 5,000 images
    at a time, hundreds of MB) paid a page fault per 4 KiB page when first written. Measured on
    2 cores: ``torch.cat`` into a fresh 11.2M-float tensor 16.7 ms, 3.9 ms with this; a CNN
    evaluation of 10,000 MNIST test images at batch 5,000: 6.0 s, 3.5 s. So allocations come
    from the heap (``M_MMAP_MAX = 0``) and the heap gives memory back only when more than
    :data:`KEEP_FREED_BYTES` is free at its top: a run keeps the memory of its largest round.
    Where memory comes from changes no arithmetic: the numbers are the same with or without."""
    global _kept
    if _kept is None:
        _kept = False
        if switched_on(MALLOC_ENV) and platform.system() == "Linux":
            if _libc_name().startswith("glibc"):
                try:
                    libc = ctypes.CDLL("libc.so.6")
                    _kept = bool(
                        libc.mallopt(_M_MMAP_MAX, 0)
                        and libc.mallopt(_M_TRIM_THRESHOLD, KEEP_FREED_BYTES)
                    )
                except (OSError, AttributeError):  # pragma: no cover - an unusual libc
                    _kept = False
    return _kept


def _libc_name() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):  # not glibc (musl), or no confstr
        return ""
