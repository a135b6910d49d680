"""Issue 9: no hangs, one driver per sweep, signals, resume checks, Ray state per store.

Every test is bounded in time and all traffic stays on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.core.processes import free_port
from tests.helpers import small_run, small_spec, write_yaml

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def silent_port():
    """A local port that accepts connections (the kernel's backlog) but never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield s.getsockname()[1]
    s.close()


def runs_of(store: str):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store)
    exps = [e.experiment_id for e in client.search_experiments()]
    return client, (client.search_runs(exps, max_results=1000) if exps else [])


# ---------------------------------------------------------------- tracking server
@pytest.mark.slow
def test_unreachable_tracking_server_fails_in_seconds(tmp_path, silent_port, monkeypatch):
    config = write_yaml(tmp_path / "run.yaml", small_run("r", "unreach", rounds=2))
    spec = write_yaml(tmp_path / "s.yaml", small_spec("unreach"))
    monkeypatch.setenv("FEDSWEEP_TRACKING_TIMEOUT", "2")
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    refused = f"http://127.0.0.1:{free_port()}"
    silent = f"http://127.0.0.1:{silent_port}"
    for args, why in [
        (("run", config, "--tracking-uri", refused), "Connection refused"),
        (("sweep", spec, "--profile", "smoke", "--tracking-uri", refused), "Connection refused"),
        (("run", config, "--tracking-uri", silent), "no answer within 2 s"),
        (("runs", "--tracking-uri", silent), "no answer within 2 s"),
    ]:
        start = time.perf_counter()
        res = invoke(*args)
        took = time.perf_counter() - start
        assert res.exit_code == 2, (args, res.output)
        assert "tracking server does not answer" in res.output and why in res.output, res.output
        assert "Traceback" not in res.output
        assert took < 20, (args, took)  # MLflow's own retries take minutes


# ---------------------------------------------------------------- Ray address, resources
@pytest.mark.slow
def test_unreachable_ray_address_fails_in_seconds_and_opens_no_run(tmp_path, monkeypatch):
    spec = write_yaml(tmp_path / "s.yaml", small_spec("noray"))
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    for address in (f"127.0.0.1:{free_port()}", f"ray://127.0.0.1:{free_port()}"):
        start = time.perf_counter()
        res = invoke(
            "sweep", spec, "--profile", "smoke", "--tracking-uri", store, "--address", address
        )
        assert res.exit_code == 2, res.output
        assert f"--address {address}: cannot reach a Ray cluster" in res.output, res.output
        assert time.perf_counter() - start < 30
    # a port that accepts but is no Ray: Ray's own retries (820 s measured) are bounded; in a
    # fresh process, as Ray reads the bounds when it is imported
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        start = time.perf_counter()
        res = subprocess.run(
            [sys.executable, "-m", "fedsweep.cli.main", "sweep", str(spec), "--profile", "smoke"]
            + ["--tracking-uri", store, "--address", address],
            env={**os.environ, "PYTHONPATH": str(ROOT), "FEDSWEEP_STORE_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        took = time.perf_counter() - start
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-3000:]
    assert f"--address {address}:" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert took < 60, took
    _, runs = runs_of(store)
    assert runs == []  # the parent run is opened only once Ray is connected


def test_unsatisfiable_resources_fail_fast_naming_what_there_is(ray_session, tmp_path, monkeypatch):
    import ray

    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    have = ray.cluster_resources().get("CPU", 0)
    for resources, asked in [({"cpu": have + 6}, "cpu="), ({"cpu": 1, "gpu": 1}, "gpu=1")]:
        spec = write_yaml(tmp_path / "big.yaml", small_spec("big", resources=resources))
        start = time.perf_counter()
        res = invoke("sweep", spec, "--profile", "smoke", "--tracking-uri", store)
        assert res.exit_code == 2, res.output
        assert "no Ray node has that much" in res.output and asked in res.output, res.output
        assert f"{have:g} CPUs" in res.output
        assert time.perf_counter() - start < 60
    _, runs = runs_of(store)
    assert runs == []


# ------------------------------------- second driver, SIGTERM, resume checks, two stores
def _wait_for(predicate, timeout: float, what: str, log: Path):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    pytest.fail(
        f"timed out waiting for {what}; the driver's output ends:\n{log.read_text()[-3000:]}"
    )


@pytest.mark.slow
def test_second_driver_sigterm_resume_check_and_another_store(ray_session, tmp_path, monkeypatch):
    """One driver sweeps; a second one is refused naming it; SIGTERM ends the first with every
    run KILLED (none left RUNNING) and its Ray processes gone; ``--resume`` with a changed
    ``--set`` is refused with the difference; the same figure then sweeps into another store
    although the first store's Ray state is still there; the first sweep resumes exactly."""
    from fedsweep.sweep.runner import run_sweep

    # 60 rounds (6 trials, 2 at a time): the sweep is still busy for seconds after its first
    # rounds are logged, while the second driver is refused and SIGTERM arrives
    rounds = 60
    spec = write_yaml(
        tmp_path / "busy.yaml",
        small_spec("busy", rounds=rounds, seeds=(0, 1, 2), train_subset=900, checkpoint_every=5),
    )
    store_dir = tmp_path / "store"
    store = f"sqlite:///{store_dir / 'mlflow.db'}"
    other = f"sqlite:///{tmp_path / 'other' / 'mlflow.db'}"
    env = {
        **os.environ,
        "FEDSWEEP_STORE_DIR": str(store_dir),
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONPATH": str(ROOT),
    }
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(store_dir))
    cmd = [sys.executable, "-m", "fedsweep.cli.main", "sweep", str(spec), "--profile", "smoke"]
    cmd += ["--tracking-uri", store]
    log_path = tmp_path / "driver.log"
    # the store exists before the driver starts: the polling below (a plain MlflowClient) would
    # otherwise race the driver in creating it, and the driver refuse the half-made schema
    # (seen once under load, 2026-11-25)
    from fedsweep.tracking.connect import get_client

    get_client(store)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:

            def under_way():
                try:
                    client, runs = runs_of(store)
                except Exception:
                    return False
                kids = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
                return any(client.get_metric_history(r.info.run_id, "round_time") for r in kids)

            _wait_for(under_way, 240, "the first trial's rounds", log_path)
            busy = invoke(*cmd[3:])
            assert busy.exit_code == 2, busy.output
            assert f"PID {proc.pid} on {socket.gethostname()}" in busy.output, busy.output
            assert "--wait" in busy.output
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    out = log_path.read_text()
    assert rc == 143, out[-3000:]
    assert "interrupted (SIGTERM)" in out and "--resume" in out
    # issue 48, item 17: where the checkpoints are (beside the store: issue 53)
    assert f"their checkpoints are kept in {store_dir / 'ray_results'}" in " ".join(out.split())
    client, runs = runs_of(store)
    assert [r.info.status for r in runs if r.info.status == "RUNNING"] == []
    (parent,) = [r for r in runs if r.data.tags.get("fedsweep.kind") == "sweep"]
    assert parent.info.status == "KILLED" and parent.data.tags["fedsweep.status"] == "killed"
    unfinished = [r for r in runs if r.data.tags.get("fedsweep.status") == "killed"]
    assert len(unfinished) >= 2  # the parent and at least one trial
    # what the driver started is gone (the session of the killed driver is empty)
    _wait_for(
        lambda: subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True).stdout == b"",
        30,
        "the driver's Ray processes to end",
        log_path,
    )

    changed = invoke(*cmd[3:], "--resume", "--set", "train.rounds=20")
    assert changed.exit_code == 2, changed.output
    assert "--resume:" in changed.output and "train.rounds: (unset) -> 20" in changed.output

    quiet = dict(verbose=0, echo=lambda *a: None, storage_dir=store_dir / "ray_results")
    elsewhere = run_sweep(spec, "smoke", tracking_uri=other, overrides={"train.rounds": 3}, **quiet)
    assert (elsewhere.finished, elsewhere.errored) == (6, 0)

    resumed = run_sweep(spec, "smoke", tracking_uri=store, resume=True, **quiet)
    assert resumed.errored == 0 and resumed.interrupted == 0
    client, runs = runs_of(store)
    kids = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(kids) == 6 and len({r.data.tags["fedsweep.config_hash"] for r in kids}) == 6
    for run in kids:
        assert run.data.tags["fedsweep.status"] == "finished" and run.info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "test_loss")]
        assert steps == list(range(1, rounds + 1))  # nothing lost, nothing logged twice
    (parent,) = [r for r in runs if r.data.tags.get("fedsweep.kind") == "sweep"]
    assert parent.info.status == "FINISHED"


