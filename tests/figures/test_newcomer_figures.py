"""Issue 37, the newcomer's path through the figures: pages that fit the browser window (images
keep their paper size), curves that coincide shown as two ("identical to X"), a CSV of every
plotted curve beside each figure, a parallel-coordinates page of each figure's runs, and a
``--set`` figure under its own name that leaves the figure as configured untouched.

The store is hand-logged (metrics only, no training): a spec of our own with three curves
(alpha=0.3, 0.5, 1.0; alpha=0.5 and alpha=1.0 log the same values), two panels (Case 1,
Case 2) and two seeds, 4 rounds; the same again for the trials under ``--set train.lr=0.1``.
Image export uses a fake kaleido (no browser needed).
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from typer.testing import CliRunner

from dashboards import build_figures
from dashboards.compare import Group, compare_figure, long_frame
from dashboards.export import NARROW_PX, NARROW_SCRIPT, curve_table
from dashboards.index import override_stem
from dashboards.style import IDENTICAL, CurveStyle, coinciding, draw_curve, mark_coinciding
from fedsweep.cli.main import app
from tests.figures.test_figure_outputs import fake_browser  # noqa: F401 - a fixture
from tests.helpers import log_config, small_spec, write_yaml

FIGURE = "i37-newcomer"
ROUNDS = 4
SEEDS = (0, 1)
LR = {"train.lr": 0.1}


def values(curve: str, panel: str, seed: int, t: int, lr: float = 0.0) -> dict[str, float]:
    """The metrics a run logs at round ``t``: alpha=0.5 and alpha=1.0 the same, alpha=0.3
    clearly apart; the seeds differ (a non-zero std), the panels too."""
    c = 0.3 if "0.3" in curve else 0.0
    p = 0.02 if "case2" in panel else 0.0
    s = 0.01 * seed
    return {
        "test_loss": 1.0 / t + c + p + s + lr,
        "test_acc": 0.5 + 0.05 * t - c / 3 + p + s - lr,
        "train_loss": 0.9 / t + c + s + lr,
    }


def log_runs(client, uri: str, spec, overrides: dict | None = None) -> dict[str, dict]:
    """One finished run per smoke trial (of ``overrides``' runs); run id -> its trial's keys."""
    from mlflow.entities import Metric

    from fedsweep.specs.load import expand
    from fedsweep.tracking.store import ensure_experiment

    exp = ensure_experiment(client, spec.figure, uri)
    lr = 0.05 if overrides else 0.0
    made = {}
    for trial in expand(spec, "smoke", extra=dict(overrides or {})):
        tags = {
            "fedsweep.config_hash": trial.config_hash,
            "fedsweep.figure": spec.figure,
            "fedsweep.status": "finished",
        }
        run = client.create_run(exp, tags=tags).info.run_id
        log_config(client, run, trial.config)
        metrics = [
            Metric(key, value, 0, t)
            for t in range(1, ROUNDS + 1)
            for key, value in values(trial.curve, trial.panel_id, trial.seed, t, lr).items()
        ]
        client.log_batch(run, metrics=metrics)
        made[run] = {"curve": trial.curve, "panel": trial.panel_id, "seed": trial.seed}
    return made


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """(store uri, spec path, run id -> trial keys of the runs as configured)."""
    from fedsweep.specs.load import load_spec
    from fedsweep.tracking.connect import get_client

    tmp = tmp_path_factory.mktemp("i37")
    tree = small_spec(
        FIGURE,
        title="Newcomer study",
        alphas=(0.3, 0.5, 1.0),
        seeds=SEEDS,
        rounds=ROUNDS,
        panels={"data.partition": ["case1", "case2"]},
        eval_={"train_metrics": True},
    )
    path = write_yaml(tmp / f"{FIGURE}.yaml", tree)
    spec = load_spec(path)
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    client = get_client(uri)
    made = log_runs(client, uri, spec)
    log_runs(client, uri, spec, LR)
    return uri, path, made


@pytest.fixture(scope="module")
def built(study, tmp_path_factory):
    """The figure as configured, drawn (no images) into a folder: (result, folder)."""
    uri, path, _ = study
    out = tmp_path_factory.mktemp("i37-figs")
    (r,) = build_figures(uri, "smoke", out, spec_files=[path], images=())
    assert not r.error and r.runs == 3 * 2 * len(SEEDS), r.error
    return r, out


def plot_args(html: str) -> tuple[list, dict, dict]:
    """(data, layout, config) of the ``Plotly.newPlot`` call of a page."""
    decoder = json.JSONDecoder()
    at = html.index("Plotly.newPlot(")
    at = html.index(",", at) + 1  # after the div id
    args = []
    for _ in range(3):
        while html[at] in " \n,":
            at += 1
        value, at = decoder.raw_decode(html, at)
        args.append(value)
    return args[0], args[1], args[2]


def as_list(value) -> list:
    """A value of a page's plot JSON as a list (Plotly writes numeric arrays as base64)."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).tolist()
    return list(value)


# ------------------------------------------------------------------- 1: responsive pages
def test_figure_pages_fit_the_window_and_images_keep_the_paper_size(built, monkeypatch):
    import kaleido

    from dashboards.export import PngJob, write_pngs

    r, out = built
    html = (out / f"{FIGURE}.html").read_text()
    _, layout, config = plot_args(html)
    assert "width" not in layout and layout.get("autosize") is True
    assert config["responsive"] is True
    assert 'style="height:' in html and "width:100%" in html.replace(" ", "")
    assert 'name="viewport"' in html
    # issue 52, item 6: on a narrow window (800 px) the legend moves below the panels, so a
    # grid keeps the window's width (checked by screenshot: Fig. 2b's 3x3 grid at 800 px, its
    # panel titles and axis titles clear of each other); a wide one keeps it on the right
    assert NARROW_SCRIPT in html and f"gd.clientWidth < {NARROW_PX}" in html
    assert "'legend.yref': 'container'" in NARROW_SCRIPT
    # the figure object and its images keep the fixed, paper-like size
    assert r.figure.layout.width and r.figure.layout.width >= 900
    assert config["toImageButtonOptions"]["width"] == r.figure.layout.width
    assert layout["height"] == r.figure.layout.height
    sizes = []  # what the image export is asked for: the figure's own size

    def fake(specs, **kw):
        sizes.extend((s["opts"]["width"], s["opts"]["height"]) for s in specs)
        for s in specs:
            Path(s["path"]).write_bytes(b"image")
        return []

    monkeypatch.setenv("BROWSER_PATH", sys.executable)
    monkeypatch.setattr(kaleido, "write_fig_from_object_sync", fake)
    png = out.parent / "shot.png"
    assert write_pngs([PngJob(r.figure, png)]) == {png: True}
    assert sizes == [(r.figure.layout.width, r.figure.layout.height)]
    page = (out / f"{FIGURE}-parcoords.html").read_text()
    assert "width" not in plot_args(page)[1] and plot_args(page)[2]["responsive"] is True


# ------------------------------------------------------------- 2: coinciding curves shown
def two_curves(offset: float, symbols=(None, None, None), rounds: int = 5) -> go.Figure:
    """Three solid curves in one panel spanning [0, 1]: "a", "b" = "a" + ``offset``, and "c"
    far from both; ``symbols``: their markers (staggered, as the builders draw them)."""
    fig = go.Figure()
    base = np.linspace(0.0, 1.0, rounds)
    curves = (("a", base), ("b", base + offset), ("c", base[::-1]))
    for i, ((name, y), symbol) in enumerate(zip(curves, symbols, strict=True)):
        table = pd.DataFrame({"round": np.arange(1, rounds + 1), "mean": y, "std": 0.0, "n": 1})
        style = CurveStyle(name, f"{name} (n=1)", "#1f77b4", symbol=symbol, index=i, of=3)
        draw_curve(fig, table, style, row=None, col=None, show_legend=True)
    return fig


def marks(trace) -> set[int]:
    """The rounds (0-based) where a curve shows a marker."""
    if trace.mode is None or "markers" not in trace.mode:
        return set()
    return {k for k, size in enumerate(trace.marker.size) if size}


@pytest.mark.parametrize("offset", [0.0, 1e-4])
def test_identical_curves_get_a_note_and_markers_of_their_own(offset):
    fig = two_curves(offset)  # no markers, the same dash: b would hide a
    pairs = mark_coinciding(fig)
    assert pairs == [("a", "b", "")]
    a, b, c = (t for t in fig.data if t.fill != "toself")
    assert a.name == f"a (n=1) — {IDENTICAL} b" and b.name == f"b (n=1) — {IDENTICAL} a"
    assert f"{IDENTICAL} b" in a.hovertemplate and f"{IDENTICAL} a" in b.hovertemplate
    # both get markers, at alternate rounds and of distinct symbols; the dashes stay as drawn
    assert marks(a) == {0, 2, 4} and marks(b) == {1, 3}
    assert a.marker.symbol != b.marker.symbol and a.marker.color == a.line.color
    assert (a.line.dash, b.line.dash) == ("solid", "solid")
    assert IDENTICAL not in c.name and marks(c) == set()
    names = [t.name for t in fig.data]
    assert mark_coinciding(fig) == pairs and [t.name for t in fig.data] == names  # idempotent
    assert marks(a) == {0, 2, 4} and marks(b) == {1, 3}


def test_three_identical_curves_show_markers_at_rounds_of_their_own():
    fig = two_curves(0.0, ("circle", "square", "diamond"), rounds=7)
    fig.data[2].y = fig.data[0].y  # c: the same as a and b
    mark_coinciding(fig)
    a, b, c = fig.data
    assert (marks(a), marks(b), marks(c)) == ({0, 3, 6}, {1, 4}, {2, 5})
    assert c.name == f"c (n=1) — {IDENTICAL} a; b"


def test_curves_apart_by_more_than_the_resolution_are_not_identical():
    fig = two_curves(0.05)  # 5% of the axis range: clearly two lines
    assert coinciding(fig) == [] and mark_coinciding(fig) == []
    assert all(IDENTICAL not in (t.name or "") for t in fig.data)


def test_coinciding_curves_drawn_apart_keep_their_own_look():
    fig = two_curves(0.0)
    fig.data[1].line.dash = "dot"  # b: already drawn apart (dotted over a solid a)
    mark_coinciding(fig)
    a, b, _ = fig.data
    assert (a.line.dash, b.line.dash) == ("solid", "dot") and marks(a) == marks(b) == set()
    assert a.name.endswith(f"{IDENTICAL} b")
    # a long run: the markers are staggered, a's show between b's: left as drawn
    fig = two_curves(0.0, ("circle", "square", "diamond"), rounds=40)
    before = [marks(t) for t in fig.data]
    mark_coinciding(fig)
    assert [marks(t) for t in fig.data] == before and not before[0] & before[1]
    assert IDENTICAL in fig.data[1].name
    # a short run: every round has both markers, b's hide a's: alternate rounds
    fig = two_curves(0.0, ("circle", "square", "diamond"), rounds=5)
    mark_coinciding(fig)
    a, b, _ = fig.data
    assert (a.marker.symbol, b.marker.symbol) == ("circle", "square")
    assert marks(a) == {0, 2, 4} and marks(b) == {1, 3}


def test_figure_curves_that_coincide_in_every_panel_say_so(built):
    r, _ = built
    lines = [t for t in r.figure.data if t.fill != "toself" and t.showlegend]
    by_label = {t.name.split(" (n=")[0]: t for t in lines}
    # in every cell: no "in (a), …"
    assert by_label["alpha=0.5"].name.endswith(f"{IDENTICAL} alpha=1.0")
    assert by_label["alpha=1.0"].name.endswith(f"{IDENTICAL} alpha=0.5")
    assert IDENTICAL not in by_label["alpha=0.3"].name
    # distinct symbols (and the markers staggered) for the two identical curves
    assert by_label["alpha=0.5"].marker.symbol != by_label["alpha=1.0"].marker.symbol


def test_compare_curves_have_markers_and_identical_ones_say_so():
    rows = []
    for key in ("g1", "g2", "g3"):
        for seed in (0, 1):
            for t in range(1, 6):
                y = 0.5 + 0.05 * t + (0.2 if key == "g3" else 0.0) + 0.01 * seed
                rows.append((key, seed, f"{key}-{seed}", t, "test_acc", y))
    groups = [Group(k, k.upper(), [f"{k}-0", f"{k}-1"], [0, 1]) for k in ("g1", "g2", "g3")]
    fig = compare_figure(long_frame(rows), groups, ["test_acc"], "t", "s")
    lines = {t.legendgroup: t for t in fig.data if t.fill != "toself"}
    symbols = {lines[k].marker.symbol for k in lines}
    assert len(symbols) == 3 and "markers" in lines["g1"].mode
    assert lines["g1"].name == f"G1 (n=2) — {IDENTICAL} G2"
    assert lines["g2"].name == f"G2 (n=2) — {IDENTICAL} G1"
    assert IDENTICAL not in lines["g3"].name


# ------------------------------------------------------------------------- 3: curves CSV
def test_the_curves_csv_holds_every_plotted_curve(built, study):
    r, out = built
    _, _, made = study
    table = pd.read_csv(out / f"{FIGURE}.csv")
    # panels (2) x metrics (2) cells, 3 curves each, one row per round
    assert len(table) == 2 * 2 * 3 * ROUNDS
    assert set(table["curve"]) == {"alpha=0.3", "alpha=0.5", "alpha=1.0"}
    assert sorted(table["x"].unique()) == list(range(1, ROUNDS + 1))
    assert set(table["n"]) == {len(SEEDS)}
    # the values are the plotted means (read back from the figure), exactly
    plotted = curve_table(r.figure)
    assert np.array_equal(table["mean"].to_numpy(), plotted["mean"].to_numpy())
    # ... and the seed mean and std of the logged values
    row = table[
        (table["curve"] == "alpha=0.3") & (table["x"] == 2) & table["y_axis"].str.contains("loss")
    ]
    panel_ids = {"case1": "(a)", "case2": "(b)"}
    for pid, tag in panel_ids.items():
        cell = row[row["panel"].str.startswith(tag)]
        logged = [values("alpha=0.3", pid, s, 2)["test_loss"] for s in SEEDS]
        assert len(cell) == 1
        assert cell["mean"].iloc[0] == pytest.approx(np.mean(logged), rel=1e-12)
        assert cell["std"].iloc[0] == pytest.approx(np.std(logged, ddof=1), rel=1e-9)
    index = (out / "index.html").read_text()
    assert f'href="{FIGURE}.csv"' in index and "curves as CSV" in index
    entry = json.loads((out / f"{FIGURE}.json").read_text())
    assert entry["files"]["data"] == [f"{FIGURE}.csv"]


# ---------------------------------------------------------------- 4: parallel coordinates
def test_the_parcoords_page_has_one_line_per_run_over_the_varied_keys(built, study):
    r, out = built
    _, _, made = study
    data, _, _ = plot_args((out / f"{FIGURE}-parcoords.html").read_text())
    (trace,) = data
    assert trace["type"] == "parcoords"
    dims = {d["label"]: {**d, "values": as_list(d["values"])} for d in trace["dimensions"]}
    assert list(dims) == [
        "curve",
        "bherd.alpha",
        "data.partition",
        "seed",
        "final test acc",
        "best test acc",
        "final train loss",
        "final test loss",
    ]
    runs = len(made)
    assert all(len(d["values"]) == runs for d in dims.values())
    part = dims["data.partition"]  # text: integers with the values as tick labels
    assert part["ticktext"] == ["case1", "case2"] and sorted(set(part["values"])) == [0, 1]
    assert sorted(dims["bherd.alpha"]["values"]) == sorted([0.3, 0.5, 1.0] * 2 * len(SEEDS))
    assert as_list(trace["line"]["color"]) == dims["final test acc"]["values"]
    table = pd.read_csv(out / f"{FIGURE}-runs.csv")
    assert set(table["run_id"]) == set(made)
    for run_id, keys in made.items():
        row = table[table["run_id"] == run_id].iloc[0]
        last = values(keys["curve"], keys["panel"], keys["seed"], ROUNDS)
        assert row["final test acc"] == pytest.approx(last["test_acc"])
        assert row["best test acc"] == pytest.approx(last["test_acc"])  # rising accuracy
        assert row["final train loss"] == pytest.approx(last["train_loss"])
        assert f"data.partition={row['data.partition']}" == keys["panel"]
        assert row["seed"] == keys["seed"]
    index = (out / "index.html").read_text()
    assert f'href="{FIGURE}-parcoords.html"' in index and f'href="{FIGURE}-runs.csv"' in index


# ------------------------------------------------------------------- 5: --set figures
def test_a_set_figure_has_its_own_files_and_leaves_the_figure_untouched(
    built,
    study,
    tmp_path,
    fake_browser,  # noqa: F811 - the imported fixture
):
    uri, path, _ = study
    out = tmp_path / "figs"
    shutil.copytree(built[1], out)
    (r,) = build_figures(uri, "smoke", out, spec_files=[path], images=("png",))
    stem = override_stem(FIGURE, LR)
    assert stem == f"{FIGURE}--lr-0.1"
    mine = {p.name: p.read_bytes() for p in out.iterdir() if p.name.startswith(FIGURE)}
    assert {f"{FIGURE}.html", f"{FIGURE}.csv", f"{FIGURE}.json", f"{FIGURE}.png"} <= set(mine)
    res = CliRunner().invoke(
        app,
        [
            "figures", "--spec", str(path), "--profile", "smoke", "--tracking-uri", uri,
            "--out", str(out), "--set", "train.lr=0.1", "--format", "png",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.name.startswith(FIGURE)}
    for name, data in mine.items():  # every file of the figure as configured: byte-identical
        assert after[name] == data, name
    new = set(after) - set(mine)
    assert new == {f"{stem}.{k}" for k in ("html", "csv", "json", "png")} | {
        f"{stem}-parcoords.html",
        f"{stem}-runs.csv",
    }, new
    entry = json.loads((out / f"{stem}.json").read_text())
    assert entry["figure_id"] == stem and entry["figure"] == FIGURE
    assert entry["overrides"] == {"train.lr": "0.1"} and entry["runs"] == r.runs
    table = pd.read_csv(io.StringIO((out / f"{stem}.csv").read_text()))
    first = table[(table["curve"] == "alpha=0.3") & (table["x"] == 1)]
    assert first["y_axis"].str.contains("loss").any()
    loss = first[first["y_axis"].str.contains("loss")]["mean"].iloc[0]
    assert loss == pytest.approx(
        np.mean([values("alpha=0.3", "case1", s, 1, 0.05)["test_loss"] for s in SEEDS])
    )  # the --set runs' values
    index = (out / "index.html").read_text()
    assert f"id='{FIGURE}'" in index and f"id='{stem}'" in index
    assert "--set train.lr=0.1" in index
    assert stem not in (out / "reproduction.html").read_text()  # the report: as configured


def test_override_stems_are_readable_file_names():
    assert override_stem("f", {}) == "f"
    assert override_stem("f", {"data.download": False, "threads": 1}) == "f"  # the same runs
    assert override_stem("f", {"data.download": False, "train.lr": 0.1}) == "f--lr-0.1"
    assert override_stem("f", {"bherd.server_scale": None}) == "f--server_scale-none"
    assert override_stem("f", {"a.x": 1, "b.x": "p/q r"}) == "f--a.x-1--b.x-p_q_r"
    long = override_stem("f", {"k": "v" * 300})
    assert len(long) <= 120 and long != override_stem("f", {"k": "v" * 301})
    assert Path(long).name == long
