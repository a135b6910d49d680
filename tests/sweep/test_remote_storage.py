"""``fedsweep sweep --storage s3://...``: the trials' checkpoints on an object store
(``sweep.remote_state``), against a real S3 server (moto's, in this process) and a real Ray
Tune sweep: a trial that crashed goes on, in a later ``--resume`` with this machine's copy
gone, from the checkpoint the object store holds."""

from __future__ import annotations

import shutil

import pytest

from fedsweep.specs.load import SpecError, expand, load_spec
from tests.faults import fault_plugins
from tests.helpers import small_spec, sweep_runs, write_yaml

ROUNDS = 4


@pytest.fixture
def s3(monkeypatch):
    server = pytest.importorskip("moto.server")
    for key, value in (
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(key, value)
    moto = server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    import pyarrow.fs as pafs

    query = f"endpoint_override={host}:{port}&scheme=http&region=us-east-1"
    fs, _ = pafs.FileSystem.from_uri(f"s3://bucket?{query}&allow_bucket_creation=true")
    fs.create_dir("bucket")
    yield f"s3://bucket/sweeps?{query}", fs
    moto.stop()


def _files(fs, prefix: str) -> list[str]:
    import pyarrow.fs as pafs

    selector = pafs.FileSelector(prefix, recursive=True, allow_not_found=True)
    return sorted(i.path for i in fs.get_file_info(selector) if i.type == pafs.FileType.File)


@pytest.mark.slow
def test_checkpoints_on_an_object_store_survive_the_loss_of_the_local_copy(
    ray_session, tmp_path, s3, monkeypatch
):
    from fedsweep.sweep.runner import run_sweep
    from fedsweep.sweep.trial import RESUMED_TAG

    uri, fs = s3
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "local"))
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    spec = write_yaml(
        tmp_path / "remote-fig.yaml",
        small_spec("remote-fig", rounds=ROUNDS, seeds=(0,), max_failures=0, checkpoint_every=2),
    )
    victim = expand(load_spec(spec), "smoke", extra={})[0]

    def sweep(**kw):
        return run_sweep(
            spec, "smoke", tracking_uri=store, storage_dir=uri, verbose=0, echo=lambda *a: None,
            **kw,
        )  # fmt: skip

    # the victim crashes after its round-2 checkpoint
    first = sweep(plugins=fault_plugins(tmp_path, {victim.trial_id: 3}))
    assert (first.finished, first.errored) == (1, 1), first.errors
    remote = _files(fs, "bucket/sweeps")
    mine = [p for p in remote if f"/trials/{victim.config_hash}/" in p]
    assert any(p.endswith("/checkpoint_000002/meta.json") for p in mine), remote
    assert any(p.endswith("/checkpoint_000002/fl_state.pt") for p in mine), remote

    # this machine's copy (Ray's folder, beside the store: issue 53) is gone: only the object
    # store has the checkpoints
    shutil.rmtree(tmp_path / "store" / "ray_results")
    resumed = sweep(resume=True)
    assert (resumed.scheduled, resumed.finished, resumed.errored) == (1, 1, 0), resumed.errors
    client, _, _, children = sweep_runs(store, "remote-fig")
    run = next(r for r in children if r.data.tags["fedsweep.config_hash"] == victim.config_hash)
    assert run.data.tags[RESUMED_TAG] == "2"  # went on from the store's checkpoint
    assert run.info.status == "FINISHED"
    for key in ("test_loss", "round_time"):
        steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
        assert steps == list(range(1, ROUNDS + 1)), (key, steps)
    assert _files(fs, "bucket/sweeps") == []  # everything finished: the checkpoints went


def test_a_storage_that_cannot_hold_checkpoints_fails_before_ray(tmp_path, s3):
    from fedsweep.sweep.ray_backend import check_storage

    uri, _ = s3
    check_storage(uri)  # writable: fine
    missing = uri.replace("s3://bucket/", "s3://no-such-bucket/")
    with pytest.raises(SpecError, match="--storage s3://no-such-bucket/sweeps.*cannot write"):
        check_storage(missing)


def test_a_storage_that_does_not_answer_fails_within_the_probe_time(tmp_path, monkeypatch):
    """issue 48, item 11: `--storage gs://...` without a network hung past 120 s (pyarrow
    retries). Every remote storage is now probed in a child process killed after
    PROBE_TIMEOUT_S (at most 15 s): one line saying it did not answer, before Ray starts, and
    the command ends at once (a probe thread left in pyarrow held the exit for 100 s). The
    silent endpoint here is a local socket that accepts connections and never replies (no
    network needed: pyarrow's S3 client retries it for about 100 s)."""
    import socket
    import time

    from typer.testing import CliRunner

    from fedsweep.cli.main import app
    from fedsweep.sweep import remote_state

    assert remote_state.PROBE_TIMEOUT_S <= 15
    monkeypatch.setattr(remote_state, "PROBE_TIMEOUT_S", 2.0)
    for key, value in (("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")):
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "local"))
    monkeypatch.chdir(tmp_path)
    spec = write_yaml(tmp_path / "silent.yaml", small_spec("silent"))
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        host, port = silent.getsockname()
        uri = f"s3://bucket/sweeps?endpoint_override={host}:{port}&scheme=http&region=us-east-1"
        start = time.monotonic()
        res = CliRunner().invoke(app, ["sweep", str(spec), "--profile", "smoke", "--storage", uri])
        took = time.monotonic() - start
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"--storage {uri}: did not answer within 2 s (no network, a wrong endpoint or a "
        "firewall?); check the URI and that this machine reaches it"
    ]
    assert took < 10, took  # 2 s, and the killed probe held nothing up
    assert sorted(p.name for p in tmp_path.iterdir()) == ["silent.yaml"]
