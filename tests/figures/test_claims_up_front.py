"""Issue 62, items 5 and 10: a declared claim that cannot be computed, or whose numbers are
nonsense, is refused before a sweep or a report starts, in one line naming the field."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.specs.claims import MAX_CLAIMS
from fedsweep.specs.load import SpecError, load_spec
from tests.helpers import small_spec, write_yaml

CLAIM = {"id": "half-faster", "text": "α=0.5 reaches the target first", "kind": "faster",
         "measure": "rounds_to_target", "curve": "alpha=0.5", "versus": "alpha=1.0",
         "margin": 0.0}  # fmt: skip


def _spec(tmp_path, *claims, **top):
    return write_yaml(tmp_path / "study.yaml", small_spec("study", claims=list(claims), **top))


def _one_error(tmp_path, *claims, **top) -> str:
    """The spec's error: its header line and ONE line naming the field."""
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, *claims, **top))
    lines = str(err.value).splitlines()
    assert len(lines) == 2 and lines[0].startswith("invalid sweep spec"), lines
    return lines[1]


def test_a_kind_typo_gets_a_did_you_mean_not_the_unions_noise(tmp_path):
    line = _one_error(tmp_path, {**CLAIM, "kind": "fastr"})
    assert line.startswith("  key `claims.0.kind`: unknown kind 'fastr'")
    assert "(did you mean 'faster'?)" in line and "allowed: faster, higher" in line
    line = _one_error(tmp_path, {**CLAIM, "kindd": "faster"})  # an unknown key: the claim's
    assert "key `claims.0.kindd`: unknown key; did you mean `kind`?" in line


@pytest.mark.parametrize("margin", [float("inf"), float("-inf"), float("nan")])
def test_a_non_finite_margin_is_refused(tmp_path, margin):
    line = _one_error(tmp_path, {**CLAIM, "measure": "loss_auc", "margin": margin})
    assert "key `claims.0.margin`: margin" in line and "is not a finite number" in line
    line = _one_error(tmp_path, {**CLAIM, "measure": "loss_auc", "fails_below": margin})
    assert "key `claims.0.fails_below`" in line


def test_a_categorical_over_is_refused_with_what_is_allowed(tmp_path):
    curves = [{"label": "a", "set": {"data.partition": "case1"}},
              {"label": "b", "set": {"data.partition": "case2"}}]  # fmt: skip
    claim = {"id": "mono", "text": "t", "kind": "monotone", "measure": "final_acc",
             "over": "data.partition", "margin": 0.0}  # fmt: skip
    line = _one_error(tmp_path, claim, curves=curves)
    assert "claims[0] (mono).over: 'data.partition' takes the value 'case1', which has no " in line
    assert "allowed: a config key whose curves set numbers" in line


def test_too_many_claims_are_refused_before_each_is_read(tmp_path):
    claims = [{**CLAIM, "id": f"c{i}", "measure": "loss_auc"} for i in range(MAX_CLAIMS + 1)]
    line = _one_error(tmp_path, *claims)
    assert f"key `claims`: {MAX_CLAIMS + 1} claims; allowed: at most {MAX_CLAIMS} per spec" in line
    claims = [{**CLAIM, "id": f"c{i}", "measure": "loss_auc"} for i in range(MAX_CLAIMS)]
    assert len(load_spec(_spec(tmp_path, *claims)).claims) == MAX_CLAIMS


def test_a_claim_without_its_target_stops_the_sweep_plan_and_the_report(tmp_path):
    """``rounds_to_target`` on a profile without ``target_acc`` was accepted, swept, and read
    "no data" with every run present: ``sweep --plan`` (and ``report``) exit 2 in one line
    naming the claim and the missing field; a profile that sets it plans."""
    from fedsweep.tracking.connect import get_client

    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    path = _spec(tmp_path, CLAIM, {**CLAIM, "id": "speedup", "measure": "log2_speedup"})
    runner = CliRunner()
    res = runner.invoke(app, ["sweep", str(path), "--plan", "--profile", "smoke",
                              "--tracking-uri", store])  # fmt: skip
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    text = " ".join(res.output.split())
    assert "claims[0] (half-faster).measure: 'rounds_to_target' counts the rounds" in text
    assert "profiles.smoke.target_acc is not set" in text and "Traceback" not in text

    get_client(store)
    res = runner.invoke(app, ["report", "--figure", str(path), "--profile", "smoke",
                              "--tracking-uri", store])  # fmt: skip
    assert res.exit_code == 2 and "profiles.smoke.target_acc is not set" in res.output
    assert not (tmp_path / "claims-smoke.json").exists()

    profiles = {p: {"target_acc": 0.5} for p in ("paper", "quick", "smoke")}
    path = _spec(tmp_path, CLAIM, profiles=profiles)
    res = runner.invoke(app, ["sweep", str(path), "--plan", "--profile", "smoke",
                              "--tracking-uri", store])  # fmt: skip
    assert res.exit_code == 0, res.output


def test_a_claim_on_training_metrics_the_runs_do_not_log_stops_the_sweep_plan(tmp_path):
    """A measure declares the metrics it reads beyond the test set's (issue 62, item 5):
    FedWalk's early-window training loss on runs with ``eval.train_metrics: false`` (they log
    no training loss) is refused in one line naming the claim, the curve and the setting; the
    same claim on runs that log them plans."""
    claim = {**CLAIM, "id": "early", "kind": "faster", "measure": "fedwalk.early_train_loss"}
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    runner = CliRunner()
    path = _spec(tmp_path, claim)  # small_spec's runs log no training metrics
    res = runner.invoke(app, ["sweep", str(path), "--plan", "--profile", "smoke",
                              "--tracking-uri", store])  # fmt: skip
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    text = " ".join(res.output.split())
    assert "claims[0] (early).measure: 'fedwalk.early_train_loss' reads the training set" in text
    assert "the runs of 'alpha=0.5' at profile smoke do not log them" in text
    assert "eval.train_metrics: false" in text and "Traceback" not in text

    path = write_yaml(
        tmp_path / "study.yaml", small_spec("study", claims=[claim], eval_={"train_metrics": True})
    )
    res = runner.invoke(app, ["sweep", str(path), "--plan", "--profile", "smoke",
                              "--tracking-uri", store])  # fmt: skip
    assert res.exit_code == 0, res.output
