"""Run names, tags, experiment descriptions, figure membership and spec ``extends``.

Real MLflow sqlite stores in temp dirs; real Ray Tune (smoke-sized, embedded mnist-5k) only for
the sweep tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.config.hashing import config_hash
from fedsweep.config.load import load_config
from fedsweep.specs import load as spec_module
from fedsweep.specs.load import SpecError, expand, load_spec, spec_paths
from fedsweep.sweep.store_index import membership_filter, used_by_tag
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.naming import run_name, trial_line_name, trial_run_name
from fedsweep.tracking.store import (
    GENERIC_DESCRIPTION,
    KIND_TAG,
    KIND_TRAINING,
    NOTE_TAG,
    VIEW_NAME,
    VIEW_TAG,
    ensure_experiment,
    ensure_panel_views,
    panel_views,
    view_tag_value,
)
from tests.helpers import small_run, small_spec, smoke_sweep, sweep_runs, write_yaml

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture
def store(tmp_path):
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


# ------------------------------------------------------------------------------ hashes
def test_config_hash_values_are_pinned():
    """Values computed before the hash moved to fedsweep/config/hashing.py: finished runs are
    reused by these, so they must never change."""
    default = ROOT / "configs" / "bherd-default.yaml"
    assert config_hash(load_config(default)) == "ef2d728dde9d3341"
    changed = load_config(default, ["bherd.alpha=0.3", "data.partition=case2"])
    assert config_hash(changed) == "3ad640fef748a813"
    trials = {t.trial_id: t for t in expand(load_spec(ROOT / "sweeps/bherd-fig3a.yaml"), "smoke")}
    assert trials["bherd-fig3a|smoke|data.partition=case1|α=0.3|seed=0"].config_hash == (
        "0df022488e732b0c"
    )
    assert spec_module.config_hash is config_hash  # the old import path still works


# -------------------------------------------------------------------------- run names
@pytest.mark.slow
def test_trial_run_names_come_from_the_spec_labels():
    fig3a = {t.trial_id: t for t in expand(load_spec(ROOT / "sweeps/bherd-fig3a.yaml"), "smoke")}
    assert fig3a["bherd-fig3a|smoke|data.partition=case2|α=0.3|seed=0"].run_name == (
        "seed 0 · α=0.3 · Case 2"
    )
    fig2a = {t.trial_id: t for t in expand(load_spec(ROOT / "sweeps/bherd-fig2a.yaml"), "smoke")}
    key = "bherd-fig2a|smoke|setting=cnn-mnist,data.partition=case2|BHerd-FedAvg|seed=0"
    assert fig2a[key].run_name == "seed 0 · BHerd-FedAvg · CNN, MNIST · Case 2"
    for path in spec_paths(ROOT / "sweeps"):  # every shipped spec reads as labels, not keys
        trials = expand(load_spec(path), "quick")
        names = [t.run_name for t in trials]
        assert len(set(names)) == len(names), path
        for name in names:
            assert "|" not in name and "data.partition=" not in name and "setting=" not in name


def test_trial_run_names_lead_with_the_seed_and_the_curve():
    """MLflow's run list cuts a long name at the column's width: the seed and what the figure
    varies come first, the panel label (shared by most of a figure's runs) last."""
    assert trial_run_name("α=0.3", "Case 2", 1) == "seed 1 · α=0.3 · Case 2"
    assert trial_run_name("BHerd-FedAvg", "CNN, MNIST · Case 2", 0) == (
        "seed 0 · BHerd-FedAvg · CNN, MNIST · Case 2"
    )
    assert trial_run_name("α=0.3", "", 12) == "seed 12 · α=0.3"  # a spec without panels
    assert trial_run_name("α=0.3", "Case 2", 1)[:20].startswith("seed 1 · α=0.3")


def test_a_trial_is_tagged_with_its_readable_figure_line(tmp_path):
    """Issue 65: the MLflow UI groups a sweep's trials by the tag fedsweep.line, which names the
    line as the figure's legend does (curve first: legends cut long names at their end), its
    panel and its profile (two profiles' runs are different lines), never a key."""
    from fedsweep.sweep.ray_backend import trial_payload

    assert trial_line_name("α=0.3", "Case 2", "quick") == "α=0.3 · Case 2 · quick profile"
    assert trial_line_name("α=0.3", "", "smoke") == "α=0.3 · smoke profile"  # no panels
    spec = load_spec(ROOT / "sweeps/bherd-fig3a.yaml")
    trials = expand(spec, "smoke")
    lines = {t.line_name for t in trials}
    assert len(lines) == len({(t.panel_id, t.curve) for t in trials})  # one per line, no more
    trial = next(t for t in trials if t.curve == "α=0.3" and t.panel_label == "Case 2")
    tags = trial_payload(trial, spec, f"sqlite:///{tmp_path / 'm.db'}", "f", "p")["tags"]
    assert tags["fedsweep.line"] == "α=0.3 · Case 2 · smoke profile"


def test_a_figure_with_several_panels_gets_a_saved_view_per_panel(store):
    """Issue 65: MLflow 3.17 draws every visible run in every chart (its chart configs have no
    run filter), so a figure's panels share one chart per metric in the figure's view; each panel
    gets a view searched down to its trials, named by its label, written once."""
    client = get_client(store)
    exp_id = ensure_experiment(client, "panelled", store)
    panels = [("data.partition=case1", "Case 1"), ("data.partition=case2", "Case 2")]
    ensure_panel_views(client, exp_id, panels)
    tags = client.get_experiment(exp_id).tags
    second = json.loads(tags["mlflow.sharedViewState.fedsweep-panel-2"])
    assert second["name"] == "fedsweep: Case 2"
    state = json.loads(second["state"])
    assert state["searchFilter"] == "tags.`fedsweep.panel` = 'data.partition=case2'"
    assert state["groupBy"] == json.loads(json.loads(tags[VIEW_TAG])["state"])["groupBy"]
    ensure_panel_views(client, exp_id, panels)  # unchanged: not rewritten
    assert client.get_experiment(exp_id).tags == tags
    assert panel_views(panels[:1]) == {}  # one panel: the figure's view is the panel's
    assert list(panel_views([("k='x'", "odd"), *panels])) == [
        "fedsweep-panel-2",
        "fedsweep-panel-3",
    ]


def test_run_name_says_what_differs_from_the_config_file():
    path = ROOT / "configs" / "bherd-default.yaml"
    assert run_name(load_config(path), {}) == "bherd-fedavg-svm-mnist-case3"
    sets = {"bherd.alpha": 0.3, "data.partition": "case2"}
    assert run_name(load_config(path, sets), sets) == "bherd-fedavg svm mnist case2 α=0.3"
    sets = {"train.lr": "1e-2", "train.local_epochs": 2, "data.case1_mode": "shuffled"}
    cfg = load_config(path, sets)
    assert run_name(cfg, sets) == "bherd-fedavg svm mnist case3 η=0.01 E=2 data.case1_mode=shuffled"
    sets = {"selector": "none", "tracking.experiment": "x", "data.root": "/tmp"}
    assert run_name(load_config(path, sets), sets) == "fedavg svm mnist case3"
    # keys that cannot change the numbers keep the file's name
    sets = {"tracking.experiment": "x", "threads": 1}
    assert run_name(load_config(path, sets), sets) == "bherd-fedavg-svm-mnist-case3"


TINY_RUN = small_run(
    "tiny-run",
    "names-test",
    rounds=2,
    eval={"train_metrics": False, "test_subset": 300},
)


def _cli_run(tmp_path: Path, store: str, *args: str):
    from mlflow import MlflowClient

    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(TINY_RUN))
    res = runner.invoke(app, ["run", str(cfg), "--tracking-uri", store, "--quiet", *args])
    assert res.exit_code == 0, res.output
    run_id = res.output.split("mlflow_run_id=")[1].split()[0]
    return MlflowClient(tracking_uri=store).get_run(run_id), cfg


