"""Figure dashboards: a real MLflow sqlite store of smoke runs (no Ray, no mocks) -> figures.

The module-scoped store holds the smoke runs of bherd-fig3a, fig3d, fig4abc and fig4e (45 runs
of 3 rounds); fig4d has no runs of its own and must find fig4abc's by config hash. A second
store holds hand-logged runs of fig4e's quick profile under the fallback data set only.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboards import BUILDERS, build_figures
from dashboards import claims as C
from dashboards import registry as R
from dashboards.export import PngExportWarning, find_browser
from dashboards.model import Panel
from dashboards.papers.bherd import claims as B
from dashboards.store import RunIndex, aggregate, load_selected, resolve_runs
from dashboards.verdicts import VERDICTS
from fedsweep.config.schema import RunConfig
from fedsweep.sweep.ray_backend import trial_payload
from fedsweep.sweep.spec import CurveSpec, expand, load_spec
from fedsweep.tracking.store import ensure_experiment, get_client
from fedsweep.tracking.tracked_run import TrackedRun

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
RUN_FIGURES = ["bherd-fig3a", "bherd-fig3d", "bherd-fig4abc", "bherd-fig4e"]
BUILT = ["bherd-fig3a", "bherd-fig3d", "bherd-fig4abc", "bherd-fig4d", "bherd-fig4e"]


def run_smoke(uri: str, figure: str) -> None:
    """Run the smoke trials of ``figure`` for real, as the sweep driver logs them: a trial
    whose config hash already has a done run (under any figure) is skipped."""
    spec = load_spec(SWEEPS / f"{figure}.yaml")
    client = get_client(uri)
    done = RunIndex.load(client)
    exp = ensure_experiment(client, spec.figure, uri)
    parent = client.create_run(exp, tags={"fedsweep.kind": "sweep", "fedsweep.figure": figure})
    for trial in expand(spec, "smoke"):
        if done.get(trial.config_hash) is not None:
            continue
        payload = trial_payload(trial, spec, uri, spec.figure, parent.info.run_id)
        cfg = RunConfig.model_validate(payload["config"])
        TrackedRun(cfg, tags=payload["tags"]).execute()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    for figure in RUN_FIGURES:
        run_smoke(uri, figure)
    return uri


@pytest.fixture(scope="module")
def built(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("figures")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = build_figures(store, "smoke", out, BUILT, SWEEPS)
    png_warnings = [w for w in caught if issubclass(w.category, PngExportWarning)]
    return {r.figure_id: r for r in results}, out, png_warnings


def lines(fig):
    """The mean-curve traces (not the ±std bands)."""
    return [t for t in fig.data if t.type == "scatter" and t.fill != "toself"]


# ----------------------------------------------------------------------------- outputs
@pytest.mark.slow
def test_every_figure_writes_offline_html(built):
    results, out, _ = built
    assert set(results) == set(BUILT)
    assert (out / "plotly.min.js").stat().st_size > 1_000_000
    for fid, r in results.items():
        assert r.status == "complete", (fid, r.status, r.error)
        html = (out / f"{fid}.html").read_text()
        assert r.html == out / f"{fid}.html"
        assert r.title in html
        assert 'src="plotly.min.js"' in html
        assert "cdn." not in html.lower() and "https://" not in html
    index = (out / "index.html").read_text()
    assert all(f"{fid}.html" in index for fid in BUILT)
    assert "cdn" not in index.lower() and "<script" not in index


def test_png_export(built):
    results, out, png_warnings = built
    if find_browser() is not None:
        assert not png_warnings, [str(w.message) for w in png_warnings]
        for fid, r in results.items():
            assert r.png == out / f"{fid}.png"
            assert r.png.stat().st_size > 10_000
    else:
        assert len(png_warnings) == 1
        assert all(r.png is None and r.html.is_file() for r in results.values())


def test_png_without_browser_warns_once_and_keeps_html(store, tmp_path, monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-such-chrome"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = build_figures(store, "smoke", tmp_path, ["bherd-fig4e", "bherd-fig4d"], SWEEPS)
    assert len([w for w in caught if issubclass(w.category, PngExportWarning)]) == 1
    assert all(r.html.is_file() and r.png is None for r in results)
    assert not list(tmp_path.glob("*.png"))


# ----------------------------------------------------------------------------- fig 3
def test_fig3_grid_curves_and_legend(built):
    r = built[0]["bherd-fig3a"]
    fig = r.figure
    axes = [k for k in fig.layout.to_plotly_json() if k.startswith("xaxis")]
    assert len(axes) == 6
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [f"({x}) Case {c}" for x, c in zip("abcdef", (1, 2, 3, 1, 2, 3), strict=True)]
    assert fig.layout.yaxis.title.text == "Test loss"
    assert fig.layout.yaxis4.title.text == "Test accuracy"
    assert fig.layout.xaxis4.title.text == "Communication round t"
    curves = lines(fig)
    assert len(curves) == 6 * 6  # 6 spec curves x (2 metrics x 3 cases)
    legend = [t.name for t in curves if t.showlegend]
    assert len(legend) == 6 and all("(n=1)" in name for name in legend)
    assert legend[0].startswith("α=0.1") and legend[-1].startswith("FedAvg (RR)")
    fedavg = next(t for t in curves if t.name.startswith("FedAvg"))
    assert fedavg.line.dash == "dot" and fedavg.line.color == "#7f7f7f"
    assert all(len(t.x) == 3 for t in curves)
    assert r.seeds == [0] and r.runs == r.run_count == r.expected_runs == 18
    assert "smoke profile" in fig.layout.title.subtitle.text


def test_fig3d_flat_centralized_line(built):
    fig = built[0]["bherd-fig3d"].figure
    flat = [t for t in lines(fig) if t.name.startswith("Centralized SGD")]
    assert len(flat) == 6
    for t in flat:
        assert len(set(t.y)) == 1 and list(t.x) == [1, 3]
        assert t.line.color == "#000000"


def test_claim_checks_on_real_runs(built):
    results = built[0]
    r = results["bherd-fig3a"]
    assert [c.claim for c in r.claims] == load_spec(SWEEPS / "bherd-fig3a.yaml").claims
    for fid in ("bherd-fig3a", "bherd-fig3d", "bherd-fig4d", "bherd-fig4e"):
        for c in results[fid].claims:
            assert c.verdict in (*VERDICTS, "yes", "no", "n/a", "n/t") and c.numbers and c.criterion
    # 3 rounds cannot test a convergence claim: "not testable", with the numbers, never "no"
    assert all(c.verdict in ("n/t", "not-testable") for c in r.claims)
    assert all(c.shown == "not testable at this profile (T=3)" for c in r.claims)
    assert "α=1.0 − FedAvg effect" in r.claims[0].numbers and "Case 3" in r.claims[0].numbers


# ----------------------------------------------------------------------------- fig 4
def test_fig4abc_heatmaps_match_npz(store, built):
    fig = built[0]["bherd-fig4abc"].figure
    heatmaps = [t for t in fig.data if t.type == "heatmap"]
    assert len(heatmaps) == 15
    assert [a.text for a in fig.layout.annotations] == [f"Client {i}" for i in range(1, 6)] + [
        "(a) Case 1",
        "(b) Case 2",
        "(c) Case 3",
    ]
    spec = load_spec(SWEEPS / "bherd-fig4abc.yaml")
    client = get_client(store)
    res = resolve_runs(spec, "smoke", RunIndex.load(client))
    labels = {"data.partition=case1": "Case 1", "data.partition=case2": "Case 2"}
    labels["data.partition=case3"] = "Case 3"
    for tr in res.found:
        arrays = load_selected(client, tr.run.run_id)
        assert len(arrays) == 5
        for i, arr in arrays.items():
            name = f"{labels[tr.trial.panel_id]}, Client {i + 1}"
            trace = next(t for t in heatmaps if t.name.startswith(name))
            z = np.asarray(trace.z)
            assert z.shape == arr.shape and arr.shape[0] == 3  # [T, tau_i]
            assert np.array_equal(z.astype(bool), arr) and trace.transpose
            assert list(trace.y) == list(range(1, arr.shape[1] + 1))


def test_fig4d_finds_fig4abc_runs_by_hash(store, built):
    r = built[0]["bherd-fig4d"]
    assert r.runs == r.expected_runs == 3 and r.missing == 0
    client = get_client(store)
    own = client.get_experiment_by_name("bherd-fig4d")
    assert own is None  # nothing ran under fig4d: its runs are fig4abc's
    curves = lines(r.figure)
    assert [t.name for t in curves if t.showlegend] == [f"Client {i} (n=1)" for i in range(1, 6)]
    index = RunIndex.load(client)
    res = resolve_runs(load_spec(SWEEPS / "bherd-fig4d.yaml"), "smoke", index)
    abc = resolve_runs(load_spec(SWEEPS / "bherd-fig4abc.yaml"), "smoke", index)
    assert [tr.run.run_id for tr in res.found] == [tr.run.run_id for tr in abc.found]
    assert all(tr.run.tags["fedsweep.figure"] != "bherd-fig4d" for tr in res.found)
    case3 = next(tr for tr in res.found if tr.trial.panel_id.endswith("case3"))
    # the paper's form ||g_sel/(alpha tau_i) - mu_i|| by default (docs/figures.md)
    key = "client/3/dist_paper"
    history = [m.value for m in client.get_metric_history(case3.run.run_id, key)]
    trace = [t for t in curves if t.name.startswith("Client 4")][2]  # third panel = Case 3
    assert np.allclose(trace.y, history)
    assert "α τ" in r.figure.layout.yaxis.title.text
    assert r.claims[0].verdict == "n/t" and "client 4" in r.claims[0].numbers
    assert "dist_paper" in r.claims[0].numbers


def test_fig4d_divided_by_k_as_an_option(store, tmp_path):
    from dashboards import FigureOptions

    opts = FigureOptions(metrics=("client/{i}/dist",))
    (r,) = build_figures(store, "smoke", tmp_path, ["bherd-fig4d"], SWEEPS, png=False, options=opts)
    client = get_client(store)
    res = resolve_runs(load_spec(SWEEPS / "bherd-fig4d.yaml"), "smoke", RunIndex.load(client))
    case3 = next(tr for tr in res.found if tr.trial.panel_id.endswith("case3"))
    history = [m.value for m in client.get_metric_history(case3.run.run_id, "client/3/dist")]
    trace = [t for t in lines(r.figure) if t.name.startswith("Client 4")][2]
    assert np.allclose(trace.y, history)
    assert "k<sub>i</sub>" in r.figure.layout.yaxis.title.text


def test_fig4e_solid_rr_dashed_no_rr(built):
    fig = built[0]["bherd-fig4e"].figure
    curves = lines(fig)
    assert len(curves) == 12  # 6 curves x 2 metrics
    for t in curves:
        assert t.line.dash == ("dash" if "no RR" in t.name else "solid")
    assert [a.text for a in fig.layout.annotations] == ["(a) Test loss", "(b) Test accuracy"]


# ----------------------------------------------------------------------------- missing runs
@pytest.mark.slow
def test_figures_cli_writes_index(store, tmp_path):
    from typer.testing import CliRunner

    from fedsweep.cli.main import app

    out = tmp_path / "cli_figs"
    res = CliRunner().invoke(
        app,
        [
            "figures",
            "--figure",
            "bherd-fig4abc",
            "--profile",
            "smoke",
            "--tracking-uri",
            store,
            "--out",
            str(out),
            "--sweeps-dir",
            str(SWEEPS),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "bherd-fig4abc: 3 runs" in res.output
    assert (out / "index.html").is_file() and (out / "bherd-fig4abc.html").is_file()


def test_figure_without_runs_is_listed(store, tmp_path):
    # the store holds smoke runs only: nothing of fig3b's quick profile (nor its fallback)
    results = build_figures(store, "quick", tmp_path / "out", ["bherd-fig3b"], SWEEPS, png=False)
    r = results[0]
    assert r.status == "no runs" and r.figure is None and r.html is None
    assert r.runs == 0 and r.expected_runs == 45
    assert all(c.verdict == "n/a" for c in r.claims)
    index = (tmp_path / "out" / "index.html").read_text()
    assert "bherd-fig3b" in index and "no runs" in index


def test_missing_store_is_not_created(tmp_path):
    uri = f"sqlite:///{tmp_path / 'absent.db'}"
    with pytest.warns(UserWarning, match="no MLflow store"):
        results = build_figures(uri, "smoke", tmp_path / "out", ["bherd-fig4d"], SWEEPS)
    assert results[0].status == "no runs" and not (tmp_path / "absent.db").exists()


def test_fallback_dataset_runs_are_found_and_stated(tmp_path):
    """Runs that exist only under the profile's data_fallback are used and the figure says so.
    Hand-logged quick-profile runs (3 seeds, 5 rounds); one seed of one curve diverged."""
    uri = f"sqlite:///{tmp_path / 'fb.db'}"
    spec = load_spec(SWEEPS / "bherd-fig4e.yaml")
    client = get_client(uri)
    exp = ensure_experiment(client, spec.figure, uri)
    primary = expand(spec, "quick")
    fallback = expand(spec, "quick", extra={"data.dataset": "mnist-5k"})
    rng = np.random.default_rng(0)
    from mlflow.entities import Metric

    for trial in fallback:
        diverged = trial.curve == "Case 2, RR" and trial.seed == 1
        tags = {"fedsweep.config_hash": trial.config_hash, "fedsweep.figure": spec.figure}
        tags["fedsweep.status"] = "diverged" if diverged else "finished"
        run = client.create_run(exp, tags=tags).info.run_id
        rounds = 3 if diverged else 5
        metrics = []
        for t in range(1, rounds + 1):
            loss = float("nan") if diverged and t == 3 else 0.5 - 0.02 * t + rng.normal(0, 0.01)
            acc = 0.6 + 0.05 * t + rng.normal(0, 0.01)
            metrics += [Metric("test_loss", loss, 0, t), Metric("test_acc", acc, 0, t)]
        client.log_batch(run, metrics=metrics)
    assert {t.config_hash for t in primary}.isdisjoint(t.config_hash for t in fallback)

    results = build_figures(uri, "quick", tmp_path / "out", ["bherd-fig4e"], SWEEPS, png=False)
    r = results[0]
    assert r.runs == 18 and r.missing == 0 and r.seed_count == "3"
    assert r.data_note == "ran on mnist-5k (full MNIST unavailable)"
    assert r.data_note in r.figure.layout.title.subtitle.text
    assert r.data_note in (tmp_path / "out" / "index.html").read_text()
    names = [t.name for t in lines(r.figure) if t.showlegend]
    assert "Case 1, RR (n=3)" in names
    assert "Case 2, RR (n=3) — diverged at round 3" in names
    bands = [t for t in r.figure.data if t.fill == "toself"]
    assert len(bands) == 12 and bands[0].fillcolor.endswith(",0.2)")
    short = [t for t in lines(r.figure) if t.name.startswith("Case 2, RR")][0]
    assert list(short.x) == [1, 2, 3, 4, 5]  # the other seeds continue after round 3
    assert any("diverged at round 3" in n for n in r.notes)


def test_every_bherd_spec_has_a_builder():
    specs = {load_spec(p).figure for p in SWEEPS.glob("bherd-*.yaml")}
    assert specs <= set(BUILDERS)


# ----------------------------------------------------------------------------- claim criteria
CASES = [
    Panel(f"data.partition=case{i}", f"Case {i}", {"data.partition": f"case{i}"}) for i in (1, 2, 3)
]


def make(curves: list[CurveSpec], values: dict, panels=CASES, diverged=None) -> C.ClaimData:
    """ClaimData from {(panel index, curve label, metric): [mean per round]}; same for all
    panels when the panel index is None."""
    cells = {}
    for (pi, label, metric), ys in sorted(values.items(), key=lambda kv: kv[0][0] is not None):
        for p in panels if pi is None else [panels[pi]]:
            cells[(p.panel_id, label, metric)] = ys  # a panel's own values override None's
    rows = [(*key, t, y, 0.0, 1) for key, ys in cells.items() for t, y in enumerate(ys, start=1)]
    agg = pd.DataFrame(rows, columns=["panel_id", "curve", "metric", "round", "mean", "std", "n"])
    return C.ClaimData(agg, curves, panels, diverged or {})


def curve(label: str, **kv) -> CurveSpec:
    return CurveSpec(label=label, set={k.replace("__", "."): v for k, v in kv.items()})


ALPHAS = [curve(f"α={a}", bherd__alpha=a) for a in (0.1, 0.3, 0.5, 0.7, 1.0)]
FEDAVG = curve("FedAvg (RR)", selector="none", train__order="rr")


def seeds_data(curves, finals: dict[str, list[float]], panels=CASES) -> C.ClaimData:
    """Per-seed runs: curve -> the final test accuracy of each seed (rounds 1..10, accuracy
    0.5 until the last round), every panel the same."""
    long = [
        (
            p.panel_id,
            label,
            seed,
            f"run-{p.panel_id}-{label}-{seed}",
            t,
            "test_acc",
            a if t == 10 else 0.5,
        )
        for p in panels
        for label, accs in finals.items()
        for seed, a in enumerate(accs)
        for t in range(1, 11)
    ]
    cols = ["panel_id", "curve", "seed", "run_id", "round", "metric", "value"]
    long = pd.DataFrame(long, columns=cols)
    return C.ClaimData(aggregate(long), curves, panels, long=long)


def test_alpha_matches_fedavg_criterion():
    fa = [0.80, 0.81, 0.79, 0.80, 0.805]
    same = [a + d for a, d in zip(fa, [0.001, -0.002, 0.0, 0.002, -0.001], strict=True)]
    low = [a - 0.2 for a in fa]  # α=0.1 far below FedAvg: α matters in this figure
    finals = {"FedAvg (RR)": fa, "α=1.0": same, "α=0.1": low}
    verdict, numbers = B.alpha_matches_fedavg(seeds_data(ALPHAS + [FEDAVG], finals))
    assert verdict == "supported", numbers
    assert numbers.count("(95% CI, 5 seeds) → supported") == 3 and "α matters: α=0.1" in numbers
    # every α equals FedAvg: matching it shows nothing about α
    flat = {"FedAvg (RR)": fa, "α=1.0": same, "α=0.1": same}
    verdict, numbers = B.alpha_matches_fedavg(seeds_data(ALPHAS + [FEDAVG], flat))
    assert verdict == "inconclusive" and "shows nothing about α" in numbers
    # α=1.0 clearly 0.05 above FedAvg: contradicted
    off = {**finals, "α=1.0": [a + 0.05 for a in same]}
    assert B.alpha_matches_fedavg(seeds_data(ALPHAS + [FEDAVG], off))[0] == "contradicted"
    # two noisy seeds cannot decide
    two = {"FedAvg (RR)": [0.8, 0.8], "α=1.0": [0.79, 0.815], "α=0.1": [0.6, 0.6]}
    assert B.alpha_matches_fedavg(seeds_data(ALPHAS + [FEDAVG], two))[0] == "inconclusive"
    assert B.alpha_matches_fedavg(seeds_data(ALPHAS, finals))[0] == "n/a"  # no FedAvg curve
    assert B.alpha_matches_fedavg(make(ALPHAS + [FEDAVG], {}))[0] == "n/a"


def test_alpha_fastest_criterion():
    loss = {(None, f"α={a}", "test_loss"): [0.6, 0.5 + a / 10] for a in (0.1, 0.3, 0.5, 0.7, 1.0)}
    loss[(None, "α=0.3", "test_loss")] = [0.5, 0.4]
    loss[(None, "α=0.1", "test_loss")] = [0.5, 0.3]
    assert B.alpha_fastest(make(ALPHAS, loss))[0] == "no"  # α=0.1 is fastest
    div = {(p.panel_id, "α=0.1"): [(0, 2)] for p in CASES}
    verdict, numbers = B.alpha_fastest(make(ALPHAS, loss, diverged=div))
    assert verdict == "yes" and "fastest α=0.3" in numbers


def test_alpha_fails_criterion():
    good = {
        (None, c.label, m): [0.5, 0.3] if m == "test_loss" else [0.6, 0.9]
        for c in ALPHAS
        for m in ("test_loss", "test_acc")
    }
    assert B.alpha_fails(make(ALPHAS, good))[0] == "no"
    low = {**good, (None, "α=0.1", "test_acc"): [0.6, 0.84]}
    assert B.alpha_fails(make(ALPHAS, low))[0] == "yes"  # ≥ 0.05 below the best
    rising = {**good, (None, "α=0.1", "test_loss"): [0.5, 0.55]}
    assert B.alpha_fails(make(ALPHAS, rising))[0] == "yes"
    div = {(p.panel_id, "α=0.1"): [(0, 7)] for p in CASES}
    verdict, numbers = B.alpha_fails(make(ALPHAS, good, diverged=div))
    assert verdict == "yes" and "diverged at round 7" in numbers


E_CURVES = [curve(f"E={e}", train__local_epochs=e) for e in (0.1, 0.5, 1.0, 1.5, 2.0)]


def test_larger_e_and_oscillation_criteria():
    smooth = {
        (None, f"E={e}", "test_loss"): [0.6, 0.5 - e / 10, 0.4 - e / 10]
        for e in (0.1, 0.5, 1.0, 1.5, 2.0)
    }
    assert B.larger_e_faster(make(E_CURVES, smooth))[0] == "yes"
    swapped = {**smooth, (1, "E=0.5", "test_loss"): [0.1, 0.1, 0.1]}
    assert B.larger_e_faster(make(E_CURVES, swapped))[0] == "no"
    assert B.e2_oscillates(make(E_CURVES, smooth))[0] == "no"
    zigzag = {**smooth, (None, "E=2.0", "test_loss"): [0.5, 0.3, 0.35, 0.25, 0.3]}
    verdict, numbers = B.e2_oscillates(make(E_CURVES, zigzag))
    assert verdict == "yes" and "E=2: 2, E=1: 0" in numbers


def test_best_batch_criterion():
    bs = [curve(f"B={b}", train__batch_size=b) for b in (10, 50, 100, 500, 1000)]
    final = {(None, f"B={b}", "test_loss"): [1.0, 0.3 + b / 1e4] for b in (10, 50, 100, 500, 1000)}
    final[(2, "B=50", "test_loss")] = [1.0, 0.2]
    verdict, numbers = B.best_batch(make(bs, final))
    assert verdict == "yes" and "Case 3: best B=50 (paper 50)" in numbers
    final[(0, "B=100", "test_loss")] = [1.0, 0.1]
    assert B.best_batch(make(bs, final))[0] == "no"


def test_number_of_clients_criteria():
    ns = [curve(f"N={n}", data__num_clients=n) for n in (1, 5, 10, 15, 20)]
    cen = CurveSpec(label="Centralized SGD", set={"algorithm": "centralized"}, flat=True)
    v = {(None, f"N={n}", "test_loss"): [0.6, 0.3 + n / 100] for n in (1, 5, 10, 15, 20)}
    v |= {(None, f"N={n}", "test_acc"): [0.6, 0.9 - n / 100] for n in (1, 5, 10, 15, 20)}
    v |= {(None, "Centralized SGD", "test_acc"): [0.6, 0.885]}
    assert B.n1_centralized(make(ns + [cen], v))[0] == "yes"
    assert B.n5_best(make(ns + [cen], v))[0] == "yes"
    worse = {**v, (None, "Centralized SGD", "test_acc"): [0.6, 0.95]}
    assert B.n1_centralized(make(ns + [cen], worse))[0] == "no"
    v[(1, "N=10", "test_loss")] = [0.6, 0.2]
    assert B.n5_best(make(ns + [cen], v))[0] == "no"


def test_case3_distance_criterion():
    far = {(2, f"Client {i}", "dist"): [0.1 * i, 0.1 * i] for i in range(1, 6)}
    near = {**far, (2, "Client 5", "dist"): [0.05, 0.05]}
    assert B.case3_far_clients(make([], far))[0] == "yes"
    assert B.case3_far_clients(make([], near))[0] == "no"
    assert B.case3_far_clients(make([], {}))[0] == "n/a"


def test_rr_criterion_and_unknown_claims():
    cs = [
        curve(f"Case {i}, {o}", data__partition=f"case{i}", train__order=k)
        for i in (1, 2, 3)
        for o, k in (("RR", "rr"), ("no RR", "fixed"))
    ]
    panel = [Panel("all", "", {})]
    v = {(0, c.label, "test_acc"): [0.5, 0.9] for c in cs}
    verdict, numbers = B.rr_little_difference(make(cs, v, panel))
    assert verdict == "yes" and numbers.startswith("Case 1:")
    v[(0, "Case 2, no RR", "test_acc")] = [0.5, 0.85]
    assert B.rr_little_difference(make(cs, v, panel))[0] == "no"
    long = {k: [0.5] * 9 + ys[-1:] for k, ys in v.items()}  # T = 10: testable
    checks = R.check_claims(["RR vs no RR differ little", "something new"], make(cs, long, panel))
    assert [c.verdict for c in checks] == ["no", "n/a"]
    (short,) = R.check_claims(["RR vs no RR differ little"], make(cs, v, panel))  # T = 2
    assert short.verdict == "n/t" and short.shown == "not testable at this profile (T=2)"
    assert R.check_claims(["RR vs no RR differ little"], None)[0].verdict == "n/a"


# ------------------------------------------------------------- diverged runs are no evidence
RR_CURVES = [
    curve(f"Case {i}, {o}", data__partition=f"case{i}", train__order=k)
    for i in (1, 2)
    for o, k in (("RR", "rr"), ("no RR", "fixed"))
]
ALL = [Panel("all", "", {})]


def _rr_data(rounds: int = 12, **kw) -> C.ClaimData:
    v = {(0, c.label, "test_acc"): [0.5] * (rounds - 1) + [0.9] for c in RR_CURVES}
    data = make(RR_CURVES, v, ALL)
    for key, value in kw.items():
        setattr(data, key, value)
    return data


def test_claim_with_a_diverged_run_is_not_testable():
    runs = {("all", c.label): 3 for c in RR_CURVES}  # 3 seeds per curve, 12 runs read
    (ok,) = R.check_claims(["RR vs no RR differ little"], _rr_data(runs=runs))
    assert ok.verdict == "yes" and ok.shown == "yes"
    div = {("all", "Case 2, no RR"): [(1, 4)]}
    (check,) = R.check_claims(["RR vs no RR differ little"], _rr_data(runs=runs, diverged=div))
    assert check.verdict == "n/t" and check.shown == "not testable: 1 of 12 runs diverged"
    assert "Case 1: acc RR 0.9000" in check.numbers  # the numbers are still shown
    assert "diverged" in check.criterion
    # a finite loss blow-up counts the same; a seed both diverged and blown up counts once
    blow = {("all", "Case 1, RR"): [(0, "test_loss 3.2e+06 at round 12 > 1000 x round 1")]}
    both = {**blow, ("all", "Case 2, no RR"): [(1, "x")]}
    (check,) = R.check_claims(
        ["RR vs no RR differ little"], _rr_data(runs=runs, diverged=div, blowups=both)
    )
    assert check.shown == "not testable: 2 of 12 runs diverged (1 of them a finite loss blow-up)"
    # without run counts: the largest seed count n of each cell read (1 in make)
    (check,) = R.check_claims(["RR vs no RR differ little"], _rr_data(diverged=div))
    assert check.shown == "not testable: 1 of 4 runs diverged"


def test_diverged_reason_takes_precedence_over_a_short_profile():
    div = {("all", c.label): [(0, 1)] for c in RR_CURVES}
    (check,) = R.check_claims(["RR vs no RR differ little"], _rr_data(rounds=3, diverged=div))
    assert check.verdict == "n/t"
    assert check.shown == "not testable: 4 of 4 runs diverged; T=3 < 5 rounds"


def test_only_the_cells_a_claim_reads_count():
    # α=0.3 diverged in Case 3: α=1.0 vs FedAvg does not read it; "fastest α" does
    accs = {(None, c.label, "test_acc"): [0.5] * 11 + [0.8] for c in ALPHAS + [FEDAVG]}
    loss = {(None, c.label, "test_loss"): [0.6] * 11 + [0.5] for c in ALPHAS + [FEDAVG]}
    data = make(ALPHAS + [FEDAVG], {**accs, **loss})
    data.diverged = {(CASES[2].panel_id, "α=0.3"): [(0, 5)]}
    claims = ["alpha=1.0 matches FedAvg", "alpha 0.3-0.5 is fastest", "alpha=0.1 fails"]
    match, fastest, _ = R.check_claims(claims, data)
    assert match.verdict == "n/a"  # no per-seed histories in this table; above all: not n/t
    assert fastest.verdict == "n/t" and fastest.shown == "not testable: 1 of 15 runs diverged"
    # α=0.1 failing to converge: its own divergence (or blow-up) is the claim's evidence
    data.diverged = {(p.panel_id, "α=0.1"): [(0, 7)] for p in CASES}
    (fails,) = R.check_claims(["alpha=0.1 fails to converge"], data)
    assert fails.verdict == "yes" and "seed 0 diverged at round 7" in fails.numbers
    data.diverged = {}
    data.blowups = {(p.panel_id, "α=0.1"): [(0, "test_loss 5e+04 ...")] for p in CASES}
    (fails,) = R.check_claims(["alpha=0.1 fails to converge"], data)
    assert fails.verdict == "yes" and "seed 0 loss blew up" in fails.numbers
