"""One way to name things (issue 37): every command that takes a figure accepts its id or its
spec file, with a "did you mean" for both; ``figures``/``report`` without ``--profile`` read the
profile the store's runs were swept at; a config-key filter never matches a run that does not
use the key's section; help reads well at 80 columns; next steps are offered."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedsweep.cli.common import reflow
from fedsweep.cli.main import app
from tests.cli.test_exit_codes import one_line_exit_2

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def invoke(*args, columns: int = 200):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": str(columns)})


@pytest.fixture(autouse=True)
def _in_a_clone(tmp_path, monkeypatch):
    """cwd = a folder with the repository's sweeps/ (as in a clone), its own default store."""
    (tmp_path / "sweeps").symlink_to(ROOT / "sweeps")
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "mlruns"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)


# ----------------------------------------------------------------- a figure id or a spec path
def test_sweep_takes_a_figure_id_or_a_spec_path_with_did_you_mean(tmp_path):
    uri = f"sqlite:///{tmp_path / 'plan.db'}"
    by_id = invoke("sweep", "bherd-fig4e", "--profile", "smoke", "--plan", "--tracking-uri", uri)
    by_path = invoke(
        "sweep", "sweeps/bherd-fig4e.yaml", "--profile", "smoke", "--plan", "--tracking-uri", uri
    )
    assert by_id.exit_code == 0, by_id.output
    assert by_id.output == by_path.output  # the same plan: 6 trials of bherd-fig4e
    assert by_id.output.count("bherd-fig4e|smoke|") == 6
    # typos with one nearest name (never a tie between fig4d and fig4e)
    one_line_exit_2(invoke("sweep", "bherd-fig4ab", "--plan"), "did you mean 'bherd-fig4abc'?")
    one_line_exit_2(
        invoke("sweep", "sweeps/bherd-fig4abd.yaml", "--plan"),
        "sweep spec not found: sweeps/bherd-fig4abd.yaml",
        "did you mean 'sweeps/bherd-fig4abc.yaml'?",
    )
    one_line_exit_2(  # a spec file named without its folder
        invoke("sweep", "bherd-fig4e.yaml", "--plan"), "did you mean 'sweeps/bherd-fig4e.yaml'?"
    )


def test_a_bare_sweep_asks_for_a_figure_or_an_explicit_profile(tmp_path):
    """``fedsweep sweep`` alone would start every spec at the quick profile (hours)."""
    one_line_exit_2(invoke("sweep"), "name the figure(s) to sweep", "--profile")
    plan = invoke("sweep", "--plan", "--tracking-uri", f"sqlite:///{tmp_path / 'p.db'}")
    assert plan.exit_code == 0 and "bherd-fig3a|quick|" in plan.output  # a plan costs nothing


def test_figures_runs_compare_report_and_robustness_take_ids_and_paths(tmp_path):
    """Each names the figure the same way: a typo of an id or a path gets the nearest one."""
    uri = f"sqlite:///{tmp_path / 'none.db'}"  # never reached: the names fail first
    for command in (
        ["figures", "--figure"],
        ["runs", "--figure"],
        ["compare", "--figure"],
        ["report", "--figure"],
        ["robustness"],
    ):
        extra = ["--axis", "train.lr=0.1,0.2"] if command == ["robustness"] else []
        res = invoke(*command, "sweeps/bherd-fig4abd.yaml", *extra, "--tracking-uri", uri)
        one_line_exit_2(res, "did you mean 'sweeps/bherd-fig4abc.yaml'?")


def test_figures_draws_a_spec_path_as_its_figure_id(tmp_path):
    """``--figure sweeps/<id>.yaml`` is the id: the same files as ``--figure <id>``."""
    store = _store(tmp_path, [])
    a = invoke("figures", "--figure", "sweeps/bherd-fig4e.yaml", "--profile", "smoke",
               "--out", tmp_path / "a", "--format", "png", "--tracking-uri", store)  # fmt: skip
    assert a.exit_code == 1, a.output  # issue 62: nothing drawn is no success
    assert "bherd-fig4e: 0 runs" in a.output
    assert (
        "6 of 6 runs missing at --profile smoke; run them: fedsweep sweep bherd-fig4e" in a.output
    )
    assert "nothing drawn: the store" in a.output  # never a silent exit 0


# ------------------------------------------------------------- the profile the store was swept at
def _store(tmp_path, runs: list[tuple[str, str, dict]]) -> str:
    """A store with runs (experiment, profile, params) made directly with MLflow, oldest first."""
    import mlflow
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir(exist_ok=True)
    client = MlflowClient(uri)
    mlflow.set_tracking_uri(uri)
    client.search_experiments()  # creates the schema
    for exp, profile, params in runs:
        found = client.get_experiment_by_name(exp)
        eid = found.experiment_id if found else client.create_experiment(exp)
        run = client.create_run(eid, tags={"fedsweep.figure": exp, "fedsweep.profile": profile})
        for key, value in params.items():
            client.log_param(run.info.run_id, key, value)
        for key in ("test_acc", "test_loss"):
            client.log_metric(run.info.run_id, key, 0.5, step=1)
        client.set_terminated(run.info.run_id)
        time.sleep(0.01)  # distinct start times: the order is the test's, not a clock tie
    mlflow.set_tracking_uri(None)
    return uri


