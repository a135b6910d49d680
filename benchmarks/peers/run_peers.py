"""``make bench-peers``: seconds per FedAvg round, fedsweep vs Flower's simulation, same workload.

    python benchmarks/peers/run_peers.py [--models svm,cnn] [--rounds R] [--venv .venv-peers]
                                         [--json]

Workload (``fedsweep.bench``, issue 2): 5 clients x 120 local SGD steps of B=100 per round on
``fedsweep.bench.synthetic_mnist(seed=0)`` (60,000 MNIST-shaped training images split IID with
``case1``, 10,000 test images), lr 1e-4, then a test-set evaluation of the global model.

* **fedsweep**, measured in this process: ``fedsweep.bench.engine_run(model, data)`` (FedAvg, no
  selector) timed with ``fedsweep.bench.time_engine_round``; one warm-up round, then the median
  of R rounds. torch uses all the process's CPUs (``set_threads(None)``, as ``make bench``);
  the clients run one after the other.
* **Flower**, ``flower_fedavg.py`` run by the venv's python (flwr[simulation] has its own Ray
  pin, so it lives in ``.venv-peers``, see ``requirements.txt``): ``run_simulation`` with the Ray
  backend, FedAvg over all 5 clients, each client a plain torch loop (forward, criterion +
  penalty, backward, ``torch.optim.SGD``) in a Ray actor with 1 CPU (so Ray runs as many clients
  at once as there are CPUs, each with 1 torch thread), centralized evaluation on the server.
  Seconds per round from timestamps taken in the strategy's ``evaluate_fn``; the median of R
  rounds after one warm-up round (which also absorbs Ray's and the actors' start-up).

Prints a markdown table; ``--json`` adds one JSON object as the last line. Flower's and Ray's
logs go to a log file per model (its path is printed) instead of the terminal.
"""

from __future__ import annotations

import os

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ["FLWR_TELEMETRY_ENABLED"] = "0"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from fedsweep.bench import (  # noqa: E402
    engine_run,
    fingerprint,
    synthetic_mnist,
    time_engine_round,
)
from fedsweep.core.device import set_threads  # noqa: E402
from fedsweep.data.datasets import TensorDataset  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def fedsweep_side(model: str, data: TensorDataset, rounds: int) -> dict:
    """Median seconds per fedsweep FedAvg round (one warm-up round first)."""
    run = engine_run(model, data)
    warmup = time_engine_round(run)
    times = [time_engine_round(run) for _ in range(rounds)]
    return {
        "rounds_s": [round(t, 4) for t in times],
        "median_s": round(statistics.median(times), 4),
        "warmup_round_s": round(warmup, 4),
    }


def flower_side(python: Path, model: str, rounds: int, log_dir: Path) -> dict:
    """Run ``flower_fedavg.py`` in the venv; its JSON line, plus the subprocess's wall time."""
    log = log_dir / f"flower-{model}.log"
    cmd = [str(python), str(HERE / "flower_fedavg.py"), "--model", model, "--rounds", str(rounds)]
    start = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=os.environ)
    wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
        sys.exit(f"the Flower side failed (rc {proc.returncode}), log {log}:\n{tail}")
    result = json.loads(lines[-1])
    result["process_wall_s"] = round(wall, 2)
    result["log"] = str(log)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="svm,cnn")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per side (median)")
    parser.add_argument("--venv", default=str(REPO / ".venv-peers"), help="the Flower venv")
    parser.add_argument("--json", action="store_true", help="a JSON summary as the last line")
    args = parser.parse_args(argv)
    python = Path(args.venv) / "bin" / "python"
    if not python.exists():
        sys.exit(f"no Flower venv at {args.venv}: run `make bench-peers` (it creates it)")
    models = [m for m in args.models.split(",") if m]
    flwr_version = subprocess.run(
        [str(python), "-c", "import flwr; print(flwr.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()

    threads = set_threads(None)
    data = synthetic_mnist(seed=0)
    log_dir = Path(tempfile.mkdtemp(prefix="fedsweep-bench-peers-"))
    summary: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.platform()} {platform.machine()} {os.cpu_count()} CPUs",
        "torch": torch.__version__,
        "flwr": flwr_version,
        "rounds": args.rounds,
        "fedsweep_threads": threads,
    }
    results = {}
    for model in models:
        # fedsweep first, then Flower: never both at once on the same CPUs
        fs = fedsweep_side(model, data, args.rounds)
        fl = flower_side(python, model, args.rounds, log_dir)
        if fl["data_fingerprint"] != fingerprint(data):
            sys.exit(f"{model}: the Flower side saw different data: {fl['data_fingerprint']}")
        results[model] = {"fedsweep": fs, "flower": fl, "ratio": fl["median_s"] / fs["median_s"]}

    print(
        f"# bench-peers  {summary['date']}  {summary['machine']}  torch {torch.__version__}  "
        f"flwr {flwr_version}"
    )
    print(
        f"# one round = 5 clients x 120 steps of B=100 + test eval (10,000 images); median of "
        f"{args.rounds} rounds after 1 warm-up round"
    )
    if results:
        fl = next(iter(results.values()))["flower"]
        print(
            f"# torch threads: fedsweep {threads} (clients in turn); Flower clients "
            f"{fl['client_torch_threads']:g} each ({fl['client_cpus']} CPU per Ray actor, up to "
            f"{os.cpu_count()} at once), Flower server eval {fl['server_torch_threads']}"
        )
    print("| model | fedsweep s/round | Flower s/round | Flower ÷ fedsweep |")
    print("|---|---:|---:|---:|")
    for model, r in results.items():
        print(
            f"| {model} | {r['fedsweep']['median_s']:.4f} | {r['flower']['median_s']:.4f} "
            f"| {r['ratio']:.2f} |"
        )
    for model, r in results.items():
        fl = r["flower"]
        print(
            f"# {model}: per round fedsweep {r['fedsweep']['rounds_s']}, Flower {fl['rounds_s']}; "
            f"warm-up round fedsweep {r['fedsweep']['warmup_round_s']:.2f} s, Flower "
            f"{fl['warmup_round_s']:.2f} s (with Ray start-up); Flower process "
            f"{fl['process_wall_s']:.1f} s; mean Flower client train "
            f"{fl['client_train_s_mean']:.3f} s; log {fl['log']}"
        )
    summary["results"] = results
    for model, r in results.items():
        summary[f"{model}_fedsweep_s_per_round"] = r["fedsweep"]["median_s"]
        summary[f"{model}_flower_s_per_round"] = r["flower"]["median_s"]
        summary[f"{model}_flower_over_fedsweep"] = round(r["ratio"], 4)
    if args.json:
        print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
