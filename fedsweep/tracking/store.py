"""The experiments fedsweep makes in a store and the MLflow UI's routes to them: every
experiment opens in MLflow's training-runs view with fedsweep's saved view of its trials and a
description that links to it (:func:`ensure_experiment`); :func:`ui_path` and :func:`ui_url`
are the routes, :func:`ui_base` the address of the UI that shows a store (a running
``fedsweep ui``'s, kept in the store's ``ui.json``). Where a store is, and opening it:
:mod:`fedsweep.tracking.uri`, :mod:`fedsweep.tracking.connect`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

from fedsweep.core.processes import alive
from fedsweep.tracking import credentials
from fedsweep.tracking.uri import artifact_root, store_folder

#: MLflow's experiment description (the UI's "Description" of an experiment or a run)
NOTE_TAG = "mlflow.note.content"
#: MLflow 3.x's experiment kind: an experiment tagged ``custom_model_development`` is a
#: training-runs experiment (``genai_development``: GenAI/traces). Key and value as in MLflow
#: 3.17's UI bundle (``mlflow/server/js/build/static/js/main.*.js``:
#: ``CUSTOM_MODEL_DEVELOPMENT="custom_model_development"``, read from the tag
#: ``mlflow.experimentKind``; ``mlflow/demo/generators/traces.py`` sets the GenAI value).
KIND_TAG = "mlflow.experimentKind"
KIND_TRAINING = "custom_model_development"
#: In 3.17 the UI's "GenAI | Model training" switch (per browser, default GenAI) decides the view
#: before the tag does; a ``workflowType`` query in the URL overrides the switch, so every URL
#: fedsweep prints or links carries it (see :func:`ui_url`).
TRAINING_VIEW_QUERY = "workflowType=machine_learning"
#: MLflow 3.17's saved views of an experiment's runs page (its "Views" menu) are experiment tags
#: ``mlflow.sharedViewState.<id>`` = ``{"name", "createdAt", "updatedAt", "state"}``, ``state``
#: the JSON of the page's search facets and UI state; ``#/experiments/<id>/runs?
#: viewStateShareKey=<id>`` opens one (``mlflow/server/js/build/static/js/3448.*.chunk.js``:
#: the envelope; ``5439.*``: ``openView``; ``3878.*``: the loader). fedsweep gives every
#: experiment it touches the view :data:`VIEW_STATE` and links to it (:func:`ui_path`).
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
#: a sweep trial's figure line, readable (``naming.trial_line_name``): what the view groups by
LINE_TAG = "fedsweep.line"
VIEW_ID = "fedsweep-trials"
VIEW_TAG = VIEW_TAG_PREFIX + VIEW_ID
VIEW_NAME = "fedsweep: every trial, charted"
#: the envelope key that marks the view as fedsweep's: a view someone overwrote in the UI (which
#: writes the envelope without it) is theirs, and fedsweep leaves it alone
VIEW_OWNER_KEY = "fedsweep"
VIEW_STATE = {
    # MLflow nests child runs under their (collapsed) parent only when the list is sorted by
    # start time (``nestChildren`` in ``3878.*``); sorted by trial id, a sweep's trials are one
    # flat list (profile, panel, curve, seed), the sweep's parent run last
    "orderByKey": "tags.`fedsweep.trial_id`",
    "orderByAsc": True,
    # the default table shows Source, Models and Dataset; the global test curves instead
    "selectedColumns": ["metrics.`Global/test_acc`", "metrics.`Global/test_loss`"],
    # the chart view draws every run, not the first 10 (MLflow's default)
    "runsHiddenMode": "SHOW_ALL",
    # one group per line of the figure, its seeds' mean drawn in the charts (MLflow 3.17's "Group
    # by", ``useGroupedValuesInCharts`` on by default): the charts look like the figure (issue 52,
    # item 2). One key, the trial's tag LINE_TAG: MLflow names a group of one key by its value
    # alone ("α=0.3 · Case 2 · quick profile"), of several keys "key: value, key: value" (the
    # legends read "fedsweep.profile: smoke, feds…", issue 65)
    "groupBy": {
        "aggregateFunction": "average",
        "groupByKeys": [{"mode": "tag", "groupByData": LINE_TAG}],
    },
}
#: the view a link opens in: the chart view (``TABLE``: the runs table with the metric columns)
VIEW_MODE_QUERY = "compareRunsMode=CHART"
#: the description of an experiment that ``fedsweep run`` creates
GENERIC_DESCRIPTION = (
    "fedsweep runs: one federated-learning run per MLflow run, named by what it runs; the tag "
    "`fedsweep.config_hash` groups runs with the same config."
)


def ui_path(
    experiment_id: str | None = None, run_id: str | None = None, *, view: bool = True
) -> str:
    """The MLflow UI route of the experiment list (``#/experiments?workflowType=...``), a run
    (``#/experiments/1/runs/abc?workflowType=...``) or an experiment, all in the training-runs
    view. An experiment opens in fedsweep's saved view (:data:`VIEW_STATE`: every trial in one
    flat list, charted, with the test metrics as columns; ``#/experiments/1/runs?
    viewStateShareKey=fedsweep-trials&compareRunsMode=CHART&...``); ``view=False`` for an
    experiment that does not have it (made by an older fedsweep, and not touched since):
    MLflow would show an error, then the plain runs page."""
    path = "#/experiments"
    if experiment_id is None:
        return f"{path}?{TRAINING_VIEW_QUERY}"
    if run_id is not None:
        return f"{path}/{experiment_id}/runs/{run_id}?{TRAINING_VIEW_QUERY}"
    # the tab route: ``#/experiments/<id>`` redirects to it and drops the query
    if not view:
        return f"{path}/{experiment_id}/runs?{TRAINING_VIEW_QUERY}"
    return f"{path}/{experiment_id}/runs?viewStateShareKey={VIEW_ID}&{VIEW_MODE_QUERY}&" + (
        TRAINING_VIEW_QUERY
    )


#: a search link's order: by trial id, so the matching runs are one flat list (sorted by start
#: time, MLflow's default, it nests them under their collapsed parent runs)
SEARCH_ORDER_QUERY = f"orderByKey={quote(VIEW_STATE['orderByKey'], safe='')}&orderByAsc=true"


def ui_search_path(experiment_ids, search_filter: str) -> str:
    """The UI route that shows the runs of ``experiment_ids`` matching ``search_filter`` (one
    experiment's run list, or MLflow's compare-experiments view for several), flat."""
    ids = sorted({str(i) for i in experiment_ids})
    query = f"searchFilter={quote(search_filter, safe='')}&{SEARCH_ORDER_QUERY}&"
    query += TRAINING_VIEW_QUERY
    if len(ids) == 1:  # the tab route: ``#/experiments/<id>`` redirects and drops the filter
        return f"#/experiments/{ids[0]}/runs?{query}"
    listed = quote(json.dumps(ids, separators=(",", ":")), safe="")
    return f"#/compare-experiments/s?experiments={listed}&{query}"


#: the MLflow UI's address when the tracking URI is no server and no --ui-url is given
UI_URL_ENV = "FEDSWEEP_UI_URL"
DEFAULT_UI_BASE = "http://127.0.0.1:5000"


#: the file in a local store's folder where a running ``fedsweep ui`` keeps its address
UI_STATE_FILE = "ui.json"


def ui_state_path(tracking_uri: str) -> Path | None:
    """``<store folder>/ui.json`` of a local store (None for a database or tracking server)."""
    folder = store_folder(tracking_uri)
    return folder / UI_STATE_FILE if folder is not None else None


def served_ui(tracking_uri: str) -> str | None:
    """The base URL at which a running ``fedsweep ui`` serves ``tracking_uri`` (its
    ``ui.json``: ``{"url", "pid", "tracking_uri"}``, written once the server answers and removed
    when it stops), else None: no file, another store's, or its process no longer runs."""
    path = ui_state_path(tracking_uri)
    if path is None:
        return None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict):
        return None
    url, pid = state.get("url"), state.get("pid")
    if not isinstance(url, str) or not url or not isinstance(pid, int) or pid <= 0:
        return None
    if state.get("tracking_uri") != tracking_uri or not alive(pid):
        return None
    return url.rstrip("/")


