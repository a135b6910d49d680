"""``fedsweep figures --spec``: the generic layout of any sweep spec, on a real MLflow store of
tiny runs (no Ray, no mocks); the index merge; bands, baselines, claims that a short profile
cannot test; the CLI's clean errors; PDF/SVG export."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import yaml
from typer.testing import CliRunner

from dashboards import FigureOptions, FigureSelectionError, build_figures
from dashboards.export import find_browser
from dashboards.style import CurveStyle, band_width, draw_curve, metric_bounds
from fedsweep.cli.main import app
from fedsweep.config.schema import RunConfig
from fedsweep.judge import runs as JR
from fedsweep.judge.panels import Panel
from fedsweep.judge.store import RunIndex
from fedsweep.specs.load import CurveSpec, expand, load_spec, read_spec
from fedsweep.sweep.ray_backend import trial_payload
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.store import ensure_experiment
from fedsweep.tracking.tracked_run import TrackedRun

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"

BASE = {
    "algorithm": "fedavg",
    "selector": "bherd",
    "bherd": {"alpha": 0.5},
    "data": {"dataset": "mnist-5k", "partition": "case1", "num_clients": 3, "train_subset": 600},
    "model": {"name": "svm"},
    "train": {"rounds": 3, "batch_size": 50, "lr": 0.05, "order": "fixed"},
    "eval": {"train_metrics": False, "test_subset": 300},
}
PROFILES = {"paper": {}, "quick": {}, "smoke": {"note": "tiny test profile"}}
#: Fig. 3a's declared claims (sweeps/bherd-fig3a.yaml) by id, as a spec writes them
FIG3A = {
    c.id: c.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    for c in read_spec(SWEEPS / "bherd-fig3a.yaml").claims
}


def study(figure: str, **changes) -> dict:
    """A user's own spec (outside sweeps/): α=1.0 vs FedAvg on two Cases, 2 seeds, T=3."""
    tree = {
        "figure": figure,
        "title": f"My study {figure}",
        "base": BASE,
        "panels": {"data.partition": ["case1", "case2"]},
        "curves": [
            {"label": "α=1.0", "set": {"bherd.alpha": 1.0}},
            {
                "label": "FedAvg (RR)",
                "set": {"selector": "none", "train.order": "rr"},
                "dash": "dot",
            },
        ],
        "seeds": [0, 1],
        "claims": [FIG3A["alpha1-matches-fedavg"]],
        "profiles": PROFILES,
    }
    tree.update(changes)
    return tree


def write_spec(folder: Path, tree: dict) -> Path:
    path = folder / f"{tree['figure']}.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True, sort_keys=False))
    return path


def run_trials(uri: str, path: Path) -> None:
    """Run a spec's smoke trials for real, as the sweep driver logs them (skip done hashes)."""
    spec = load_spec(path)
    client = get_client(uri)
    done = RunIndex.load(client)
    exp = ensure_experiment(client, spec.figure, uri)
    parent = client.create_run(exp, tags={"fedsweep.kind": "sweep", "fedsweep.figure": spec.figure})
    for trial in expand(spec, "smoke"):
        if done.get(trial.config_hash) is not None:
            continue
        payload = trial_payload(trial, spec, uri, spec.figure, parent.info.run_id)
        TrackedRun(RunConfig.model_validate(payload["config"]), tags=payload["tags"]).execute()


@pytest.fixture(scope="module")
def specs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("my-specs")  # not sweeps/
    grid = study(
        "my-grid-study",
        panels={"train.batch_size": [25, 50], "data.partition": ["case1", "case2"]},
        curves=[{"label": "FedAvg", "set": {"selector": "none", "train.order": "rr"}}],
        seeds=[0],
        claims=[],
    )
    return {
        "study": write_spec(folder, study("my-alpha-study")),
        "grid": write_spec(folder, grid),
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory, specs) -> str:
    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    for path in specs.values():
        run_trials(uri, path)
    return uri