def test_cli_run_is_named_from_set_carries_the_config_hash_and_a_described_experiment(
    tmp_path, store
):
    run, cfg = _cli_run(
        tmp_path, store, "--set", "bherd.alpha=0.3", "--set", "data.partition=case2"
    )
    assert run.info.run_name == "bherd-fedavg svm mnist-5k case2 α=0.3"
    expected = config_hash(load_config(cfg, ["bherd.alpha=0.3", "data.partition=case2"]))
    assert run.data.tags["fedsweep.config_hash"] == expected
    client = get_client(store)
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == "names-test"
    assert exp.tags[KIND_TAG] == KIND_TRAINING == "custom_model_development"
    assert exp.tags[NOTE_TAG].startswith(GENERIC_DESCRIPTION)
    # global metrics also under Global/ (the UI's first chart section), per-client keys kept
    keys = set(run.data.metrics)
    assert {"test_acc", "Global/test_acc", "client/0/dist"} <= keys
    assert not any(k.startswith("Global/client") for k in keys)
    for key in ("test_loss", "test_acc"):
        assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)] == [
            (m.step, m.value) for m in client.get_metric_history(run.info.run_id, f"Global/{key}")
        ]


def test_cli_run_name_option(tmp_path, store):
    run, cfg = _cli_run(tmp_path, store, "--name", "my baseline", "--set", "bherd.alpha=0.3")
    assert run.info.run_name == "my baseline"
    assert run.data.tags["fedsweep.config_hash"] == config_hash(
        load_config(cfg, ["bherd.alpha=0.3"])
    )


