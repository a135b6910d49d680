"""The FedVeca figures (sweeps/fedveca-fig3..8.yaml, dashboards/papers/fedveca/): the claim criteria on
hand-built curves (a yes and a no case each), and the six builders on a real MLflow sqlite store
of hand-logged runs (no training, no Ray), derived baselines resolved from their FedVeca runs as
the sweep does."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from dashboards import BUILDERS, build_figures
from dashboards import claims as C
from dashboards import registry as R
from dashboards.model import Panel
from dashboards.papers.fedveca import claims as V
from dashboards.papers.fedveca import figures as fedveca
from dashboards.store import RunIndex, aggregate, resolve_derived
from fedsweep.sweep.spec import CurveSpec, DeriveSpec, Trial, expand, load_spec
from fedsweep.tracking.store import ensure_experiment, get_client

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
FIGURES = [f"fedveca-fig{i}" for i in range(3, 9)]
T = 12  # rounds of every hand-made curve (≥ MIN_ROUNDS: the verdicts are testable)


# ------------------------------------------------------------------------------ curves
def cv(label: str, derive_from: str | None = None, **kv) -> CurveSpec:
    """A curve spec; ``derive_from`` makes it a derived curve (fixed steps = mean_tau)."""
    derive = None
    if derive_from is not None:
        derive = DeriveSpec(**{"from": derive_from, "set": {"fixed_steps.steps": "mean_tau"}})
    return CurveSpec(
        label=label, set={k.replace("__", "."): v for k, v in kv.items()}, derive=derive
    )


def loss_curve(hit: int, bumps: int = 0, high: float = 0.6, low: float = 0.25) -> list[float]:
    """``high`` until round ``hit``, then ``low``; the last ``2 * bumps`` rounds alternate
    ``low + 0.02`` / ``low`` (``bumps`` rises of the loss)."""
    ys = [high if t < hit else low for t in range(1, T + 1)]
    for k in range(bumps):
        ys[T - 2 * k - 2] = low + 0.02
    return ys


def acc_of(loss: list[float]) -> list[float]:
    return [1.2 - v for v in loss]  # 0.6 -> 0.6, 0.25 -> 0.95 (≥ the centralized 0.90)


def long_rows(series: dict[tuple[str, str, int, str], list[float]], start: int = 1):
    """Long table from {(panel_id, curve, seed, metric): values from round ``start``}."""
    rows = [
        ("f", pid, label, seed, f"{pid}-{label}-{seed}", t, metric, v)
        for (pid, label, seed, metric), ys in series.items()
        for t, v in enumerate(ys, start=start)
    ]
    cols = ["figure", "panel_id", "curve", "seed", "run_id", "round", "metric", "value"]
    return pd.DataFrame(rows, columns=cols)


def make(curves, series, panels, start: int = 1) -> C.ClaimData:
    """ClaimData whose seed means are aggregated from per-run ``series`` (see ``long_rows``)."""
    long = long_rows(series, start)
    return C.ClaimData(aggregate(long), curves, panels, long=long)


SETTING = [Panel("setting=svm-mnist", "SVM, MNIST", {"model.name": "svm"})]
FIG3 = [
    cv("Centralized SGD", "FedVeca", algorithm="centralized", step_policy="fixed"),
    cv("FedAvg", "FedVeca", algorithm="fedavg", step_policy="fixed"),
    cv("FedNova", "FedVeca", algorithm="fednova", step_policy="fixed"),
    cv("FedVeca"),
]


def fig3_data(hits: dict[str, int | None]) -> C.ClaimData:
    """Centralized at loss 0.30 / acc 0.90 (one round); each method reaches it at ``hits``."""
    pid = SETTING[0].panel_id
    series = {(pid, "Centralized SGD", 0, "test_loss"): [0.30]}
    series[(pid, "Centralized SGD", 0, "test_acc")] = [0.90]
    for label, hit in hits.items():
        loss = loss_curve(hit) if hit is not None else [0.6] * T
        series[(pid, label, 0, "test_loss")] = loss
        series[(pid, label, 0, "test_acc")] = acc_of(loss)
    return make(FIG3, series, SETTING)


def test_fedveca_reaches_first():
    verdict, numbers = V.fedveca_reaches_first(
        fig3_data({"FedAvg": 8, "FedNova": None, "FedVeca": 4})
    )
    assert verdict == "yes", numbers
    assert "first at: FedAvg 8, FedNova never, FedVeca 4" in numbers
    assert "L_c=0.3000" in numbers and "A_c=0.9000" in numbers and "FedVeca -0.0500" in numbers
    # FedAvg is earlier
    assert V.fedveca_reaches_first(fig3_data({"FedAvg": 3, "FedNova": 6, "FedVeca": 4}))[0] == "no"
    # a tie with both baselines is not "first"
    assert V.fedveca_reaches_first(fig3_data({"FedAvg": 4, "FedNova": 4, "FedVeca": 4}))[0] == "no"
    # no curve reaches the centralized level: the panel fails
    never = {"FedAvg": None, "FedNova": None, "FedVeca": None}
    verdict, numbers = V.fedveca_reaches_first(fig3_data(never))
    assert verdict == "no" and "FedVeca never" in numbers
    assert V.fedveca_curve(fig3_data(never)) == "FedVeca"  # the derived curves' source


def premise_data(runs: dict[int, list[float]]) -> C.ClaimData:
    """FedVeca's premise per seed from round 2 (as logged) in two panels."""
    panels = [Panel("setting=svm", "SVM", {}), Panel("setting=cnn", "CNN", {})]
    series = {
        (p.panel_id, "FedVeca", seed, "premise"): ys for p in panels for seed, ys in runs.items()
    }
    return make([cv("FedVeca")], series, panels, start=2)