def test_store_profile_is_the_newest_sweep_of_the_figures(tmp_path):
    from fedsweep.sweep.swept import swept_profiles

    uri = _store(
        tmp_path,
        [("bherd-fig3a", "quick", {}), ("bherd-fig4e", "smoke", {}), ("bherd-fig3a", "paper", {})],
    )
    assert [s.profile for s in swept_profiles(uri, ["bherd-fig4e"])] == ["smoke"]
    assert [s.profile for s in swept_profiles(uri, ["bherd-fig3a"])] == ["paper", "quick"]
    assert [s.profile for s in swept_profiles(uri)] == ["paper", "smoke", "quick"]
    assert swept_profiles(uri, ["fedveca-fig3"]) == []
    assert swept_profiles(f"sqlite:///{tmp_path / 'nothing.db'}") == []
    res = invoke("figures", "--figure", "bherd-fig3a", "--out", tmp_path / "f", "--format", "png",
                 "--tracking-uri", uri)  # fmt: skip
    assert "profile: paper (the store's newest sweep of these figures; it also has quick runs: "
    "add --profile quick)" in " ".join(res.output.split()), res.output


# --------------------------------------------------------------- filters follow the used sections
def test_a_config_key_filter_skips_runs_that_do_not_use_its_section(tmp_path):
    uri = _store(
        tmp_path,
        [
            ("study", "quick", {"selector": "bherd", "bherd.alpha": "0.5", "train.lr": "0.1"}),
            ("study", "quick", {"selector": "none", "bherd.alpha": "0.5", "train.lr": "0.1"}),
        ],
    )
    bherd = invoke("runs", "--where", "bherd.alpha=0.5", "--tracking-uri", uri)
    assert bherd.exit_code == 0, bherd.output
    assert "1 run(s)" in bherd.output  # the FedAvg run logs bherd.alpha but does not use it
    both = invoke("runs", "--where", "train.lr=0.1", "--tracking-uri", uri)
    assert "2 run(s)" in both.output
    cmp = invoke("compare", "--where", "bherd.alpha=0.5", "--out", tmp_path / "c", "--no-png",
                 "--tracking-uri", uri)  # fmt: skip
    assert cmp.exit_code == 0, cmp.output
    assert "1 config(s), 1 run(s)" in (tmp_path / "c" / "compare.html").read_text()


def test_compare_takes_a_figure(tmp_path):
    uri = _store(tmp_path, [("bherd-fig4e", "smoke", {}), ("bherd-fig3a", "smoke", {})])
    res = invoke("compare", "--figure", "bherd-fig4e", "--out", tmp_path / "c", "--no-png",
                 "--tracking-uri", uri)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "1 config(s), 1 run(s)" in (tmp_path / "c" / "compare.html").read_text()
    curves = (tmp_path / "c" / "compare-curves.csv").read_text().splitlines()
    assert len(curves) == 1 + 2  # the header, then test_loss and test_acc at round 1
    one_line_exit_2(
        invoke("compare", "--figure", "bherd-fig4ab", "--tracking-uri", uri),
        "did you mean 'bherd-fig4abc'?",
    )


# ----------------------------------------------------------------------------- help at 80 columns
COMMANDS = [[], ["run"], ["sweep"], ["figures"], ["report"], ["robustness"], ["validate"],
            ["runs"], ["compare"], ["ui"], ["team"], ["team", "up"]]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "fedsweep")
def test_help_fits_80_columns_without_cutting_anything(command):
    res = invoke(*command, "--help", columns=80)
    assert res.exit_code == 0, res.output
    for line in res.output.splitlines():
        assert len(line) <= 80 and "…" not in line, line
    assert "[[" not in res.output  # the usage line reads [FIGURE]..., not [[SPEC]...]...


def test_help_paragraphs_are_reflowed_not_hard_wrapped():
    doc = """First line.

    A paragraph hard-wrapped
    in the source, kept as one.

    - a list item
    - another
      continued"""
    assert reflow(doc) == (
        "First line.\n\nA paragraph hard-wrapped in the source, kept as one.\n\n"
        "- a list item\n- another\n  continued"
    )
    text = invoke("compare", "--help", columns=80).output
    assert "Runs of one config that differ only in the seed form one group" in " ".join(
        text.split()
    )
    # at 80 columns, no description line is cut short where the source broke it
    assert "differ only in\n" not in text


# ------------------------------------------------------------------------------- next steps
def test_the_missing_store_error_names_the_commands_that_make_runs(tmp_path):
    res = invoke("runs", "--tracking-uri", f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}")
    one_line_exit_2(res, "no MLflow store", "fedsweep sweep bherd-fig3a --profile smoke")


def test_run_offers_its_next_steps():
    from fedsweep.cli.run import next_steps

    here = next_steps("abc123", None)
    assert here[0].startswith("next: fedsweep compare abc123") and "fedsweep ui" in here[1]
    other = next_steps("abc123", "sqlite:////elsewhere/mlflow.db")
    assert all("--tracking-uri sqlite:////elsewhere/mlflow.db" in line for line in other)


def test_add_curves_is_suggested_for_its_typo(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "extends: sweeps/bherd-fig4e.yaml\nfigure: mine\ntitle: Mine\n"
        "add_curvs:\n  - label: x\n    set: {bherd.alpha: 0.3}\n"
    )
    one_line_exit_2(
        invoke("sweep", tmp_path / "mine.yaml", "--plan"),
        "did you mean `add_curves`?",
        "curves, add_curves,",
    )


def test_no_environment_leaks_between_tests():
    assert "MLFLOW_TRACKING_URI" not in os.environ
