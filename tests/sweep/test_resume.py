"""Issue 32: ``--resume`` from fedsweep's own state (no pickle read back), corrupted
checkpoints, a full disk, one warning for many small clients, bounded memory per round."""

from __future__ import annotations

import errno
import json
import os
import pickle
import warnings
from pathlib import Path

import pytest
import torch

from fedsweep.experiment import FLRun
from fedsweep.sweep import trial as trial_mod
from tests.helpers import tiny_config, tiny_dataset


class _Planted:
    """A pickle whose unpickling writes ``marker`` (what a tampered store could hold)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('unpickled')",))


def plant_pickles(folder: Path, marker: Path) -> list[Path]:
    """Ray's pickles of an experiment (``tuner.pkl``, ``trial_*/params.pkl``) in ``folder``
    and in its ``ray`` subfolder, each writing ``marker`` when unpickled."""
    planted = []
    for base in (folder, folder / "ray"):
        for rel in ("tuner.pkl", "trial_planted/params.pkl", "trainable.pkl"):
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(pickle.dumps(_Planted(marker)))
            planted.append(path)
    (folder / "experiment_state-2026-01-01_00-00-00.json").write_text("{}")
    return planted


# ------------------------------------------------------------------------------ unit level
def _checkpoints(folder: Path, rounds=(1, 2, 3)) -> FLRun:
    run = FLRun(tiny_config(train__rounds=max(rounds)), dataset=tiny_dataset())
    for k in range(1, max(rounds) + 1):
        run.step()
        if k in rounds:
            trial_mod.save_checkpoint(folder, run.state_dict(), "run-1", k)
    return run


def test_a_checkpoint_that_does_not_load_is_set_aside_for_the_previous_one(tmp_path):
    # checkpoint folders as the trial wrote them before (Ray's layout, torch.save by path):
    # ``_restore`` of one whose state is random bytes raised torch's UnpicklingError ("...
    # weights_only=False ...") and failed the trial; now it takes the previous good one
    run = FLRun(tiny_config(train__rounds=2), dataset=tiny_dataset())
    old = tmp_path / "old"
    for k in (1, 2):
        run.step()
        (old / f"checkpoint_{k:06d}").mkdir(parents=True)
        torch.save(run.state_dict(), old / f"checkpoint_{k:06d}" / trial_mod.STATE_FILE)
        meta = json.dumps({"mlflow_run_id": "run-0"})
        (old / f"checkpoint_{k:06d}" / trial_mod.META_FILE).write_text(meta)
    (old / "checkpoint_000002" / trial_mod.STATE_FILE).write_bytes(os.urandom(3000))

    class Checkpoint:  # what ``ray.tune.Checkpoint`` gives (``as_directory``)
        def as_directory(self):
            from contextlib import nullcontext

            return nullcontext(str(old / "checkpoint_000002"))

    state, run_id = trial_mod._restore(Checkpoint())
    assert (state["round"], run_id) == (1, "run-0")
    assert list((old / "checkpoint_000002").glob("fl_state.pt.corrupt-*"))

    tmp_path = tmp_path / "new"  # fedsweep's own checkpoints (``save_checkpoint``)
    _checkpoints(tmp_path)
    assert sorted(p.parent.name for p in tmp_path.glob("*/fl_state.pt")) == [
        "checkpoint_000002",
        "checkpoint_000003",
    ]
    newest = tmp_path / "checkpoint_000003" / trial_mod.STATE_FILE
    newest.write_bytes(os.urandom(2000))
    said: list[str] = []
    state, run_id = trial_mod.restore_newest(tmp_path, warn=said.append)
    assert (state["round"], run_id) == (2, "run-1")
    assert len(said) == 1 and str(newest) in said[0], said
    (aside,) = newest.parent.glob("fl_state.pt.corrupt-*")
    assert not newest.exists() and aside.stat().st_size == 2000
    # the older one is corrupt too (truncated): round 0 in the same run, one warning more
    older = tmp_path / "checkpoint_000002" / trial_mod.STATE_FILE
    older.write_bytes(older.read_bytes()[:100])
    state, run_id = trial_mod.restore_newest(tmp_path, warn=said.append)
    assert (state, run_id) == (None, "run-1") and len(said) == 2
    assert trial_mod.restore_newest(tmp_path / "none") == (None, None)


def test_checkpoints_are_written_atomically_and_a_full_disk_names_the_folder(tmp_path, monkeypatch):
    run = _checkpoints(tmp_path, rounds=(1,))
    real = torch.save

    def full(obj, f, *args, **kwargs):
        f.write(b"x" * 10)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(trial_mod.StoreFullError) as info:
        trial_mod.save_checkpoint(tmp_path, run.state_dict(), "run-1", 2)
    monkeypatch.setattr(torch, "save", real)
    assert str(tmp_path) in str(info.value) and "full" in str(info.value)
    assert info.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_000001"]  # no temp left
    state, _ = trial_mod.restore_newest(tmp_path)
    assert state["round"] == 1


def test_disk_full_is_recognised_through_ray_and_mlflow_errors():
    from mlflow.exceptions import MlflowException
    from ray.exceptions import RayTaskError

    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/store/x.pt")
        except OSError as err:
            raise MlflowException("could not log") from err
    except MlflowException as err:
        chained = err
    found = trial_mod.disk_full(chained)
    assert found is not None and "/store/x.pt" in str(found)
    sqlite = MlflowException("(sqlite3.OperationalError) database or disk is full")
    assert "full" in str(trial_mod.disk_full(sqlite))
    wrapped = RayTaskError("fl_trial", "Traceback ...", trial_mod.StoreFullError("/store/t"))
    assert "/store/t" in str(trial_mod.disk_full(wrapped))
    assert pickle.loads(pickle.dumps(trial_mod.StoreFullError("/p"))).path == "/p"
    assert trial_mod.disk_full(RuntimeError("boom")) is None


def test_clients_below_one_batch_give_one_warning_with_the_count():
    cfg = tiny_config(data__num_clients=30, train__batch_size=50, train__local_epochs=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FLRun(cfg, dataset=tiny_dataset(n_train=600))
    small = [w for w in caught if "E|D_i|/B < 1" in str(w.message)]
    assert len(small) == 1, [str(w.message) for w in small]
    assert str(small[0].message).startswith("30 of 30 clients have E|D_i|/B < 1")


@pytest.mark.slow
def test_a_tracked_runs_memory_does_not_grow_with_its_rounds(tmp_path):
    """The per-round records (BHerd's selected steps of 10 clients) go to a spool on disk every
    16 rounds: from round 64 to 160 the Python objects the run keeps grow by fewer than 10
    blocks a round (about 3, MLflow's and SQLAlchemy's caches filling: 0.8 over rounds
    160-320), where they grew by 33 a round before (3 per client: the record tensor, its numpy
    array, its list slot); and the logged record artifacts equal those of a run that kept
    them in memory."""
    import gc
    import sys

    import numpy as np
    from mlflow import MlflowClient

    from fedsweep.engine.observers import Observer
    from fedsweep.tracking.tracked_run import TrackedRun

    first, last = 64, 160
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = tiny_config(
        selector="bherd",
        data__num_clients=10,
        train__rounds=last,
        eval__every=40,
        tracking__enabled=True,
        tracking__uri=store,
        tracking__experiment="memory",
    )
    data = tiny_dataset(n_train=600, n_test=50)
    held: dict[int, int] = {}

    class Measure(Observer):
        def on_round(self, t, metrics, result) -> None:
            if t in (first, last):
                tracked.logger.flush()  # the metrics of the last seconds (at most FLUSH_ROWS)
                gc.collect()
                held[t] = sys.getallocatedblocks()

    tracked = TrackedRun(cfg, dataset=data)
    out = tracked.execute(observers=[Measure()])
    per_round = (held[last] - held[first]) / (last - first)
    assert per_round < 10, f"{per_round:.1f} blocks kept per round"
    assert not tracked.run.records  # all in the spool

    straight = FLRun(
        cfg.model_copy(update={"tracking": cfg.tracking.model_copy(update={"enabled": False})}),
        dataset=data,
    )
    straight.run()
    want = straight.record_arrays()
    folder = MlflowClient(tracking_uri=store).download_artifacts(
        out.run_id, "records", str(tmp_path)
    )
    got = {p.stem: np.load(p)["data"] for p in Path(folder).glob("*.npz")}
    assert sorted(got) == sorted(want) and len(want) == 10
    for name, array in want.items():
        assert got[name].dtype == array.dtype and np.array_equal(got[name], array), name
