"""Issue 49, item 2: Ray starts while the sweep driver opens the store (``ray_backend.start_ray``,
in a thread that lives as long as Ray: its processes die with the thread that started them),
when a trial will run by the store's tags alone (``runner.start_ray_early``, read without
MLflow); ``init_ray`` waits for it and raises its error, a driver that fails before it waited
stops it, and the driver's own SIGTERM handler stays."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fedsweep.specs.load import expand, load_spec
from fedsweep.sweep import ray_backend
from fedsweep.sweep.runner import start_ray_early
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.direct import done_runs_by_hash, tagged_done_hashes
from tests.helpers import small_spec, write_yaml

ROOT = Path(__file__).resolve().parents[2]


def _done(client, experiment_id: str, config_hash: str, status: str = "finished") -> str:
    tags = {"fedsweep.config_hash": config_hash, "fedsweep.status": status}
    return client.create_run(experiment_id, tags=tags).info.run_id


def test_ray_starts_early_only_when_a_trial_will_run(tmp_path):
    spec = write_yaml(tmp_path / "early.yaml", small_spec("early", alphas=(0.5, 1.0)))
    trials = expand(load_spec(spec), "smoke")
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    assert start_ray_early(trials, store)  # no store yet: every trial runs
    client = get_client(store)
    exp = client.create_experiment("early")
    assert start_ray_early(trials, store)  # an empty store
    *first, last = trials
    for t in first:
        _done(client, exp, t.config_hash)
    _done(client, exp, last.config_hash, status="running")  # not done
    assert start_ray_early(trials, store)
    deleted = _done(client, exp, last.config_hash)
    client.delete_run(deleted)  # a deleted run does not count
    assert start_ray_early(trials, store)
    _done(client, exp, last.legacy_hash or last.config_hash)  # done (by its legacy hash too)
    assert not start_ray_early(trials, store)
    hashes = {h for t in trials for h in t.hashes}
    db = tmp_path / "store" / "mlflow.db"
    assert tagged_done_hashes(db, hashes) == set(done_runs_by_hash(client, hashes))
    assert not start_ray_early(trials, "http://127.0.0.1:5000")  # read through MLflow: later
    (tmp_path / "junk.db").write_text("not a database")
    assert tagged_done_hashes(tmp_path / "junk.db", hashes) is None
    assert not start_ray_early(trials, f"sqlite:///{tmp_path / 'junk.db'}")


class FakeRay:
    """``ray.init`` that takes ``delay`` seconds and fails ``fails`` times."""

    def __init__(self, fails: int = 0, delay: float = 0.0):
        self.fails, self.delay, self.calls, self.up, self.threads = fails, delay, 0, False, []

    def init(self, address=None, **kwargs):
        self.calls += 1
        self.threads.append(threading.current_thread().name)
        time.sleep(self.delay)
        if self.calls <= self.fails:
            raise Exception(  # noqa: TRY002 - what Ray raises
                "The current node timed out during startup."
            )
        self.up = True

    def shutdown(self):
        self.up = False

    def is_initialized(self):
        return self.up


@pytest.fixture
def fake_ray(monkeypatch):
    import ray

    def make(**kw):
        fake = FakeRay(**kw)
        for name in ("init", "shutdown", "is_initialized"):
            monkeypatch.setattr(ray, name, getattr(fake, name))
        return fake

    monkeypatch.setattr(ray_backend, "RAY_RETRY_PAUSE_S", 0.0)
    monkeypatch.setattr(ray_backend, "_PENDING", None)
    monkeypatch.setattr(ray_backend, "_KEEPER", None)
    return make


def test_init_ray_waits_for_the_background_start_and_shutdown_ends_it(fake_ray):
    fake = fake_ray(delay=0.3)
    assert ray_backend.start_ray(None)
    assert not ray_backend.start_ray(None)  # one start at a time
    assert ray_backend.init_ray(None) is True  # waited for it
    assert fake.calls == 1 and fake.threads == ["fedsweep-ray-start"] and fake.up
    keeper = [t for t in threading.enumerate() if t.name == "fedsweep-ray-start"]
    assert keeper  # alive while Ray runs
    ray_backend.shutdown_ray()
    assert not fake.up
    assert not any(t.name == "fedsweep-ray-start" for t in threading.enumerate())
    # a start nobody waited for: shutdown waits for it first, then stops it
    fake = fake_ray(delay=0.3)
    ray_backend.start_ray(None)
    ray_backend.shutdown_ray()
    assert fake.calls == 1 and not fake.up


def test_a_failed_background_start_is_raised_where_the_driver_waits(fake_ray):
    fake = fake_ray(fails=2)
    ray_backend.start_ray(None)
    with pytest.raises(ray_backend.RayStartError, match="did not come up, twice"):
        ray_backend.init_ray(None)
    assert fake.calls == 2 and not fake.up
    fake = fake_ray(delay=0.2)
    ray_backend.start_ray(None)
    ray_backend.abandon_start()  # the driver failed before it waited: Ray is stopped
    assert fake.calls == 1 and not fake.up
    assert not any(t.name == "fedsweep-ray-start" for t in threading.enumerate())


SCRIPT = """
import json, signal, sys, threading
from pathlib import Path
from fedsweep.sweep import runner
from fedsweep.sweep.ray_backend import shutdown_ray

spec, store, out = sys.argv[1], sys.argv[2], {}
handler = lambda signum, frame: None
signal.signal(signal.SIGTERM, handler)
quiet = dict(verbose=0, echo=lambda *a: None, storage_dir=Path(store).parent / "ray",
             max_concurrent=1)
real = runner.get_client

def broken(uri, **kw):  # the store fails to open while Ray is starting
    raise RuntimeError("the store is broken")

runner.get_client = broken
try:
    runner.run_sweep(spec, "smoke", tracking_uri="sqlite:///" + store, **quiet)
except RuntimeError as err:
    out["broken"] = str(err)
import ray
out["ray_after_failure"] = ray.is_initialized()
runner.get_client = real
started = []
original = runner.start_ray
runner.start_ray = lambda address: started.append(original(address))
report = runner.run_sweep(spec, "smoke", tracking_uri="sqlite:///" + store, **quiet)
out["started_early"] = started
out["finished"] = report.finished
out["errored"] = report.errored
out["sigterm_kept"] = signal.getsignal(signal.SIGTERM) is handler
shutdown_ray()
out["threads_left"] = [t.name for t in threading.enumerate() if t.name == "fedsweep-ray-start"]
print("RESULT=" + json.dumps(out))
"""


@pytest.mark.slow
def test_a_sweep_starts_ray_in_the_background_in_a_fresh_driver(tmp_path):
    """In a fresh interpreter (no Ray up, as a real driver): a store that fails to open while
    Ray starts leaves no Ray behind; a sweep then starts Ray early, runs every trial, and the
    driver's SIGTERM handler is its own after Ray's start."""
    spec = write_yaml(tmp_path / "bg.yaml", small_spec("bg", alphas=(0.5,), seeds=(0, 1)))
    store = tmp_path / "store" / "mlflow.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(spec), str(store)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT=")]
    assert done.returncode == 0 and lines, (done.stdout[-3000:], done.stderr[-3000:])
    out = json.loads(lines[-1][len("RESULT=") :])
    assert out["broken"] == "the store is broken" and out["ray_after_failure"] is False
    assert out["started_early"] == [True]
    assert (out["finished"], out["errored"]) == (2, 0)
    assert out["sigterm_kept"] is True
    assert out["threads_left"] == []