def test_existing_experiments_get_the_kind_and_a_description_once(store):
    client = get_client(store)
    exp_id = client.create_experiment("old")
    assert ensure_experiment(client, "old", store) == exp_id
    tags = client.get_experiment(exp_id).tags
    assert tags[KIND_TAG] == KIND_TRAINING and tags[NOTE_TAG].startswith(GENERIC_DESCRIPTION)
    ensure_experiment(client, "old", store, description="a sweep's title", overwrite=True)
    assert client.get_experiment(exp_id).tags[NOTE_TAG].startswith("a sweep's title · [")
    ensure_experiment(client, "old", store)  # a single run keeps the sweep's description
    assert client.get_experiment(exp_id).tags[NOTE_TAG].startswith("a sweep's title · [")


def test_experiments_get_fedsweeps_saved_view_and_someones_own_view_stays(store):
    """The view the experiment links open (MLflow 3.17's saved views: an experiment tag holding
    ``{name, createdAt, updatedAt, state}``): flat trials sorted by trial id, the global test
    metrics as columns, every run drawn; written once, and never over a view someone saved
    under the same id in the UI."""
    client = get_client(store)
    exp_id = ensure_experiment(client, "viewed", store)
    raw = client.get_experiment(exp_id).tags[VIEW_TAG]
    envelope = json.loads(raw)
    assert envelope["name"] == VIEW_NAME and isinstance(envelope["createdAt"], int)
    state = json.loads(envelope["state"])
    assert state["orderByKey"] == "tags.`fedsweep.trial_id`"  # not start time: no nesting
    assert state["runsHiddenMode"] == "SHOW_ALL"
    assert "metrics.`Global/test_acc`" in state["selectedColumns"]
    # issue 52, item 2: one group per line of the figure, its seed mean drawn in the charts;
    # issue 65: by one key, the readable tag fedsweep.line (MLflow names a group of several
    # keys "fedsweep.profile: smoke, feds…" in every legend, of one key by its value)
    assert state["groupBy"] == {"aggregateFunction": "average", "groupByKeys": [
        {"mode": "tag", "groupByData": "fedsweep.line"}]}  # fmt: skip
    # the description links to it: one click from the page the experiment list opens
    note = client.get_experiment(exp_id).tags[NOTE_TAG]
    assert note.startswith(GENERIC_DESCRIPTION + " · [every trial, by curve, charted](")
    assert f"](#/experiments/{exp_id}/runs?viewStateShareKey=fedsweep-trials&" in note
    ensure_experiment(client, "viewed", store)
    assert client.get_experiment(exp_id).tags[VIEW_TAG] == raw  # unchanged, not rewritten
    # an older fedsweep's view is replaced (its creation time kept) ...
    old = {**envelope, "state": "{}", "updatedAt": 1}
    client.set_experiment_tag(exp_id, VIEW_TAG, json.dumps(old))
    ensure_experiment(client, "viewed", store)
    new = json.loads(client.get_experiment(exp_id).tags[VIEW_TAG])
    assert new["state"] == envelope["state"] and new["createdAt"] == envelope["createdAt"]
    # ... a view overwritten in the UI (an envelope without fedsweep's mark) is kept
    theirs = json.dumps({"name": "mine", "createdAt": 1, "updatedAt": 2, "state": "{}"})
    client.set_experiment_tag(exp_id, VIEW_TAG, theirs)
    ensure_experiment(client, "viewed", store)
    assert client.get_experiment(exp_id).tags[VIEW_TAG] == theirs
    assert view_tag_value("not json") is not None  # a broken value is repaired
    # an older fedsweep's description (the same text, no link) gets the link
    client.set_experiment_tag(exp_id, NOTE_TAG, GENERIC_DESCRIPTION)
    ensure_experiment(client, "viewed", store)
    assert client.get_experiment(exp_id).tags[NOTE_TAG] == note


