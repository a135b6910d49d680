"""Shared fixtures. Tests make their own data; real data is used only when FEDSWEEP_DATA_DIR is set."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow's schema template (fedsweep.tracking.store) in a folder of this test session, not the
# user's cache; subprocesses inherit it, so every fresh store of the session is a copy
os.environ.setdefault("FEDSWEEP_SCHEMA_CACHE", tempfile.mkdtemp(prefix="fedsweep-schema-"))


def _real_data_dir() -> Path | None:
    root = os.environ.get("FEDSWEEP_DATA_DIR")
    return Path(root).resolve() if root and Path(root).is_dir() else None


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """The folder with real MNIST/CIFAR-10 in torchvision's layout; skips the test if absent."""
    root = _real_data_dir()
    if root is None or not (root / "MNIST" / "raw").is_dir():
        pytest.skip("FEDSWEEP_DATA_DIR with real MNIST is not set")
    return root


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance (2 CPUs) for every test that runs a real Ray Tune sweep."""
    import ray

    ray.init(
        address="local",  # never a cluster this machine runs (`ray start`, a team head)
        num_cpus=2,
        include_dashboard=False,
        logging_level="WARNING",
        configure_logging=True,
    )
    yield
    ray.shutdown()
