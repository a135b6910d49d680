"""Figure dashboards: a real MLflow sqlite store of smoke runs (no Ray, no mocks) -> figures.

The module-scoped store holds the smoke runs of bherd-fig3a, fig3d, fig4abc and fig4e (45 runs
of 3 rounds); fig4d has no runs of its own and must find fig4abc's by config hash. A second
store holds hand-logged runs of fig4e's quick profile under the fallback data set only.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboards import BUILDERS, build_figures
from dashboards.export import PngExportWarning, find_browser
from dashboards.store import load_selected
from fedsweep.config.schema import RunConfig
from fedsweep.judge import runs as JR
from fedsweep.judge import verdicts as JV
from fedsweep.judge.claim import judge_claim
from fedsweep.judge.panels import Panel
from fedsweep.judge.runs import aggregate
from fedsweep.judge.stats import VERDICTS
from fedsweep.judge.store import RunIndex, resolve_runs
from fedsweep.specs.claims import Claim
from fedsweep.specs.load import CurveSpec, expand, load_spec
from fedsweep.sweep.ray_backend import trial_payload
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.store import ensure_experiment
from fedsweep.tracking.tracked_run import TrackedRun
from tests.helpers import log_config, typed_configs

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
RUN_FIGURES = ["bherd-fig3a", "bherd-fig3d", "bherd-fig4abc", "bherd-fig4e"]
BUILT = ["bherd-fig3a", "bherd-fig3d", "bherd-fig4abc", "bherd-fig4d", "bherd-fig4e"]
#: BHerd's declared claims (sweeps/bherd-*.yaml) by id
DECLARED: dict[str, Claim] = {
    c.id: c for path in sorted(SWEEPS.glob("bherd-*.yaml")) for c in load_spec(path).claims
}


def judge(claim_id: str, data: JR.ClaimData) -> tuple[str, str]:
    """(verdict, numbers) of BHerd's declared claim ``claim_id`` on ``data`` (the judge's,
    before the not-testable rules)."""
    data.evidence = []
    data.used.clear()
    return judge_claim(DECLARED[claim_id], data)


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


@pytest.mark.parametrize("writes", [True, False])
def test_what_the_browser_libraries_log_stays_off_the_terminal(
    writes, tmp_path, monkeypatch, caplog
):
    """choreographer 1.4 logs, with a traceback, a message it cannot decode and then ignores
    (its own ``{bye}`` while the browser closes): the images are written, so nothing reaches
    the root logger's handlers (the terminal, or a test's "no Traceback in stderr") and nothing
    is warned. When an image is missing, the warning names the record, without a traceback."""
    import json
    import logging

    import kaleido
    import plotly.graph_objects as go

    from dashboards.export import PngJob, write_pngs

    def fake(specs, **kw):
        try:
            try:
                json.loads("{bye}")
            except json.JSONDecodeError as err:
                raise RuntimeError("cannot decode") from err
        except RuntimeError:
            logging.getLogger("choreographer.channels.pipe").exception(
                "JSONError decoding message. Ignoring"
            )
        logging.getLogger("kaleido.kaleido").warning("a kaleido warning")
        for spec in specs if writes else ():
            Path(spec["path"]).write_bytes(b"\x89PNG image")
        return []

    monkeypatch.setenv("BROWSER_PATH", sys.executable)
    monkeypatch.setattr(kaleido, "write_fig_from_object_sync", fake)
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "f.png"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = write_pngs([PngJob(go.Figure(), path)])
    assert done == {path: writes} and path.is_file() == writes
    assert not [r for r in caplog.records if r.name.startswith(("choreographer", "kaleido"))]
    said = [str(w.message) for w in caught if issubclass(w.category, PngExportWarning)]
    if writes:
        assert said == []
    else:
        (message,) = said
        assert "f.png" in message and "Traceback" not in message, message
        assert "choreographer.channels.pipe: JSONError decoding message. Ignoring" in message
        assert "RuntimeError: Expecting property name" in message, message
        assert "kaleido.kaleido: a kaleido warning" in message
    assert (
        logging.getLogger("choreographer").propagate
        and not logging.getLogger("choreographer").handlers
    )


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
    assert [c.claim for c in r.claims] == load_spec(SWEEPS / "bherd-fig3a.yaml").claim_texts
    for fid in ("bherd-fig3a", "bherd-fig3d", "bherd-fig4d", "bherd-fig4e"):
        for c in results[fid].claims:
            assert c.verdict in (*VERDICTS, "n/a") and c.numbers and c.criterion
    # 3 rounds cannot test a convergence claim: "not testable", with the numbers
    assert all(c.verdict == "not-testable" for c in r.claims)
    # ... nor the smoke profile's regime by the rule (fedsweep/specs/regimes.py): its data
    regime = (
        "not testable at this profile: scaled regime (scaled: data.dataset=mnist-5k (paper "
        "profile mnist); T=3 of the paper profile's 500 rounds); "
    )
    assert all(c.shown == regime + "not testable at this profile (T=3)" for c in r.claims)
    assert "α=1.0 − FedAvg (RR) effect" in r.claims[0].numbers and "Case 3" in r.claims[0].numbers


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
    assert r.claims[0].verdict == "not-testable" and "clients 4, 5" in r.claims[0].numbers
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
        assert t.line.dash == ("dash" if "no RR" in t.legendgroup else "solid")
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
        log_config(client, run, trial.config)
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
#: per-seed factors every curve shares (runs pair by seed: the same partition and initial model)
SHARED = (0.0, 1.0, -1.0, 2.0, -2.0)
#: per-seed noise of one curve (rotated by the curve's index ``k``: independent of the others)
OWN = (0.5, -1.0, 1.0, -0.5, 0.0)


def curve(label: str, **kv) -> CurveSpec:
    return CurveSpec(label=label, set={k.replace("__", "."): v for k, v in kv.items()})


def runs(curves, histories: dict, panels=CASES, **fields) -> JR.ClaimData:
    """ClaimData of per-seed runs from {(panel index, or None for every panel; curve label;
    metric): [the history of each seed, rounds 1, 2, ...]} (a panel's own entry overrides
    None's); ``fields`` set ClaimData fields (diverged, blowups, runs, base)."""
    cells = {}
    for (pi, label, metric), hs in sorted(histories.items(), key=lambda kv: kv[0][0] is not None):
        for p in panels if pi is None else [panels[pi]]:
            cells[(p.panel_id, label, metric)] = hs
    rows = [
        (pid, label, seed, f"run-{pid}-{label}-{seed}", t, metric, y)
        for (pid, label, metric), hs in cells.items()
        for seed, ys in enumerate(hs)
        for t, y in enumerate(ys, start=1)
    ]
    cols = ["panel_id", "curve", "seed", "run_id", "round", "metric", "value"]
    long = pd.DataFrame(rows, columns=cols)
    data = JR.ClaimData(aggregate(long), curves, panels, long=long)
    if "base" in fields:  # the config tree the curves' overrides apply to
        fields["configs"] = typed_configs(curves, fields.pop("base"))
    for key, value in fields.items():
        setattr(data, key, value)
    return data


def decay(level: float, seeds: int = 5, noise: float = 0.01, k: int = 0, rounds: int = 10):
    """Per-seed test-loss histories ``level (1 + 1/t)`` (the per-run loss AUC is proportional
    to ``level``), scaled per seed by ``1 + 0.01 SHARED[s]`` (every curve alike: paired) and
    ``1 + noise OWN[s + k]`` (this curve's own noise)."""
    return [
        [
            level * (1 + 1 / t) * (1 + 0.01 * SHARED[s]) * (1 + noise * OWN[(s + k) % 5])
            for t in range(1, rounds + 1)
        ]
        for s in range(seeds)
    ]


def final(values, rounds: int = 10, start: float = 0.5) -> list[list[float]]:
    """Per-seed histories at ``start`` until the last round, which has the seed's value."""
    return [[start] * (rounds - 1) + [v] for v in values]


def acc(level: float, seeds: int = 5, noise: float = 0.002, k: int = 0, rounds: int = 10):
    """Per-seed final test accuracies ``level + 0.005 SHARED[s] + noise OWN[s + k]``."""
    return final(
        [level + 0.005 * SHARED[s] + noise * OWN[(s + k) % 5] for s in range(seeds)], rounds
    )


ALPHAS = [curve(f"α={a}", bherd__alpha=a) for a in (0.1, 0.3, 0.5, 0.7, 1.0)]
FEDAVG = curve("FedAvg (RR)", selector="none", train__order="rr")


def seeds_data(curves, finals: dict[str, list[float]], panels=CASES) -> JR.ClaimData:
    """Per-seed runs: curve -> the final test accuracy of each seed (rounds 1..10, accuracy
    0.5 until the last round), every panel the same."""
    return runs(
        curves, {(None, label, "test_acc"): final(v) for label, v in finals.items()}, panels
    )


def test_alpha_matches_fedavg_criterion():
    fa = [0.80, 0.81, 0.79, 0.80, 0.805]
    same = [a + d for a, d in zip(fa, [0.001, -0.002, 0.0, 0.002, -0.001], strict=True)]
    low = [a - 0.2 for a in fa]  # α=0.1 far below FedAvg: α matters in this figure
    finals = {"FedAvg (RR)": fa, "α=1.0": same, "α=0.1": low}
    verdict, numbers = judge("alpha1-matches-fedavg", seeds_data(ALPHAS + [FEDAVG], finals))
    assert verdict == "supported", numbers
    assert (
        numbers.count("(95% CI, 5 seeds) → supported") == 3
        and "bherd.alpha matters: α=0.1" in numbers
    )
    # every α equals FedAvg: matching it shows nothing about α
    flat = {"FedAvg (RR)": fa, "α=1.0": same, "α=0.1": same}
    verdict, numbers = judge("alpha1-matches-fedavg", seeds_data(ALPHAS + [FEDAVG], flat))
    assert verdict == "inconclusive" and "shows nothing about bherd.alpha" in numbers
    # α=1.0 clearly 0.05 above FedAvg: contradicted
    off = {**finals, "α=1.0": [a + 0.05 for a in same]}
    assert judge("alpha1-matches-fedavg", seeds_data(ALPHAS + [FEDAVG], off))[0] == "contradicted"
    # two noisy seeds cannot decide
    two = {"FedAvg (RR)": [0.8, 0.8], "α=1.0": [0.79, 0.815], "α=0.1": [0.6, 0.6]}
    assert judge("alpha1-matches-fedavg", seeds_data(ALPHAS + [FEDAVG], two))[0] == "inconclusive"
    assert judge("alpha1-matches-fedavg", seeds_data(ALPHAS, finals))[0] == "n/a"  # no FedAvg curve
    assert judge("alpha1-matches-fedavg", runs(ALPHAS + [FEDAVG], {}))[0] == "n/a"


# ------------------------------------------------------------------------------ fig 2b
FIG2B = [
    curve("FedNova", algorithm="fednova", selector="none"),
    curve("SCAFFOLD", algorithm="scaffold", selector="none"),
    curve("BHerd-FedNova", algorithm="fednova", selector="bherd"),
    curve("BHerd-SCAFFOLD", algorithm="scaffold", selector="bherd"),
]


def fig2b_panels(cnn_regime=None) -> list[Panel]:
    return [
        Panel(
            f"{m}-case{c}",
            f"{m.upper()} · Case {c}",
            {"model.name": m, "data.partition": f"case{c}"},
            cnn_regime if m == "cnn" else None,
        )
        for m in ("svm", "cnn")
        for c in (1, 2)
    ]


def fig2b_data(svm: dict, cnn: dict, seeds: int = 5, panels=None) -> JR.ClaimData:
    """``svm``/``cnn``: curve -> loss level of every panel of that model (per seed: the loss
    levels of each seed when a list)."""
    panels = panels or fig2b_panels()
    out = {}
    for i, p in enumerate(panels):
        table = svm if p.values["model.name"] == "svm" else cnn
        for k, (label, level) in enumerate(table.items()):
            hs = (
                [decay(x, 1, k=k + s)[0] for s, x in enumerate(level)]
                if isinstance(level, list)
                else decay(level, seeds, k=k)
            )
            out[(i, label, "test_loss")] = hs
    return runs(FIG2B, out, panels)


#: BHerd's loss-AUC gain: FedNova 40% on the SVM, 5% on the CNN; SCAFFOLD the other way round
SVM_GAINS = {"FedNova": 1.0, "BHerd-FedNova": 0.6, "SCAFFOLD": 1.0, "BHerd-SCAFFOLD": 0.95}
CNN_GAINS = {"FedNova": 1.0, "BHerd-FedNova": 0.95, "SCAFFOLD": 1.0, "BHerd-SCAFFOLD": 0.6}


def test_bherd_gain_by_model_criterion():
    verdict, numbers = judge("bherd-gain-by-model", fig2b_data(SVM_GAINS, CNN_GAINS))
    assert verdict == "supported", numbers
    assert (
        "FedNova: model.name=svm − model.name=cnn effect 0.35 [" in numbers
        and "SCAFFOLD: model.name=cnn − model.name=svm effect 0.35 [" in numbers
    )
    assert judge("bherd-gain-by-model", fig2b_data(CNN_GAINS, SVM_GAINS))[0] == "contradicted"
    # FedNova's gains 10% (SVM) and 7% (CNN): 3 points apart, below the 5% of every "faster"
    small = {**SVM_GAINS, "BHerd-FedNova": 0.90}
    close = {**CNN_GAINS, "BHerd-FedNova": 0.93}
    verdict, numbers = judge("bherd-gain-by-model", fig2b_data(small, close))
    assert verdict == "contradicted", numbers
    assert "model.name=svm − model.name=cnn effect 0.03 [" in numbers
    assert "model.name=cnn − model.name=svm effect 0.35 [" in numbers
    # two seeds that disagree: seed 0 as the paper says, seed 1 the other way round
    two = {k: [SVM_GAINS[k], CNN_GAINS[k]] for k in SVM_GAINS}
    owt = {k: [CNN_GAINS[k], SVM_GAINS[k]] for k in SVM_GAINS}
    verdict, numbers = judge("bherd-gain-by-model", fig2b_data(two, owt))
    assert verdict == "inconclusive" and "(95% CI, 2 seeds)" in numbers
    only_svm = [p for p in fig2b_panels() if p.values["model.name"] == "svm"]
    assert (
        judge("bherd-gain-by-model", fig2b_data(SVM_GAINS, CNN_GAINS, panels=only_svm))[0] == "n/a"
    )
    # the CNN panels are there but have no runs (a sweep run with --panel setting=svm-mnist)
    verdict, numbers = judge("bherd-gain-by-model", fig2b_data(SVM_GAINS, {}))
    assert verdict == "n/a"
    assert numbers == (
        "FedNova: no panel of one side has runs of both curves; "
        "SCAFFOLD: no panel of one side has runs of both curves"
    )


def test_gain_by_model_is_judged_once_and_not_on_a_scaled_regime():
    from fedsweep.specs.model import Regime

    assert DECLARED["bherd-gain-by-model"].across_regimes
    claim = DECLARED["bherd-gain-by-model"]
    paper, scaled = Regime(kind="paper"), Regime(kind="scaled", reason="η 100× the paper's")
    panels = [
        dataclasses.replace(p, regime=scaled if p.values["model.name"] == "cnn" else paper)
        for p in fig2b_panels()
    ]
    checks = JV.judge_claims([claim], fig2b_data(SVM_GAINS, CNN_GAINS, panels=panels))
    assert len(checks) == 1  # one check over both regimes, not one per regime
    (check,) = checks
    assert check.verdict == "not-testable" and "scaled regime" in check.shown
    assert "model.name=svm − model.name=cnn effect" in check.numbers  # the numbers are still shown
    all_paper = [dataclasses.replace(p, regime=paper) for p in panels]
    (check,) = JV.judge_claims([claim], fig2b_data(SVM_GAINS, CNN_GAINS, panels=all_paper))
    assert check.verdict == "supported"


# ------------------------------------------------------------------------------ fig 3a
def alpha_loss(levels: dict[float, float], seeds: int = 5) -> dict:
    return {
        (None, f"α={a}", "test_loss"): decay(level, seeds, k=i)
        for i, (a, level) in enumerate(levels.items())
    }


ALPHA_LEVELS = {0.1: 1.0, 0.3: 0.8, 0.5: 0.85, 0.7: 0.95, 1.0: 1.0}


def test_alpha_fastest_criterion():
    verdict, numbers = judge("alpha03-05-fastest", runs(ALPHAS, alpha_loss(ALPHA_LEVELS)))
    assert verdict == "supported", numbers
    assert (
        numbers.count("→ supported") == 3
        and "loss_auc α=0.3 1.034, α=0.5 1.099, α=0.1 1.29" in numbers
    )
    # α=0.1 fastest in Case 2
    fast01 = {**alpha_loss(ALPHA_LEVELS), (1, "α=0.1", "test_loss"): decay(0.7)}
    assert judge("alpha03-05-fastest", runs(ALPHAS, fast01))[0] == "contradicted"
    # two seeds: α=0.3 first on seed 0, α=0.7 first on seed 1
    two = alpha_loss({0.1: 1.0, 0.3: 0.8, 0.5: 1.0, 0.7: 0.9, 1.0: 1.0}, seeds=2)
    two[(None, "α=0.3", "test_loss")] = [decay(0.8, 1)[0], decay(0.95, 1)[0]]
    verdict, numbers = judge("alpha03-05-fastest", runs(ALPHAS, two))
    assert verdict == "inconclusive" and "(95% CI, 2 seeds)" in numbers
    no_claimed = [c for c in ALPHAS if c.label not in ("α=0.3", "α=0.5")]
    assert judge("alpha03-05-fastest", runs(no_claimed, alpha_loss(ALPHA_LEVELS)))[0] == "n/a"


def test_a_diverged_rival_alpha_ranks_last_and_keeps_the_claim_testable():
    """The paper expects α=0.1 to fail: its diverged seeds rank last, they do not make "α
    0.3–0.5 is fastest" untestable; a diverged α=0.3 seed still does."""
    div = {(p.panel_id, "α=0.1"): [(0, 4), (3, 6)] for p in CASES}
    (check,) = JV.judge_claims(
        [DECLARED["alpha03-05-fastest"]], runs(ALPHAS, alpha_loss(ALPHA_LEVELS), diverged=div)
    )
    assert check.verdict == "supported", check.numbers
    div = {(CASES[0].panel_id, "α=0.3"): [(1, 4)]}
    (check,) = JV.judge_claims(
        [DECLARED["alpha03-05-fastest"]], runs(ALPHAS, alpha_loss(ALPHA_LEVELS), diverged=div)
    )
    assert check.verdict == "not-testable" and "1 of" in check.shown


def fails_data(a01: list[list[float]], seeds: int = 5, **fields) -> JR.ClaimData:
    """The other curves end at accuracy 0.85 (paired by seed); α=0.1 at ``a01``."""
    others = [c for c in ALPHAS + [FEDAVG] if c.label != "α=0.1"]
    hs = {(None, c.label, "test_acc"): acc(0.85, seeds, k=k) for k, c in enumerate(others)}
    return runs(ALPHAS + [FEDAVG], {**hs, (None, "α=0.1", "test_acc"): a01}, **fields)


def test_alpha_fails_criterion():
    verdict, numbers = judge("alpha01-fails", fails_data(acc(0.70, k=4)))  # 0.15 below the best
    assert verdict == "supported", numbers
    assert "FedAvg (RR) 0.85, α=0.1 0.7; effect 0.15" in numbers
    # 0.005 below the best: well within the 0.05 that "fails" needs
    assert judge("alpha01-fails", fails_data(acc(0.845, k=4)))[0] == "contradicted"
    # two seeds: one fails, one converges
    verdict, numbers = judge("alpha01-fails", fails_data(final([0.70, 0.85]), seeds=2))
    assert verdict == "inconclusive" and "(95% CI, 2 seeds)" in numbers
    assert judge("alpha01-fails", runs(ALPHAS[1:], {}))[0] == "n/a"  # no α=0.1 curve


def test_a_diverged_alpha_01_counts_as_a_failure_and_stays_testable():
    """α=0.1's divergence is the claim's evidence: its seeds count at chance accuracy (1/10 on
    MNIST) and the claim is decided, not "not testable"."""
    nan = float("nan")
    broken = [[0.5] * 5 + [nan] * 5 for _ in range(5)]  # every seed diverged at round 6
    div = {(p.panel_id, "α=0.1"): [(s, 5) for s in range(5)] for p in CASES}
    (check,) = JV.judge_claims([DECLARED["alpha01-fails"]], fails_data(broken, diverged=div))
    assert check.verdict == "supported", check.numbers
    assert "seed 0 diverged at round 5 (counted at chance 0.1)" in check.numbers
    assert "effect 0.75" in check.numbers
    # a finite loss blow-up counts the same, whatever accuracy the run logged
    blow = {
        (p.panel_id, "α=0.1"): [(s, "test_loss 3e+04 > 1000 x") for s in range(5)] for p in CASES
    }
    (check,) = JV.judge_claims(
        [DECLARED["alpha01-fails"]], fails_data(acc(0.85, k=4), blowups=blow)
    )
    assert check.verdict == "supported" and "seed 0 loss blew up" in check.numbers
    # the chance level is the run's data set's
    cifar100 = [curve("α=0.1", bherd__alpha=0.1, data__dataset="cifar100")]
    assert runs(cifar100, {}).chance("α=0.1") == pytest.approx(0.01)


def test_class_counts_cover_every_data_set():
    """The chance level of a claim comes from the data catalogue: one entry per data set, as
    many classes as torchvision's set has."""
    from typing import get_args

    from fedsweep.data.catalog import CLASS_COUNTS
    from fedsweep.data.config import DataConfig
    from fedsweep.data.datasets import _TORCHVISION

    assert set(CLASS_COUNTS) == set(get_args(DataConfig.model_fields["dataset"].annotation))
    assert all(len(CLASS_COUNTS[name]) == n for name, (_, n) in _TORCHVISION.items())


# ------------------------------------------------------------------------------ fig 3b
E_CURVES = [curve(f"E={e}", train__local_epochs=e) for e in (0.1, 0.5, 1.0, 1.5, 2.0)]
E_LEVELS = {0.1: 1.0, 0.5: 0.8, 1.0: 0.6, 1.5: 0.45, 2.0: 0.35}
#: the literal Eq. 7 server factor E/α (bherd.scale's default) and the 1/α reading (B3)
LITERAL = {"selector": "bherd"}
ONE_OVER_ALPHA = {"selector": "bherd", "bherd": {"scale": "one_over_alpha"}}


def e_loss(levels: dict[float, float], seeds: int = 5) -> dict:
    return {
        (None, f"E={e}", "test_loss"): decay(level, seeds, k=i)
        for i, (e, level) in enumerate(levels.items())
    }


def test_larger_e_faster_criterion():
    data = runs(E_CURVES, e_loss(E_LEVELS), base=ONE_OVER_ALPHA)
    verdict, numbers = judge("larger-e-faster", data)
    assert verdict == "supported", numbers
    assert numbers.count("→ supported") == 12 and "local_epochs=1.5→2 effect" in numbers  # 4 x 3
    reverse = dict(zip(E_LEVELS, reversed(E_LEVELS.values()), strict=True))
    assert judge("larger-e-faster", runs(E_CURVES, e_loss(reverse), base=ONE_OVER_ALPHA))[0] == (
        "contradicted"
    )
    # E=2 no faster than E=1.5 (±2% noise): below the 5% margin of every "faster"
    flat = {**E_LEVELS, 2.0: 0.45}
    assert judge("larger-e-faster", runs(E_CURVES, e_loss(flat), base=ONE_OVER_ALPHA))[0] == (
        "contradicted"
    )
    # two seeds: faster with E on seed 0, slower on seed 1
    two = {
        (None, f"E={e}", "test_loss"): [decay(a, 1, k=i)[0], decay(b, 1, k=i)[0]]
        for i, (e, a, b) in enumerate(
            zip(E_LEVELS, E_LEVELS.values(), reverse.values(), strict=True)
        )
    }
    verdict, numbers = judge("larger-e-faster", runs(E_CURVES, two, base=ONE_OVER_ALPHA))
    assert verdict == "inconclusive" and "(95% CI, 2 seeds)" in numbers
    assert judge("larger-e-faster", runs(E_CURVES[:1], e_loss(E_LEVELS)))[0] == "n/a"


def test_larger_e_faster_by_construction_under_the_literal_factor():
    """Eq. 7's E/α multiplies the server step by E: 'faster with larger E' then holds by
    construction. The statistics are shown, the verdict is inconclusive, either way."""
    for levels in (E_LEVELS, dict(zip(E_LEVELS, reversed(E_LEVELS.values()), strict=True))):
        data = runs(E_CURVES, e_loss(levels), base=LITERAL)
        verdict, numbers = judge("larger-e-faster", data)
        assert verdict == "inconclusive", numbers
        assert "follows by construction; run the 1/α reading" in numbers
        assert "local_epochs=0.1→0.5 effect" in numbers and len(data.evidence) == 12
        assert {row["verdict"] for row in data.evidence} == {"inconclusive"}
        assert all("by construction" in row["note"] for row in data.evidence)
    # FedAvg curves (no BHerd server factor) are decided normally
    fedavg = runs(E_CURVES, e_loss(E_LEVELS), base={"selector": "none"})
    assert judge("larger-e-faster", fedavg)[0] == "supported"


SMOOTH = [0.5 - 0.03 * t for t in range(10)]
ZIGZAG = [0.5, 0.3, 0.35, 0.25, 0.3, 0.2, 0.25, 0.15, 0.2, 0.1]  # 4 rises


def test_e2_oscillates_criterion():
    def data(e2, e1, seeds=5):
        """Per seed the given E=2 and E=1 histories (a seed-specific offset, same rises)."""
        return runs(
            E_CURVES,
            {
                (None, "E=2.0", "test_loss"): [[y + 1e-4 * s for y in e2[s]] for s in range(seeds)],
                (None, "E=1.0", "test_loss"): [[y + 1e-4 * s for y in e1[s]] for s in range(seeds)],
            },
        )

    verdict, numbers = judge("e2-oscillates", data([ZIGZAG] * 5, [SMOOTH] * 5))
    # 4 rises of 0.05 on a drop of 0.4: oscillation 0.5 of the figure's scale, in all 3 Cases
    assert verdict == "supported" and "Case 1: E=2.0 − E=1.0 effect 0.5 [0.5, 0.5]" in numbers
    assert numbers.count("effect 0.5 [0.5, 0.5] (95% CI, 5 seeds) → supported") == 3
    assert judge("e2-oscillates", data([SMOOTH] * 5, [ZIGZAG] * 5))[0] == "contradicted"
    # plateau jitter: 3 rises of 1e-4 on a drop of 0.27 (0.1% of it, nothing a figure shows):
    # no oscillation by its size (issue 51, item 6), where a count of rises said "supported"
    jitter = [0.5, 0.3, 0.25, 0.23, 0.23, 0.2301, 0.23, 0.2301, 0.23, 0.2301]
    verdict, numbers = judge("e2-oscillates", data([jitter] * 5, [SMOOTH] * 5))
    assert verdict == "contradicted", numbers
    count = DECLARED["e2-oscillates"].model_copy(update={"measure": "loss_rises", "margin": 0})
    assert judge_claim(count, data([jitter] * 5, [SMOOTH] * 5))[0] == "supported"
    verdict, numbers = judge("e2-oscillates", data([ZIGZAG, SMOOTH], [SMOOTH, ZIGZAG], seeds=2))
    assert verdict == "inconclusive" and "(95% CI, 2 seeds)" in numbers
    assert judge("e2-oscillates", runs(E_CURVES[:3], {}))[0] == "n/a"  # no E=2 curve


# ------------------------------------------------------------------------------ fig 3c
BS = [curve(f"B={b}", train__batch_size=b) for b in (10, 50, 100, 500, 1000)]
B_LEVELS = {10: 0.30, 50: 0.32, 100: 0.34, 500: 0.40, 1000: 0.50}


def b_loss(levels: dict[int, float], panel: int | None = None, seeds: int = 5) -> dict:
    return {
        (panel, f"B={b}", "test_loss"): decay(level, seeds, k=i)
        for i, (b, level) in enumerate(levels.items())
    }


def test_best_batch_criterion():
    paper = {**b_loss(B_LEVELS), **b_loss({**B_LEVELS, 50: 0.25}, panel=2)}  # Case 3: B=50
    verdict, numbers = judge("best-batch", runs(BS, paper))
    assert verdict == "supported", numbers
    assert "Case 3: final_loss B=50 0.275, B=10 0.33" in numbers and "effect 0.055 [" in numbers
    assert judge("best-batch", runs(BS, b_loss(B_LEVELS)))[0] == "contradicted"  # B=10 in Case 3
    # the speed reading (loss AUC) is shown, never deciding: B=10 falls fastest but ends above
    # B=50 (Case 2 of the paper profile); the final-loss verdict stays contradicted
    fast = [
        [0.30 - 0.02 * t + 0.001 * s for t in range(5)] + [0.22 + 0.001 * s] * 15 for s in range(5)
    ]
    slow = [
        [0.60 - 0.04 * t + 0.001 * s for t in range(10)] + [0.20 + 0.001 * s] * 10 for s in range(5)
    ]
    crossing = {**b_loss(B_LEVELS), (None, "B=10", "test_loss"): fast}
    crossing[(None, "B=50", "test_loss")] = slow
    verdict, numbers = judge("best-batch", runs(BS, crossing, panels=CASES[:1]))
    assert verdict == "contradicted", numbers
    assert "speed reading (loss_auc; shown, not deciding): Case 1 B=10 first by effect" in numbers
    assert "→ would be supported" in numbers
    # two seeds: B=10 first on seed 0, B=50 on seed 1 (every Case)
    two = b_loss(B_LEVELS, seeds=2)
    two[(None, "B=50", "test_loss")] = [decay(0.32, 1)[0], decay(0.28, 1)[0]]
    two[(2, "B=50", "test_loss")] = [decay(0.25, 1)[0], decay(0.25, 1)[0]]
    verdict, numbers = judge("best-batch", runs(BS, two))
    assert verdict == "inconclusive" and "(95% CI, 2 seeds)" in numbers
    assert judge("best-batch", runs([], {}))[0] == "n/a"


# ------------------------------------------------------------------------------ fig 3d
NS = [curve(f"N={n}", data__num_clients=n) for n in (1, 5, 10, 15, 20)]
CEN = CurveSpec(label="Centralized SGD", set={"algorithm": "centralized"}, flat=True)
N_LOSS = {1: 0.5, 5: 0.6, 10: 0.7, 15: 0.75, 20: 0.8}
N_ACC = {1: 0.90, 5: 0.87, 10: 0.85, 15: 0.84, 20: 0.83}


def n_data(loss=N_LOSS, accs=N_ACC, centralized=0.90, seeds=5, extra=None) -> JR.ClaimData:
    """N curves with these loss levels and final accuracies, Centralized SGD's accuracy;
    ``extra``: histories replacing those of some (panel, curve, metric) cells."""
    hs = {(None, f"N={n}", "test_loss"): decay(v, seeds, k=n) for n, v in loss.items()}
    hs |= {(None, f"N={n}", "test_acc"): acc(v, seeds, k=n) for n, v in accs.items()}
    hs[(None, "Centralized SGD", "test_acc")] = acc(centralized, seeds, k=3)
    return runs(NS + [CEN], {**hs, **(extra or {})})


def test_n1_centralized_criterion():
    verdict, numbers = judge("n1-centralized-fastest", n_data())
    assert verdict == "supported", numbers
    assert "data.num_clients matters: N=5 in Case 1" in numbers
    assert "N=1 first by effect" in numbers
    # every N matches centralized: N=1 matching it shows nothing about N
    flat = dict.fromkeys(N_ACC, 0.90)
    verdict, numbers = judge("n1-centralized-fastest", n_data(accs=flat))
    assert verdict == "inconclusive" and "shows nothing about data.num_clients" in numbers
    assert (
        judge("n1-centralized-fastest", n_data(centralized=0.95))[0] == "contradicted"
    )  # 0.05 apart
    assert (
        judge("n1-centralized-fastest", n_data(loss={**N_LOSS, 5: 0.4}))[0] == "contradicted"
    )  # N=5 faster
    # two seeds: N=1 0.015 above centralized on seed 0, 0.015 below on seed 1
    two = n_data(seeds=2, extra={(None, "N=1", "test_acc"): final([0.915, 0.885])})
    verdict, numbers = judge("n1-centralized-fastest", two)
    assert verdict == "inconclusive" and "(95% CI, 2 seeds)" in numbers
    assert judge("n1-centralized-fastest", runs(NS, {}))[0] == "n/a"  # no centralized curve


def test_n5_best_criterion():
    data = n_data()
    verdict, numbers = judge("n5-best", data)
    assert verdict == "supported", numbers
    assert "Case 2: final_loss N=5 0.66, N=10 0.77" in numbers and "effect 0.11 [" in numbers
    # each N partitions differently: the runs pair by seed number, N=5 against the others
    assert data.evidence[0]["measure"] == "first on final test loss: N=5 against N=10, N=15, N=20"
    assert data.evidence[0]["seeds"] == [0, 1, 2, 3, 4]
    case2 = n_data(extra={(1, "N=10", "test_loss"): decay(0.3, k=10)})  # N=10 best in Case 2
    assert judge("n5-best", case2)[0] == "contradicted"
    # two seeds: N=5 first on seed 0, last on seed 1
    two = n_data(seeds=2, extra={(None, "N=5", "test_loss"): [decay(0.6, 1)[0], decay(0.9, 1)[0]]})
    verdict, numbers = judge("n5-best", two)
    assert verdict == "inconclusive" and "(95% CI, 2 seeds)" in numbers
    assert judge("n5-best", runs(NS[:1], {}))[0] == "n/a"


# ------------------------------------------------------------------------------ fig 4d
def clients(levels: list[float], seeds: int = 3, metric: str = "dist_paper") -> dict:
    """Case 3's per-client distance histories (5 rounds) as the runs log them
    (``client/{i}/dist_paper``, i = 0..4, of the one curve), per seed a little noise."""
    return {
        (2, "BHerd-FedAvg", f"client/{i - 1}/{metric}"): [
            [lv + 0.005 * OWN[(s + i) % 5]] * 5 for s in range(seeds)
        ]
        for i, lv in enumerate(levels, start=1)
    }


FAR = [0.1, 0.12, 0.11, 0.3, 0.35]
FIG4D = [curve("BHerd-FedAvg")]


def test_case3_distance_criterion():
    verdict, numbers = judge("case3-far-clients", runs(FIG4D, clients(FAR)))
    assert verdict == "supported", numbers
    assert numbers.startswith("Case 3: mean-over-rounds distance, min of clients 4, 5 − max")
    assert "effect 0.178 [0.164, 0.193] (95% CI, 3 seeds)" in numbers
    near = [0.1, 0.12, 0.11, 0.3, 0.05]  # client 5 no farther than clients 1-3
    assert judge("case3-far-clients", runs(FIG4D, clients(near)))[0] == "contradicted"
    verdict, numbers = judge("case3-far-clients", runs(FIG4D, clients(FAR, seeds=1)))
    assert verdict == "inconclusive" and "1 seed: no interval" in numbers  # Fig. 4d: one run
    verdict, numbers = judge("case3-far-clients", runs(FIG4D, clients(FAR, metric="dist")))
    assert verdict == "supported" and "effect 0.178 [" in numbers  # read from dist
    assert judge("case3-far-clients", runs(FIG4D, clients(FAR), CASES[2:] * 3))[0] == "supported"
    assert judge("case3-far-clients", runs(FIG4D, {}, CASES[:2]))[0] == "n/a"  # no Case 3 panel
    assert judge("case3-far-clients", runs(FIG4D, {}))[0] == "n/a"


def test_case3_reads_the_runs_own_per_client_metrics_per_seed():
    """Fig. 4d's claim reads the per-client distances as the runs log them
    (``client/{i}/dist_paper``), per seed: the judge loads them itself, whatever the figure
    draws (its curves "Client 1".."Client 5" are the builder's: fig4d.per_client)."""
    rows = [
        (CASES[2].panel_id, "BHerd-FedAvg", s, f"run-{s}", t, f"client/{i}/dist_paper", y)
        for s in range(3)
        for i, level in enumerate(FAR)
        for t, y in enumerate([level + 0.005 * OWN[(s + i) % 5]] * 5, start=1)
    ]
    cols = ["panel_id", "curve", "seed", "run_id", "round", "metric", "value"]
    long = pd.DataFrame(rows, columns=cols)
    data = JR.ClaimData(aggregate(long), FIG4D, CASES, long=long)
    verdict, numbers = judge("case3-far-clients", data)
    assert verdict == "supported" and "(95% CI, 3 seeds)" in numbers


# ------------------------------------------------------------------------------ fig 4e
RR_CURVES = [
    curve(f"Case {i}, {o}", data__partition=f"case{i}", train__order=k)
    for i in (1, 2)
    for o, k in (("RR", "rr"), ("no RR", "fixed"))
]
ALL = [Panel("all", "", {})]
#: Fig. 4e's claim ("RR vs no RR differ little")
RR = DECLARED["rr-differs-little"]


def _rr_data(rounds=12, seeds=3, curves=RR_CURVES, shift=None, finals=None, **kw) -> JR.ClaimData:
    """Final test accuracy 0.9 (paired by seed) for every curve; ``shift``: curve -> added to
    it; ``finals``: curve -> its per-seed final accuracies instead."""
    shift, finals = shift or {}, finals or {}
    hs = {
        (0, c.label, "test_acc"): (
            final(finals[c.label], rounds)
            if c.label in finals
            else acc(0.9 + shift.get(c.label, 0.0), seeds, noise=0.001, k=k, rounds=rounds)
        )
        for k, c in enumerate(curves)
    }
    return runs(curves, hs, ALL, **kw)


def test_rr_criterion_and_unknown_claims():
    cs = [
        curve(f"Case {i}, {o}", data__partition=f"case{i}", train__order=k)
        for i in (1, 2, 3)
        for o, k in (("RR", "rr"), ("no RR", "fixed"))
    ]
    verdict, numbers = judge("rr-differs-little", _rr_data(seeds=5, curves=cs))
    assert verdict == "supported", numbers
    assert numbers.startswith("all: Case 1, RR − Case 1, no RR effect")
    assert "Case 3, RR − Case 3, no RR effect" in numbers
    lower = _rr_data(seeds=5, curves=cs, shift={"Case 2, no RR": -0.05})
    assert judge("rr-differs-little", lower)[0] == "contradicted"
    # two seeds: RR 0.015 above no RR on seed 0, 0.015 below on seed 1
    two = _rr_data(seeds=2, curves=cs, finals={"Case 1, RR": [0.915, 0.885]})
    verdict, numbers = judge("rr-differs-little", two)
    assert verdict == "inconclusive" and "(95% CI, 2 seeds)" in numbers
    (check,) = JV.judge_claims([RR], _rr_data(curves=cs))
    assert check.verdict == "supported"
    (short,) = JV.judge_claims([RR], _rr_data(rounds=2, curves=cs))
    assert short.verdict == "not-testable" and short.shown == "not testable at this profile (T=2)"
    assert JV.judge_claims([RR], None)[0].verdict == "n/a"
    assert judge("rr-differs-little", runs(cs[::2], {}, ALL))[0] == "n/a"  # no no-RR curve


# ------------------------------------------------------------- diverged runs are no evidence
def test_claim_with_a_diverged_run_is_not_testable():
    runs4 = {("all", c.label): 4 for c in RR_CURVES}  # 4 runs per curve, one never loaded
    (ok,) = JV.judge_claims([RR], _rr_data(runs=runs4))
    assert ok.verdict == "supported" and ok.shown == "supported"
    div = {("all", "Case 2, no RR"): [(1, 4)]}
    (check,) = JV.judge_claims([RR], _rr_data(runs=runs4, diverged=div))
    assert check.verdict == "not-testable" and check.shown == "not testable: 1 of 16 runs diverged"
    assert "Case 1, RR − Case 1, no RR effect" in check.numbers  # the numbers are still shown
    assert "diverged" in check.criterion
    # a finite loss blow-up counts the same; a seed both diverged and blown up counts once
    blow = {("all", "Case 1, RR"): [(0, "test_loss 3.2e+06 at round 12 > 1000 x round 1")]}
    both = {**blow, ("all", "Case 2, no RR"): [(1, "x")]}
    (check,) = JV.judge_claims([RR], _rr_data(runs=runs4, diverged=div, blowups=both))
    assert check.shown == "not testable: 2 of 16 runs diverged (1 of them a finite loss blow-up)"
    # without run counts: the largest seed count n of each cell read (3 seeds in _rr_data)
    (check,) = JV.judge_claims([RR], _rr_data(diverged=div))
    assert check.shown == "not testable: 1 of 12 runs diverged"


def test_diverged_reason_takes_precedence_over_a_short_profile():
    div = {("all", c.label): [(0, 1)] for c in RR_CURVES}
    (check,) = JV.judge_claims([RR], _rr_data(rounds=3, diverged=div))
    assert check.verdict == "not-testable"
    assert check.shown == "not testable: 4 of 12 runs diverged; T=3 < 5 rounds"


def test_only_the_cells_a_claim_reads_count():
    # α=0.3 diverged in Case 3: α=1.0 vs FedAvg does not read it; "fastest α" does
    curves = ALPHAS + [FEDAVG]
    accs = {(None, c.label, "test_acc"): acc(0.8, 3, noise=0.0) for c in curves}
    loss = {(None, c.label, "test_loss"): decay(1.0, 3, k=k) for k, c in enumerate(curves)}
    data = runs(curves, {**accs, **loss})
    data.diverged = {(CASES[2].panel_id, "α=0.3"): [(0, 5)]}
    claims = [DECLARED[i] for i in ("alpha1-matches-fedavg", "alpha03-05-fastest", "alpha01-fails")]
    match, fastest, _ = JV.judge_claims(claims, data)
    assert match.verdict == "inconclusive" and "shows nothing about bherd.alpha" in match.numbers
    assert fastest.verdict == "not-testable"
    assert fastest.shown == "not testable: 1 of 45 runs diverged"  # 5 α x 3 Cases x 3 seeds
    # α=0.1 failing to converge: its own divergence (or blow-up) is the claim's evidence
    data.diverged = {(p.panel_id, "α=0.1"): [(s, 7) for s in range(3)] for p in CASES}
    (fails,) = JV.judge_claims([DECLARED["alpha01-fails"]], data)
    assert fails.verdict == "supported" and "seed 0 diverged at round 7" in fails.numbers
    data.diverged = {}
    data.blowups = {
        (p.panel_id, "α=0.1"): [(s, "test_loss 5e+04") for s in range(3)] for p in CASES
    }
    (fails,) = JV.judge_claims([DECLARED["alpha01-fails"]], data)
    assert fails.verdict == "supported" and "seed 0 loss blew up" in fails.numbers
    # ... but a diverged run of a curve it compares α=0.1 with makes it not testable
    data.diverged = {(CASES[0].panel_id, "FedAvg (RR)"): [(2, 3)]}
    (fails,) = JV.judge_claims([DECLARED["alpha01-fails"]], data)
    assert fails.verdict == "not-testable" and fails.shown == "not testable: 1 of 45 runs diverged"