def test_the_premise_is_a_lower_bound():
    """The paper: "we set the value '1' as a lower bound" and the SVM values are "slightly
    smaller than the lower bound for the first few rounds": below 1 is the violation."""
    paper_like = {s: [0.8] * 4 + [1.5 + 0.1 * s] * 7 for s in range(3)}  # rounds 2-5 below
    verdict, numbers = V.premise_above_lower_bound(premise_data(paper_like))
    assert verdict == "supported", numbers
    assert "rounds 2–5: 12 of 12 (run, round) pairs below 1" in numbers
    assert "effect 0 [0, 0] (95% CI, 3 seeds)" in numbers
    # what the upper-bound reading called "yes" (every value below 1) violates it everywhere
    below = {s: [0.001 * 1.8**t for t in range(11)] for s in range(3)}  # max 0.357
    assert V.premise_above_lower_bound(premise_data(below))[0] == "contradicted"
    # two seeds, one below the bound in half its late rounds: the interval cannot decide
    mixed = {0: [1.5] * 11, 1: [1.5] * 4 + [0.5, 1.5] * 3 + [0.5]}
    verdict, numbers = V.premise_above_lower_bound(premise_data(mixed))
    assert verdict == "inconclusive", numbers
    data = premise_data(paper_like)
    data.long = data.long[data.long["metric"] != "premise"]
    assert V.premise_above_lower_bound(data)[0] == "n/a"


def test_a_statistical_claim_carries_its_evidence():
    checks = C.check_claims(
        ["the premise stays above its lower bound after the first few rounds"],
        premise_data({s: [0.8] * 4 + [1.5] * 7 for s in range(3)}),
        V.CRITERIA,
    )
    (check,) = checks
    assert check.verdict == "supported" and len(check.evidence) == 2  # one row per panel
    assert check.numbers.endswith("[τ rule R1 (our reconstruction)]")
    row = check.evidence[0]
    assert (row["panel"], row["effect"], row["ci_low"], row["ci_high"]) == ("SVM", 0.0, 0.0, 0.0)
    assert (row["threshold"], row["seeds"]) == (0.05, [0, 1, 2])


