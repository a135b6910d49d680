"""DivFL (issue 32): the peak memory and time of building DivFL's distance table ``Dst``, kept
as its packed upper triangle (``samplers.divfl.packed_distance_table``), in a fresh interpreter
with the engine's allocator setting (:func:`bench_divfl`; the child is ``python -m
fedsweep.bench --divfl-child N,F,T``).
"""

from __future__ import annotations

import time

import torch

from fedsweep.bench.child import child_json
from fedsweep.core.device import keep_freed_memory, set_threads

#: the features of DivFL's bench: the SVM's gradient on MNIST (784 weights and the bias)
DIVFL_FEATURES = 785


def _proc_status_bytes(field: str) -> int | None:
    """``VmRSS``, ``VmHWM``, ... of this process in bytes (Linux ``/proc``); None elsewhere."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset this process's peak RSS (``VmHWM``) to its current RSS (Linux 4.0+)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def divfl_child(clients: int, features: int, threads: int | None = None) -> dict:
    """In this (fresh) process: build DivFL's packed distance table of ``clients`` random float32
    gradients of ``features`` on ``threads`` threads (default: every CPU), with freed memory
    kept as in a run. ``build_bytes``: the peak RSS during the build above the RSS just before
    it (the peak is reset first; where it cannot be, above the process's peak before it)."""
    import resource
    import sys

    from fedsweep.components.samplers.divfl import (
        build_scratch_elements,
        packed_distance_table,
        packed_size,
    )

    kept = keep_freed_memory()
    threads = set_threads(threads)
    u = torch.randn(clients, features, generator=torch.Generator().manual_seed(0))
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else KiB

    def peak_since_start() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale

    before = _proc_status_bytes("VmRSS") or peak_since_start()
    reset = _reset_peak_rss()
    if not reset:  # the peak cannot be reset: count only what the build adds to it
        before = max(before, peak_since_start())
    start = time.perf_counter()
    table = packed_distance_table(u)
    seconds = time.perf_counter() - start
    peak = (_proc_status_bytes("VmHWM") if reset else None) or peak_since_start()
    assert table.shape == (packed_size(clients),)
    return {
        "clients": clients,
        "features": features,
        "threads": threads,
        "freed_memory_kept": kept,
        "seconds": seconds,
        "rss_before_bytes": before,
        "peak_rss_bytes": peak,
        "build_bytes": peak - before,
        "table_bytes": table.numel() * table.element_size(),
        "scratch_bound_bytes": build_scratch_elements(clients, features) * 8,
    }


def bench_divfl(clients: int, features: int = DIVFL_FEATURES, threads: int | None = None) -> dict:
    """:func:`divfl_child` in a fresh interpreter (its peak RSS is this build's alone)."""
    args = ["fedsweep.bench", "--divfl-child", f"{clients},{features},{threads or 0}"]
    return child_json(args, "the DivFL bench")
