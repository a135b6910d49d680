"""Issue 48, item 15: SIGTERM during an outage of the tracking server. A real ``mlflow server``
goes away in the middle of a sweep; SIGTERM then stops a driver waiting with ``--wait`` and the
running driver within seconds, exit 143 and one line, instead of MLflow's minutes of retries
for every clean-up write (measured before: still running 120 s after SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from fedsweep.core.processes import free_port, mlflow_server_env
from tests.helpers import small_spec, write_yaml

ROOT = Path(__file__).resolve().parents[2]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_sigterm_during_an_outage_stops_both_drivers_in_seconds(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--backend-store-uri", f"sqlite:///{tmp_path / 'srv.db'}",
         "--artifacts-destination", str(tmp_path / "artifacts")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env=mlflow_server_env(),  # as fedsweep starts one: no job runner beside it
    )  # fmt: skip
    spec = write_yaml(
        tmp_path / "stop.yaml",
        small_spec("stop", rounds=1500, seeds=(0, 1), alphas=(0.5,), train_subset=900,
                   checkpoint_every=50),
    )  # fmt: skip
    env = {**os.environ, "FEDSWEEP_STORE_DIR": str(tmp_path / "local"),
           "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT)}  # fmt: skip
    cmd = [sys.executable, "-m", "fedsweep.cli.main", "sweep", str(spec), "--profile", "smoke",
           "--tracking-uri", url, "--max-concurrent", "1"]  # fmt: skip
    logs = {n: open(tmp_path / f"{n}.log", "w") for n in ("running", "waiting")}  # noqa: SIM115
    procs: dict[str, subprocess.Popen] = {}
    try:
        deadline = time.time() + 120
        while not _answers(url):
            assert time.time() < deadline and server.poll() is None, "mlflow server did not start"
            time.sleep(0.3)
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=url)
        procs["running"] = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=logs["running"],
                                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        deadline = time.time() + 240
        while time.time() < deadline:  # the first trial has logged rounds
            time.sleep(0.5)
            try:
                exps = [e.experiment_id for e in client.search_experiments()]
                kids = [r for r in client.search_runs(exps) if "mlflow.parentRunId" in r.data.tags]
                if kids and client.get_metric_history(kids[0].info.run_id, "round_time"):
                    break
            except Exception:  # noqa: BLE001 - the store is being made
                continue
        else:
            pytest.fail((tmp_path / "running.log").read_text()[-3000:])
        procs["waiting"] = subprocess.Popen([*cmd, "--wait"], env=env, cwd=tmp_path,
                                            stdout=logs["waiting"], stderr=subprocess.STDOUT,
                                            start_new_session=True)  # fmt: skip
        deadline = time.time() + 120  # it queues behind the running driver
        while "to end its sweep of" not in " ".join((tmp_path / "waiting.log").read_text().split()):
            assert time.time() < deadline and procs["waiting"].poll() is None, (
                tmp_path / "waiting.log"
            ).read_text()[-3000:]
            time.sleep(0.3)
        os.killpg(server.pid, signal.SIGKILL)  # the outage
        server.wait(timeout=30)
        time.sleep(3)
        took = {}
        for name in ("waiting", "running"):
            started = time.monotonic()
            procs[name].send_signal(signal.SIGTERM)
            assert procs[name].wait(timeout=90) == 143, name
            took[name] = time.monotonic() - started
    finally:
        for proc in (*procs.values(), server):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        for handle in logs.values():
            handle.close()
    assert took["waiting"] < 15 and took["running"] < 45, took
    running = " ".join((tmp_path / "running.log").read_text().split())
    assert "interrupted (SIGTERM): the store did not answer the clean-up" in running
    assert "could not be marked KILLED now" in running and "Traceback" not in running
    assert "interrupted (SIGTERM)" in (tmp_path / "waiting.log").read_text()
