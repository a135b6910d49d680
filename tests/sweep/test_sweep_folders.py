"""Issue 53, items 3-4: where a sweep keeps its Ray state, and what ``figures`` says while a
sweep of the figure runs.

- Ray's state, logs and the driver's lock file go to ``<store dir>/ray_results`` beside the
  ``--tracking-uri`` store (as ``--storage``'s help says), not to ``./mlruns`` of the working
  folder, and the lock file is removed when the sweep ends.
- ``figures`` of a figure whose sweep holds the store's driver lease says who sweeps it and how
  to wait for it, instead of a bare "nothing drawn"."""

from __future__ import annotations

import os
import socket

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.sweep.locking import store_driver_lease
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.uri import ray_results_dir
from tests.faults import fault_plugins
from tests.helpers import small_spec, write_yaml


def test_ray_results_sit_beside_a_sqlite_store(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "default"))
    store = tmp_path / "exp" / "mlflow.db"
    assert ray_results_dir(f"sqlite:///{store}") == store.parent / "ray_results"
    for other in ("http://host:5000", "postgresql://u@h/db", None, "sqlite:///:memory:"):
        assert ray_results_dir(other) == tmp_path / "default" / "ray_results"


@pytest.mark.slow
def test_a_sweeps_ray_state_is_beside_its_store_and_its_lock_file_goes(
    ray_session, tmp_path, monkeypatch
):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("FEDSWEEP_STORE_DIR", raising=False)
    tree = small_spec("folders", alphas=(0.5,), max_failures=0, checkpoint_every=1)
    spec = write_yaml(tmp_path / "folders.yaml", tree)
    store = tmp_path / "elsewhere" / "mlflow.db"
    from fedsweep.specs.load import expand, load_spec
    from fedsweep.sweep.runner import run_sweep

    (trial,) = expand(load_spec(spec), "smoke")
    report = run_sweep(  # a crash at round 2 keeps the trial's round-1 checkpoint
        spec, "smoke", tracking_uri=f"sqlite:///{store}", verbose=0, echo=print,
        plugins=fault_plugins(tmp_path, {trial.trial_id: 2}),
    )  # fmt: skip
    assert (report.finished, report.errored) == (0, 1)
    results = store.parent / "ray_results"
    (kept,) = results.glob(f"folders-smoke-*/trials/{trial.config_hash}/checkpoint_000001")
    assert (kept / "meta.json").is_file()
    assert list(results.glob("*.driver")) == []  # removed when the sweep ended
    assert not (work / "mlruns").exists()  # nothing in the working folder


def test_figures_during_a_running_sweep_say_who_sweeps_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_yaml(tmp_path / "busy.yaml", small_spec("busy", alphas=(0.5,)))
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    get_client(uri)  # the store exists (figures never create one)
    with store_driver_lease(uri, "busy", "smoke", False, print):
        res = CliRunner().invoke(
            app,
            ["figures", "--spec", str(spec), "--profile", "smoke", "--tracking-uri", uri,
             "--out", str(tmp_path / "figs"), "--format", "svg"],
        )  # fmt: skip
    assert res.exit_code == 1, res.output  # nothing drawn (yet): exit 1 (issue 62)
    text = " ".join(res.output.split())
    who = f"PID {os.getpid()} on {socket.gethostname()} (since "
    assert f"busy [smoke] is being swept into this store now, by {who}" in text, text
    assert f"fedsweep sweep busy --profile smoke --tracking-uri {uri} --wait" in text
    assert "nothing drawn: the store" in text and "yet (being swept now: see above)" in text
    # no sweep running: the plain hint to run the missing trials
    res = CliRunner().invoke(
        app,
        ["figures", "--spec", str(spec), "--profile", "smoke", "--tracking-uri", uri,
         "--out", str(tmp_path / "figs"), "--format", "svg"],
    )  # fmt: skip
    assert "being swept" not in res.output and "run them: fedsweep sweep busy" in res.output


def test_a_sweep_interrupted_before_the_move_goes_on_where_its_state_is(tmp_path, monkeypatch):
    """A sweep interrupted before Ray's state moved beside the store (its state file under
    ``$FEDSWEEP_STORE_DIR/ray_results``) goes on there, with one note, so ``--resume`` finds its
    checkpoints; without such a state the folder beside the store is used."""
    from fedsweep.sweep.locking import STATE_FILE
    from fedsweep.sweep.runner import sweep_folder

    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "mlruns"))
    uri = f"sqlite:///{tmp_path / 'elsewhere' / 'mlflow.db'}"
    said: list[str] = []
    assert sweep_folder(uri, "fig-smoke-0123abcd", said.append) == (
        tmp_path / "elsewhere" / "ray_results"
    )
    old = tmp_path / "mlruns" / "ray_results" / "fig-smoke-0123abcd"
    old.mkdir(parents=True)
    (old / STATE_FILE).write_text("{}")
    assert sweep_folder(uri, "fig-smoke-0123abcd", said.append) == old.parent
    assert said == [
        f"note: fig-smoke-0123abcd: its Ray state is in {old.parent}, where sweeps kept it "
        f"before 2026-11-28; it goes on there (new sweeps of this store use "
        f"{tmp_path / 'elsewhere' / 'ray_results'})"
    ]
    assert sweep_folder(uri, "other-smoke-89abcdef", said.append).name == "ray_results"
    assert sweep_folder(uri, "other-smoke-89abcdef", said.append).parent.name == "elsewhere"
