"""One store, many writers: ``fedsweep run`` processes started at once on a fresh sqlite store
all finish and log every round (MLflow creates the schema in the first process that opens the
file; :func:`fedsweep.tracking.store.prepare_store` serialises that under a file lock)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers import small_run, write_yaml

ROOT = Path(__file__).resolve().parents[1]
WRITERS = 6
ROUNDS = 2


def test_concurrent_runs_on_a_fresh_sqlite_store_all_finish(tmp_path):
    from mlflow import MlflowClient

    config = write_yaml(tmp_path / "run.yaml", small_run("conc", "concurrency", rounds=ROUNDS))
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"  # neither folder nor file exists
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_DISABLE_TELEMETRY": "true"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "fedsweep.cli.main", "run", str(config), "-q"]
            + ["--set", f"seed={seed}", "--tracking-uri", uri],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for seed in range(WRITERS)
    ]
    deadline = time.time() + 300
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.time()))
            outputs.append(out)
    finally:
        for proc in procs:
            proc.kill()
    failed = [
        (p.returncode, o[-2000:]) for p, o in zip(procs, outputs, strict=True) if p.returncode
    ]
    assert not failed, failed

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("concurrency")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == WRITERS
    assert sorted(r.data.params["seed"] for r in runs) == [str(s) for s in range(WRITERS)]
    for run in runs:
        assert run.info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "test_loss")]
        assert steps == list(range(1, ROUNDS + 1))