def ui_base(tracking_uri: str | None, explicit: str | None = None) -> str:
    """The base URL of the MLflow UI that shows ``tracking_uri``'s runs: ``explicit``
    (``--ui-url``), else the tracking server itself for an ``http(s)`` URI (it serves the UI),
    else ``$FEDSWEEP_UI_URL``, else the address of a running ``fedsweep ui`` for this store
    (:func:`served_ui`: the port it really serves), else ``http://127.0.0.1:5000``
    (``fedsweep ui``'s default)."""
    if explicit:
        return explicit.rstrip("/")
    if tracking_uri and credentials.scheme(tracking_uri) in ("http", "https"):
        return credentials.redact(tracking_uri).rstrip("/")
    if os.environ.get(UI_URL_ENV):
        return os.environ[UI_URL_ENV].rstrip("/")
    served = served_ui(tracking_uri) if tracking_uri else None
    return served or DEFAULT_UI_BASE


def ui_open_hint(tracking_uri: str | None, explicit: str | None = None) -> str:
    """How to open the UI that :func:`ui_base` links when nothing says it runs, else "": the
    links of a figure drawn while no ``fedsweep ui`` serves its store (no ``--ui-url``, no
    ``$FEDSWEEP_UI_URL``, no tracking server) point at ``fedsweep ui``'s default address,
    http://127.0.0.1:5000, where nothing may answer (issue 65, item 8): the command that serves
    it there, e.g. ``fedsweep ui --tracking-uri sqlite:////abs/mlruns/mlflow.db``."""
    if explicit or os.environ.get(UI_URL_ENV):
        return ""
    if not tracking_uri or credentials.scheme(tracking_uri) in ("http", "https"):
        return ""
    if served_ui(tracking_uri):
        return ""
    return f"fedsweep ui --tracking-uri {credentials.redact(tracking_uri)}"