def invoke(*args: str):
    return CliRunner().invoke(app, ["figures", *args])


def lines(fig: go.Figure, name: str = "") -> list:
    return [
        t
        for t in fig.data
        if t.type == "scatter" and t.fill != "toself" and (t.name or "").startswith(name)
    ]


def bands(fig: go.Figure) -> list:
    return [t for t in fig.data if t.fill == "toself"]


# ---------------------------------------------------------------------------- --spec PATH
@pytest.mark.slow
def test_figures_spec_outside_sweeps_draws_the_generic_layout(store, specs, tmp_path):
    out = tmp_path / "figs"
    res = invoke(
        "--spec",
        str(specs["study"]),
        "--profile",
        "smoke",
        "--tracking-uri",
        store,
        "--out",
        str(out),
        "--format",
        "png",
    )
    assert res.exit_code == 0, res.output
    assert "my-alpha-study: 8 runs" in res.output
    html = (out / "my-alpha-study.html").read_text()
    assert "My study my-alpha-study" in html
    # the figure page links to its MLflow experiment (looked up by name = figure id)
    exp = get_client(store).get_experiment_by_name("my-alpha-study")
    assert f"http://127.0.0.1:5000/#/experiments/{exp.experiment_id}" in html
    # no UI serves the store: the page says how to start the one its link points at (issue 65)
    assert f"(start it with: fedsweep ui --tracking-uri {store})" in html
    entry = json.loads((out / "my-alpha-study.json").read_text())
    assert entry["runs"] == entry["expected_runs"] == 8 and entry["status"] == "complete"
    # T=3 cannot test "α=1.0 matches FedAvg": not testable with the reason, never "no"
    (claim,) = entry["claims"]
    assert claim["verdict"] == "not-testable"
    assert claim["shown"] == "not testable at this profile (T=3)"
    assert "α=1.0 − FedAvg" in claim["numbers"] and "T ≥ 5" in claim["criterion"]
    index = (out / "index.html").read_text()
    assert "not testable at this profile (T=3)" in index


def test_generic_layout_panels_as_columns_metrics_as_rows(store, specs, tmp_path):
    (r,) = build_figures(
        store, "smoke", tmp_path, spec_files=[specs["study"]], sweeps_dir=SWEEPS, png=False
    )
    fig = r.figure
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [
        f"({x}) data.partition=case{c}" for x, c in zip("abcd", (1, 2, 1, 2), strict=True)
    ]
    assert fig.layout.yaxis.title.text == "Test loss"
    assert fig.layout.yaxis3.title.text == "Test accuracy"
    curves = lines(fig)
    assert len(curves) == 2 * 2 * 2  # 2 curves x 2 panels x 2 metrics
    assert [t.name for t in curves if t.showlegend] == ["α=1.0 (n=2)", "FedAvg (RR) (n=2)"]
    # coinciding curves stay visible: own marker symbols, the dotted curve drawn on top and
    # thinner than the solid one under it
    solid, dotted = lines(fig, "α=1.0")[0], lines(fig, "FedAvg")[0]
    assert solid.marker.symbol != dotted.marker.symbol and "markers" in solid.mode
    assert fig.data.index(dotted) > fig.data.index(solid)
    assert dotted.line.width < solid.line.width and dotted.line.dash == "dot"
    # every loss band stays at or above 0; the default band is ±1 std (n = 2 seeds)
    loss_axes = {"x", "x2"}
    loss_bands = [b for b in bands(fig) if b.xaxis in loss_axes]
    assert len(loss_bands) == 4 and all(min(b.y) >= 0 for b in loss_bands)


