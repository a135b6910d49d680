"""A real Ray Tune sweep on a local SQLite store: its trial processes do all their store work
with sqlite3 (``tracking.lite``) and never import MLflow or SQLAlchemy, and the runs are what
MLflow's client reads as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import small_spec, smoke_sweep, sweep_runs, write_yaml

#: a ``--plugin`` module every trial imports first (before its claim and store work): it
#: notes what of MLflow and SQLAlchemy was imported already, and every later import of them
#: with the stack that asked, into ``imports/<pid>.txt`` beside itself
PROBE = """
import os
import sys
import traceback
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "imports"
FOLDER.mkdir(exist_ok=True)
WATCHED = ("mlflow", "sqlalchemy")


def note(text):
    with open(FOLDER / f"{os.getpid()}.txt", "a") as handle:
        handle.write(text + "\\n")


note("loaded:" + ",".join(m for m in WATCHED if m in sys.modules))


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in WATCHED:
            note(f"imported {name}:\\n" + "".join(traceback.format_stack(limit=20)))
        return None


sys.meta_path.insert(0, Watch())
"""


@pytest.mark.slow
def test_trials_on_a_sqlite_store_never_import_mlflow(ray_session, tmp_path):
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "lite_import_probe.py").write_text(PROBE)
    spec = write_yaml(
        tmp_path / "lite-fig.yaml",
        small_spec("lite-fig", rounds=3, checkpoint_every=2),
    )
    report = smoke_sweep(
        spec, store, tmp_path, plugins=[("lite_import_probe", str(tmp_path / "plugin"))]
    )
    assert (report.total, report.finished, report.errored) == (2, 2, 0)
    notes = sorted((tmp_path / "plugin" / "imports").glob("*.txt"))
    assert notes and all(int(p.stem) != os.getpid() for p in notes)  # trial processes
    for path in notes:
        lines = path.read_text().splitlines()
        assert set(lines) == {"loaded:"}, path.read_text()[-3000:]
    _, _, parents, children = sweep_runs(store, "lite-fig")
    assert len(parents) == 1 and len(children) == 2
    for run in children:
        assert run.info.status == "FINISHED" and run.data.tags["fedsweep.status"] == "finished"
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert run.data.metrics["round_time"] > 0 and "Global/test_acc" in run.data.metrics
        assert Path(run.info.artifact_uri.removeprefix("file://"), "config.yaml").is_file()
