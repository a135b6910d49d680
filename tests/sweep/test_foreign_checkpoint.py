"""Issue 53: a checkpoint belongs to its trial. Every checkpoint carries its trial's config hash
(in the state file and in ``meta.json``, with the round); a restore compares both with the
trial's and the round with the folder's, and sets aside a checkpoint of another trial with a
warning saying so, falling back to the trial's previous checkpoint or round 0."""

from __future__ import annotations

import json
import os

import pytest

from fedsweep.experiment import FLRun
from fedsweep.specs.load import expand, load_spec
from fedsweep.sweep import trial as trial_mod
from tests.faults import fault_plugins
from tests.helpers import small_spec, smoke_sweep, sweep_runs, tiny_config, tiny_dataset, write_yaml


def _trial_folder(folder, lr: float, owner: str, rounds=(1, 2)):
    run = FLRun(tiny_config(train__rounds=max(rounds), train__lr=lr), dataset=tiny_dataset())
    for k in range(1, max(rounds) + 1):
        run.step()
        if k in rounds:
            trial_mod.save_checkpoint(folder, run.state_dict(), f"run-{owner}", k, owner)
    return run


def test_checkpoints_carry_their_trials_hash_and_a_swapped_state_is_set_aside(tmp_path):
    a, b = tmp_path / "trials" / "aaaa", tmp_path / "trials" / "bbbb"
    _trial_folder(a, 0.05, "aaaa")
    _trial_folder(b, 0.2, "bbbb")
    meta = json.loads((a / "checkpoint_000002" / trial_mod.META_FILE).read_text())
    assert meta == {"mlflow_run_id": "run-aaaa", "round": 2, "config_hash": "aaaa"}
    assert trial_mod.load_state(a / "checkpoint_000002" / "fl_state.pt")[
        "fedsweep_config_hash"
    ] == ("aaaa")
    # another trial's state file at the same round (meta.json left: it names this trial)
    os.replace(b / "checkpoint_000002" / "fl_state.pt", a / "checkpoint_000002" / "fl_state.pt")
    said: list[str] = []
    state, run_id = trial_mod.restore_newest(a, warn=said.append, config_hash="aaaa")
    assert (state["round"], run_id) == (1, "run-aaaa")  # the trial's previous checkpoint
    assert "fedsweep_config_hash" not in state
    assert len(said) == 1, said
    assert said[0].startswith(f"checkpoint {a / 'checkpoint_000002' / 'fl_state.pt'} is not this ")
    assert "belongs to another trial: config hash bbbb, this trial's is aaaa" in said[0]
    assert "set aside as fl_state.pt.corrupt-" in said[0]


def test_a_foreign_checkpoint_from_another_round_says_so(tmp_path):
    """Issue 53, item 2: another trial's checkpoint of a round this trial never reached (a
    whole folder copied in) is named as another trial's, not as missing records."""
    a, b = tmp_path / "aaaa", tmp_path / "bbbb"
    _trial_folder(a, 0.05, "aaaa", rounds=(1,))
    _trial_folder(b, 0.2, "bbbb", rounds=(1, 2, 3))
    os.replace(b / "checkpoint_000003", a / "checkpoint_000003")
    said: list[str] = []
    state, _ = trial_mod.restore_newest(a, warn=said.append, config_hash="aaaa")
    assert state["round"] == 1 and len(said) == 1
    assert (
        "checkpoint_000003/fl_state.pt is not this trial's (it belongs to another trial"
        in (said[0])
    )
    # this trial's own state under another round's folder name: not resumed as that round
    os.replace(a / "checkpoint_000001", a / "checkpoint_000004")
    state, _ = trial_mod.restore_newest(a, warn=said.append, config_hash="aaaa")
    assert (
        state is None and "its state is of round 1, its folder and meta.json say 1, 4" in (said[-1])
    )


def test_checkpoints_written_before_the_hash_still_resume(tmp_path):
    """A checkpoint of an older fedsweep (no hash in it) resumes as before: an interrupted
    sweep is not sent back to round 0 by the upgrade."""
    _trial_folder(tmp_path, 0.05, None)
    state, run_id = trial_mod.restore_newest(tmp_path, config_hash="aaaa")
    assert (state["round"], run_id) == (2, "run-None")