def test_two_panel_axes_give_one_grid_per_metric(store, specs, tmp_path):
    (r,) = build_figures(
        store, "smoke", tmp_path, spec_files=[specs["grid"]], sweeps_dir=SWEEPS, png=False
    )
    assert list(r.parts) == ["loss", "acc"] and r.figure is r.parts["loss"]
    for part, fig in r.parts.items():
        assert (tmp_path / f"my-grid-study-{part}.html").is_file()
        # rows = the first axis (batch size), columns = the second (data.partition)
        titles = [a.text for a in fig.layout.annotations]
        assert titles == [
            "(a) train.batch_size=25 · data.partition=case1",
            "(b) train.batch_size=25 · data.partition=case2",
            "(c) train.batch_size=50 · data.partition=case1",
            "(d) train.batch_size=50 · data.partition=case2",
        ]
        grid = fig._grid_ref
        assert len(grid) == 2 and len(grid[0]) == 2
        assert fig.layout.width <= 1800
    assert not (tmp_path / "my-grid-study.html").exists()
    entry = json.loads((tmp_path / "my-grid-study.json").read_text())
    assert entry["files"]["html"] == ["my-grid-study-loss.html", "my-grid-study-acc.html"]


# ---------------------------------------------------------------------------- index merge
def test_index_merges_figures_drawn_one_at_a_time(store, specs, tmp_path):
    build_figures(store, "smoke", tmp_path, spec_files=[specs["study"]], png=False)
    first = (tmp_path / "index.html").read_text()
    assert "my-alpha-study" in first and "my-grid-study" not in first
    build_figures(store, "smoke", tmp_path, spec_files=[specs["grid"]], png=False)
    index = (tmp_path / "index.html").read_text()
    assert "href='#my-alpha-study'" in index and "href='#my-grid-study'" in index
    # redrawing one figure replaces its entry, never duplicates it
    build_figures(store, "smoke", tmp_path, spec_files=[specs["study"]], png=False)
    index = (tmp_path / "index.html").read_text()
    assert index.count("<section id='my-alpha-study'>") == 1
    assert index.count("<section id='my-grid-study'>") == 1


# ---------------------------------------------------------------------------- bands, diff
def test_band_never_below_zero_for_a_loss():
    table = pd.DataFrame(
        {"round": [1, 2, 3], "mean": [0.1, 0.05, 0.02], "std": [0.5, 0.4, 0.3], "n": [2, 2, 2]}
    )
    for band in ("std", "sem"):
        fig = go.Figure()
        style = CurveStyle("a", "a", "#1f77b4")
        draw_curve(
            fig, table, style, row=None, col=None, show_legend=True, band=band,
            bounds=metric_bounds("test_loss"),
        )  # fmt: skip
        (b,) = bands(fig)
        assert min(b.y) == 0.0 and max(b.y) > 0.3
    assert metric_bounds("test_acc") == (0.0, 1.0)
    assert metric_bounds("client/0/dist_paper") == (0.0, None)


def test_sem_band_is_narrower_than_std_for_two_or_more_seeds():
    std, n = np.array([0.2, 0.3, 0.0]), np.array([2, 5, 3])
    sem = band_width(std, n, "sem")
    assert np.allclose(sem, std / np.sqrt(n))
    assert (sem[:2] < band_width(std, n, "std")[:2]).all()
    assert (band_width(std, n, "none") == 0).all()
    with pytest.raises(ValueError, match="allowed: std, sem, none"):
        band_width(std, n, "iqr")


def test_sem_band_on_real_runs(store, specs, tmp_path):
    (std,) = build_figures(store, "smoke", tmp_path, spec_files=[specs["study"]], png=False)
    opts = FigureOptions(band="sem")
    (sem,) = build_figures(
        store, "smoke", tmp_path, spec_files=[specs["study"]], png=False, options=opts
    )
    acc = "x3"  # the accuracy row's first cell: no clipping at 0 or 1 can shrink the bands
    for b_std, b_sem in zip(bands(std.figure), bands(sem.figure), strict=True):
        if b_std.xaxis != acc:
            continue
        w_std = np.ptp(np.asarray(b_std.y, dtype=float))
        w_sem = np.ptp(np.asarray(b_sem.y, dtype=float))
        assert w_sem < w_std
    assert "standard error" in sem.figure.layout.title.subtitle.text


