"""Issue 48, item 16: ``--artifact-root s3://...`` on an S3-compatible server (moto's, in this
process). A write is probed before Ray starts (a bucket that does not exist, an endpoint that
refuses or does not answer: one line, exit 2, no run opened, within the probe's bound); the
endpoint (``MLFLOW_S3_ENDPOINT_URL``) and credentials reach the trials, whose artifacts land in
the bucket."""

from __future__ import annotations

import socket
import time

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.tracking.artifact_probe import ArtifactRootError, check_artifact_root
from tests.helpers import small_spec, sweep_runs, write_yaml


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
    endpoint = f"http://{host}:{port}"
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="bucket")
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", endpoint)
    yield client
    moto.stop()


def _keys(client, prefix: str) -> list[str]:
    found = client.list_objects_v2(Bucket="bucket", Prefix=prefix).get("Contents", [])
    return sorted(o["Key"] for o in found)


def test_the_probe_writes_and_removes_one_file(s3):
    check_artifact_root("s3://bucket/art")
    assert _keys(s3, "art/") == []  # the probe's file is gone
    with pytest.raises(ArtifactRootError) as err:
        check_artifact_root("s3://no-such-bucket/art")
    text = str(err.value)
    assert text.startswith("--artifact-root s3://no-such-bucket/art: cannot write there (")
    assert "NoSuchBucket" in text and "\n" not in text
    assert "(endpoint http://127.0.0.1:" in text


def test_an_endpoint_that_does_not_answer_fails_within_the_bound(monkeypatch):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts connections, never answers
    monkeypatch.setenv("MLFLOW_S3_ENDPOINT_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    started = time.monotonic()
    with pytest.raises(ArtifactRootError, match=r"did not answer within 3 s \(endpoint http"):
        check_artifact_root("s3://bucket/art", timeout=3)
    assert time.monotonic() - started < 10
    silent.close()


def test_a_bad_artifact_root_stops_the_sweep_before_ray(s3, tmp_path, monkeypatch):
    from fedsweep.sweep import stage

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray started before the artifact root was checked")

    monkeypatch.setattr(stage, "init_ray", no_ray)
    monkeypatch.chdir(tmp_path)
    spec = write_yaml(tmp_path / "art.yaml", small_spec("art", alphas=(0.5,)))
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    res = CliRunner().invoke(
        app,
        ["sweep", str(spec), "--profile", "smoke", "--tracking-uri", store,
         "--artifact-root", "s3://no-such-bucket/art"],
    )  # fmt: skip
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    errors = [ln for ln in res.output.splitlines() if "--artifact-root" in ln]
    assert len(errors) == 1 and "cannot write there" in errors[0], res.output


@pytest.mark.slow
def test_trials_write_their_artifacts_to_the_bucket(ray_session, s3, tmp_path):
    """The session's Ray started without ``MLFLOW_S3_ENDPOINT_URL``: the trials write to the
    bucket only because the driver hands the endpoint over with the credentials."""
    from fedsweep.sweep.runner import run_sweep

    spec = write_yaml(tmp_path / "art.yaml", small_spec("art", alphas=(0.5,)))
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    report = run_sweep(
        spec, "smoke", tracking_uri=store, storage_dir=tmp_path / "ray", verbose=0,
        echo=print, artifact_root="s3://bucket/art",
    )  # fmt: skip
    assert (report.finished, report.errored) == (1, 0), report.errors
    _, _, _, children = sweep_runs(store, "art")
    (run,) = children
    assert run.info.artifact_uri.startswith("s3://bucket/art/")
    keys = _keys(s3, "art/")
    assert any(k.endswith(f"{run.info.run_id}/artifacts/config.yaml") for k in keys), keys
