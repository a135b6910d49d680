"""``--artifact-root`` on an object store (``s3://bucket/prefix``, ``gs://``, ``wasbs://``): a
write probed before Ray starts, and what the trials need to write there.

Without the probe an unreachable or misconfigured artifact store showed itself only when the
first trial logged its artifacts, after its whole training, as a 110-line traceback per trial.
Now one small file is logged and deleted through MLflow's own artifact repository for the URI
(so the same client, endpoint and credentials the runs will use) within
:data:`PROBE_TIMEOUT_S` seconds, in a child process killed when the time is up (boto3 retries
an endpoint that does not answer for minutes).

An S3-compatible server (MinIO, Ceph, moto) is reached through ``MLFLOW_S3_ENDPOINT_URL``;
that and the other variables of :data:`ARTIFACT_ENV` are handed to the trials with the
credentials (``sweep.tune_fit.fit_trials``: Ray's object store, never a trial's
``runtime_env``), so trials on other nodes write where the driver probed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: seconds the probe may take
PROBE_TIMEOUT_S = 15.0
#: the variables that say where and how MLflow writes artifacts to an object store
ARTIFACT_ENV = (
    "MLFLOW_S3_ENDPOINT_URL",
    "MLFLOW_S3_IGNORE_TLS",
    "MLFLOW_S3_UPLOAD_EXTRA_ARGS",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_CA_BUNDLE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_ACCESS_KEY",
)


class ArtifactRootError(ValueError):
    """An ``--artifact-root`` that cannot be written (one line, the URI and the reason)."""


def is_object_store(uri: str | None) -> bool:
    """An artifact URI on an object store (not a local folder or ``file:``)."""
    return bool(uri) and "://" in uri and not uri.startswith("file:")


def artifact_env() -> dict[str, str]:
    """The driver's :data:`ARTIFACT_ENV` variables that are set."""
    return {k: os.environ[k] for k in ARTIFACT_ENV if os.environ.get(k)}


def check_artifact_root(uri: str, timeout: float | None = None) -> None:
    """Log and delete one small file under ``uri`` within ``timeout`` seconds (default
    :data:`PROBE_TIMEOUT_S`); raises :class:`ArtifactRootError`. Local folders are left to
    MLflow (they are made when written)."""
    if not is_object_store(uri):
        return
    from fedsweep.core.processes import probe_in_child

    timeout = PROBE_TIMEOUT_S if timeout is None else timeout
    endpoint = os.environ.get("MLFLOW_S3_ENDPOINT_URL")
    hint = (
        f" (endpoint {endpoint}, from MLFLOW_S3_ENDPOINT_URL)"
        if endpoint and uri.startswith("s3")
        else " (an S3-compatible server needs MLFLOW_S3_ENDPOINT_URL)"
        if uri.startswith("s3")
        else ""
    )
    try:
        why = probe_in_child("fedsweep.tracking.artifact_probe", uri, timeout)
    except subprocess.TimeoutExpired:
        raise ArtifactRootError(
            f"--artifact-root {uri}: did not answer within {timeout:g} s{hint}; check the "
            "URI, the endpoint and that this machine reaches it"
        ) from None
    if why is None:
        return
    raise ArtifactRootError(f"--artifact-root {uri}: cannot write there ({why[:300]}){hint}")


def probe(uri: str) -> None:
    """Log one file under ``uri/.fedsweep-probe-<pid>`` with MLflow's artifact repository,
    list it, delete it (the child process of :func:`check_artifact_root`)."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    where = f"{uri.rstrip('/')}/.fedsweep-probe-{os.getpid()}"
    repo = get_artifact_repository(where)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "probe.txt"
        path.write_text("fedsweep artifact probe\n")
        repo.log_artifact(str(path))
    names = [f.path for f in repo.list_artifacts()]
    if "probe.txt" not in names:
        raise OSError(f"a file logged there is not listed back (listed: {names})")
    try:
        repo.delete_artifacts()
    except NotImplementedError:  # a store without deletes: the probe file stays (tiny)
        pass


if __name__ == "__main__":  # pragma: no cover - run by check_artifact_root
    try:
        probe(sys.stdin.read().strip())
    except Exception as err:  # noqa: BLE001 - one line for the parent
        text = (str(err).strip().splitlines() or [type(err).__name__])[0]
        print(f"{type(err).__name__}: {text}")
        sys.exit(1)
