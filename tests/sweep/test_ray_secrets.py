"""Issue 48, item 3: no secret in Ray's logs. Ray Tune copies the driver's AWS credentials into
every trial actor's ``runtime_env``, and Ray's runtime-env agent writes that, in clear, into the
session's ``logs/runtime_env_agent.log``. fedsweep hands credentials to trials through Ray's
object store instead: a real sweep with sentinel credentials set leaves them in no file under
Ray's session folder, the sweep's Ray folder or the store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedsweep.sweep import ray_backend
from tests.helpers import small_spec, smoke_sweep, write_yaml

SENTINELS = {
    "AWS_SECRET_ACCESS_KEY": "sentinel-secret-5e1f0c",
    "AWS_ACCESS_KEY_ID": "sentinel-key-id-a9b27d",
    "AWS_SESSION_TOKEN": "sentinel-token-3c88e4",
    "MLFLOW_TRACKING_PASSWORD": "sentinel-password-77d0b1",
}


def files_holding(folder: Path, needles) -> list[str]:
    hits = []
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                hits += [f"{path}: {n}" for n in needles if n.encode() in data]
        except OSError:  # sockets, files removed meanwhile
            continue
    return hits


def test_ray_tune_propagates_no_secret_during_a_fit(monkeypatch):
    """During a fit Ray's propagation list holds no credential name, and the credentials set
    are handed to the caller (for the object store); after it, Ray's list is as it was."""
    from ray.tune.execution import class_cache

    before = set(class_cache.ENV_VARS_TO_PROPAGATE)
    assert "AWS_SECRET_ACCESS_KEY" in before  # what Ray 2.60 does: the leak's cause
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    with ray_backend.secrets_kept_from_ray() as held:
        assert held == {"AWS_SECRET_ACCESS_KEY": "s"}
        during = class_cache.ENV_VARS_TO_PROPAGATE
        assert not {n for n in during if n.startswith("AWS_")}
        assert os.environ["AWS_SECRET_ACCESS_KEY"] == "s"  # the driver keeps its own
    assert class_cache.ENV_VARS_TO_PROPAGATE == before


@pytest.mark.slow
def test_a_sweep_leaves_no_secret_in_rays_files(ray_session, tmp_path, monkeypatch):
    import ray

    for key, value in SENTINELS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    spec = write_yaml(tmp_path / "secrets.yaml", small_spec("secrets", alphas=(0.5,), rounds=2))
    report = smoke_sweep(spec, store, tmp_path)
    assert (report.finished, report.errored) == (1, 0)
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    assert (session / "logs").is_dir()
    needles = list(SENTINELS.values())
    assert files_holding(session, needles) == []
    assert files_holding(tmp_path, needles) == []  # the store, its artifacts, Ray's storage


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


#: a driver that attaches to the Ray cluster at argv[1] as a sweep does and prints the cluster's
#: job table (what ``ray list jobs`` shows to anyone holding the cluster's token)
JOBS_DRIVER = """
import json, sys
import ray
from fedsweep.sweep.ray_backend import init_ray, shutdown_ray
init_ray(sys.argv[1])
print("JOBS" + json.dumps(ray._private.state.jobs(), default=str))
shutdown_ray()
"""


@pytest.mark.slow
def test_the_clusters_job_table_holds_no_password_of_the_command_line(tmp_path):
    """Issue 62, item 2: Ray records the driver's command line as its job's ``Entrypoint`` in
    the cluster's job table, readable by anyone holding the cluster's token while the head
    runs. A driver attached to a real head (``ray start --head``) with a PostgreSQL password in
    its command line leaves the password nowhere in that table (entrypoint, runtime_env,
    metadata); the rest of the command line stays."""
    import json
    import shutil
    import subprocess
    import sys
    import tempfile
    import time

    from fedsweep.team.local import stop_group

    secret = "Sw0rdf1sh-job-table"
    temp = tempfile.mkdtemp(prefix="fsr-", dir="/tmp")  # short: Ray's socket paths live there
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    head = subprocess.Popen(
        ["ray", "start", "--head", "--block", "--port", str(port), "--num-cpus", "0",
         "--node-ip-address", "127.0.0.1", "--include-dashboard=false",
         "--disable-usage-stats", "--dashboard-agent-listen-port", str(_free_port()),
         f"--temp-dir={temp}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        from fedsweep.core.processes import listens

        deadline = time.monotonic() + 120
        while not listens("127.0.0.1", port):
            assert head.poll() is None, "ray start --head exited"
            assert time.monotonic() < deadline, "the Ray head does not listen after 120 s"
            time.sleep(0.3)
        uri = f"postgresql://alice:{secret}@db.example:5432/mlflow"
        proc = subprocess.run(
            [sys.executable, "-c", JOBS_DRIVER, f"127.0.0.1:{port}", "--tracking-uri", uri],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        stop_group(head.pid)
        shutil.rmtree(temp, ignore_errors=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("JOBS")), None)
    assert proc.returncode == 0 and line, proc.stdout + proc.stderr
    jobs = json.loads(line[len("JOBS") :])
    assert jobs, "the job table holds no job"
    assert secret not in line
    entrypoints = [job["Entrypoint"] for job in jobs]
    assert any("--tracking-uri postgresql://alice:***@db.example:5432/mlflow" in e
               for e in entrypoints), entrypoints  # fmt: skip