def test_diff_from_baseline_is_zero_for_the_baseline(store, specs, tmp_path):
    opts = FigureOptions(diff_from="FedAvg (RR)")
    (r,) = build_figures(
        store, "smoke", tmp_path, spec_files=[specs["study"]], png=False, options=opts
    )
    base = lines(r.figure, "FedAvg")
    assert len(base) == 4 and all(np.all(np.asarray(t.y) == 0.0) for t in base)
    other = lines(r.figure, "α=1.0")
    assert any(np.any(np.asarray(t.y) != 0.0) for t in other)
    assert r.figure.layout.yaxis.title.text == "Test loss − FedAvg (RR)"
    # the claims still use the raw curves
    assert r.claims[0].verdict == "not-testable" and "α=1.0 − FedAvg" in r.claims[0].numbers
    # drawn together with a figure that lacks the baseline: that one is drawn as it is
    both = build_figures(
        store, "smoke", tmp_path / "both", spec_files=list(specs.values()), png=False, options=opts
    )
    assert [r.error for r in both] == [None, None]
    by_id = {r.figure_id: r for r in both}
    assert by_id["my-grid-study"].figure.layout.yaxis.title.text == "Test loss"
    assert by_id["my-alpha-study"].figure.layout.yaxis.title.text == "Test loss − FedAvg (RR)"
    with pytest.raises(FigureSelectionError, match="did you mean 'FedAvg \\(RR\\)'"):
        build_figures(
            store,
            "smoke",
            tmp_path,
            spec_files=[specs["study"]],
            png=False,
            options=FigureOptions(diff_from="FedAvg"),
        )


# ---------------------------------------------------------------------------- claims
def claim_data(a1: float, fa: float, rounds: int = 10) -> JR.ClaimData:
    curves = [
        CurveSpec(label="α=1.0", set={"bherd.alpha": 1.0}),
        CurveSpec(label="FedAvg (RR)", set={"selector": "none"}),
    ]
    panel = Panel("data.partition=case1", "Case 1", {"data.partition": "case1"})
    rows = [
        (panel.panel_id, label, "test_acc", t, acc if t == rounds else 0.5, 0.0, 1)
        for label, acc in (("α=1.0", a1), ("FedAvg (RR)", fa))
        for t in range(1, rounds + 1)
    ]
    agg = pd.DataFrame(rows, columns=["panel_id", "curve", "metric", "round", "mean", "std", "n"])
    return JR.ClaimData(agg, curves, [panel])


def test_metric_option_draws_other_metrics_one_row_per_client(store, specs, tmp_path):
    opts = FigureOptions(metrics=("client/{i}/dist_paper", "test_acc"))
    (r,) = build_figures(
        store, "smoke", tmp_path, spec_files=[specs["study"]], png=False, options=opts
    )
    rows = [r.figure.layout[f"yaxis{i if i > 1 else ''}"].title.text for i in (1, 3, 5, 7)]
    assert rows == [f"client/{i}/dist_paper" for i in range(3)] + ["Test accuracy"]
    # FedAvg (selector none) logs no distances: 3 clients x 2 panels x α=1.0, + 2 x 2 accuracy
    assert len(lines(r.figure)) == 3 * 2 + 2 * 2


# ---------------------------------------------------------------------------- fig 4d metric
def test_fig4d_draws_dist_paper_by_default():
    spec = load_spec(SWEEPS / "bherd-fig4d.yaml")
    assert spec.metrics == ["client/{i}/dist_paper"]


