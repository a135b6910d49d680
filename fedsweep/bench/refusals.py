"""``make bench``'s refusal rows: how long a bad input takes to be refused, as a user meets it,
one whole command at a time (a fresh Python each, as ``farm-bench`` times commands).

Each row runs its command ``repeats`` times and reports the median wall time and the exit code;
every command must exit 2 (bad input) with one message. The rows are what issue 48 measured at
5-9 s idle (a figure-id typo: torch, Ray, MLflow and plotly imported first) and 130 s (a dead
PostgreSQL URI: Ray started first), and what issue 49 measured at 2-4 s (an unknown config key
or tracking-URI scheme: torch imported first); all are now refused before torch, Ray and
MLflow's store are imported (``fedsweep.cli.early``)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fedsweep.core.processes import free_port


def refusal_commands() -> list[tuple[str, list[str]]]:
    dead = f"postgresql://u@127.0.0.1:{free_port()}/db"
    return [
        ("sweep, a figure-id typo", ["sweep", "bherd-fig4x", "--profile", "smoke"]),
        ("figures, a figure-id typo", ["figures", "--figure", "bherd-fig4x"]),
        ("report, a figure-id typo", ["report", "--figure", "bherd-fig4x"]),
        (
            "sweep, a dead PostgreSQL URI",
            ["sweep", "bherd-fig4e", "--profile", "smoke", "--tracking-uri", dead],
        ),
        ("run, an unknown config key", ["run", "configs/fedavg-svm.yaml", "--set", "trian.lr=1"]),
        (
            "sweep, an unknown --set key",
            ["sweep", "bherd-fig4e", "--profile", "smoke", "--set", "trian.lr=1"],
        ),
        (
            "run, an unknown tracking-URI scheme",
            ["run", "configs/fedavg-svm.yaml", "--tracking-uri", "sqlit:///x.db"],
        ),
    ]


def bench_refusals(repeats: int = 3, root: Path | None = None) -> list[dict]:
    """Per command: median wall seconds over ``repeats`` runs, the exit codes, the lines."""
    root = root or Path(__file__).resolve().parents[2]
    rows = []
    with tempfile.TemporaryDirectory() as store:
        env = {**os.environ, "FEDSWEEP_STORE_DIR": store, "RAY_USAGE_STATS_ENABLED": "0"}
        env.pop("MLFLOW_TRACKING_URI", None)
        for label, args in refusal_commands():
            times, codes, lines = [], set(), 0
            for _ in range(max(1, repeats)):
                start = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "fedsweep.cli.main", *args],
                    cwd=root, env=env, capture_output=True, text=True, timeout=600,
                )  # fmt: skip
                times.append(time.perf_counter() - start)
                codes.add(done.returncode)
                lines = len(done.stderr.strip().splitlines())
            rows.append(
                {"command": label, "args": " ".join(args), "median_s": statistics.median(times),
                 "exit_codes": sorted(codes), "stderr_lines": lines}
            )  # fmt: skip
    return rows
