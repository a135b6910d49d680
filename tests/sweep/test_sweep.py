"""Real Ray Tune sweeps against a real MLflow sqlite store (smoke-sized, embedded mnist-5k)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fedsweep.specs.load import SpecError, expand, load_spec
from tests.faults import fault_plugins
from tests.helpers import small_spec, smoke_sweep, sweep_runs, write_yaml

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 4


def write_spec(
    folder: Path,
    *,
    rounds=ROUNDS,
    seeds=(0, 1),
    max_failures=1,
    checkpoint_every=2,
    name="test-fig",
) -> Path:
    spec = small_spec(
        name,
        rounds=rounds,
        seeds=seeds,
        train_subset=900,
        max_failures=max_failures,
        checkpoint_every=checkpoint_every,
    )
    return write_yaml(folder / f"{name}.yaml", spec)


@pytest.fixture
def store(tmp_path):
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


def alive(pid: int) -> bool:
    """A process that runs (a zombie waiting to be reaped does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def child_runs(store: str, figure: str):
    client, _, parents, children = sweep_runs(store, figure)
    return client, parents, children


@pytest.mark.slow
def test_sweep_runs_trials_as_child_runs_with_exact_metric_counts(ray_session, tmp_path, store):
    """Four trials as child runs of one parent, every metric logged once per round, and a
    trial that crashes at round 3 retried from its round-2 checkpoint in the same run (one run
    per trial, no lost and no duplicate round); a second sweep schedules nothing, and a trial
    Ray schedules again after its run ended does not run twice."""
    spec = write_spec(tmp_path, max_failures=1, checkpoint_every=1)
    victim = expand(load_spec(spec), "smoke", extra={})[0].trial_id
    report = smoke_sweep(spec, store, tmp_path, plugins=fault_plugins(tmp_path, {victim: 3}))
    assert (report.total, report.scheduled, report.finished, report.errored) == (4, 4, 4, 0)
    assert report.restarts == 1
    client, parents, children = child_runs(store, "test-fig")
    assert len(parents) == 1 and len(children) == 4  # no duplicate run for the retried trial
    parent_id = parents[0].info.run_id
    assert parents[0].info.status == "FINISHED"
    seen = set()
    for run in children:
        tags = run.data.tags
        assert tags["mlflow.parentRunId"] == parent_id
        assert tags["fedsweep.figure"] == "test-fig" and tags["fedsweep.profile"] == "smoke"
        assert tags["fedsweep.status"] == "finished" and tags["fedsweep.threads"] == "1"
        seen.add((tags["fedsweep.curve"], tags["fedsweep.seed"]))
        # the MLflow UI's group of the trial: its figure line, readable (issue 65)
        line = f"{tags['fedsweep.curve']} · {tags['fedsweep.panel_label']} · smoke profile"
        assert tags["fedsweep.line"] == line.replace(" ·  · ", " · ")
        for key in ("test_loss", "test_acc", "client/0/dist", "round_time"):
            assert [m.step for m in client.get_metric_history(run.info.run_id, key)] == [1, 2, 3, 4]
    assert seen == {("alpha=0.5", "0"), ("alpha=0.5", "1"), ("alpha=1.0", "0"), ("alpha=1.0", "1")}

    again = smoke_sweep(spec, store, tmp_path)  # idempotent: nothing to schedule
    assert (again.skipped, again.scheduled) == (4, 0)
    assert len(child_runs(store, "test-fig")[2]) == 4

    # A trial whose run already ended but that Ray schedules again (the driver was killed between
    # the run's last round and Tune's next snapshot, then --resume) must not run a second time.
    from ray import tune

    from fedsweep.sweep.ray_backend import trial_payload
    from fedsweep.sweep.trial import fl_trial

    loaded = load_spec(spec)
    trial = expand(loaded, "smoke", extra={})[0]
    payload = trial_payload(trial, loaded, store, "test-fig", parent_id)
    grid = tune.Tuner(
        fl_trial,
        param_space={"trial": payload},
        run_config=tune.RunConfig(storage_path=str(tmp_path / "ray-direct"), verbose=0),
    ).fit()
    assert not grid.errors and grid[0].metrics["already_ended"] == 1
    children = child_runs(store, "test-fig")[2]
    assert len(children) == 4
    assert sum(r.data.tags["fedsweep.config_hash"] == trial.config_hash for r in children) == 1


@pytest.mark.slow
def test_injected_crash_does_not_stop_the_others_and_resume_reads_no_pickle(
    ray_session, tmp_path, store
):
    """A crash (trial A) and a full disk (trial B, one line naming the cause) at round 3, after
    the round-2 checkpoints, do not stop the others. Then (issue 32) B's checkpoint is
    overwritten with random bytes, A's and B's runs are left RUNNING (as a kill -9 of the driver
    leaves them) beside a stray RUNNING child, and Ray's pickles are planted in the sweep's
    folder. ``--resume``: no pickle is read; A goes on from its checkpoint (its injected crash
    at round 3 is skipped only by a trial restored from a checkpoint); B's checkpoint is set
    aside with one warning and B restarts at round 0 in its run without logging a round twice;
    every run ends FINISHED, the stray one FAILED."""
    from fedsweep.sweep import trial as trial_mod
    from tests.sweep.test_resume import plant_pickles

    spec = write_spec(tmp_path, max_failures=0)
    a, b = expand(load_spec(spec), "smoke", extra={})[1:3]
    report = smoke_sweep(
        spec,
        store,
        tmp_path,
        plugins=fault_plugins(tmp_path, {a.trial_id: 3, b.trial_id: (3, "enospc")}),
    )
    assert (report.finished, report.errored) == (2, 2)
    assert "injected failure" in report.errors[1]
    full = report.errors[0]  # the full disk: one line, no traceback
    assert "\n" not in full and full.startswith(
        "1 of 4 trials: the store's file system is full at "
    )
    assert "no space left on device" in full and b.config_hash in full, full
    client, parents, children = child_runs(store, "test-fig")
    statuses = sorted(r.data.tags["fedsweep.status"] for r in children)
    assert statuses == ["failed", "failed", "finished", "finished"]
    assert parents[0].data.tags["fedsweep.status"] == "partial"

    (sweep_dir,) = [p for p in (tmp_path / "ray").iterdir() if p.is_dir()]
    kept = sorted((sweep_dir / "trials" / b.config_hash).glob("checkpoint_*"))
    assert [p.name for p in kept] == ["checkpoint_000002"]
    corrupt = kept[-1] / trial_mod.STATE_FILE
    corrupt.write_bytes(os.urandom(corrupt.stat().st_size))
    marker = tmp_path / "unpickled.txt"
    plant_pickles(sweep_dir, marker)
    for run in children:  # what a kill -9 of the driver leaves
        if run.data.tags["fedsweep.status"] == "failed":
            client.update_run(run.info.run_id, "RUNNING")
    tags = {"mlflow.parentRunId": parents[0].info.run_id, "fedsweep.config_hash": "stray"}
    client.create_run(parents[0].info.experiment_id, tags=tags)

    lines: list[str] = []
    resumed = smoke_sweep(
        spec,
        store,
        tmp_path,
        resume=True,
        echo=lines.append,
        plugins=fault_plugins(tmp_path, {a.trial_id: 3}),
    )
    assert not marker.exists(), "a pickle in the store's ray_results folder was unpickled"
    assert (resumed.scheduled, resumed.finished, resumed.errored) == (2, 2, 0), resumed.errors
    warned = [line for line in lines if "does not load" in line]
    assert len(warned) == 1 and str(corrupt) in warned[0] and "set aside" in warned[0], lines
    client, parents, children = child_runs(store, "test-fig")
    assert parents[0].info.status == "FINISHED"
    by_hash = {r.data.tags["fedsweep.config_hash"]: r for r in children}
    assert by_hash.pop("stray").info.status == "FAILED"
    for run in by_hash.values():
        assert run.info.status == "FINISHED" and run.data.tags["fedsweep.status"] == "finished"
        for key in ("test_loss", "round_time", "client/0/dist"):
            steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
            assert steps == list(range(1, ROUNDS + 1)), (key, steps)


@pytest.mark.slow
def test_kill_driver_then_resume_loses_and_duplicates_nothing(
    ray_session, tmp_path, store, monkeypatch
):
    """Kill -9 the sweep driver mid-sweep, then --resume into another store from the same
    directory, then into the first: each store has exactly one run per config hash, and the
    printed counts equal what ran. The driver that is killed is a process of its own (with its
    own local Ray); the resumes and the last run are the same ``fedsweep sweep`` command run
    in this process (on the session's Ray), which saves a Python start-up and a Ray start each."""
    from typer.testing import CliRunner

    from fedsweep.cli.main import app
    from fedsweep.tracking.connect import get_client

    # 30 rounds (6 trials, 2 at a time): the kill (polled every 0.25 s) lands while some trials
    # have finished and another one has rounds ahead of it
    rounds = 30
    spec = write_spec(tmp_path, rounds=rounds, seeds=(0, 1, 2), checkpoint_every=5)
    env = {
        **os.environ,
        "FEDSWEEP_STORE_DIR": str(tmp_path / "store"),
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONPATH": str(ROOT),
    }
    args = ["sweep", str(spec), "--profile", "smoke", "--tracking-uri", store]
    cmd = [sys.executable, "-m", "fedsweep.cli.main", *args]
    # create the store's tables before the driver starts: the polling client below would
    # otherwise race the driver's first connection in creating them (two schema migrations of
    # one fresh sqlite file; the store's own concurrency is issue 9's reliability pass)
    get_client(store)
    log = open(tmp_path / "driver.log", "w")  # noqa: SIM115  (closed below)
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 240
        while time.time() < deadline:  # wait until the sweep is under way
            time.sleep(0.25)
            try:
                client, _, children = child_runs(store, "test-fig")
                done = [r for r in children if r.data.tags.get("fedsweep.status") == "finished"]
                # an unfinished trial that has logged at most rounds - 10 rounds (it logs them at
                # least at each checkpoint, every 5 rounds, so more than 5 are still ahead of
                # it): it still runs when the kill comes, a moment after this look
                ahead = [
                    r
                    for r in children
                    if r.data.tags.get("fedsweep.status") != "finished"
                    and len(client.get_metric_history(r.info.run_id, "round_time")) <= rounds - 10
                ]
            except Exception:
                continue
            if done and ahead:
                break
        else:
            log.flush()
            tail = (tmp_path / "driver.log").read_text()[-3000:]
            pytest.fail(f"sweep did not get under way; the driver's output ends:\n{tail}")
        # what the driver started locally (gcs, raylet, Ray's agents...): its process group
        group = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True)
        started = {int(p) for p in group.stdout.split()} - {proc.pid}
        os.kill(proc.pid, signal.SIGKILL)  # the driver dies without any clean-up
        proc.wait(timeout=30)
        # issue 9: nothing of it lives on (Ray's agents used to for ~60 s): fedsweep's watchdog
        deadline = time.time() + 20
        while time.time() < deadline and any(alive(p) for p in started):
            time.sleep(0.1)
        left = [p for p in started if alive(p)]
        assert started and not left, f"still running 20 s after kill -9 of the driver: {left}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # then its local Ray processes
        except ProcessLookupError:
            pass
        log.close()
    _, _, before = child_runs(store, "test-fig")
    unfinished = [r for r in before if r.data.tags.get("fedsweep.status") != "finished"]
    assert unfinished, "the kill came too late to test anything"
    done_before = len(before) - len(unfinished)

    # the same command in this process: its environment and folder as the killed driver's
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)

    def sweep(*argv):
        res = CliRunner().invoke(app, argv)
        assert res.exit_code == 0, (res.output[-3000:], res.exception)
        return res

    # issue 14: --resume into a fresh store from the same directory (the Ray state of both
    # stores under one ray_results folder) runs every trial once there, and says so; it used to
    # restore the first store's Tune experiment and give 24 runs for 18 configs
    other = f"sqlite:///{tmp_path / 'other' / 'mlflow.db'}"
    res = sweep(*args[:-1], other, "--resume")
    assert "6 trials, 0 already finished, scheduling 6" in res.stdout, res.stdout
    assert "test-fig [smoke]: 6 run, 0 skipped" in res.stdout, res.stdout
    _, _, elsewhere = child_runs(other, "test-fig")
    assert sorted(r.data.tags["fedsweep.config_hash"] for r in elsewhere) == sorted(
        {r.data.tags["fedsweep.config_hash"] for r in elsewhere}
    )
    assert len(elsewhere) == 6
    assert all(r.data.tags["fedsweep.status"] == "finished" for r in elsewhere)

    res = sweep(*args, "--resume")
    # the printed counts are what ran: the finished trials skipped, the others run once
    left = 6 - done_before
    assert f"6 trials, {done_before} already finished, scheduling {left}" in res.stdout, res.stdout
    assert f"test-fig [smoke]: {left} run, {done_before} skipped" in res.stdout, res.stdout
    client, parents, children = child_runs(store, "test-fig")
    assert len(parents) == 1
    hashes = [r.data.tags["fedsweep.config_hash"] for r in children]
    assert len(hashes) == 6 and len(set(hashes)) == 6  # zero lost, zero duplicate runs
    for run in children:
        assert run.data.tags["fedsweep.status"] == "finished"
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "test_loss")]
        assert steps == list(range(1, rounds + 1))
    rerun = sweep(*args)
    assert "nothing to schedule" in rerun.stdout