def case_data(accs: list[float], aucs: list[float]) -> C.ClaimData:
    """Case 1 and Case 2 panels; in Case 1 the three methods end at ``accs`` with flat losses
    at ``aucs``; Case 2 (not read) differs wildly."""
    panels = [
        Panel("data.partition=case1", "Case 1", {"data.partition": "case1"}),
        Panel("data.partition=case2", "Case 2", {"data.partition": "case2"}),
    ]
    series = {}
    for label, acc, auc in zip(("FedAvg", "FedNova", "FedVeca"), accs, aucs, strict=True):
        series[(panels[0].panel_id, label, 0, "test_acc")] = [0.5] * (T - 1) + [acc]
        series[(panels[0].panel_id, label, 0, "test_loss")] = [auc] * T
        series[(panels[1].panel_id, label, 0, "test_acc")] = [0.1] * T
        series[(panels[1].panel_id, label, 0, "test_loss")] = [auc * 3] * T
    return make(FIG3, series, panels)


def test_case1_overlap():
    verdict, numbers = V.case1_overlap(case_data([0.900, 0.904, 0.897], [0.30, 0.31, 0.305]))
    assert verdict == "yes", numbers
    assert numbers.startswith("Case 1: final acc FedAvg 0.9000, FedNova 0.9040, FedVeca 0.8970")
    assert "spread 3.3% of the smallest" in numbers and "Case 2" not in numbers
    assert V.case1_overlap(case_data([0.90, 0.93, 0.90], [0.30, 0.30, 0.30]))[0] == "no"
    assert V.case1_overlap(case_data([0.90, 0.90, 0.90], [0.30, 0.33, 0.30]))[0] == "no"


PHIS = [cv(f"φ={p}", fedveca__phi=p) for p in (0.5, 0.05, 0.005)]


def phi_data(shapes: dict[str, tuple[int, int]], smooth: str | None = "φ=0.5") -> C.ClaimData:
    """Per φ (hit, bumps) of the loss of two seeds; ``smooth`` instead falls linearly (slow)."""
    pid = "all"
    series = {}
    for label in ("φ=0.5", "φ=0.05", "φ=0.005"):
        for seed in (0, 1):
            if label == smooth:
                ys = [0.6 - 0.02 * t for t in range(T)]
            else:
                ys = loss_curve(*shapes[label])
            series[(pid, label, seed, "test_loss")] = ys
    return make(PHIS, series, [Panel(pid, "", {})])


def test_phi_smooth_slow_and_mean_rises():
    data = phi_data({"φ=0.05": (4, 1), "φ=0.005": (2, 3)})
    verdict, numbers = V.phi_smooth_slow(data)
    assert verdict == "yes", numbers
    assert "φ=0.5: 0.0 mean rises" in numbers and "φ=0.005: 3.0 mean rises" in numbers
    assert V.mean_rises(data.long, "all", "φ=0.05") == 1.0
    # the smallest φ is fast but not the noisiest
    assert V.phi_smooth_slow(phi_data({"φ=0.05": (4, 3), "φ=0.005": (2, 1)}))[0] == "no"
    # the largest φ is not the slowest (fast step curve, no rises)
    fast_big = phi_data({"φ=0.5": (2, 0), "φ=0.05": (4, 1), "φ=0.005": (3, 3)}, smooth=None)
    assert V.phi_smooth_slow(fast_big)[0] == "no"


FIG8 = [
    cv("FedVeca N=5", data__num_clients=5),
    cv("FedVeca N=30", data__num_clients=30),
    cv("FedVeca N=50", data__num_clients=50),
    cv(
        "FedNova N=50",
        "FedVeca N=50",
        data__num_clients=50,
        algorithm="fednova",
        step_policy="fixed",
    ),
    cv(
        "FedAvg N=50", "FedVeca N=50", data__num_clients=50, algorithm="fedavg", step_policy="fixed"
    ),
]


def fig8_data(hits: dict[str, int]) -> C.ClaimData:
    pid = "all"
    series = {}
    for label, hit in hits.items():
        series[(pid, label, 0, "test_loss")] = loss_curve(hit)
        series[(pid, label, 0, "test_acc")] = acc_of(loss_curve(hit))
    return make(FIG8, series, [Panel(pid, "", {})])