# ---------------------------------------------------------------------------- CLI errors
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            ["--figure", "bherd-fig3x"],
            ["unknown figure id 'bherd-fig3x'", "did you mean", "allowed:"],
        ),
        # --profile is a click choice: tests/cli/test_cli_polish.py::test_profile_is_a_choice
        (["--band", "sme"], ["unknown band 'sme'", "did you mean 'sem'"]),
        (["--format", "jpg"], ["unknown image format 'jpg'", "png, pdf, svg"]),
        (["--spec", "no/such/spec.yaml"], ["sweep spec not found"]),
        (
            ["--figure", "bherd-fig3a", "--diff-from", "FedAvg"],
            ["--diff-from 'FedAvg'", "did you mean 'FedAvg (RR)'"],
        ),
    ],
)
@pytest.mark.slow
def test_bad_figures_input_exits_2_without_traceback(tmp_path, args, needles):
    uri = f"sqlite:///{tmp_path}/x.db"
    res = invoke(
        *args, "--out", str(tmp_path / "o"), "--tracking-uri", uri, "--sweeps-dir", str(SWEEPS)
    )
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and not isinstance(res.exception, FigureSelectionError)
    for needle in needles:
        assert needle in res.output
    assert not (tmp_path / "x.db").exists()


def test_figure_completion_lists_spec_ids(monkeypatch):
    from fedsweep.cli.figures import complete_figure

    monkeypatch.chdir(ROOT)
    assert "bherd-fig3a" in complete_figure("bherd-fig3")
    assert all(i.startswith("bherd-fig2") for i in complete_figure("bherd-fig2"))


# ---------------------------------------------------------------------------- PDF / SVG
@pytest.mark.slow
@pytest.mark.skipif(find_browser() is None, reason="no Chrome/Chromium for kaleido")
def test_pdf_and_svg_beside_png(store, specs, tmp_path):
    (r,) = build_figures(store, "smoke", tmp_path, spec_files=[specs["study"]])
    for fmt, magic in (("png", b"\x89PNG"), ("pdf", b"%PDF"), ("svg", b"<svg")):
        path = tmp_path / f"my-alpha-study.{fmt}"
        assert path in r.files and path.stat().st_size > 1000
        assert (
            path.read_bytes()[:200].lstrip().startswith(magic) or magic in path.read_bytes()[:400]
        )
    index = (tmp_path / "index.html").read_text()
    assert "my-alpha-study.pdf" in index and "my-alpha-study.svg" in index


def test_set_selects_the_runs_of_a_sweep_run_with_overrides(store, specs, tmp_path):
    """``figures --set`` = the overrides the sweep ran with: other configs, other runs."""
    common = ["--spec", str(specs["study"]), "--profile", "smoke", "--tracking-uri", store]
    res = invoke(*common, "--out", str(tmp_path), "--format", "png", "--set", "train.rounds=5")
    assert res.exit_code == 1, res.output  # nothing drawn: exit 1 (issue 62)
    assert "my-alpha-study: 0 runs" in res.output
    bad = invoke(*common, "--out", str(tmp_path), "--set", "train.roundz=5")
    assert bad.exit_code == 2 and "roundz" in bad.output and "Traceback" not in bad.output