@pytest.mark.slow
def test_swapped_checkpoints_at_the_same_round_are_not_resumed(ray_session, tmp_path):
    """The issue's case in a real sweep: two trials crash at round 3 after their round-2
    checkpoints; their state files are swapped (same round, meta.json untouched) and their runs
    left RUNNING; ``--resume`` warns that each checkpoint belongs to another trial, restarts
    both at round 0 in their runs, and every logged value equals an uninterrupted sweep's."""
    spec = write_yaml(
        tmp_path / "swap.yaml",
        small_spec(
            "swap", rounds=4, alphas=(0.3, 0.9), train_subset=600, max_failures=0,
            checkpoint_every=2,
        ),
    )  # fmt: skip
    a, b = expand(load_spec(spec), "smoke", extra={})
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    report = smoke_sweep(
        spec, store, tmp_path, plugins=fault_plugins(tmp_path, {a.trial_id: 3, b.trial_id: 3})
    )
    assert (report.finished, report.errored) == (0, 2)
    (sweep_dir,) = [p for p in (tmp_path / "ray").iterdir() if p.is_dir()]
    first, second = (sweep_dir / "trials" / t.config_hash / "checkpoint_000002" for t in (a, b))
    meta = json.loads((first / trial_mod.META_FILE).read_text())
    assert meta["config_hash"] == a.config_hash and meta["round"] == 2
    swap = first / "swap.tmp"
    os.replace(first / "fl_state.pt", swap)
    os.replace(second / "fl_state.pt", first / "fl_state.pt")
    os.replace(swap, second / "fl_state.pt")
    client, _, _, children = sweep_runs(store, "swap")
    for run in children:  # what a kill -9 of the driver leaves
        client.update_run(run.info.run_id, "RUNNING")

    lines: list[str] = []
    resumed = smoke_sweep(spec, store, tmp_path, resume=True, echo=lines.append)
    assert (resumed.finished, resumed.errored) == (2, 0), resumed.errors
    foreign = [line for line in lines if "belongs to another trial" in line]
    assert len(foreign) == 2, lines
    assert any(
        f"config hash {b.config_hash}, this trial's is {a.config_hash}" in x for x in foreign
    )

    reference = f"sqlite:///{tmp_path / 'reference' / 'mlflow.db'}"
    smoke_sweep(spec, reference, tmp_path / "ref")

    def values(uri: str) -> dict:
        client, _, _, children = sweep_runs(uri, "swap")
        out = {}
        for run in children:
            h = run.data.tags["fedsweep.config_hash"]
            for key in ("test_loss", "test_acc", "client/0/dist"):
                history = client.get_metric_history(run.info.run_id, key)
                out[h, key] = [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)]
        return out

    got, want = values(store), values(reference)
    assert set(got) == set(want) and len(got) == 6
    for key, series in want.items():
        assert [s for s, _ in got[key]] == [1, 2, 3, 4], key
        assert got[key] == series, key


@pytest.mark.parametrize("damage", ["zeroed", "truncated", "payload"])
def test_a_damaged_or_planted_state_file_is_set_aside_and_never_runs(tmp_path, damage):
    """Issue 48's fault matrix at the checkpoint: a state file of zeros, cut in half, or a
    torch checkpoint carrying a pickle payload (``torch.save`` of an object whose unpickling
    would write a marker): set aside with one warning, the previous checkpoint taken, and the
    payload never runs (``torch.load(weights_only=True)``)."""
    import torch

    from tests.sweep.test_resume import _Planted

    _trial_folder(tmp_path, 0.05, "aaaa")
    newest = tmp_path / "checkpoint_000002" / "fl_state.pt"
    marker = tmp_path / "MARKER"
    if damage == "zeroed":
        newest.write_bytes(bytes(newest.stat().st_size))
    elif damage == "truncated":
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    else:
        torch.save({"round": 2, "w": _Planted(marker)}, newest)
    said: list[str] = []
    state, run_id = trial_mod.restore_newest(tmp_path, warn=said.append, config_hash="aaaa")
    assert (state["round"], run_id) == (1, "run-aaaa")
    assert len(said) == 1 and "does not load" in said[0] and "set aside" in said[0]
    assert not marker.exists()
