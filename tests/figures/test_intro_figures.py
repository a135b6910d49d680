"""The introduction-to-FL figures (sweeps/intro-*.yaml, dashboards/papers/intro/): the specs at every
profile (no Ray), the rounds-to-target helper, the claim criteria on synthetic curves, and the
builders on a store of hand-logged runs (real MLflow sqlite, no training, no Ray)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
import yaml

from dashboards import BUILDERS, build_figures
from dashboards import claims as C
from dashboards import registry as R
from dashboards.model import Panel, run_base
from dashboards.papers.intro import claims as IC
from dashboards.papers.intro import figures as intro
from dashboards.style import wrap_subtitle
from dashboards.targets import Reach, rounds_to_target, speedup
from fedsweep.sweep.spec import CurveSpec, SpecError, expand, load_spec
from fedsweep.tracking.store import ensure_experiment, get_client

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
INTRO = ["intro-fedavg", "intro-epochs", "intro-sampling", "intro-fedopt", "intro-selection",
         "intro-cohort"]  # fmt: skip
TARGETED = ["intro-fedavg", "intro-epochs", "intro-cohort"]


# ---------------------------------------------------------------------------------- specs
@pytest.mark.parametrize("figure", INTRO)
def test_intro_spec_expands_at_every_profile(figure):
    spec = load_spec(SWEEPS / f"{figure}.yaml")  # validates every profile's trials
    assert spec.figure == figure and spec.resources.cpu == 1 and spec.claims
    assert BUILDERS[figure] is not None
    for profile in ("paper", "quick", "smoke"):
        trials = expand(spec, profile)
        assert trials and all(t.config.data.num_clients == 100 for t in trials)
        if figure in TARGETED:
            assert 0 < spec.profiles[profile].target_acc < 1
        if figure not in ("intro-fedavg", "intro-sampling"):  # these add an IID panel
            assert {t.config.data.partition for t in trials} == {"shards"}
    paper, smoke = expand(spec, "paper"), expand(spec, "smoke")
    assert all(
        t.config.model.name == "cnn-mcmahan" and t.config.data.dataset == "mnist" for t in paper
    )
    assert all(t.config.train.rounds <= 3 and t.config.data.dataset == "mnist-5k" for t in smoke)
    assert spec.profiles["quick"].data_fallback == "mnist-5k"


def test_intro_spec_settings():
    fedavg = expand(load_spec(SWEEPS / "intro-fedavg.yaml"), "paper")
    sgd = [t for t in fedavg if t.curve.startswith("FedSGD")]
    assert {t.config.train.batch_size for t in sgd} == {"full"}
    assert {t.config.cohort.fraction for t in fedavg} == {0.1}
    assert {t.config.data.partition for t in fedavg} == {"iid", "shards"}
    sampling = expand(load_spec(SWEEPS / "intro-sampling.yaml"), "quick")
    assert {(t.config.sampler, t.config.uniform.weighting) for t in sampling} == {
        ("replacement", "renorm"),
        ("uniform", "scheme2"),
    }
    cohort = expand(load_spec(SWEEPS / "intro-cohort.yaml"), "quick")
    assert sorted({t.config.cohort.size for t in cohort}) == [10, 20, 50, 100]
    fedopt = load_spec(SWEEPS / "intro-fedopt.yaml")
    assert len(fedopt.curve_list()) == 100  # 4 methods x 5 eta_l x 5 eta_s
    quick = expand(fedopt, "quick")
    assert len({t.curve for t in quick}) == 24 and len(quick) == 48
    assert {t.config.server_optimizer for t in quick} == {"sgd", "adagrad", "adam", "yogi"}
    adam = [t for t in quick if t.curve == "FedAdam η_l=1e-1, η_s=1e-2"][0].config
    assert (adam.train.lr, adam.fedopt.lr) == (0.1, 0.01)
    avg = [t for t in quick if t.curve == "FedAvg η_l=1e-2, η_s=1e0"][0].config
    assert (avg.train.lr, avg.server_sgd.lr) == (0.01, 1.0)


def test_profile_curve_subset_is_checked(tmp_path):
    tree = yaml.safe_load((SWEEPS / "intro-epochs.yaml").read_text())
    tree["profiles"]["quick"]["curves"] = ["E=1", "E=3"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    with pytest.raises(SpecError, match=r"profiles.quick.curves.*'E=3'"):
        load_spec(path)
    tree["profiles"]["quick"]["curves"] = ["E=20", "E=1"]
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    spec = load_spec(path)
    assert [c.label for c in spec.profile_curves("quick")] == ["E=1", "E=20"]  # spec order
    assert {t.curve for t in expand(spec, "quick")} == {"E=1", "E=20"}
    assert len(expand(spec, "paper")) == 15


# ------------------------------------------------------------------------ rounds to target
def test_rounds_to_target_and_speedup():
    s = pd.Series([0.2, 0.5, 0.79, 0.8, 0.7], index=[1, 2, 3, 4, 5])
    r = rounds_to_target(s, 0.8)
    assert (r.rounds, r.horizon, r.text) == (4, 5, "4")
    miss = rounds_to_target(s, 0.9)
    assert (miss.rounds, miss.low, miss.high, miss.text) == (
        None,
        6.0,
        math.inf,
        "> 5 (not reached)",
    )
    assert rounds_to_target(pd.Series(dtype=float), 0.5) is None
    assert rounds_to_target(pd.Series([math.nan, 0.95], index=[1, 2]), 0.9).rounds == 2
    assert speedup(Reach(40, 50), Reach(8, 50)).text == "5.0×"
    assert speedup(Reach(None, 50), Reach(10, 50)).text == "≥ 5.1×"  # FedSGD: > 50 rounds
    assert speedup(Reach(40, 50), Reach(None, 50)).text == "—"


# ------------------------------------------------------------------------ claim criteria
ONE = [Panel("all", "", {})]
#: what the hand-built curves' overrides apply to (their run configs): an intro spec's base
BASE = run_base(load_spec(SWEEPS / "intro-cohort.yaml"))


def make(curves, values: dict, panels=ONE, diverged=None, target=None, long=None):
    """ClaimData from {(panel_id, label, metric): [mean per round 1..T]}."""
    rows = [
        (pid, label, metric, t, y, 0.0, 1)
        for (pid, label, metric), ys in values.items()
        for t, y in enumerate(ys, start=1)
    ]
    agg = pd.DataFrame(rows, columns=["panel_id", "curve", "metric", "round", "mean", "std", "n"])
    return C.ClaimData(agg, curves, panels, diverged or {}, target=target, long=long, base=BASE)


def cv(label: str, **kv) -> CurveSpec:
    return CurveSpec(label=label, set={k.replace("__", "."): v for k, v in kv.items()})


def ramp(hit: int | None, T: int = 12, top: float = 0.9) -> list[float]:
    """An accuracy curve that first reaches 0.8 at round ``hit`` (never when None)."""
    if hit is None:
        return [0.5 + 0.2 * t / T for t in range(1, T + 1)]  # stays below 0.7
    return [0.5 if t < hit else top for t in range(1, T + 1)]


FEDAVG_CURVES = [cv("FedSGD", train__batch_size="full")] + [
    cv(f"B={b}", train__batch_size=b) for b in (10, 50)
]


def test_fedavg_fewer_rounds_criterion():
    panels = [Panel("p=iid", "IID", {}), Panel("p=shards", "Non-IID", {})]

    def values(sgd, b10, b50):
        out = {}
        for p in panels:
            out |= {
                (p.panel_id, "FedSGD", "test_acc"): ramp(sgd),
                (p.panel_id, "B=10", "test_acc"): ramp(b10),
                (p.panel_id, "B=50", "test_acc"): ramp(b50),
            }
        return out

    verdict, numbers = IC.fedavg_fewer_rounds(
        make(FEDAVG_CURVES, values(None, 2, 6), panels, target=0.8)
    )
    assert verdict == "yes", numbers
    assert "FedSGD > 12" in numbers and "B=10 2 (≥ 6.5×)" in numbers
    # FedSGD reaches at 10: B=50 at round 6 is only 1.7x faster
    verdict, numbers = IC.fedavg_fewer_rounds(
        make(FEDAVG_CURVES, values(10, 2, 6), panels, target=0.8)
    )
    assert verdict == "no" and "B=50 6 (1.7×)" in numbers
    # a FedAvg curve that never reaches the target: no
    assert (
        IC.fedavg_fewer_rounds(make(FEDAVG_CURVES, values(None, 2, None), panels, target=0.8))[0]
        == "no"
    )
    assert IC.fedavg_fewer_rounds(make(FEDAVG_CURVES, values(None, 2, 6), panels))[0] == "n/a"
    assert (
        IC.fedavg_fewer_rounds(make(FEDAVG_CURVES[1:], values(None, 2, 6), panels, target=0.8))[0]
        == "n/a"
    )


E_CURVES = [cv(f"E={e:g}", train__local_epochs=e) for e in (1.0, 2.0, 5.0, 10.0, 20.0)]


def test_e_interior_fastest_criterion():
    def values(hits):
        return {
            ("all", f"E={e:g}", "test_acc"): ramp(h)
            for e, h in zip((1, 2, 5, 10, 20), hits, strict=True)
        }

    verdict, numbers = IC.e_interior_fastest(make(E_CURVES, values([9, 6, 4, 4, 7]), target=0.8))
    assert verdict == "yes" and "E=1: 9" in numbers and "E=20: 7" in numbers
    assert IC.e_interior_fastest(make(E_CURVES, values([9, 6, 4, 4, 4]), target=0.8))[0] == "no"
    assert IC.e_interior_fastest(make(E_CURVES, values([3, 6, 4, 4, 7]), target=0.8))[0] == "no"
    # not reached within T counts as T + 1: slower than any that reached
    assert (
        IC.e_interior_fastest(make(E_CURVES, values([None, 6, 4, 5, None]), target=0.8))[0] == "yes"
    )
    assert IC.e_interior_fastest(make(E_CURVES, values([None] * 5), target=0.8))[0] == "no"


SCHEMES = [
    cv("Scheme 1", sampler="replacement"),
    cv("Scheme 2", sampler="uniform", uniform__weighting="scheme2"),
]


def test_replacement_faster_criterion():
    fast = [2.0 - 0.1 * t for t in range(12)]
    slow = [2.0 - 0.08 * t for t in range(12)]
    data = make(
        SCHEMES, {("all", "Scheme 1", "train_loss"): fast, ("all", "Scheme 2", "train_loss"): slow}
    )
    verdict, numbers = IC.replacement_faster(data)
    assert verdict == "yes" and "train-loss AUC scheme 1" in numbers
    data = make(
        SCHEMES, {("all", "Scheme 1", "train_loss"): slow, ("all", "Scheme 2", "train_loss"): fast}
    )
    assert IC.replacement_faster(data)[0] == "no"
    assert IC.replacement_faster(make(SCHEMES[:1], {}))[0] == "n/a"


GRID = [
    cv(f"{m} {lr}/{s}", server_optimizer=o, train__lr=lr, **{key: s})
    for m, o, key in (
        ("FedAvg", "sgd", "server_sgd__lr"),
        ("FedAdam", "adam", "fedopt__lr"),
        ("FedAdagrad", "adagrad", "fedopt__lr"),
        ("FedYogi", "yogi", "fedopt__lr"),
    )
    for lr in (0.01, 0.1)
    for s in (0.1, 1.0)
]


def grid_values(finals: dict[str, float]) -> dict:
    return {("all", c.label, "test_acc"): [0.3] * 11 + [finals.get(c.label, 0.5)] for c in GRID}


def test_adaptive_outperform_picks_the_best_grid_point():
    finals = {
        "FedAvg 0.1/1.0": 0.80,
        "FedAdam 0.01/0.1": 0.85,
        "FedAdagrad 0.1/0.1": 0.82,
        "FedYogi 0.1/0.1": 0.84,
        "FedAdam 0.1/1.0": 0.99,  # diverged: not a candidate
    }
    div = {("all", "FedAdam 0.1/1.0"): [(0, 5)]}
    data = make(GRID, grid_values(finals), diverged=div)
    assert IC.best_of_grid(data, "all", "adam") == ("FedAdam 0.01/0.1", 0.85)
    assert IC.best_of_grid(data, "all", "sgd") == ("FedAvg 0.1/1.0", 0.80)
    verdict, numbers = IC.adaptive_outperform(data)
    assert verdict == "yes", numbers
    assert "FedAvg 0.8000 (FedAvg 0.1/1.0)" in numbers
    # the diverged grid point is no evidence, and it was never read: the claim stays testable
    [check] = R.check_claims(["The adaptive server optimizers outperform FedAvg"], data)
    assert check.verdict == "yes"
    finals["FedYogi 0.1/0.1"] = 0.79
    assert IC.adaptive_outperform(make(GRID, grid_values(finals), diverged=div))[0] == "no"


def test_informed_early_criterion():
    curves = [
        cv("Random", sampler="uniform"),
        cv("PoC", sampler="poc"),
        cv("DivFL", sampler="divfl"),
    ]
    slow = [2.0 - 0.1 * t for t in range(12)]
    fast = [1.5 - 0.1 * t for t in range(6)] + [2.0 - 0.1 * t for t in range(6, 12)]
    late = [v + 0.01 for v in slow[:6]] + [0.1] * 6  # better only after round 6 = T/2
    vals = {("all", "Random", "train_loss"): slow, ("all", "PoC", "train_loss"): fast}
    verdict, numbers = IC.informed_early(
        make(curves, vals | {("all", "DivFL", "train_loss"): fast})
    )
    assert verdict == "yes" and "t ≤ 6" in numbers
    assert IC.informed_early(make(curves, vals | {("all", "DivFL", "train_loss"): late}))[0] == "no"


M_CURVES = [cv(f"M={m}", cohort__size=m) for m in (10, 20, 50, 100)]


def test_cohort_diminishing_criterion():
    def values(hits):
        return {
            ("all", f"M={m}", "test_acc"): ramp(h)
            for m, h in zip((10, 20, 50, 100), hits, strict=True)
        }

    # 10 -> 20 halves the rounds (2x per doubling), 50 -> 100 saves nothing (1x)
    verdict, numbers = IC.cohort_diminishing(make(M_CURVES, values([10, 5, 4, 4]), target=0.8))
    assert verdict == "yes" and "M=10→20 2.00×" in numbers and "M=50→100 1.00×" in numbers
    assert IC.cohort_diminishing(make(M_CURVES, values([6, 6, 8, 4]), target=0.8))[0] == "no"
    # M=10 not reached: R > 12, so its gain is at least 13/5 per doubling: still decided
    assert IC.cohort_diminishing(make(M_CURVES, values([None, 5, 4, 4]), target=0.8))[0] == "yes"
    # M=100 not reached: the large gain is below 1, the small one 2: decided
    assert IC.cohort_diminishing(make(M_CURVES, values([10, 5, 4, None]), target=0.8))[0] == "yes"
    # M=10 and M=20 not reached: undecided -> n/a
    verdict, numbers = IC.cohort_diminishing(make(M_CURVES, values([None, None, 4, 4]), target=0.8))
    assert verdict == "n/a" and "undecided" in numbers


def long_table(series: dict[tuple[str, int], list[float]]) -> pd.DataFrame:
    rows = [
        ("f", "all", label, seed, f"{label}-{seed}", t, "train_acc", v)
        for (label, seed), ys in series.items()
        for t, v in enumerate(ys, start=1)
    ]
    return pd.DataFrame(
        rows, columns=["figure", "panel_id", "curve", "seed", "run_id", "round", "metric", "value"]
    )


def test_catastrophic_failures_counted_per_run():
    smooth = [0.2 + 0.05 * t for t in range(12)]
    crash = smooth[:5] + [0.15] + smooth[6:]  # 0.4 -> 0.15: below half
    dip = smooth[:5] + [0.3] + smooth[6:]  # 0.4 -> 0.3: not a failure
    long = long_table({("M=10", 0): crash, ("M=10", 1): dip, ("M=20", 0): smooth})
    f = IC.training_failures(long)
    assert list(zip(f["curve"], f["seed"], f["round"], strict=True)) == [("M=10", 0, 6)]
    agg_vals = {("all", label, "train_acc"): smooth for label in ("M=10", "M=20")}
    data = make(M_CURVES[:2], agg_vals, long=long)
    verdict, numbers = IC.failures_happen(data)
    assert verdict == "yes" and "M=10: 1 in 1 run(s)" in numbers
    data = make(M_CURVES[:2], agg_vals, long=long_table({("M=10", 1): dip}))
    assert IC.failures_happen(data)[0] == "no"
    # the crashing run diverged: no evidence, and the claim is not testable
    div = {("all", "M=10"): [(0, 6)]}
    data = make(M_CURVES[:2], agg_vals, diverged=div, long=long)
    [check] = R.check_claims(["Catastrophic training failures happen"], data)
    assert check.verdict == "n/t" and "diverged" in check.shown


def test_intro_claims_are_not_testable_on_short_profiles():
    vals = {
        ("all", f"E={e:g}", "test_acc"): ramp(h, T=3)
        for e, h in zip((1, 2, 5, 10, 20), [3, 2, 1, 1, 3], strict=True)
    }
    [check] = R.check_claims(
        ["Too small and too large E both slow convergence"], make(E_CURVES, vals, target=0.8)
    )
    assert check.verdict == "n/t" and check.shown == "not testable at this profile (T=3)"


# ------------------------------------------------------------------------ builders (store)
def log_runs(uri: str, figure: str, values) -> None:
    """Log one finished run per smoke trial of ``figure`` with ``values(trial) -> {metric:
    [value per round]}`` (tags as the sweep driver writes them; no training)."""
    from mlflow.entities import Metric

    spec = load_spec(SWEEPS / f"{figure}.yaml")
    client = get_client(uri)
    exp = ensure_experiment(client, spec.figure, uri)
    for trial in expand(spec, "smoke"):
        tags = {
            "fedsweep.config_hash": trial.config_hash,
            "fedsweep.figure": figure,
            "fedsweep.status": "finished",
        }
        run = client.create_run(exp, tags=tags).info.run_id
        metrics = [
            Metric(key, float(v), 0, t)
            for key, ys in values(trial).items()
            for t, v in enumerate(ys, start=1)
        ]
        client.log_batch(run, metrics=metrics)


def hit_at(r: int, T: int = 12) -> list[float]:
    return [0.3 if t < r else 0.9 for t in range(1, T + 1)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Hand-logged smoke runs of 12 rounds (targets 50%) and the six figures built from them."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('intro-store') / 'mlflow.db'}"
    fedavg = {"FedSGD (B=∞, E=1)": None, "FedAvg B=50, E=1": 4, "FedAvg B=50, E=5": 3,
              "FedAvg B=10, E=1": 3, "FedAvg B=10, E=5": 2}  # fmt: skip
    log_runs(uri, "intro-fedavg", lambda t: {"test_acc": hit_at(fedavg[t.curve] or 99)})
    epochs = {"E=1": 8, "E=2": 5, "E=5": 3, "E=10": 4, "E=20": 6}
    log_runs(uri, "intro-epochs", lambda t: {"test_acc": hit_at(epochs[t.curve])})
    cohort = {"M=10": 8, "M=20": 4, "M=50": 3, "M=100": 3}
    crash = [0.2, 0.4, 0.6, 0.2, 0.5, 0.6, 0.7, 0.7, 0.7, 0.7, 0.8, 0.8]

    def cohort_values(t):
        train = crash if t.curve == "M=10" else [0.1 + 0.05 * r for r in range(12)]
        return {"test_acc": hit_at(cohort[t.curve]), "train_acc": train}

    log_runs(uri, "intro-cohort", cohort_values)

    def fedopt_values(t):
        best = {"FedAvg": 0.7, "FedAdagrad": 0.75, "FedAdam": 0.8, "FedYogi": 0.78}
        final = best[t.curve.split()[0]]
        return {"test_acc": [0.3] * 11 + [final], "train_loss": [1.0 - 0.05 * r for r in range(12)]}

    log_runs(uri, "intro-fedopt", fedopt_values)
    loss = {"test_acc": [0.5] * 12, "train_loss": [1.0 - 0.05 * r for r in range(12)]}
    log_runs(uri, "intro-sampling", lambda t: loss)
    log_runs(uri, "intro-selection", lambda t: loss)
    out = tmp_path_factory.mktemp("intro-figures")
    results = build_figures(uri, "smoke", out, INTRO, SWEEPS, png=False)
    return {r.figure_id: r for r in results}


def tables(fig: go.Figure) -> list:
    return [t for t in fig.data if t.type == "table"]


@pytest.mark.slow
def test_intro_figures_build(built):
    assert set(built) == set(INTRO)
    for fid, r in built.items():
        assert r.status == "complete" and r.error is None, (fid, r.error)
        assert r.figure.layout.title.text == r.title


def test_fedavg_table_rounds_and_speedups(built):
    r = built["intro-fedavg"]
    [table] = tables(r.figure)
    cols = table.cells.values
    assert list(cols[0])[0] == "FedSGD (B=∞, E=1)"
    assert list(cols[1]) == ["> 12 (not reached)", "4", "3", "3", "2"]  # IID rounds
    assert list(cols[2]) == ["(baseline)", "≥ 3.2×", "≥ 4.3×", "≥ 4.3×", "≥ 6.5×"]
    assert "target 50%" in r.figure.layout.title.subtitle.text
    assert any(
        "FedSGD (B=∞, E=1) > 12 (baseline), FedAvg B=50, E=1 4 (≥ 3.2×)" in n for n in r.notes
    )
    [claim] = r.claims
    assert claim.verdict == "yes", claim.numbers  # 12 rounds ≥ MIN_ROUNDS


def test_epochs_rounds_against_e(built):
    r = built["intro-epochs"]
    mean = [t for t in r.figure.data if (t.name or "").startswith("seed mean")][0]
    assert list(mean.x) == [1, 2, 5, 10, 20] and list(mean.y) == [8, 5, 3, 4, 6]
    assert r.figure.layout.xaxis2.type == "log"
    [claim] = r.claims
    assert claim.verdict == "yes", claim.numbers


def test_cohort_failures_and_diminishing_gains(built):
    r = built["intro-cohort"]
    [bars] = [t for t in r.figure.data if t.type == "bar"]
    assert list(bars.x) == ["10", "20", "50", "100"] and list(bars.y) == [1, 0, 0, 0]
    verdicts = {c.claim: c.verdict for c in r.claims}
    assert verdicts == {
        "larger cohorts give diminishing gains": "yes",
        "catastrophic training failures happen": "yes",
    }
    assert any("M=10: 1 (seed 0 t=4)" in n for n in r.notes)


def test_fedopt_draws_the_best_grid_point_per_method(built):
    r = built["intro-fedopt"]
    names = {t.name for t in r.figure.data if t.type == "scatter" and t.showlegend}
    assert len(names) == 4 and all("η_l=1e-1" in n for n in names)
    [table] = tables(r.figure)
    assert sum("★" in v for col in table.cells.values for v in col) == 4
    [claim] = r.claims
    assert claim.verdict == "yes", claim.numbers


def test_generic_intro_figures(built):
    for fid in ("intro-sampling", "intro-selection"):
        r = built[fid]
        layout = r.figure.layout.to_plotly_json()
        ytitles = [
            v.get("title", {}).get("text") for k, v in layout.items() if k.startswith("yaxis")
        ]
        assert "Training loss" in ytitles and "Test accuracy" in ytitles, ytitles
        assert BUILDERS[fid] is intro.build_generic
        note = load_spec(SWEEPS / f"{fid}.yaml").profiles["quick"].note
        lines = wrap_subtitle(note, 1100).split("<br>")
        assert len(lines) > 1 and max(map(len, lines)) <= (1100 - 120) / 7.5  # wrapped
    assert wrap_subtitle("a · b", 600) == "a<br>b"