def ui_url(
    base: str, experiment_id: str | None = None, run_id: str | None = None, *, view: bool = True
) -> str:
    """``ui_path`` under a server's base URL, e.g. ``http://127.0.0.1:5000``."""
    return f"{base.rstrip('/')}/{ui_path(experiment_id, run_id, view=view)}"


#: the text of the link to fedsweep's saved view in an experiment's description
VIEW_LINK_TEXT = "every trial, by curve, charted"


def experiment_note(description: str, experiment_id: str) -> str:
    """``description`` with a link to the experiment's fedsweep view at the end of its first
    line: the runs page shows the description's first line above the runs, so the view is one
    click from the page the experiment list opens (relative, it works on any port)."""
    first, newline, rest = description.partition("\n")
    link = f"[{VIEW_LINK_TEXT}]({ui_path(experiment_id)})"
    return f"{first} · {link}{newline}{rest}"


def view_tag_value(
    current: str | None,
    now_ms: int | None = None,
    *,
    name: str = VIEW_NAME,
    view: dict | None = None,
) -> str | None:
    """The value to give an experiment's ``VIEW_TAG``, or None to leave it: ``current`` is
    missing or unreadable, or fedsweep's own view (``VIEW_OWNER_KEY``) with another name or
    state (written by another fedsweep version); a view someone overwrote in the UI stays.
    ``name`` and ``view``: another of fedsweep's views (default: :data:`VIEW_STATE`)."""
    import time

    state = json.dumps(VIEW_STATE if view is None else view, separators=(",", ":"))
    old = None
    if current:
        try:
            old = json.loads(current)
        except ValueError:
            old = None
    if isinstance(old, dict) and not old.get(VIEW_OWNER_KEY) and isinstance(old.get("state"), str):
        return None  # someone's own view under this id
    if isinstance(old, dict) and (old.get("name"), old.get("state")) == (name, state):
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    created = old.get("createdAt") if isinstance(old, dict) else None
    envelope = {
        "name": name,
        "createdAt": created if isinstance(created, int) else now,
        "updatedAt": now,
        "state": state,
        VIEW_OWNER_KEY: 1,
    }
    return json.dumps(envelope, separators=(",", ":"))


