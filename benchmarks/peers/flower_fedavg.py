"""The Flower side of ``make bench-peers``: seconds per FedAvg round in a Flower simulation.

Run inside the Flower venv (``.venv-peers``, see ``requirements.txt``)::

    .venv-peers/bin/python benchmarks/peers/flower_fedavg.py --model svm --rounds 3

Workload, the same as ``fedsweep.bench`` (issue 2): ``fedsweep.bench.synthetic_mnist(seed=0)``
(60,000 x 1x28x28 training images, 10,000 test images), split IID into 5 clients with
fedsweep's own ``case1`` partition (the one ``fedsweep.bench.engine_run`` uses). One round = the
5 clients each doing exactly 120 local SGD steps of B=100 (a plain torch loop: forward,
``criterion`` (+ ``penalty``), ``backward``, ``torch.optim.SGD`` lr 1e-4; each client walks a
seeded permutation of its shard, 120 x 100 = one pass), FedAvg of the 5 replies, then the
server evaluating the global model on the 10,000 test images (centralized evaluation).

Flower API (flwr 1.41, the Message API that version documents): a ``ServerApp`` whose ``main``
runs ``flwr.serverapp.strategy.FedAvg(fraction_train=1.0, fraction_evaluate=0.0)`` (all 5
clients train every round; no client-side evaluation) with ``evaluate_fn`` as the centralized
evaluation, a ``ClientApp`` with a ``train`` handler, and ``flwr.simulation.run_simulation``
with the Ray backend, each client (actor) given 1 CPU.

Timing: ``evaluate_fn`` records a ``perf_counter`` timestamp after every evaluation (Flower calls
it once before round 1 and once after each round), so round ``r`` takes
``t[r] - t[r - 1]``: dispatching to the actors, the local training, the replies, the
aggregation and the test evaluation. ``--rounds R`` runs R + 1 rounds; round 1 (the actors'
first imports and data generation) is the warm-up and is reported separately, like the start-up
(interpreter, Ray, actor pool) before it. The median is over rounds 2 .. R + 1.

Prints one JSON line on stdout (Flower's and Ray's logs go to stderr).
"""

from __future__ import annotations

import os

# Set before flwr/ray are imported: no usage stats or telemetry (the machine has no internet).
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["FLWR_TELEMETRY_ENABLED"] = "0"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import flwr  # noqa: E402
import torch  # noqa: E402
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402

from fedsweep.bench import (  # noqa: E402
    BATCH,
    CLIENTS,
    STEPS_PER_CLIENT,
    fingerprint,
    synthetic_mnist,
)
from fedsweep.data.datasets import TensorDataset  # noqa: E402
from fedsweep.data.partitions import case1  # noqa: E402
from fedsweep.models.registry import build_model  # noqa: E402

LR = 1e-4
EVAL_CHUNK = 5000

# Per process (the driver, and each Ray actor): the data set and the client shards, built once.
# Clients run in Ray actors that import this module by name (see the bottom of the file), so
# this cache lives as long as the actor, like a real client's local data.
_DATA: dict[str, object] = {}


def data() -> TensorDataset:
    if "data" not in _DATA:
        _DATA["data"] = synthetic_mnist(seed=0)
    return _DATA["data"]  # type: ignore[return-value]


def shard(partition_id: int) -> torch.Tensor:
    """Global training indices of client ``partition_id`` (fedsweep's IID ``case1`` split)."""
    if "shards" not in _DATA:
        parts = case1(data().y_train.numpy(), CLIENTS)
        _DATA["shards"] = [torch.from_numpy(p) for p in parts]
    return _DATA["shards"][partition_id]  # type: ignore[index]


# ----------------------------------------------------------------------------- ClientApp

client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    """120 local SGD steps of B=100 on this client's shard, from the received global model."""
    start = time.perf_counter()
    cfg = msg.content["config"]
    d = data()
    model = build_model(str(cfg["model"]), d.input_shape, d.num_classes)
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=float(cfg["lr"]))
    partition_id = int(context.node_config["partition-id"])
    rows = shard(partition_id)
    steps, batch = int(cfg["steps"]), int(cfg["batch"])
    g = torch.Generator().manual_seed(1000 * int(cfg["server-round"]) + partition_id)
    order = rows[torch.randperm(len(rows), generator=g)]
    for step in range(steps):
        idx = order[step * batch : (step + 1) * batch]
        opt.zero_grad()
        out = model(d.x_train.index_select(0, idx))
        loss = model.criterion(out, d.y_train.index_select(0, idx))
        penalty = model.penalty(dict(model.named_parameters()))
        if penalty is not None:
            loss = loss + penalty
        loss.backward()
        opt.step()
    metrics = MetricRecord(
        {
            "num-examples": steps * batch,
            "torch-threads": torch.get_num_threads(),
            "train-s": time.perf_counter() - start,
        }
    )
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics})
    return Message(content=content, reply_to=msg)


