"""Shared fixtures. Tests make their own data; real data is used only when FEDSWEEP_DATA_DIR is set."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow's schema template (fedsweep.tracking.schema) in a folder of this test session, not the
# user's cache; subprocesses and pytest-xdist's workers inherit it, so every fresh store of the
# session is a copy; removed when the session that made it ends
_SCHEMA_CACHE = None
if "FEDSWEEP_SCHEMA_CACHE" not in os.environ:
    _SCHEMA_CACHE = os.environ["FEDSWEEP_SCHEMA_CACHE"] = tempfile.mkdtemp(
        prefix="fedsweep-schema-"
    )
# the drawn runs' provenance verdicts (fedsweep.tracking.provenance.DrawnRuns) likewise
_PROVENANCE_CACHE = None
if "FEDSWEEP_PROVENANCE_CACHE" not in os.environ:
    _PROVENANCE_CACHE = os.environ["FEDSWEEP_PROVENANCE_CACHE"] = tempfile.mkdtemp(
        prefix="fedsweep-provenance-"
    )

#: each test file's measured seconds (``make test``'s ``--durations=0``, summed per file:
#: tests/file_seconds.py), to start the longest files first; a file not listed is estimated
#: from its tests' marks
_MEASURED = Path(__file__).with_name("file_seconds.json")
_COST = {"team": 35.0, "slow": 12.0}
_COST_OTHER = 0.2


#: the test files with a test that uses ``ray_session`` (pytest_collection_modifyitems)
_RAY_FILES: set[str] = set()


def _file(item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    """The test files in order of their expected time, longest first (a file's own tests keep
    their order): ``make test`` runs files side by side on every core (pytest-xdist,
    ``--dist loadfile --no-loadscope-reorder``), and a long file started last would end the
    suite alone on one core. The files whose tests use ``ray_session`` come before all the
    others (longest first among them too), so that each worker can stop its Ray once its next
    file needs none (:func:`pytest_runtest_teardown`)."""
    import json

    measured = json.loads(_MEASURED.read_text()) if _MEASURED.is_file() else {}
    estimate: dict[str, float] = {}
    for item in items:
        path = _file(item)
        marks = {mark.name for mark in item.iter_markers()}
        seconds = max((_COST[m] for m in marks & _COST.keys()), default=_COST_OTHER)
        estimate[path] = estimate.get(path, 0.0) + seconds
        if "ray_session" in item.fixturenames:
            _RAY_FILES.add(path)
    cost = {path: measured.get(path, guess) for path, guess in estimate.items()}
    ranked = sorted(cost, key=lambda p: (p not in _RAY_FILES, -cost[p], p))
    order = {path: rank for rank, path in enumerate(ranked)}
    items.sort(key=lambda item: order[_file(item)])  # stable within a file


def pytest_sessionfinish(session, exitstatus):
    _stop_ray()
    if _SCHEMA_CACHE is not None:
        import shutil

        shutil.rmtree(_SCHEMA_CACHE, ignore_errors=True)
    if _PROVENANCE_CACHE is not None:
        import shutil

        shutil.rmtree(_PROVENANCE_CACHE, ignore_errors=True)


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


#: whether this process runs the local Ray of ``ray_session``
_RAY_UP = False


@pytest.fixture
def ray_session():
    """One local Ray in this process for the tests that run a real Ray Tune sweep in it, with
    one CPU: a test sweep's trials are a few rounds long, so they run one after the other on
    one trial actor (Tune reuses it) instead of starting a second actor (its Python, Ray, torch
    and MLflow: about 5 s of CPU) for each fit. Measured on 2 cores (tests/sweep/test_derived.py's
    two sweeps, 7 fits): 88.5 s of CPU with 2 CPUs, 68.7 s with 1, and no longer.

    Started by the first test that asks for it and kept for the next ones; stopped when this
    worker's next test file uses none (those files run first), as an idle Ray still costs CPU
    (its GCS, raylet and agents: about 0.03 of a core; docs/development/notes/lab-notebook.md, 2026-11-29), about 12 CPU-s
    per worker over the rest of the suite. A later test that asks for it again starts it
    again."""
    global _RAY_UP
    if not _RAY_UP:
        import ray

        ray.init(
            address="local",  # never a cluster this machine runs (`ray start`, a team head)
            num_cpus=1,
            include_dashboard=False,
            logging_level="WARNING",
            configure_logging=True,
        )
        _RAY_UP = True
    yield


def _stop_ray() -> None:
    global _RAY_UP
    if _RAY_UP:
        import ray

        ray.shutdown()
        _RAY_UP = False


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if nextitem is not None and _file(nextitem) not in _RAY_FILES:
        _stop_ray()
