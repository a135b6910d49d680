"""Product grids in sweep specs (``curves: - grid: {key: [values], ...}``, issue 33 step 3): the
cartesian product of several keys with a label template, checked when the spec loads, and
sweeps/intro-fedopt.yaml written with them giving the trials it had as 100 hand-listed curves.
Spec loading and ``sweep --plan`` only: nothing here starts Ray or MLflow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.specs.load import SpecError, expand, load_spec
from tests.helpers import small_spec

ROOT = Path(__file__).resolve().parents[2]
PINNED = ROOT / "tests" / "fixtures" / "intro_fedopt_hashes.json"

GRID = {
    "grid": {"bherd.alpha": [0.5, 1.0], "train.lr": [0.001, 0.01, 0.1]},
    "label": "α={bherd.alpha} η={train.lr}",
    "labels": {"train.lr": {0.001: "1e-3", 0.01: "1e-2", 0.1: "1e-1"}},
    "colors": {"bherd.alpha": {0.5: "#d62728", 1.0: "#1f77b4"}},
    "set": {"selector": "bherd"},
}
PLAIN = {"label": "FedAvg", "set": {"selector": "none"}, "color": "#7f7f7f"}


def write(path: Path, tree: dict) -> Path:
    """``tree`` as YAML in its own key order (a grid's key order is the product's order)."""
    path.write_text(yaml.safe_dump(tree, allow_unicode=True, sort_keys=False))
    return path


def spec_file(tmp_path: Path, curves, name: str = "grid.yaml", **top) -> Path:
    tree = small_spec("grid-test", seeds=(0, 1), curves=curves, **top)
    return write(tmp_path / name, tree)


def load_error(path: Path) -> str:
    with pytest.raises(SpecError) as err:
        load_spec(path)
    return str(err.value)


def test_product_grid_gives_every_combination_in_order_with_template_labels(tmp_path):
    spec = load_spec(spec_file(tmp_path, [PLAIN, GRID]))
    curves = spec.curve_list()
    assert [c.label for c in curves] == [
        "FedAvg",
        "α=0.5 η=1e-3",
        "α=0.5 η=1e-2",
        "α=0.5 η=1e-1",
        "α=1.0 η=1e-3",
        "α=1.0 η=1e-2",
        "α=1.0 η=1e-1",
    ]
    assert curves[2].set == {"selector": "bherd", "bherd.alpha": 0.5, "train.lr": 0.01}
    assert [c.color for c in curves] == ["#7f7f7f"] + ["#d62728"] * 3 + ["#1f77b4"] * 3
    trials = expand(spec, "smoke")
    assert len(trials) == 1 * 7 * 2  # panels x curves x seeds
    assert len({t.config_hash for t in trials}) == 14
    t = next(t for t in trials if t.curve == "α=1.0 η=1e-1" and t.seed == 1)
    assert (t.config.bherd.alpha, t.config.train.lr) == (1.0, 0.1)
    assert t.trial_id == "grid-test|smoke|data.partition=case1|α=1.0 η=1e-1|seed=1"


def test_a_grid_gives_the_trials_of_the_same_curves_listed_by_hand(tmp_path):
    by_hand = [
        {
            "label": f"α={a} η={text}",
            "set": {"selector": "bherd", "bherd.alpha": a, "train.lr": lr},
            "color": color,
        }
        for a, color in ((0.5, "#d62728"), (1.0, "#1f77b4"))
        for lr, text in ((0.001, "1e-3"), (0.01, "1e-2"), (0.1, "1e-1"))
    ]
    grid = load_spec(spec_file(tmp_path, [PLAIN, GRID]))
    listed = load_spec(spec_file(tmp_path, [PLAIN, *by_hand], name="listed.yaml"))
    assert grid.curve_list() == listed.curve_list()
    for profile in ("paper", "quick", "smoke"):
        want = [(t.trial_id, t.config_hash, t.legacy_hash) for t in expand(listed, profile)]
        assert [(t.trial_id, t.config_hash, t.legacy_hash) for t in expand(grid, profile)] == want


def test_format_specs_default_labels_and_the_mapping_form(tmp_path):
    fmt = {"grid": {"train.lr": [0.001, 0.01]}, "label": "η={train.lr:.0e} {{x}}"}
    spec = load_spec(spec_file(tmp_path, [fmt]))
    assert [c.label for c in spec.curve_list()] == ["η=1e-03 {x}", "η=1e-02 {x}"]
    bare = {"grid": {"bherd.alpha": [0.5], "train.lr": [0.001, 0.01]}}
    spec = load_spec(spec_file(tmp_path, bare, name="mapping.yaml"))  # curves: one grid
    assert [c.label for c in spec.curve_list()] == [
        "bherd.alpha=0.5, train.lr=0.001",
        "bherd.alpha=0.5, train.lr=0.01",
    ]
    assert len(expand(spec, "paper")) == 2 * 2


def test_a_profile_runs_a_smaller_grid(tmp_path):
    profiles = {"paper": {}, "quick": {"grid": {"train.lr": [0.01, 0.1]}}, "smoke": {}}
    profiles["smoke"] = {"grid": {"bherd.alpha": [1.0]}, "curves": ["α=1.0 η=1e-2", "FedAvg"]}
    spec = load_spec(spec_file(tmp_path, [PLAIN, GRID], profiles=profiles))
    assert [c.label for c in spec.profile_curves("quick")] == [
        "FedAvg",  # a curve of no grid is kept
        "α=0.5 η=1e-2",
        "α=0.5 η=1e-1",
        "α=1.0 η=1e-2",
        "α=1.0 η=1e-1",
    ]
    assert [c.label for c in spec.profile_curves("smoke")] == ["FedAvg", "α=1.0 η=1e-2"]
    assert len(expand(spec, "quick")) == 5 * 2
    bad = {**profiles, "quick": {"grid": {"train.lr": [0.5]}}}
    text = load_error(spec_file(tmp_path, [PLAIN, GRID], name="bad.yaml", profiles=bad))
    assert "profiles.quick.grid.train.lr" in text and "0.5" in text


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        ({"label": "α={alpha} η={train.lr}"}, ["curves[1].label", "{alpha}", "{bherd.alpha}"]),
        ({"label": "α={bherd.alpha"}, ["curves[1].label", "lone '{'"]),
        (
            {"label": "η={train.lr}"},
            ["curves[1].label", "several curves the label", "add {bherd.alpha}"],
        ),
        ({"label": "{bherd.alpha:d}"}, ["curves[1].label", "cannot format 0.5"]),
        ({"grid": {"bherd.alpha": [0.5], "train.lr": []}}, ["curves[1].grid.train.lr", "empty"]),
        ({"grid": {}}, ["curves[1].grid", "no keys", "empty"]),
        ({"grid": {"bherd.alpha": [0.5, 0.5]}, "label": "{bherd.alpha}"}, ["repeated"]),
        ({"labels": {"train.lr": {0.5: "x"}}}, ["curves[1].labels.train.lr", "0.5"]),
        ({"colors": {"model.name": {"svm": "red"}}}, ["curves[1].colors.model.name"]),
        ({"set": {"train.lr": 0.1}}, ["curves[1].set.train.lr", "also a grid key"]),
        ({"colr": "red"}, ["curves.1.colr", "did you mean `color`"]),
    ],
)
def test_a_bad_grid_is_a_spec_error_naming_the_field(tmp_path, change, needles):
    text = load_error(spec_file(tmp_path, [PLAIN, {**GRID, **change}]))
    for needle in needles:
        assert needle in text, (needle, text)


def test_a_bad_template_key_exits_2_before_anything_runs(tmp_path):
    path = spec_file(tmp_path, [PLAIN, {**GRID, "label": "{server_optimizer}"}])
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    res = CliRunner().invoke(app, ["sweep", str(path), "--plan", "--tracking-uri", store])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert "curves[1].label: unknown key {server_optimizer}" in res.output
    assert not (tmp_path / "store").exists()


def test_an_extension_adds_curves_to_a_grid(tmp_path):
    spec_file(tmp_path, [PLAIN, GRID], name="parent.yaml")
    ext = {"extends": "parent.yaml", "figure": "grid-ext", "title": "more"}
    ext["add_curves"] = [{"grid": {"train.lr": [1.0]}, "label": "big η={train.lr}"}]
    spec = load_spec(write(tmp_path / "ext.yaml", ext))
    labels = [c.label for c in spec.curve_list()]
    assert len(labels) == 8 and labels[-1] == "big η=1.0"


def test_intro_fedopt_keeps_its_trials_and_hashes():
    """sweeps/intro-fedopt.yaml, two product grids since issue 33, gives exactly the trials of
    its 100 hand-listed curves: the pinned ids and config hashes, in order (generated before
    the rewrite)."""
    pinned = json.loads(PINNED.read_text())
    spec = load_spec(ROOT / "sweeps" / "intro-fedopt.yaml")
    got = {t.trial_id: t.config_hash for p in ("paper", "quick", "smoke") for t in expand(spec, p)}
    assert list(got.items()) == list(pinned.items())
    assert len(spec.curve_list()) == 100 and len(got) == 300 + 48 + 4
    assert len(spec.profile_curves("quick")) == 24