# ------------------------------------------------------------------------------ extends
EXT = """
extends: {ref}
figure: my-fig3a
title: Fig. 3a plus alpha=0.2
base:
  train:
    batch_size: 50
profiles:
  smoke:
    set:
      eval.test_subset: 500
add_curves:
- label: α=0.2
  set:
    bherd.alpha: 0.2
"""


def test_extends_resolves_by_figure_id_and_by_path_and_merges(tmp_path):
    parent = load_spec(ROOT / "sweeps/bherd-fig3a.yaml")
    by_id = tmp_path / "my.yaml"
    by_id.write_text(EXT.format(ref="bherd-fig3a"))
    for path in (by_id,):
        spec = load_spec(path)
        assert (spec.figure, spec.extends, spec.title) == (
            "my-fig3a",
            "bherd-fig3a",
            "Fig. 3a plus alpha=0.2",
        )
        labels = [c.label for c in spec.curve_list()]
        assert labels == [c.label for c in parent.curve_list()] + ["α=0.2"]
        assert spec.base["train"]["batch_size"] == 50 and spec.base["train"]["lr"] == 0.0001
        smoke = spec.profiles["smoke"]
        assert smoke.set == {
            "train.rounds": 3,
            "data.dataset": "mnist-5k",
            "eval.test_subset": 500,
        }
        assert smoke.note == parent.profiles["smoke"].note
    # a path relative to the extending file
    rel_file = tmp_path / "rel.yaml"
    rel_file.write_text(EXT.format(ref="parent.yaml").replace("my-fig3a", "rel-fig"))
    (tmp_path / "parent.yaml").write_text((ROOT / "sweeps/bherd-fig3a.yaml").read_text())
    assert load_spec(rel_file).extends == "bherd-fig3a"


def test_an_extension_without_changes_has_exactly_the_parent_hashes(tmp_path):
    path = tmp_path / "same.yaml"
    path.write_text("extends: bherd-fig2a\nfigure: same-2a\ntitle: same\n")
    for profile in ("smoke", "quick"):
        ours = [t.config_hash for t in expand(load_spec(path), profile)]
        theirs = [
            t.config_hash for t in expand(load_spec(ROOT / "sweeps/bherd-fig2a.yaml"), profile)
        ]
        assert ours == theirs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("extends: bherd-fig3aa\nfigure: a\ntitle: b\n", "did you mean 'bherd-fig3a'"),
        ("extends: bherd-fig3a\ntitle: b\n", "must set its own figure"),
        ("extends: bherd-fig3a\nfigure: a\n", "must set its own title"),
        ("extends: bherd-fig3a\nfigure: bherd-fig3a\ntitle: b\n", "figure id of the spec it"),
        ("extends: nothere.yaml\nfigure: a\ntitle: b\n", "not found"),
        (
            "extends: bherd-fig3a\nfigure: a\ntitle: b\nadd_curves:\n- {label: α=0.3, set: {}}\n",
            "already in 'bherd-fig3a'",
        ),
        ("figure: a\ntitle: b\nadd_curves: []\n", "needs `extends`"),
    ],
)
def test_bad_extensions_fail_naming_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=message) as err:
        load_spec(path)
    assert str(path) in str(err.value)