#: a figure's saved view per panel: ``mlflow.sharedViewState.fedsweep-panel-<n>``
PANEL_VIEW_ID = "fedsweep-panel-{n}"


def panel_views(panels: list[tuple[str, str]]) -> dict[str, tuple[str, dict]]:
    """fedsweep's saved view of each panel of a figure with several, ``panels`` = (panel id,
    panel label) in the figure's order: view id -> (name, state). MLflow 3.17 draws every
    visible run in every chart (a chart has no run filter of its own), so a figure's panels
    share one chart per metric in :data:`VIEW_STATE`; a panel's view is that view searched down
    to the panel's trials (tag ``fedsweep.panel``): its charts draw that panel's lines only."""
    if len(panels) < 2:
        return {}
    out = {}
    for n, (panel, label) in enumerate(panels, 1):
        if "'" in panel:  # not quotable in MLflow's search syntax: the figure's view shows it
            continue
        state = {**VIEW_STATE, "searchFilter": f"tags.`fedsweep.panel` = '{panel}'"}
        out[PANEL_VIEW_ID.format(n=n)] = (f"fedsweep: {label or panel}", state)
    return out


def ensure_panel_views(client, experiment_id: str, panels: list[tuple[str, str]]) -> None:
    """Give the experiment :func:`panel_views` (each written as :func:`view_tag_value` says:
    once, and never over a view someone saved under its id)."""
    if not panels:
        return
    tags = client.get_experiment(experiment_id).tags or {}
    for view_id, (name, state) in panel_views(panels).items():
        key = VIEW_TAG_PREFIX + view_id
        value = view_tag_value(tags.get(key), name=name, view=state)
        if value is not None:
            client.set_experiment_tag(experiment_id, key, value)


def ensure_experiment(
    client,
    name: str,
    tracking_uri: str,
    description: str | None = None,
    *,
    overwrite: bool = False,
    artifacts: str | None = None,
) -> str:
    """The experiment's id, creating it (with an absolute artifact location) if needed.

    Every experiment fedsweep touches opens in MLflow's training-runs view (``KIND_TAG``), has
    fedsweep's saved view (``VIEW_TAG``, :func:`view_tag_value`) and a description:
    ``description`` (default: a generic one) with a link to that view
    (:func:`experiment_note`) is written when the experiment has none, or always with
    ``overwrite`` (a sweep writes its spec's title). ``artifacts``: the artifact root of a new
    experiment (:func:`artifact_root`).
    """
    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            location = artifact_root(tracking_uri, artifacts)
            exp_id = client.create_experiment(name, artifact_location=location)
        except Exception:  # created concurrently by another process
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
        else:
            exp = client.get_experiment(exp_id)
    updates = experiment_tag_updates(
        exp.tags or {}, exp.experiment_id, description, overwrite=overwrite
    )
    for key, value in updates.items():
        client.set_experiment_tag(exp.experiment_id, key, value)
    return exp.experiment_id


def experiment_tag_updates(
    tags: dict[str, str],
    experiment_id: str,
    description: str | None = None,
    *,
    overwrite: bool = False,
) -> dict[str, str]:
    """The tags :func:`ensure_experiment` sets on an experiment whose tags are ``tags``, in
    order: its kind, fedsweep's saved view, its description (see there)."""
    out = {}
    if tags.get(KIND_TAG) != KIND_TRAINING:
        out[KIND_TAG] = KIND_TRAINING
    view = view_tag_value(tags.get(VIEW_TAG))
    if view is not None:
        out[VIEW_TAG] = view
    text = experiment_note(description or GENERIC_DESCRIPTION, experiment_id)
    # an older fedsweep wrote the same description without the link: give it the link
    stale = tags.get(NOTE_TAG) in (None, "", description or GENERIC_DESCRIPTION)
    if tags.get(NOTE_TAG) != text and (overwrite or stale):
        out[NOTE_TAG] = text
    return out
