"""The judge as its own layer (issue 63): a figure's verdicts from its plan and a run table,
nothing drawn; the profile's target reaches every figure's claims; the kinds are one object each."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from fedsweep.judge import FigureVerdicts, RunTable, judge
from fedsweep.judge.kinds import KINDS
from fedsweep.specs.claims import KINDS as SPEC_KINDS
from fedsweep.specs.figure import figure_plan
from fedsweep.specs.model import SweepSpec
from tests.helpers import log_trial_runs, small_spec, write_yaml

T = 12


SEEDS = (0, 1, 2)


def acc_history(hit: int, seed: int) -> list[float]:
    """A test accuracy that first reaches 0.9 at round ``hit`` (a seed's own small offset)."""
    return [0.5 + 0.4 * min(1.0, r / hit) - 0.001 * seed * (r < hit) for r in range(1, T + 1)]


def rounds_spec(figure: str = "tiny-rounds") -> dict:
    """A BHerd figure (two α curves) whose smoke profile has a target accuracy, claiming that
    α=0.5 reaches it in fewer rounds than α=1.0."""
    claim = {
        "id": "alpha05-fewer-rounds",
        "text": "α=0.5 reaches 90% in fewer rounds than α=1.0",
        "kind": "faster",
        "measure": "rounds_to_target",
        "curve": {"set": {"bherd.alpha": 0.5}},
        "versus": {"set": {"bherd.alpha": 1.0}},
        "margin": 0.0,
    }
    tree = small_spec(figure, seeds=list(SEEDS), rounds=T, claims=[claim])
    tree["profiles"]["smoke"] = {"target_acc": 0.9}
    return tree


HITS = {0.5: 4, 1.0: 9}  # α -> the round its runs reach 0.9


def table_of(plan) -> RunTable:
    """Per-run histories for every trial of ``plan`` (no training, no store)."""
    rows = []
    for i, t in enumerate(plan.trials):
        hit = HITS[t.config.bherd.alpha]
        for r, (acc, loss) in enumerate(
            zip(acc_history(hit, t.seed), [1.0 / r for r in range(1, T + 1)], strict=True),
            start=1,
        ):
            run = f"run{i}"
            rows.append((t.panel_id, t.curve, t.seed, run, r, "test_acc", acc))
            rows.append((t.panel_id, t.curve, t.seed, run, r, "test_loss", loss + 0.01 * hit))
    cols = ["panel_id", "curve", "seed", "run_id", "round", "metric", "value"]
    return RunTable.from_long(pd.DataFrame(rows, columns=cols))


def test_a_figures_verdicts_come_from_its_plan_and_a_run_table_without_drawing():
    """``judge(plan, runs)``: typed, frozen verdicts keyed by (figure, claim id, reading,
    regime), the profile's target read from the plan; nothing drawn, no store."""
    spec = SweepSpec.model_validate(rounds_spec())
    plan = figure_plan(spec, "smoke")
    got = judge(plan, table_of(plan))
    assert isinstance(got, FigureVerdicts) and got.figure == "tiny-rounds" and len(got) == 1
    (verdict,) = got
    assert verdict.id == "alpha05-fewer-rounds" and verdict.verdict == "supported", verdict
    assert got.get("alpha05-fewer-rounds") is verdict
    assert got.keys() == [("tiny-rounds", "alpha05-fewer-rounds", "", verdict.regime)]
    row = verdict.evidence[0]
    assert row["seeds"] == list(SEEDS) and row["effect"] == HITS[1.0] - HITS[0.5]
    # frozen: a consumer cannot rewrite a verdict (dataclasses.replace makes a new one)
    try:
        verdict.verdict = "contradicted"  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("a ClaimVerdict is frozen")
    # no runs: every claim "n/a", still one verdict per claim
    (empty,) = judge(plan, None)
    assert (empty.id, empty.verdict, empty.numbers) == ("alpha05-fewer-rounds", "n/a", "no runs")


def test_a_set_side_names_curves_by_their_typed_config(tmp_path):
    """``{set: {train.lr: 0.0001}}`` names the curve that writes ``train.lr: 1e-4``: YAML reads
    ``1e-4`` as a string, the typed config as 0.0001 (the default learning rate, written out);
    matched by the YAML value it named no curve, and the spec was refused."""
    from fedsweep.specs.load import load_spec

    claim = {
        "id": "default-lr-faster",
        "text": "the default learning rate converges faster than 1e-6",
        "kind": "faster",
        "measure": "loss_auc",
        "curve": {"set": {"train.lr": 0.0001}},
        "versus": {"set": {"train.lr": 0.000001}},
        "margin": 0.0,
    }
    tree = small_spec("typed-set", seeds=list(SEEDS), rounds=T, claims=[claim])
    tree["curves"] = [
        {"label": "lr written at its default", "set": {"train.lr": "1e-4"}},
        {"label": "lr 1e-6", "set": {"train.lr": 0.000001}},
    ]
    path = write_yaml(tmp_path / "typed-set.yaml", tree)
    spec = load_spec(path)
    assert spec.curve_list()[0].set["train.lr"] == "1e-4"  # YAML's reading, kept as written
    plan = figure_plan(spec, "smoke")
    assert plan.trials[0].config.train.lr == 0.0001
    rows = []
    cols = ["panel_id", "curve", "seed", "run_id", "round", "metric", "value"]
    for i, t in enumerate(plan.trials):
        level = 1.0 if t.config.train.lr == 0.0001 else 2.0  # the default lr: half the loss
        for r in range(1, T + 1):
            rows.append(
                (t.panel_id, t.curve, t.seed, f"r{i}", r, "test_loss", level / r + 0.01 * t.seed)
            )
    (verdict,) = judge(plan, RunTable.from_long(pd.DataFrame(rows, columns=cols)))
    assert verdict.verdict == "supported", verdict.numbers
    assert "lr written at its default − lr 1e-6" in verdict.numbers


def test_a_sweep_checks_its_claims_without_plotly_or_the_dashboards(tmp_path):
    """``fedsweep sweep --plan`` checks a spec's claims against the judge (its measures and
    guards) and imports neither Plotly nor any dashboard module (``-X importtime`` lists every
    import)."""
    import os

    spec = write_yaml(tmp_path / "tiny-rounds.yaml", rounds_spec())
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "fedsweep", "sweep", str(spec), "--plan",
         "--profile", "smoke", "--tracking-uri", f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"],
        capture_output=True, text=True, env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "fedsweep.judge.check" in res.stderr  # the claims were checked by the judge
    imported = [line.rsplit("|", 1)[-1].strip() for line in res.stderr.splitlines()]
    assert not [m for m in imported if m.split(".")[0] in ("plotly", "dashboards")]


def test_the_judge_imports_neither_plotly_nor_dashboards():
    code = (
        "import sys, fedsweep.judge, fedsweep.judge.check;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('plotly', 'dashboards'));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.fixture(scope="module")
def rounds_store(tmp_path_factory) -> tuple[str, Path]:
    """A real MLflow store with one finished run per smoke trial of :func:`rounds_spec` (logged
    as the sweep driver logs them, no training), and the folder of its spec."""
    from fedsweep.specs.load import load_spec

    tmp = tmp_path_factory.mktemp("rounds")
    sweeps = tmp / "sweeps"
    sweeps.mkdir()
    write_yaml(sweeps / "tiny-rounds.yaml", rounds_spec())
    uri = f"sqlite:///{tmp / 'store' / 'mlflow.db'}"

    def histories(trial) -> dict[str, list[float]]:
        accs = acc_history(HITS[trial.config.bherd.alpha], trial.seed)
        return {"test_acc": accs, "test_loss": [1.0 / r for r in range(1, T + 1)]}

    log_trial_runs(uri, load_spec(sweeps / "tiny-rounds.yaml"), histories)
    return uri, sweeps


def test_a_rounds_to_target_claim_on_a_bherd_figure_is_judged(rounds_store, tmp_path):
    """Before the judge was its own layer, only the intro figures' builders handed the claims
    their profile's target: a ``rounds_to_target`` claim on any other figure read "no data (a
    curve of the claim has no runs here)" with every run present. Through ``build_figures``,
    from a real MLflow store."""
    from dashboards import build_figures

    uri, sweeps = rounds_store
    (result,) = build_figures(uri, "smoke", tmp_path / "out", ["tiny-rounds"], sweeps, png=False)
    (check,) = result.claims
    assert check.verdict == "supported", check.numbers
    assert "no data" not in check.numbers
    assert result.verdicts.get("alpha05-fewer-rounds") == check


def test_the_api_judges_a_figures_claims_without_drawing_or_writing(
    rounds_store, tmp_path, monkeypatch
):
    """``fedsweep.api.claims``: the judge from the plan and the store; no figure is built (the
    builder would fail here) and no file is written (not even a temporary folder)."""

    import dashboards.build
    from fedsweep import api

    uri, sweeps = rounds_store

    def refuse(*args, **kwargs):
        raise AssertionError("api.claims drew or wrote something")

    monkeypatch.setattr(dashboards.build, "build_figures", refuse)
    monkeypatch.setattr(tempfile, "TemporaryDirectory", refuse)
    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    monkeypatch.chdir(tmp_path)
    rows = api.claims("tiny-rounds", "smoke", tracking_uri=uri, sweeps_dir=sweeps)
    assert list(rows["id"]) == ["alpha05-fewer-rounds"]
    assert list(rows["verdict"]) == ["supported"] and list(rows["seeds"]) == [len(SEEDS)]
    assert list(tmp_path.iterdir()) == []


def test_every_kind_the_specs_allow_is_one_object_of_the_judge():
    assert sorted(KINDS) == sorted(SPEC_KINDS)
    assert all(k.name == name and callable(k.parts) for name, k in KINDS.items())