NS = {"FedNova N=50": 7, "FedAvg N=50": 8}


def test_more_clients_do_not_converge_faster():
    verdict, numbers = V.more_clients_not_faster(
        fig8_data({"FedVeca N=5": 4, "FedVeca N=30": 5, "FedVeca N=50": 5} | NS)
    )
    assert verdict == "yes", numbers
    assert "N=5 0.3375, N=30 0.3667, N=50 0.3667" in numbers
    # N=50 converges clearly faster than N=5: AUC ratio 0.25 / 0.3375 = 0.74 < 0.95
    verdict, numbers = V.more_clients_not_faster(
        fig8_data({"FedVeca N=5": 4, "FedVeca N=30": 4, "FedVeca N=50": 1} | NS)
    )
    assert verdict == "no" and "N=50/N=5 0.7407" in numbers


def test_fedveca_n50_beats_the_baselines():
    verdict, numbers = V.fedveca_n50_beats_baselines(
        fig8_data({"FedVeca N=5": 4, "FedVeca N=30": 5, "FedVeca N=50": 5} | NS)
    )
    assert verdict == "yes", numbers
    assert "FedVeca 0.3667, FedNova 0.4250, FedAvg 0.4542" in numbers
    assert "final acc FedVeca 0.9500" in numbers
    verdict, _ = V.fedveca_n50_beats_baselines(
        fig8_data(
            {
                "FedVeca N=5": 4,
                "FedVeca N=30": 5,
                "FedVeca N=50": 8,
                "FedNova N=50": 7,
                "FedAvg N=50": 9,
            }
        )
    )
    assert verdict == "no"


@pytest.mark.parametrize("figure", FIGURES)
def test_every_claim_has_a_criterion(figure):
    spec = load_spec(SWEEPS / f"{figure}.yaml")
    assert BUILDERS[figure].__module__ == "dashboards.papers.fedveca.figures"
    for claim in spec.claims:
        assert C.normalize(claim) in R.CRITERIA, claim


def test_claims_not_testable_on_short_curves():
    data = fig3_data({"FedAvg": 8, "FedNova": None, "FedVeca": 4})
    data.agg = data.agg[data.agg["round"] <= 3]
    [check] = R.check_claims(["FedVeca reaches the centralized loss and accuracy first"], data)
    assert check.verdict == "n/t" and check.shown == "not testable at this profile (T=3)"
    assert "L_c" in check.numbers and "centralized (flat) curve" in check.criterion


# ------------------------------------------------------------------------ builders (store)
def run_values(trial: Trial) -> dict[str, list[float]]:
    """Hand-made histories of a smoke trial, by its config (a config hash is logged once, so
    trials shared by several figures get the same values): centralized at 0.30 / 0.90 in one
    round; FedAvg and FedNova reach it at rounds 8 and 7, FedVeca at 4 (N=5; 5 at N=30 and
    N=50); φ=0.5 falls slowly and smoothly, φ=0.005 fast with bumps; in Case 1 all overlap."""
    cfg = trial.config
    if cfg.algorithm == "centralized":
        return {"test_loss": [0.30], "test_acc": [0.90]}
    if cfg.data.partition == "case1":
        loss = loss_curve(4)
    elif cfg.step_policy == "fixed":
        loss = loss_curve(8 if cfg.algorithm == "fedavg" else 7)
    elif cfg.fedveca.phi == 0.5:
        loss = [0.6 - 0.02 * t for t in range(T)]
    elif cfg.fedveca.phi == 0.005:
        loss = loss_curve(2, bumps=3)
    else:
        loss = loss_curve(4 if cfg.data.num_clients == 5 else 5, bumps=1)
    out = {"test_loss": loss, "test_acc": acc_of(loss)}
    if cfg.step_policy == "fedveca":
        out |= estimates(cfg.data.num_clients)
    return out


