"""The bench's workload (issue 2): 5 clients x 120 local steps of B=100 on MNIST-shaped data
(60,000 x 1x28x28 training images split IID, 10,000 test images), then a test-set evaluation;
the engine runs of it (:data:`VARIANTS`) and the timing of one engine round.

``make bench-peers`` (``benchmarks/peers``) runs the same workload in Flower.
"""

from __future__ import annotations

import os
import time

import torch

from fedsweep.config.load import build_config
from fedsweep.data.datasets import TensorDataset
from fedsweep.engine.fast import svm_trajectory as svm_kernel
from fedsweep.engine.observers import all_finite
from fedsweep.experiment import FLRun

STEPS_PER_CLIENT = 120
CLIENTS = 5
BATCH = 100
STEPS = CLIENTS * STEPS_PER_CLIENT


def synthetic_mnist(seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(
        name="mnist-shaped",
        x_train=torch.rand(60000, 1, 28, 28, generator=g),
        y_train=torch.randint(0, 10, (60000,), generator=g),
        x_test=torch.rand(10000, 1, 28, 28, generator=g),
        y_test=torch.randint(0, 10, (10000,), generator=g),
        num_classes=10,
        source="synthetic (bench)",
    )


def fingerprint(d: TensorDataset) -> list[float]:
    """A cheap checksum of a data set: two processes (``make bench-peers``: fedsweep and
    Flower in its own venv) check they train on the same data."""
    return [
        round(float(d.x_train.double().sum()), 3),
        float(d.y_train.sum()),
        round(float(d.x_test.double().sum()), 3),
        float(d.y_test.sum()),
    ]


#: engine variants: label -> config overrides (FedVeca at fixed τ: the same 600 steps)
VARIANTS = {
    "fedavg": {},
    "bherd": {"selector": "bherd"},
    "grab": {"selector": "grab"},
    "fedveca": {
        "algorithm": "fednova",
        "step_policy": "fedveca",
        "fedveca": {"tau_rule": "fixed", "tau_init": STEPS_PER_CLIENT, "tau_max": STEPS_PER_CLIENT},
    },
}


def engine_run(model: str, data: TensorDataset, **overrides) -> FLRun:
    tree = {
        "algorithm": "fedavg",
        "device": "cpu",
        "data": {"dataset": "mnist", "partition": "case1", "num_clients": CLIENTS},
        "model": {"name": model},
        "train": {"rounds": 10**6, "batch_size": BATCH, "lr": 1e-4, "order": "fixed"},
        "eval": {"train_metrics": False},
        "tracking": {"enabled": False},
    }
    tree.update(overrides)
    return FLRun(build_config(tree), dataset=data)


def time_engine_round(run: FLRun, fused: bool = True) -> float:
    previous = os.environ.get(svm_kernel.ENV)
    os.environ[svm_kernel.ENV] = "1" if fused else "0"
    try:
        start = time.perf_counter()
        run.step()
        all_finite(run.w)  # the engine's once-per-round check
        return time.perf_counter() - start
    finally:
        if previous is None:
            os.environ.pop(svm_kernel.ENV)
        else:
            os.environ[svm_kernel.ENV] = previous
