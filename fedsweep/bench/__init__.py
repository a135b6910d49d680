"""``make bench``: the cost of a local step and of a round, next to the machine's limits.

Workload (issue 2): 5 clients x 120 local steps of B=100 on MNIST-shaped data (60,000 x 1x28x28
training images split IID, 10,000 test images), then a test-set evaluation. Engine rounds
evaluate the test set only (``eval.train_metrics = false``).

Rows per model (``--models``, default svm and cnn), each the median of ``--repeats``
interleaved measurements; an engine row's "÷ FedAvg" is the median ratio of adjacent pairs of
rounds (as many pairs as fit in 8 s, at least ``--repeats``, at most 60: :func:`paired_ratio`):

* **limit proxy**: the same 600 steps and evaluation without the engine. SVM: a minimal hand
  loop of the closed-form step (index_select, two matrix-vector products, clamp; no hooks, no
  loss). CNN: the raw ``nn.Module`` + ``torch.optim.SGD`` + ``backward()`` loop.
* **FedAvg** (for the SVM also with the fused trajectory off, ``FEDSWEEP_FUSED=0``: the
  per-step path), **BHerd-FedAvg**, **GraB-FedAvg** and **FedVeca** (FedNova + the FedVeca step
  policy, fixed τ = 120 so the work is the same), with µs per local step and the ratio to
  FedAvg.

Then one ResNet-18 CIFAR-10 local step (B=32, engine vs raw loop), and the sweep overhead: a
smoke sweep through Ray Tune into a fresh MLflow store, its wall time against the sum of its
runs' own round times, and seconds per trial start, next to Ray Tune's floor for the same trials
(:func:`bench_tune_floor`), sweep and floor measured alternately ``--sweep-pairs`` times (default
3), each in a fresh interpreter, the medians reported (``--no-sweep`` skips it).

DivFL (issue 32): the peak memory and time of building DivFL's distance table ``Dst``, kept as
its packed upper triangle (``samplers.divfl.packed_distance_table``) for ``--divfl-clients``
clients (default 5,000; ``0`` skips) with 785 features (the SVM's gradient on MNIST), in a fresh
interpreter with the engine's allocator setting: the peak RSS above the RSS before the build
(gradients already in memory), next to the table's own ``4 N (N − 1)`` bytes and the bound on
the rest (:func:`bench_divfl`).

``--from-store URI`` only prints the overhead of every sweep already in an MLflow store (its
wall time against its runs' own round times; :func:`sweep_overheads`), and what other schedules
of the same trials would have taken, replayed from their runs' durations
(:func:`schedule_what_if`).

``--json`` prints one JSON object as the last line (``svm_us_per_step``, ``bherd_over_fedavg``,
... ) so a bench run can be compared with an earlier one.

Modules, by what they measure (each imported only when one of its names is asked for, so that
``fedsweep.bench.floor_trial``, which Ray's workers import, pulls in neither torch nor MLflow):

* :mod:`~fedsweep.bench.workload`: the workload, its engine variants, one engine round's time;
* :mod:`~fedsweep.bench.local_step`: the limit proxies, the memory floor, the engine rows and
  their ratios to FedAvg;
* :mod:`~fedsweep.bench.resnet`: the ResNet-18 step;
* :mod:`~fedsweep.bench.divfl`: DivFL's distance table (the ``--divfl-child`` interpreter);
* :mod:`~fedsweep.bench.sweep_overhead`: the smoke sweep, Ray Tune's floor, their pairs'
  medians, the CPUs' busy time;
* :mod:`~fedsweep.bench.sweep_main`: one sweep of that row in a fresh interpreter;
* :mod:`~fedsweep.bench.floor_trial`: the floor's trainable and its fresh interpreter;
* :mod:`~fedsweep.bench.store_overheads`: the overheads in a store and the schedule replay;
* :mod:`~fedsweep.bench.child`: a row measured in a fresh interpreter;
* :mod:`~fedsweep.bench.command`: ``python -m fedsweep.bench`` (:func:`main`).

Nothing in fedsweep imports the bench: it sits above every other layer.
"""

from __future__ import annotations

from importlib import import_module

#: the names this package gives, by the module that holds them
_MODULES = {
    "workload": (
        "BATCH",
        "CLIENTS",
        "STEPS",
        "STEPS_PER_CLIENT",
        "VARIANTS",
        "engine_run",
        "fingerprint",
        "synthetic_mnist",
        "time_engine_round",
    ),
    "local_step": (
        "MAX_PAIRS",
        "PAIR_SECONDS",
        "bench_model",
        "paired_ratio",
        "time_raw_round",
        "time_svm_hand_loop",
    ),
    "resnet": ("bench_resnet_step",),
    "divfl": ("DIVFL_FEATURES", "bench_divfl", "divfl_child"),
    "child": ("child_json",),
    "sweep_overhead": (
        "CpuBusy",
        "bench_sweep",
        "bench_tune_floor",
        "floors_of",
        "measure_sweep",
        "median_row",
        "smoke_sweep_spec",
        "sweep_child",
    ),
    "store_overheads": (
        "list_schedule",
        "print_store_overheads",
        "schedule_what_if",
        "sweep_overheads",
    ),
    "command": ("main",),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    """``fedsweep.bench.X``: imports X's module on first use (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