def estimates(n: int) -> dict[str, list[float]]:
    """FedVeca's logged estimates: per client τ, β, δ, A; per round τ_k, Σ τ and, from round 2
    (the lists below start at round 2: see ``log_trial``), w_change, β̂ and the premise."""
    out: dict[str, list[float]] = {"tau_total": [5.0 * n] * T, "tau_k": [5.0] * T}
    for i in range(n):
        out[f"client/{i}/tau"] = [1.0, 1.0] + [float(3 + i)] * (T - 2)
        out[f"client/{i}/beta"] = [10.0 + i] * T
        out[f"client/{i}/delta"] = [0.1 * (i + 1)] * T
        out[f"client/{i}/A"] = [0.01 * (10.0 + i) ** 2 * 0.1 * (i + 1)] * T
    out["premise"] = [0.5 * 1.7**t for t in range(T - 1)]  # 0.5 .. 101: > 2 decades, < 1 early
    out["beta_hat"] = [20.0] * (T - 1)
    out["w_change"] = [0.1] * (T - 1)
    return out


FROM_ROUND_2 = {"premise", "beta_hat", "w_change"}


def log_trial(client, exp: str, trial: Trial) -> None:
    """One finished run with the trial's tags and hand-made histories (no training)."""
    from mlflow.entities import Metric

    tags = {
        "fedsweep.config_hash": trial.config_hash,
        "fedsweep.figure": trial.figure,
        "fedsweep.status": "finished",
    }
    run = client.create_run(exp, tags=tags).info.run_id
    metrics = [
        Metric(key, float(v), 0, t)
        for key, ys in run_values(trial).items()
        for t, v in enumerate(ys, start=2 if key in FROM_ROUND_2 else 1)
    ]
    client.log_batch(run, metrics=metrics)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One run per distinct smoke trial of the six figures (ordinary trials first, then the
    derived ones, resolved from the FedVeca runs as the sweep does), then the six figures."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('fedveca-store') / 'mlflow.db'}"
    client = get_client(uri)
    logged: set[str] = set()
    specs = {f: load_spec(SWEEPS / f"{f}.yaml") for f in FIGURES}
    for stage in (0, 1):
        for fid, spec in specs.items():
            exp = ensure_experiment(client, fid, uri)
            trials = expand(spec, "smoke")
            if stage:
                index = RunIndex.load(client)
                trials = resolve_derived(spec, "smoke", trials, index, client, extra={})
            for trial in trials:
                if (trial.derive is not None) == bool(stage) and trial.config_hash not in logged:
                    log_trial(client, exp, trial)
                    logged.add(trial.config_hash)
    out = tmp_path_factory.mktemp("fedveca-figures")
    results = build_figures(uri, "smoke", out, FIGURES, SWEEPS, png=False)
    return {r.figure_id: r for r in results}


@pytest.mark.slow
def test_fedveca_figures_build_with_the_r1_note(built):
    assert set(built) == set(FIGURES)
    for fid, r in built.items():
        assert r.status == "complete" and r.error is None, (fid, r.error, r.notes)
        sub = r.figure.layout.title.subtitle.text
        assert fedveca.R1_NOTE in sub and "docs/algorithms.md §5.5" in sub, fid
        assert "smoke profile" in sub


def test_fedveca_claims_on_the_built_figures(built):
    verdicts = {c.claim: c.verdict for fid in FIGURES for c in built[fid].claims}
    assert verdicts == {
        "FedVeca reaches the centralized loss and accuracy first": "yes",
        # one seed per panel at the smoke profile: no interval, so no decision either way
        "the premise stays above its lower bound after the first few rounds": "inconclusive",
        "in Case 1 all three overlap": "yes",
        "larger phi is smooth but slow, the smallest phi is fast but noisy": "yes",
        "more clients do not converge faster": "yes",
        "FedVeca at N=50 beats the baselines at N=50": "yes",
    }, [c.numbers for fid in FIGURES for c in built[fid].claims]


