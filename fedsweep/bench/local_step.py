"""µs per local step next to the machine's limits: one round of the workload
(:mod:`fedsweep.bench.workload`) through the engine's variants against the limit proxy (the
same steps without the engine) and, for the SVM, the memory floor; each engine row's ratio to
FedAvg from adjacent pairs of rounds (:func:`paired_ratio`).
"""

from __future__ import annotations

import statistics
import time

import torch

from fedsweep.bench.workload import (
    BATCH,
    CLIENTS,
    STEPS,
    STEPS_PER_CLIENT,
    VARIANTS,
    engine_run,
    time_engine_round,
)
from fedsweep.data.datasets import TensorDataset
from fedsweep.engine.fast import svm_trajectory as svm_kernel
from fedsweep.models.registry import build_model


def time_svm_hand_loop(data: TensorDataset, batches: torch.Tensor, lam: float = 0.1) -> float:
    """The limit proxy of the SVM: the closed-form step with nothing around it."""
    x = data.x_train.reshape(len(data.x_train), -1)
    ypm = 1.0 - 2.0 * torch.remainder(data.y_train, 2).float()
    lr = 1e-4
    start = time.perf_counter()
    for client in range(CLIENTS):
        w = torch.zeros(x.shape[1])
        for step in range(STEPS_PER_CLIENT):
            idx = batches[client, step]
            xb, yb = x.index_select(0, idx), ypm.index_select(0, idx)
            hinge = torch.clamp(1.0 - yb * (xb @ w), min=0.0)
            grad = lam * w - (xb.T @ (yb * hinge)) / BATCH
            w.sub_(grad, alpha=lr)
    xt = data.x_test.reshape(len(data.x_test), -1)
    yt = 1.0 - 2.0 * torch.remainder(data.y_test, 2).float()
    float(((xt @ w) * yt > 0).sum())
    return time.perf_counter() - start


def time_raw_round(model_name: str, data: TensorDataset, batches: torch.Tensor) -> float:
    """600 steps: fresh nn.Module per client (like a broadcast), torch.optim.SGD, backward."""
    base = build_model(model_name, data.input_shape, data.num_classes)
    state = {k: v.clone() for k, v in base.state_dict().items()}
    x, y = data.x_train, data.y_train
    start = time.perf_counter()
    for client in range(CLIENTS):
        model = base
        model.load_state_dict(state)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        for step in range(STEPS_PER_CLIENT):
            idx = batches[client, step]
            opt.zero_grad()
            out = model(x.index_select(0, idx))
            loss = model.criterion(out, y.index_select(0, idx))
            penalty = model.penalty(dict(model.named_parameters()))
            if penalty is not None:
                loss = loss + penalty
            loss.backward()
            opt.step()
    with torch.no_grad():
        correct = 0
        for s in range(0, len(data.x_test), 5000):
            out = model(data.x_test[s : s + 5000])
            correct += model.correct(out, data.y_test[s : s + 5000])
        float(correct)
    return time.perf_counter() - start


#: seconds of paired rounds per engine row for its "÷ FedAvg" (at least ``--repeats`` pairs)
PAIR_SECONDS = 8.0
#: at most this many pairs per row
MAX_PAIRS = 60


def paired_ratio(base, other, pairs: int) -> float:
    """Median of ``other() / base()`` over ``pairs`` adjacent pairs of rounds, run in turn as
    (base, other) and (other, base): each ratio compares two rounds run milliseconds apart, so
    this VM's drift from one second to the next cancels, and the alternation cancels what the
    first of a pair pays for the second (caches, the allocator)."""
    ratios = []
    for i in range(pairs):
        if i % 2 == 0:
            a = base()
            b = other()
        else:
            b = other()
            a = base()
        ratios.append(b / a)
    return statistics.median(ratios)


def bench_model(
    model: str,
    data,
    batches,
    repeats: int,
    variants: list[str],
    pair_seconds: float = PAIR_SECONDS,
) -> tuple[dict, dict]:
    """Median seconds per round of the limit proxy and each engine variant, and each row's
    ratio to FedAvg. An engine row's ratio is :func:`paired_ratio` over ``repeats`` pairs, or
    as many as fit in ``pair_seconds`` (up to ``MAX_PAIRS``: about 60 for the SVM, where one
    round is 20 ms and a ratio of single rounds moves by ±5%; a CNN round is 30 s). The proxy
    and floor rows' ratios are the median of the per-repeat ratios (each repeat times every
    row one after the other)."""
    runs = {name: engine_run(model, data, **VARIANTS[name]) for name in variants}
    proxy = (lambda: time_svm_hand_loop(data, batches)) if model == "svm" else None
    proxy = proxy or (lambda: time_raw_round(model, data, batches))
    timers = {"proxy": proxy}
    if model == "svm" and svm_kernel.kernel() is not None:
        # the memory floor: every batch's rows read once, as the fused kernel reads them under
        # the fixed order: each client's rows in sequence (its copy in batch order, 5 x 12,000
        # rows), 8 side by side
        seq = torch.arange(STEPS * BATCH).reshape(-1, BATCH)
        timers["floor"] = lambda: svm_kernel.memory_floor(data.x_train, seq)
    for name, run in runs.items():
        timers[name] = lambda run=run: time_engine_round(run)
    if model == "svm":
        timers["fedavg_per_step"] = lambda: time_engine_round(runs["fedavg"], fused=False)
    for timer in timers.values():
        timer()  # warm-up: allocations, first calls, the kernel's compilation
    times: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(repeats):
        for name, timer in timers.items():
            times[name].append(timer())
    medians = {k: statistics.median(v) for k, v in times.items()}
    ratios = {
        k: statistics.median(a / b for a, b in zip(v, times["fedavg"], strict=True))
        for k, v in times.items()
    }
    engine_rows = [k for k in timers if k in runs or k == "fedavg_per_step"]
    for name in (k for k in engine_rows if k != "fedavg"):
        pairs = int(pair_seconds / (medians[name] + medians["fedavg"]))
        pairs = max(repeats, min(MAX_PAIRS, pairs))
        ratios[name] = paired_ratio(timers["fedavg"], timers[name], pairs)
    return medians, ratios
