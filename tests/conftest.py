"""Shared fixtures. Tests make their own data; real data is used only when FEDSWEEP_DATA_DIR is set."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow's schema template (fedsweep.tracking.store) in a folder of this test session, not the
# user's cache; subprocesses and pytest-xdist's workers inherit it, so every fresh store of the
# session is a copy; removed when the session that made it ends
_SCHEMA_CACHE = None
if "FEDSWEEP_SCHEMA_CACHE" not in os.environ:
    _SCHEMA_CACHE = os.environ["FEDSWEEP_SCHEMA_CACHE"] = tempfile.mkdtemp(
        prefix="fedsweep-schema-"
    )

#: each test file's measured seconds (``make test``'s ``--durations=0``, summed per file:
#: tests/file_seconds.py), to start the longest files first; a file not listed is estimated
#: from its tests' marks
_MEASURED = Path(__file__).with_name("file_seconds.json")
_COST = {"team": 35.0, "slow": 12.0}
_COST_OTHER = 0.2


def pytest_collection_modifyitems(config, items):
    """The test files in order of their expected time, longest first (a file's own tests keep
    their order): ``make test`` runs files side by side on every core (pytest-xdist,
    ``--dist loadfile --no-loadscope-reorder``), and a long file started last would end the
    suite alone on one core."""
    import json

    measured = json.loads(_MEASURED.read_text()) if _MEASURED.is_file() else {}
    estimate: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        marks = {mark.name for mark in item.iter_markers()}
        seconds = max((_COST[m] for m in marks & _COST.keys()), default=_COST_OTHER)
        estimate[path] = estimate.get(path, 0.0) + seconds
    cost = {path: measured.get(path, guess) for path, guess in estimate.items()}
    order = {path: rank for rank, path in enumerate(sorted(cost, key=lambda p: (-cost[p], p)))}
    items.sort(key=lambda item: order[item.nodeid.split("::", 1)[0]])  # stable within a file


def pytest_sessionfinish(session, exitstatus):
    if _SCHEMA_CACHE is not None:
        import shutil

        shutil.rmtree(_SCHEMA_CACHE, ignore_errors=True)


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
    """One local Ray instance for every test that runs a real Ray Tune sweep in this process,
    with one CPU: a test sweep's trials are a few rounds
    long, so they run one after the other on one trial actor (Tune reuses it) instead of
    starting a second actor (its Python, Ray, torch and MLflow: about 5 s of CPU) for each fit.
    Measured on 2 cores (tests/sweep/test_derived.py's two sweeps, 7 fits): 88.5 s of CPU with 2
    CPUs, 68.7 s with 1, and no longer."""
    import ray

    ray.init(
        address="local",  # never a cluster this machine runs (`ray start`, a team head)
        num_cpus=1,
        include_dashboard=False,
        logging_level="WARNING",
        configure_logging=True,
    )
    yield
    ray.shutdown()