def test_derived_baselines_are_found_and_noted(built):
    r = built["fedveca-fig3"]
    assert r.runs == r.expected_runs == 12
    assert any(
        n.startswith("FedAvg [SVM, MNIST]: fixed_steps.steps = mean_tau of FedVeca's run: 5")
        for n in r.notes
    ), r.notes
    flat = [t for t in r.figure.data if t.name and t.name.startswith("Centralized SGD")]
    assert flat and all(len(set(t.y)) == 1 for t in flat if t.fill is None)


def scatter(fig: go.Figure, name: str) -> list:
    return [t for t in fig.data if t.type == "scatter" and (t.name or "").startswith(name)]


def test_fig4_premise_bound_and_blank_round_1(built):
    fig = built["fedveca-fig4"].figure
    bounds = scatter(fig, fedveca.BOUND_NAME)
    assert len(bounds) == 3 and all(list(t.y) == [1.0, 1.0] for t in bounds)
    assert sum(bool(t.showlegend) for t in bounds) == 1
    premise = [
        t for t in scatter(fig, "FedVeca") if t.fill is None and t.yaxis in ("y", "y2", "y3")
    ]
    assert len(premise) == 3
    assert all(min(t.x) == 2 and 1 not in list(t.x) for t in premise)  # round 1 blank
    assert fig.layout.xaxis.range[0] < 1  # ... but on the axis
    assert fig.layout.yaxis.type == "log"  # premise spans 0.5 .. 101
    assert fig.layout.yaxis4.type != "log"  # β̂ is constant
    assert "round 1 blank" in fig.layout.title.subtitle.text


def test_fig6_six_cells_one_line_per_client(built):
    r = built["fedveca-fig6"]
    fig = r.figure
    titles = [a.text for a in fig.layout.annotations]
    assert len(titles) == 6 and titles[0].startswith("(a) τ") and titles[5].startswith("(f) ‖w")
    clients = [t for t in fig.data if (t.name or "").startswith("Client")]
    assert len(clients) == 4 * 5  # τ, β, δ, A for 5 clients
    assert sum(bool(t.showlegend) for t in clients) == 5
    cell_a = [t for t in fig.data if t.xaxis == "x"]
    assert len(cell_a) == 5 and list(cell_a[4].y)[-1] == 7.0  # client 5: τ = 3 + 4
    w = [t for t in fig.data if t.xaxis == "x6"]
    assert len(w) == 1 and min(w[0].x) == 2  # ||w_k − w_{k−1}|| from round 2
    assert "one run: seed 0, rounds 1–12 of 12" in fig.layout.title.subtitle.text


@pytest.mark.slow
def test_smoke_sweep_of_every_fedveca_spec_through_ray_tune_and_the_figures(
    ray_session, tmp_path, monkeypatch
):
    """The six specs as a user runs them: one `fedsweep sweep` (Ray Tune, real MLflow store, the
    derived stage included), then the figure builders. (A second sweep scheduling nothing is
    tested on a smaller spec in tests/sweep/test_derived.py.)"""
    from typer.testing import CliRunner

    from fedsweep.cli.main import app

    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    monkeypatch.delenv("FEDSWEEP_DATA_DIR", raising=False)  # CIFAR-10 panels: skipped offline
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    specs = [str(SWEEPS / f"{f}.yaml") for f in FIGURES]
    args = ["sweep", *specs, "--profile", "smoke", "--tracking-uri", uri]
    args += ["--data-dir", str(tmp_path / "data")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    client = get_client(uri)
    runs = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()])]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    derived = [r for r in children if "fedsweep.derived_from" in r.data.tags]
    assert derived and all(r.data.params.get("derived_from") for r in derived)
    assert all(r.data.tags["fedsweep.status"] == "finished" for r in children)
    out = tmp_path / "figures"
    results = build_figures(uri, "smoke", out, FIGURES, SWEEPS, png=False)
    assert sorted(r.figure_id for r in results) == sorted(FIGURES)
    for f in FIGURES:
        assert "reconstruction" in (out / f"{f}.html").read_text()
    index = (out / "index.html").read_text()
    assert all(f in index for f in FIGURES)
