"""``fedsweep sweep --panel AXIS=ID``: run part of a figure's panels (issue 35), the others drawn
as "not run at this profile"; on a real Ray Tune sweep and a real MLflow store."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.specs.load import (
    SpecError,
    check_panel_filter,
    expand,
    load_spec,
    parse_panel_filter,
)
from tests.helpers import small_spec, smoke_sweep, sweep_runs, write_yaml


def two_by_two(folder, name="panel-fig"):
    """Two panel axes (a named one and a config key), one curve (α=1.0), one seed."""
    tree = small_spec(
        name,
        alphas=(1.0,),
        rounds=2,
        panels={
            "setting": [
                {"id": "small-batch", "label": "B=25", "set": {"train.batch_size": 25}},
                {"id": "big-batch", "label": "B=50", "set": {"train.batch_size": 50}},
            ],
            "data.partition": ["case1", "case2"],
        },
        claims=[],
    )
    return write_yaml(folder / f"{name}.yaml", tree)


def test_parse_repeats_and_lists():
    got = parse_panel_filter(["setting=a", "setting=b,c", "data.partition=case1"])
    assert got == {"setting": ["a", "b", "c"], "data.partition": ["case1"]}
    for bad in ("setting", "=a", "setting="):
        with pytest.raises(SpecError, match="AXIS=ID"):
            parse_panel_filter([bad])


def test_expand_keeps_only_the_filtered_cells(tmp_path):
    spec = load_spec(two_by_two(tmp_path))
    every = expand(spec, "smoke")
    assert len(every) == 4
    some = expand(spec, "smoke", panels={"setting": ["big-batch"]})
    cells = [dict(t.panel) for t in some]
    assert cells == [
        {"setting": "big-batch", "data.partition": "case1"},
        {"setting": "big-batch", "data.partition": "case2"},
    ]
    one = expand(spec, "smoke", panels={"setting": ["big-batch"], "data.partition": ["case2"]})
    assert [dict(t.panel) for t in one] == [{"setting": "big-batch", "data.partition": "case2"}]
    # the filtered trials are the same trials (same config hash) as in the whole grid
    assert {t.config_hash for t in some} < {t.config_hash for t in every}


@pytest.mark.parametrize(
    "panels, needle",
    [
        ({"settng": ["big-batch"]}, "no panel axis 'settng' (did you mean 'setting'?)"),
        ({"setting": ["big-bach"]}, "(did you mean 'big-batch'?); allowed: small-batch, big-batch"),
        ({"data.partition": ["case3"]}, "allowed: case1, case2"),
    ],
)
def test_bad_filters_name_the_axis_value_and_allowed(tmp_path, panels, needle):
    spec = load_spec(two_by_two(tmp_path))
    with pytest.raises(SpecError) as err:
        check_panel_filter(spec, "smoke", panels)
    assert needle in str(err.value)


def test_cli_plan_lists_only_the_filtered_panels_and_bad_input_exits_2(tmp_path):
    path = str(two_by_two(tmp_path))
    store = f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}"
    ok = CliRunner().invoke(
        app,
        ["sweep", path, "--profile", "smoke", "--plan", "--tracking-uri", store]
        + ["--panel", "setting=small-batch"],
    )
    assert ok.exit_code == 0, ok.output
    rows = [line for line in ok.output.splitlines() if line.startswith("  run ")]
    assert len(rows) == 2 and all("setting=small-batch" in r for r in rows)
    for args, needle in [
        (["--panel", "setting=nope"], "allowed: small-batch, big-batch"),
        (["--panel", "setting"], "AXIS=ID"),
    ]:
        bad = CliRunner().invoke(app, ["sweep", path, "--profile", "smoke", "--plan", *args])
        assert bad.exit_code == 2, bad.output
        assert needle in bad.output and "Traceback" not in bad.output
    bare = CliRunner().invoke(app, ["sweep", "--panel", "setting=a", "--plan"])
    assert bare.exit_code == 2 and "name the spec" in bare.output


@pytest.mark.slow
def test_sweep_runs_only_the_filtered_panels_and_figures_say_the_rest_was_not_run(tmp_path):
    from dashboards import build_figures

    path = two_by_two(tmp_path)
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    report = smoke_sweep(path, store, tmp_path, panels={"data.partition": ["case1"]})
    assert report.errored == 0
    client, _, parents, children = sweep_runs(store, "panel-fig")
    assert len(children) == 2
    assert sorted(c.data.tags["fedsweep.panel"] for c in children) == [
        "data.partition=case1,setting=big-batch",
        "data.partition=case1,setting=small-batch",
    ]
    assert parents[0].data.tags["fedsweep.panel_filter"] == "data.partition=case1"

    (result,) = build_figures(
        store, profile="smoke", out_dir=tmp_path / "figs", spec_files=[path], png=False
    )
    assert result.runs == 2 and result.expected_runs == 4
    assert "2 of 4 panels not run at this profile (the sweep ran --panel data.partition=case1)" in (
        result.data_note
    )
    assert len(result.parts) == 2  # two panel axes: one grid per metric
    for part in result.parts.values():
        texts = [a.text for a in part.layout.annotations]
        assert texts.count("not run at this profile") == 2  # the two case2 cells
        assert "no runs" not in texts
    assert sum("not run at this profile" in n for n in result.notes) == 2