# ----------------------------------------------------------------------------- ServerApp

server_app = ServerApp()

#: Filled by the ServerApp thread (same process as ``main``).
_RUN: dict[str, object] = {}


@server_app.main()
def server_main(grid: Grid, context: Context) -> None:
    model_name = str(_RUN["model"])
    d = data()
    model = build_model(model_name, d.input_shape, d.num_classes)
    model.eval()
    stamps: list[float] = _RUN["stamps"]  # type: ignore[assignment]
    accuracy: list[float] = _RUN["accuracy"]  # type: ignore[assignment]

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        """Centralized evaluation of the global model on the 10,000 test images."""
        model.load_state_dict(arrays.to_torch_state_dict())
        correct = 0
        with torch.no_grad():
            for s in range(0, len(d.x_test), EVAL_CHUNK):
                out = model(d.x_test[s : s + EVAL_CHUNK])
                correct += int(model.correct(out, d.y_test[s : s + EVAL_CHUNK]))
        acc = correct / len(d.x_test)
        accuracy.append(acc)
        stamps.append(time.perf_counter())
        return MetricRecord({"test-acc": acc})

    strategy = FedAvg(
        fraction_train=1.0,  # all 5 clients every round (the old API's fraction_fit=1)
        fraction_evaluate=0.0,  # no client-side evaluation: the server evaluates
        min_train_nodes=CLIENTS,
        min_available_nodes=CLIENTS,
    )
    torch.manual_seed(0)
    initial = build_model(model_name, d.input_shape, d.num_classes)
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(initial.state_dict()),
        num_rounds=int(_RUN["rounds"]),
        train_config=ConfigRecord(
            {"model": model_name, "steps": STEPS_PER_CLIENT, "batch": BATCH, "lr": LR}
        ),
        evaluate_fn=evaluate,
    )
    _RUN["train_metrics"] = {int(r): dict(m) for r, m in result.train_metrics_clientapp.items()}


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="svm", help="a fedsweep model name (svm, cnn)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (after 1 warm-up)")
    parser.add_argument("--client-cpus", type=int, default=1, help="CPUs per Flower client")
    args = parser.parse_args(argv)

    d = data()
    _RUN.update(model=args.model, rounds=args.rounds + 1, stamps=[], accuracy=[])
    backend_config = {"client_resources": {"num_cpus": args.client_cpus, "num_gpus": 0.0}}
    t_sim = time.perf_counter()
    run_simulation(
        server_app=server_app,
        client_app=client_app,
        num_supernodes=CLIENTS,
        backend_name="ray",
        backend_config=backend_config,
    )
    t_end = time.perf_counter()

    stamps: list[float] = _RUN["stamps"]  # type: ignore[assignment]
    if len(stamps) != args.rounds + 2:  # the initial evaluation + one per round
        sys.exit(f"flower_fedavg: expected {args.rounds + 2} evaluations, got {len(stamps)}")
    rounds = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    timed = rounds[1:]  # round 1 is the warm-up
    train_metrics: dict[int, dict] = _RUN.get("train_metrics", {})  # type: ignore[assignment]
    last = train_metrics.get(args.rounds + 1, {})
    print(
        json.dumps(
            {
                "side": "flower",
                "model": args.model,
                "flwr": flwr.__version__,
                "torch": torch.__version__,
                "rounds_s": [round(t, 4) for t in timed],
                "median_s": round(statistics.median(timed), 4),
                # round 1 also waits for Ray and the actor pool to start, and for each actor's
                # first imports and data generation
                "warmup_round_s": round(rounds[0], 4),
                "simulation_wall_s": round(t_end - t_sim, 3),  # run_simulation, Ray shutdown too
                "client_cpus": args.client_cpus,
                "client_torch_threads": last.get("torch-threads"),
                "client_train_s_mean": round(float(last.get("train-s", float("nan"))), 4),
                "server_torch_threads": torch.get_num_threads(),
                "test_acc": _RUN["accuracy"][-1],  # type: ignore[index]
                "data_fingerprint": fingerprint(d),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    # Run everything from the module imported by its name, not from ``__main__``: Ray pickles
    # the ClientApp with every message, and functions of an importable module travel by
    # reference (the actors import this file: Flower puts the driver's sys.path, which starts
    # with this folder, on their PYTHONPATH), so each actor keeps its data cache across rounds.
    from flower_fedavg import main as _main

    _main()