def test_circular_extension_is_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nfigure: a\ntitle: a\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nfigure: b\ntitle: b\n")
    with pytest.raises(SpecError, match="circular"):
        load_spec(tmp_path / "a.yaml")


# ------------------------------------------------------------------------ real sweeps
def write_spec(folder: Path, alphas=(0.5, 1.0)) -> Path:
    spec = small_spec(
        "names-fig",
        title="names test sweep",
        seeds=(1,),
        eval_={"test_subset": 300},
        base={"device": "cpu", "tracking": {"log_records": False}},
        panels={"data.partition": ["case2"]},
        panel_labels={"data.partition": {"case2": "Case 2"}},
        curves=[{"label": f"α={a}", "set": {"bherd.alpha": a}} for a in alphas],
    )
    return write_yaml(folder / "names-fig.yaml", spec)


def runs_of(client, experiment: str):
    _, exp, parents, children = sweep_runs(client.tracking_uri, experiment)
    return exp, parents, children


@pytest.mark.slow
def test_sweep_names_reused_parent_membership_and_extends(ray_session, tmp_path, store):
    import mlflow

    client = get_client(store)
    spec = write_spec(tmp_path)
    first = smoke_sweep(spec, store, tmp_path)
    assert (first.scheduled, first.finished, first.errored) == (2, 2, 0)
    exp, parents, children = runs_of(client, "names-fig")
    assert exp.tags[NOTE_TAG].startswith("names test sweep")
    assert exp.tags[KIND_TAG] == KIND_TRAINING
    assert len(parents) == 1
    parent_id = parents[0].info.run_id
    assert sorted(r.info.run_name for r in children) == [
        "seed 1 · α=0.5 · Case 2",
        "seed 1 · α=1.0 · Case 2",
    ]
    assert all(r.data.tags[used_by_tag("names-fig")] == "smoke" for r in children)

    # an extension beside it (extends stays in the spec's folder or sweeps/): reuses both runs,
    # schedules only its new curve
    ext = tmp_path / "ext.yaml"
    ext.write_text(
        "extends: names-fig.yaml\nfigure: my-names\ntitle: my extension\n"
        "add_curves:\n- label: α=0.2\n  set: {bherd.alpha: 0.2}\n"
    )
    report = smoke_sweep(ext, store, tmp_path)
    assert (report.total, report.skipped, report.scheduled, report.finished) == (3, 2, 1, 1)
    exp2, parents2, children2 = runs_of(client, "my-names")
    assert [r.info.run_name for r in children2] == ["seed 1 · α=0.2 · Case 2"]
    assert exp2.tags[NOTE_TAG].startswith("my extension")
    # the documented search lists every run the extension uses, the reused ones included
    filt = membership_filter("my-names", "smoke")
    assert filt == "tags.`fedsweep.used_by.my-names` LIKE '%smoke%'"
    found = mlflow.MlflowClient(store).search_runs(
        [e.experiment_id for e in client.search_experiments()], filter_string=filt
    )
    assert sorted(r.info.run_name for r in found) == sorted(
        ["seed 1 · α=0.2 · Case 2", "seed 1 · α=0.5 · Case 2", "seed 1 · α=1.0 · Case 2"]
    )
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    with _use_tracking_uri(store):  # what a user runs after mlflow.set_tracking_uri(store)
        frame = mlflow.search_runs(search_all_experiments=True, filter_string=filt)
    assert len(frame) == 3
    # ... and `fedsweep runs --figure` lists them too (own + reused), with the parent sweep run
    res = runner.invoke(app, ["runs", "--tracking-uri", store, "--figure", "my-names"])
    assert res.exit_code == 0, res.output
    listed = [x for x in res.output.splitlines() if "#/experiments/" in x]
    assert len(listed) == 4 and sum("[sweep]" in x for x in listed) == 1, res.output
    for run in [*children, *children2]:
        assert any(f"/runs/{run.info.run_id}?" in x for x in listed)
    # ... and the extension's parent run links the reused ones
    note = parents2[0].data.tags[NOTE_TAG]
    for run in children:
        assert f"#/experiments/{exp.experiment_id}/runs/{run.info.run_id}" in note
    assert filt in note

    # nothing new: 0 trials, no second parent, membership still recorded
    again = smoke_sweep(ext, store, tmp_path)
    assert (again.skipped, again.scheduled) == (3, 0)
    assert len(runs_of(client, "my-names")[1]) == 1

    # adding a curve to the original and re-running: its parent run is reused
    write_spec(tmp_path, alphas=(0.5, 1.0, 0.7))
    more = smoke_sweep(spec, store, tmp_path)
    assert (more.skipped, more.scheduled, more.finished) == (2, 1, 1)
    exp, parents, children = runs_of(client, "names-fig")
    assert [p.info.run_id for p in parents] == [parent_id]
    assert parents[0].info.status == "FINISHED"
    assert len(children) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent_id}