def test_bad_specs_fail_before_ray_naming_file_and_key(tmp_path):
    good = yaml.safe_load(write_spec(tmp_path).read_text())
    bad = {**good, "panels": {"data.partiton": ["case1"]}}
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert "typo.yaml" in str(err.value) and "partiton" in str(err.value)
    empty = {**good, "curves": {"key": "bherd.alpha", "values": []}}
    path.write_text(yaml.safe_dump(empty))
    with pytest.raises(SpecError, match=r"(?s)typo\.yaml.*curves.values.*empty"):
        load_spec(path)
    wrong = {**good, "curves": [{"label": "x", "set": {"train.lr": "fast"}}]}
    path.write_text(yaml.safe_dump(wrong))
    with pytest.raises(SpecError, match=r"train\.lr"):
        load_spec(path)


@pytest.mark.slow
def test_shipped_specs_expand_for_every_profile():
    for path in sorted((ROOT / "sweeps").glob("*.yaml")):
        spec = load_spec(path)
        for profile in ("paper", "quick", "smoke"):
            trials = expand(spec, profile)
            assert trials and len({t.trial_id for t in trials}) == len(trials)


def test_config_hash_ignores_paths_and_resources_but_not_numbers():
    from fedsweep.config.load import build_config
    from fedsweep.specs.load import config_hash

    base = build_config({"train": {"rounds": 7}})
    same = build_config(
        {
            "train": {"rounds": 7},
            "threads": 2,
            "name": "x",
            "data": {"root": "/elsewhere"},
            "tracking": {"experiment": "y"},
        }
    )
    assert config_hash(base) == config_hash(same)
    assert config_hash(base) == config_hash(build_config({"train": {"rounds": 7, "lr": 1e-4}}))
    assert config_hash(base) != config_hash(build_config({"train": {"rounds": 8}}))
    assert config_hash(base) != config_hash(build_config({"train": {"rounds": 7}, "seed": 1}))


def test_sweep_all_skips_specs_this_code_cannot_run(tmp_path):
    from typer.testing import CliRunner

    from fedsweep.cli.main import app

    good = yaml.safe_load(write_spec(tmp_path).read_text())
    (tmp_path / "test-fig.yaml").unlink()
    future = {**good, "figure": "future-fig", "base": {**good["base"], "algorithm": "grab"}}
    (tmp_path / "future-fig.yaml").write_text(yaml.safe_dump(future))
    res = CliRunner().invoke(app, ["sweep", "--sweeps-dir", str(tmp_path), "--profile", "smoke"])
    assert res.exit_code == 2
    assert "skipping" in res.output and "future-fig.yaml" in res.output
    assert "cannot run it yet" in res.output and "grab" in res.output
    assert "no runnable sweep spec" in res.output
