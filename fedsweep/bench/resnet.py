"""One ResNet-18 local step on CIFAR-shaped data (B=32): the engine against the raw loop."""

from __future__ import annotations

import statistics
import time

import torch

from fedsweep.bench.workload import time_engine_round
from fedsweep.config.load import build_config
from fedsweep.data.datasets import TensorDataset
from fedsweep.experiment import FLRun
from fedsweep.models.registry import build_model


def bench_resnet_step(repeats: int, steps: int = 5) -> dict:
    """Seconds per ResNet-18 local step on CIFAR-shaped data (B=32): engine vs raw loop."""
    g = torch.Generator().manual_seed(0)
    n = 32 * steps * 2
    data = TensorDataset(
        "cifar-shaped",
        torch.rand(n, 3, 32, 32, generator=g),
        torch.randint(0, 10, (n,), generator=g),
        torch.rand(64, 3, 32, 32, generator=g),
        torch.randint(0, 10, (64,), generator=g),
        10,
        "synthetic (bench)",
    )
    cfg = build_config(
        {
            "algorithm": "fedavg",
            "device": "cpu",
            "data": {"dataset": "cifar10", "partition": "iid", "num_clients": 1},
            "model": {"name": "resnet18"},
            "train": {"rounds": 10**6, "batch_size": 32, "lr": 1e-3, "order": "fixed"},
            "step_policy": "fixed",
            "fixed_steps": {"steps": steps},
            "eval": {"train_metrics": False, "every": 10**6},  # steps only, no evaluation
            "tracking": {"enabled": False},
        }
    )
    run = FLRun(cfg, dataset=data)
    model = build_model("resnet18", data.input_shape, 10)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def raw() -> float:
        start = time.perf_counter()
        for s in range(steps):
            xb, yb = data.x_train[s * 32 : (s + 1) * 32], data.y_train[s * 32 : (s + 1) * 32]
            opt.zero_grad()
            model.criterion(model(xb), yb).backward()
            opt.step()
        return (time.perf_counter() - start) / steps

    def engine() -> float:
        return time_engine_round(run) / steps

    raw(), engine()
    return {
        "raw": statistics.median(raw() for _ in range(repeats)),
        "engine": statistics.median(engine() for _ in range(repeats)),
    }
