"""``fedsweep sweep FIGURE --grid KEY=V1,V2`` (issue 52, item 3): the study the command line
means is written as a spec file that extends the figure (one curve per combination of the
grids' values), the same command line gives the same file, the figure's own trials keep their
hashes (their runs are reused), and a bad grid stops in one line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.specs.grid_study import parse_grids
from fedsweep.specs.model import SpecError

ROOT = Path(__file__).resolve().parents[2]


def _plan(tmp_path, *args):
    return CliRunner().invoke(
        app, ["sweep", "bherd-fig4e", "--profile", "smoke", "--plan", "--json",
              "--tracking-uri", f"sqlite:///{tmp_path / 'store.db'}", *args],
    )  # fmt: skip


def test_grid_plans_the_study_and_keeps_the_figure_s_hashes(tmp_path, monkeypatch):
    """``--grid`` with ``--plan`` lists the study's trials (the figure's own keep their hashes)
    and writes nothing (issue 62: it wrote the study's spec file, though ``--plan`` "writes
    nothing"); the study it names is the file a sweep without ``--plan`` writes."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweeps").symlink_to(ROOT / "sweeps")
    own = {json.loads(ln)["trial_id"].split("|", 1)[1]: json.loads(ln)["config_hash"]
           for ln in _plan(tmp_path).output.splitlines() if ln.startswith("{")}  # fmt: skip
    res = _plan(tmp_path, "--grid", "bherd.alpha=0.3,0.6", "--grid", "train.lr=0.001,0.01")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweeps"]  # no studies/, no store
    (named,) = [ln for ln in res.output.splitlines() if "the study this sweep would run" in ln]
    study = named.split("run: ", 1)[1].split()[0]
    assert study.startswith("studies/bherd-fig4e-grid-") and "--plan writes nothing" in named
    rows = [json.loads(ln) for ln in res.output.splitlines() if ln.startswith("{")]
    assert {r["figure"] for r in rows} == {Path(study).stem}
    new = {r["trial_id"].split("|")[3] for r in rows} - {k.split("|")[2] for k in own}
    assert new == {f"alpha={a} lr={lr}" for a in (0.3, 0.6) for lr in (0.001, 0.01)}
    mine = {r["trial_id"].split("|", 1)[1]: r["config_hash"] for r in rows}
    assert {k: mine[k] for k in own} == own  # the figure's own trials: the same runs
    again = _plan(tmp_path, "--grid", "bherd.alpha=0.3,0.6", "--grid", "train.lr=0.001,0.01")
    assert again.exit_code == 0 and study in again.output  # the same command, the same study
    assert not (tmp_path / "studies").exists()


def test_grid_writes_the_study_a_sweep_runs(tmp_path, monkeypatch):
    """Without ``--plan`` the study is written where ``--plan`` said, and loads as the
    figure's extension (one curve per combination, labelled by the keys' last segments)."""
    from fedsweep.specs.grid_study import study_tree, write_study
    from fedsweep.specs.load import load_spec

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweeps").symlink_to(ROOT / "sweeps")
    grids = parse_grids(["bherd.alpha=0.3,0.6", "train.lr=0.001,0.01"])
    parent = load_spec("sweeps/bherd-fig4e.yaml")
    path = write_study(Path("sweeps/bherd-fig4e.yaml"), parent.figure, True,
                       study_tree(parent.figure, parent.title, grids))  # fmt: skip
    assert path.parent == Path("studies") and path.stem.startswith("bherd-fig4e-grid-")
    tree = yaml.safe_load(path.read_text())
    assert tree["extends"] == "bherd-fig4e" and tree["figure"] == path.stem
    assert tree["add_curves"] == [{"grid": {"bherd.alpha": [0.3, 0.6], "train.lr": [0.001, 0.01]},
                                   "label": "alpha={bherd.alpha} lr={train.lr}"}]  # fmt: skip
    assert load_spec(path).figure == path.stem


@pytest.mark.parametrize(
    ("items", "words"),
    [(["bherd.alpha"], "allowed: KEY=V1,V2"), (["bherd.alpha=0.2,"], "allowed: KEY=V1,V2"),
     (["a=1", "a=2"], "given twice"), (["a=1,1"], "names a value twice")],
)  # fmt: skip
def test_bad_grids_name_the_item(items, words):
    with pytest.raises(SpecError) as err:
        parse_grids(items)
    assert words in str(err.value)


def test_a_grid_the_figure_refuses_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweeps").symlink_to(ROOT / "sweeps")
    res = _plan(tmp_path, "--grid", "bherd.alpah=0.3,0.6")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "bherd.alpah" in res.output
    assert not list((tmp_path / "studies").glob("*.yaml"))


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("seed=1,2", "--grid cannot vary seed: it is the seed stream"),  # drew seed-0 runs
        ("train.rounds=10,521386", "--grid cannot vary train.rounds: it is the horizon"),
        ("device=cpu,cuda", "--grid cannot vary device: it is a setting the config hash leaves"),
        ("data.root=a,b", "--grid cannot vary data.root"),
    ],
)
def test_issue_62_a_grid_over_what_the_sweep_sets_is_refused(tmp_path, monkeypatch, item, words):
    """``--grid seed=1,2`` drew seed-0 runs labelled seeds 1 and 2 (the trial's seed replaced
    the curve's); the horizon and the settings the hash leaves out change no curve's config or
    every curve's meaning: refused in one line, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweeps").symlink_to(ROOT / "sweeps")
    res = _plan(tmp_path, "--grid", item)
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert words in " ".join(res.output.split()), res.output
    assert "--seeds" in res.output or item != "seed=1,2"  # what to use instead
    assert not (tmp_path / "studies").exists()


def test_issue_62_a_curve_or_set_that_sets_the_seed_is_refused(tmp_path):
    """A spec's curve (or product grid) that sets ``seed`` had it replaced by the trial's seed
    without a word: refused when the spec loads, naming the curve."""
    from fedsweep.specs.load import load_spec
    from tests.helpers import small_spec, write_yaml

    tree = small_spec("seeded")
    tree["curves"] = {"grid": {"seed": [1, 2]}, "label": "s={seed}"}
    with pytest.raises(
        SpecError, match=r"curve 's=1': seed=1: a trial's seed comes from the seeds"
    ):
        load_spec(write_yaml(tmp_path / "seeded.yaml", tree))
    tree["curves"] = [{"label": "one", "set": {"seed": 3}}]
    with pytest.raises(SpecError, match=r"curve 'one': seed=3"):
        load_spec(write_yaml(tmp_path / "seeded.yaml", tree))
