"""fedsweep's MLflow app (``fedsweep ui`` serves MLflow through it): MLflow's page with the
first-visit defaults of a new browser, and the runs page layout of fedsweep's experiments."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from fedsweep.cli.ui_app import (
    APP_NAME,
    FIRST_VISIT,
    fedsweep_pages,
    first_visit_script,
    page_state_key,
    with_first_visit,
)
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.store import VIEW_STATE, VIEW_TAG, ensure_experiment

ROOT = Path(__file__).resolve().parents[2]


def test_the_app_is_declared_as_an_mlflow_app_plugin():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared["mlflow.app"] == {APP_NAME: "fedsweep.cli.ui_app:create_app"}


def test_the_page_sets_the_training_view_and_each_fedsweep_experiments_layout(tmp_path):
    """MLflow 3.17 reads the GenAI | Model training choice from localStorage only (unset:
    GenAI); the page sets it, and the runs page state of fedsweep's experiments, only where the
    browser has none (a browser test runs the script: tests/cli/test_ui_browser.py)."""
    assert FIRST_VISIT["mlflow.workflowType_v1"] == "machine_learning"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = get_client(uri)
    ours = ensure_experiment(client, "fig", uri)
    plain = client.create_experiment("someone-elses")
    theirs = ensure_experiment(client, "overwritten", uri)  # a view saved over in the UI
    client.set_experiment_tag(theirs, VIEW_TAG, json.dumps({"name": "mine", "state": "{}"}))
    pages = fedsweep_pages(client)
    assert set(pages) == {ours} and plain not in pages
    assert json.loads(pages[ours]) == VIEW_STATE
    assert (
        page_state_key(ours)
        == f'MLflowLocalStorage-1.1-ExperimentPage-["{ours}"]-ReactComponentState'
    )
    script = first_visit_script({**pages, "9": '{"searchFilter":"</script>"}'})
    assert "</script>" not in script[: -len("</script>")]  # a value cannot end it early
    assert "getItem(k)===null" in script  # only keys the browser does not have
    values = json.loads(script.split("var v=", 1)[1].split(";for", 1)[0])
    assert json.loads(values["mlflow.workflowType_v1"]) == "machine_learning"
    assert json.loads(values[page_state_key(ours)]) == VIEW_STATE
    page = "<!doctype html><html><head><title>MLflow</title><script defer src=m.js></script>"
    served = with_first_visit(page, pages)
    assert served.startswith("<!doctype html><html><head><script>(function(){")
    assert served.index("workflowType_v1") < served.index("m.js")  # before MLflow's script
    assert with_first_visit("<html>no head</html>") == "<html>no head</html>"