def test_a_single_run_with_the_same_config_is_reused_by_a_sweep(ray_session, tmp_path, store):
    """``fedsweep run`` tags its config hash, so a sweep trial with the same config reuses it."""
    spec = write_spec(tmp_path, alphas=(0.5,))
    trial = expand(load_spec(spec), "smoke")[0]
    cfg = tmp_path / "single.yaml"
    tree = trial.config.model_dump(mode="json")
    tree["tracking"]["experiment"] = "singles"
    cfg.write_text(yaml.safe_dump(tree, allow_unicode=True))
    res = runner.invoke(app, ["run", str(cfg), "--tracking-uri", store, "--quiet"])
    assert res.exit_code == 0, res.output
    report = smoke_sweep(spec, store, tmp_path)
    assert (report.skipped, report.scheduled) == (1, 0)
    client = get_client(store)
    (single,) = client.search_runs([client.get_experiment_by_name("singles").experiment_id])
    assert single.data.tags["fedsweep.config_hash"] == trial.config_hash
    assert single.data.tags[used_by_tag("names-fig")] == "smoke"
    _, parents, children = runs_of(client, "names-fig")
    assert len(parents) == 1 and not children
    assert single.info.run_id in parents[0].data.tags[NOTE_TAG]


def test_ui_links_open_the_training_runs_view_with_the_filter():
    from fedsweep.tracking.store import ui_path, ui_search_path, ui_url

    assert ui_path("3", "abc") == "#/experiments/3/runs/abc?workflowType=machine_learning"
    assert ui_url("http://127.0.0.1:5000/") == (
        "http://127.0.0.1:5000/#/experiments?workflowType=machine_learning"
    )
    # an experiment: fedsweep's saved view, in the chart view (the tab route keeps the query)
    assert ui_path("3") == (
        "#/experiments/3/runs?viewStateShareKey=fedsweep-trials&compareRunsMode=CHART"
        "&workflowType=machine_learning"
    )
    assert ui_path("3", view=False) == "#/experiments/3/runs?workflowType=machine_learning"
    filt = membership_filter("bherd-fig4d", "smoke")
    one = ui_search_path(["1"], filt)
    assert one.startswith("#/experiments/1/runs?searchFilter=tags.%60fedsweep.used_by.bherd-fig4d")
    # sorted by trial id, not start time: the matching runs flat, not under collapsed parents
    assert "&orderByKey=tags.%60fedsweep.trial_id%60&orderByAsc=true&" in one
    two = ui_search_path(["2", "1", "2"], filt)
    assert two.startswith("#/compare-experiments/s?experiments=%5B%221%22%2C%222%22%5D&")
    assert two.endswith("&workflowType=machine_learning")
