"""FedWalk's cost at the paper's scale on this machine: peak memory of a 100-client ResNet-18
SCAFFOLD run (with a sweep checkpoint written the way a trial writes it), and seconds per round
of a paper-profile FedWalk round.

    python benchmarks/fedwalk_cost.py memory [ROUNDS] [LOCAL_STEPS]
    python benchmarks/fedwalk_cost.py round [ROUNDS]

Needs CIFAR-10 (``FEDSWEEP_DATA_DIR``). ResNet-18 runs from random init (the ImageNet weights do
not change memory or time) and the leash is the offline stand-in (ImageNet32 is not needed for a
cost). ``memory`` runs SCAFFOLD with N = 100, m = 20, B = 32 until every client has trained
(about 20 rounds), then writes a checkpoint with ``externalize`` into a temporary folder and
prints the peak resident memory; the peak does not depend on the local steps (the default 5 is
the paper's; 1 is faster). ``round`` runs SCAFFOLD+FedWalk at the paper settings (20 clients x 5
steps of 32 images, L_k over each client's data, the leash step, and the full evaluation:
test set and training set) and prints each round's seconds.
"""

from __future__ import annotations

import io
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

from fedsweep.config.load import build_config
from fedsweep.engine.client_state import externalize
from fedsweep.experiment import FLRun


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def config(rounds: int, steps: int, hooks: list[str], full_eval: bool):
    return build_config(
        {
            "algorithm": "scaffold",
            "sampler": "uniform",
            "cohort": {"size": 20},
            "hooks": hooks,
            "step_policy": "fixed",
            "fixed_steps": {"steps": steps},
            "leash": {"source": "standin", "task": "LH"},
            "fedwalk": {"tau": 0.5},
            "data": {
                "dataset": "cifar10",
                "partition": "dirichlet",
                "dirichlet_alpha": 0.1,
                "num_clients": 100,
                "normalization": "imagenet",
                "holdout": 5000 if hooks else 0,
            },
            "model": {"name": "resnet18"},
            "train": {"rounds": rounds, "batch_size": 32, "lr": 0.01, "order": "rr"},
            "eval": (
                {"batch_size": 1000}
                if full_eval
                else {"train_metrics": False, "test_subset": 1000, "every": 10**6}
            ),
            "tracking": {"enabled": False},
            "threads": 2,
        }
    )


def memory(rounds: int, steps: int) -> None:
    run = FLRun(config(rounds, steps, [], full_eval=False))
    print(f"d = {run.fm.dim:,} parameters; after set-up: peak {peak_gib():.2f} GiB", flush=True)
    for t in range(1, rounds + 1):
        start = time.perf_counter()
        run.step()
        print(
            f"round {t}: {time.perf_counter() - start:.1f} s, clients holding c_i: "
            f"{len(run.method.ci)}, peak {peak_gib():.2f} GiB",
            flush=True,
        )
    with tempfile.TemporaryDirectory() as tmp:
        state, files = externalize(run.state_dict(), Path(tmp))
        buf = io.BytesIO()
        torch.save(state, buf)
        side = sum((Path(tmp) / f).stat().st_size for f in files)
    print(
        f"checkpoint: main state {buf.tell() / 1024**2:.1f} MiB + {len(files)} client files "
        f"{side / 1024**3:.2f} GiB; peak resident memory {peak_gib():.2f} GiB"
    )


def rounds_timed(rounds: int) -> None:
    run = FLRun(config(rounds, 5, ["fedwalk"], full_eval=True))
    for t in range(1, rounds + 1):
        start = time.perf_counter()
        metrics = run.step()
        print(
            f"round {t}: {time.perf_counter() - start:.1f} s (leashed {float(metrics['leashed']):.0f})",
            flush=True,
        )
    print(f"peak resident memory {peak_gib():.2f} GiB")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "memory"
    if what == "memory":
        memory(
            int(sys.argv[2]) if len(sys.argv) > 2 else 20,
            int(sys.argv[3]) if len(sys.argv) > 3 else 5,
        )
    else:
        rounds_timed(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