# ------------------------------------------------------- diverged runs are no claim evidence
@pytest.mark.slow
def test_claims_on_diverged_and_blown_up_runs_are_not_testable(tmp_path):
    """A real store of T=10 runs (long enough to test a claim): the FedAvg curve at lr 2.0
    diverges (non-finite values, status diverged), the α=0.5 curve at lr 0.3 blows up but stays
    finite (status finished, tag fedsweep.loss_blowup), α=1.0 at lr 0.05 is fine. A claim that
    reads a curve with such runs is "n/t: n of m runs diverged", counted over the cells it read."""
    tree = study(
        "my-diverging-study",
        base={**BASE, "train": {**BASE["train"], "rounds": 10}},
        curves=[
            {"label": "α=1.0", "set": {"bherd.alpha": 1.0}},
            {"label": "α=0.5 (lr 0.3)", "set": {"bherd.alpha": 0.5, "train.lr": 0.3}},
            {"label": "FedAvg (lr 2)", "set": {"selector": "none", "train.lr": 2.0}},
        ],
        # "α 0.3–0.5 is fastest" of a figure whose only claimed α is 0.5
        claims=[
            FIG3A["alpha1-matches-fedavg"],
            {**FIG3A["alpha03-05-fastest"], "curve": {"set": {"bherd.alpha": 0.5}}},
        ],
    )
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    run_trials(uri, write_spec(tmp_path, tree))
    runs = get_client(uri).search_runs(
        [get_client(uri).get_experiment_by_name("my-diverging-study").experiment_id],
        filter_string="tags.`fedsweep.config_hash` IS NOT NULL",
    )
    by_curve: dict[float, list] = {}
    for run in runs:
        lr = float(run.data.params["train.lr"])
        by_curve.setdefault(lr, []).append(run.data.tags)
    assert sorted(by_curve) == [0.05, 0.3, 2.0] and all(len(v) == 4 for v in by_curve.values())
    assert all(t["fedsweep.status"] == "diverged" for t in by_curve[2.0])
    assert all(t["fedsweep.status"] == "finished" for t in by_curve[0.3])
    assert all("fedsweep.loss_blowup" in t for t in by_curve[0.3])
    assert all(t["fedsweep.status"] == "finished" for t in by_curve[0.05])
    assert not any("fedsweep.loss_blowup" in t for t in by_curve[0.05])

    out = tmp_path / "figs"
    (r,) = build_figures(
        uri, "smoke", out, spec_files=[write_spec(tmp_path, tree)], sweeps_dir=SWEEPS, png=False
    )
    match, fastest = r.claims
    assert match.verdict == "not-testable" and match.shown == "not testable: 4 of 8 runs diverged"
    assert "α=1.0 − FedAvg (lr 2) effect" in match.numbers  # the numbers are still shown
    assert fastest.verdict == "not-testable"
    assert fastest.shown == "not testable: 4 of 8 runs diverged (4 of them finite loss blow-ups)"
    names = [t.name.split(" — identical to")[0] for t in lines(r.figure) if t.showlegend]
    assert "α=0.5 (lr 0.3) (n=2) — 4 runs' loss blew up" in names
    assert any(n.startswith("FedAvg (lr 2) (n=2) — 4 runs diverged") for n in names)
    assert any("seed 0 loss blew up (finite): test_loss" in n for n in r.notes)
    index = (out / "index.html").read_text()
    assert "not testable: 4 of 8 runs diverged" in index and "loss blew up (finite)" in index


def test_a_studys_added_curves_take_their_place_and_their_own_colours(tmp_path):
    """Issue 52, item 6: a study that adds α=0.2 and α=0.4 to Fig. 3a (``sweep --grid``'s
    ``add_curves``) draws them among the figure's α curves in value order, each in a colour no
    other curve has (before: appended last, the eighth in the reference FedAvg's grey)."""
    from dashboards.generic import curve_styles, value_order
    from fedsweep.specs.grid_study import study_tree

    tree = study_tree("bherd-fig3a", "Fig. 3a", {"bherd.alpha": [0.2, 0.4]})
    tree["extends"] = str(SWEEPS / "bherd-fig3a.yaml")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    curves = load_spec(path).curve_list()
    assert [c.label for c in curves][-2:] == ["alpha=0.2", "alpha=0.4"]
    ordered = [c.label for c in value_order(curves)]
    assert ordered == ["α=0.1", "alpha=0.2", "α=0.3", "alpha=0.4", "α=0.5", "α=0.7", "α=1.0",
                       "FedAvg (RR)"]  # fmt: skip

    class NoRuns:
        def counts(self, label):
            return {}

        def diverged_rounds(self, label):
            return []

        def blowup_count(self, label):
            return 0

    colours = {s.key: s.color for s in curve_styles(value_order(curves), NoRuns())}
    assert len(set(colours.values())) == len(colours)
    assert colours["FedAvg (RR)"] == "#7f7f7f" and "#7f7f7f" not in (
        colours["alpha=0.2"],
        colours["alpha=0.4"],
    )