@pytest.mark.slow
def test_driver_lock_names_the_holder_and_wait_queues(tmp_path):
    """The lock another process holds: refused with its PID, host and start time; with
    ``wait`` the second driver starts once the first has ended (its lock freed by the OS, its
    file removed: the waiting driver locks the file created anew, issue 53)."""
    from fedsweep.sweep.locking import SweepBusyError, driver_lock
    from fedsweep.tracking.leases import member

    lock = tmp_path / "fig-smoke-0123abcd.driver"
    ready, go = tmp_path / "ready", tmp_path / "go"
    # the holder keeps the lock until told to go (a wait that follows the test, not a time)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, pathlib\n"
            "from fedsweep.sweep.locking import driver_lock\n"
            f"with driver_lock(pathlib.Path({str(lock)!r}), 'fig', 'smoke', 'sqlite:///x', "
            "False, print):\n"
            f"    pathlib.Path({str(ready)!r}).touch()\n"
            f"    while not pathlib.Path({str(go)!r}).exists():\n"
            "        time.sleep(0.05)\n",
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    said: list[str] = []

    def release_once_waiting() -> None:  # the second driver is queued: the holder may go
        deadline = time.time() + 120
        while not said and time.time() < deadline and holder.poll() is None:
            time.sleep(0.05)
        go.touch()

    try:
        deadline = time.time() + 60
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.1)
        assert ready.exists()
        with pytest.raises(SweepBusyError) as info:
            with driver_lock(lock, "fig", "smoke", "sqlite:///x", False, print):
                pass
        msg = str(info.value)
        assert f"PID {holder.pid} on {socket.gethostname()} (started 20" in msg, msg
        assert msg.split("(started ", 1)[1].split(")")[0].endswith(f"; member {member()}"), msg
        assert "fig [smoke]" in msg and "--wait" in msg
        releaser = threading.Thread(target=release_once_waiting, daemon=True)
        releaser.start()
        with driver_lock(lock, "fig", "smoke", "sqlite:///x", True, said.append):
            assert go.exists()  # only once the holder was let go
            assert holder.wait(timeout=60) == 0  # and has ended (its lock freed by the OS)
        assert said and said[0].startswith(f"waiting for PID {holder.pid}")
        assert not lock.exists()  # issue 53: the lock file goes with the sweep that held it
    finally:
        holder.kill()
        holder.wait()
