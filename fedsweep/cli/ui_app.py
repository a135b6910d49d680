"""fedsweep's MLflow server app: MLflow's own app (every route, store and check as ``mlflow ui``
sets them up), whose page opens a new browser in MLflow's "Model training" view.

MLflow 3.17's UI decides between its GenAI view (an experiment opens on a traces "Overview")
and its training-runs view from the browser's ``localStorage`` alone: the "GenAI | Model
training" switch writes ``mlflow.workflowType_v1``, a missing key means GenAI, and a
``workflowType`` query in the URL counts only for that URL. The experiment tag
``mlflow.experimentKind`` is not read while that switch exists (``mlflow/server/js/build/
static/js/main.*.js``: the experiment kind is ``workflowType`` whenever the switch is on, a
constant ``true``). So a click on an experiment in the list (a link without the query) of a
browser that never used the switch opened ``#/experiments/N/overview/usage?workflowType=genai``.

This app serves MLflow's ``index.html`` with a few lines that, before MLflow's script runs, give
the keys a new browser has not set yet their training-runs values (:data:`FIRST_VISIT`): the
"Model training" view, and the MLflow Assistant side panel not opened on its own (it takes a
third of the page from the charts). And an experiment with fedsweep's saved view
(``tracking.store.VIEW_STATE``) that this browser has not opened yet gets that view's layout as
its own runs page state (MLflow keeps one per experiment, ``MLflowLocalStorage-1.1-
ExperimentPage-["<id>"]-ReactComponentState``): a click on it in the experiment list shows its
trials in one flat list grouped by figure line, not one collapsed parent run. A key the browser
already has (the switch used, the panel opened, an experiment's page changed) is left as it is.

Registered as the MLflow app plugin ``fedsweep`` (``pyproject.toml``:
``[project.entry-points."mlflow.app"]``, as MLflow registers its ``basic-auth``), which
``fedsweep ui`` starts with ``mlflow ui --app-name fedsweep``.
"""

from __future__ import annotations

import json
from pathlib import Path

#: the name ``mlflow ui --app-name`` takes (the entry point's name)
APP_NAME = "fedsweep"
#: localStorage keys (``<key>_v<version>``, JSON values, as MLflow's ``useLocalStorage`` writes
#: them) that a first visit gets, each only where the browser has none
FIRST_VISIT = {
    "mlflow.workflowType_v1": "machine_learning",
    "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": True,
}


#: MLflow's key of an experiment's runs page state (``ExperimentPage`` of ``11475`` in main.*.js)
PAGE_STATE_KEY = "MLflowLocalStorage-1.1-ExperimentPage-{ids}-ReactComponentState"


def page_state_key(experiment_id: str) -> str:
    """The localStorage key of one experiment's runs page state (its ids as a JSON list)."""
    return PAGE_STATE_KEY.format(ids=json.dumps([str(experiment_id)], separators=(",", ":")))


def first_visit_script(pages: dict[str, str] | None = None) -> str:
    """The ``<script>`` that sets :data:`FIRST_VISIT`'s keys, and the runs page state of each
    experiment of ``pages`` (id -> its state's JSON), that a browser does not have yet."""
    values = {key: json.dumps(value) for key, value in FIRST_VISIT.items()}
    values.update({page_state_key(e): state for e, state in (pages or {}).items()})
    # "</" cannot end the script early: a state's strings are JSON, "<" escaped
    values = json.dumps(values).replace("<", "\\u003c")
    return (
        "<script>(function(){try{var v=" + values + ";for(var k in v){"
        "if(window.localStorage.getItem(k)===null){window.localStorage.setItem(k,v[k]);}}"
        "}catch(e){}})();</script>"
    )


def with_first_visit(html: str, pages: dict[str, str] | None = None) -> str:
    """MLflow's ``index.html`` with :func:`first_visit_script` first in its ``<head>`` (before
    MLflow's deferred script reads the keys); unchanged if it has no ``<head>``."""
    head = html.find("<head>")
    if head < 0:
        return html
    at = head + len("<head>")
    return html[:at] + first_visit_script(pages) + html[at:]


def fedsweep_pages(store, limit: int = 1000) -> dict[str, str]:
    """Experiment id -> the state of fedsweep's saved view, for the ``limit`` most recently
    updated experiments of ``store`` (an MLflow tracking store) that have fedsweep's view (not
    one someone overwrote in the UI: :func:`tracking.store.view_tag_value`)."""
    from mlflow.entities import ViewType

    from fedsweep.tracking.store import VIEW_OWNER_KEY, VIEW_TAG

    found = store.search_experiments(
        view_type=ViewType.ACTIVE_ONLY, max_results=limit, order_by=["last_update_time DESC"]
    )
    pages = {}
    for exp in found:
        try:
            view = json.loads((exp.tags or {}).get(VIEW_TAG) or "null")
        except ValueError:
            continue
        if (
            isinstance(view, dict)
            and view.get(VIEW_OWNER_KEY)
            and isinstance(view.get("state"), str)
        ):
            pages[str(exp.experiment_id)] = view["state"]
    return pages


def add_first_visit(flask_app) -> None:
    """Serve the UI's page (the route ``/``, under MLflow's static prefix) with
    :func:`with_first_visit`; every other request goes to MLflow as before."""
    from flask import Response, request
    from mlflow.server.handlers import _add_static_prefix, _get_tracking_store

    index_route = _add_static_prefix("/")

    def first_visit_page():
        if request.method != "GET" or request.path != index_route:
            return None
        try:
            html = (Path(flask_app.static_folder) / "index.html").read_text(encoding="utf-8")
        except (OSError, TypeError):
            return None  # no page: MLflow's own answer says why
        try:
            pages = fedsweep_pages(_get_tracking_store())
        except Exception:  # noqa: BLE001 - the page serves without the experiments' layout
            pages = {}
        return Response(with_first_visit(html, pages), mimetype="text/html")

    flask_app.before_request(first_visit_page)


def create_app(app=None):
    """The app ``mlflow ui --app-name fedsweep`` serves: MLflow's Flask app with
    :func:`add_first_visit`, wrapped in MLflow's FastAPI app under uvicorn (MLflow's default
    server, and the way its own ``basic-auth`` app does it)."""
    from mlflow.environment_variables import _MLFLOW_SGI_NAME
    from mlflow.server import app as mlflow_app
    from mlflow.server.fastapi_app import create_fastapi_app

    flask_app = mlflow_app if app is None else app
    add_first_visit(flask_app)
    if _MLFLOW_SGI_NAME.get() == "uvicorn":
        return create_fastapi_app(flask_app)
    return flask_app
