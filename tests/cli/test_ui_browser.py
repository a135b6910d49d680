"""``fedsweep ui`` in a real browser (headless Chromium over the DevTools protocol: tests/browser.py),
as a person with a fresh browser meets it (issue 65, item 1): the printed link of a swept figure
opens its trials grouped by figure line, each group and legend named by the line's label; a click
on the experiment in the printed experiment list lands on its runs (MLflow 3.17 opened a new
browser's experiments in its GenAI "Overview"), the trials grouped the same way.

The store holds runs in the shape a sweep logs (a parent run, one child run per trial with the
tags ``trial_payload`` gives and the global test metrics per round), logged directly: the UI reads
runs, it does not care how they were trained. Screenshots go to ``$FEDSWEEP_UI_SCREENS`` when set.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from fedsweep.core.processes import free_port
from tests.browser import Browser, find_chromium
from tests.cli.test_ui_ready import START_S, _Lines

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_chromium() is None, reason="needs a Chromium (headless)"),
]

ROOT = Path(__file__).resolve().parents[2]
FIGURE = "ui-study"
SPEC = {
    "figure": FIGURE,
    "title": "UI study",
    "base": {
        "algorithm": "fedavg",
        "selector": "bherd",
        "bherd": {"alpha": 0.5},
        "data": {"dataset": "mnist-5k", "partition": "case1", "num_clients": 3},
        "model": {"name": "svm"},
        "train": {"rounds": 3, "batch_size": 50, "lr": 0.05, "order": "fixed"},
    },
    "panels": {"data.partition": ["case1", "case2"]},
    "curves": [
        {"label": "α=1.0", "set": {"bherd.alpha": 1.0}},
        {"label": "FedAvg (RR)", "set": {"selector": "none", "train.order": "rr"}},
    ],
    "seeds": [0, 1],
    "profiles": {"paper": {}, "quick": {}, "smoke": {}},
}
#: how long the UI may take to draw a page (MLflow's bundle is large; the machine may be busy)
DRAW_S = 60


def _sweep_shaped_store(folder: Path) -> str:
    """A store with one swept figure's runs, as the sweep driver logs them."""
    from mlflow.entities import Metric

    from fedsweep.specs.load import expand, load_spec
    from fedsweep.sweep.ray_backend import trial_payload
    from fedsweep.tracking.connect import get_client
    from fedsweep.tracking.store import ensure_experiment, ensure_panel_views

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{FIGURE}.yaml"
    path.write_text(yaml.safe_dump(SPEC, allow_unicode=True, sort_keys=False))
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    spec = load_spec(path)
    client = get_client(uri)
    exp = ensure_experiment(client, FIGURE, uri, description=SPEC["title"], overwrite=True)
    trials = expand(spec, "smoke")
    # the sweep driver's views of the experiment (fedsweep.sweep.runner)
    ensure_panel_views(client, exp, list({t.panel_id: t.panel_label for t in trials}.items()))
    parent = client.create_run(exp, run_name="sweep", tags={"fedsweep.kind": "sweep"})
    for i, trial in enumerate(trials):
        tags = trial_payload(trial, spec, uri, FIGURE, parent.info.run_id)["tags"]
        run = client.create_run(exp, run_name=trial.run_name, tags=tags)
        metrics = [
            Metric(key, value + 0.01 * i, 0, step)
            for step in (1, 2, 3)
            for key, value in (
                ("Global/test_acc", 0.5 + 0.1 * step),
                ("Global/test_loss", 2 - 0.3 * step),
            )
        ]
        client.log_batch(run.info.run_id, metrics=metrics)
        client.set_terminated(run.info.run_id)
    client.set_terminated(parent.info.run_id)
    return uri


def _plugin_path(folder: Path) -> list[str]:
    """Where Python finds fedsweep's ``mlflow.app`` entry point: nothing more where the installed
    fedsweep declares it; else (an install from before it: ``pip install -e .`` adds it) a
    package record in ``folder`` that declares it as pyproject.toml does."""
    from fedsweep.cli.ui import app_registered

    if app_registered():
        return []
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    record = folder / "fedsweep_ui_app-0.dist-info"
    record.mkdir(parents=True)
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: fedsweep-ui-app\nVersion: 0\n")
    lines = [f"{name} = {value}" for name, value in declared["mlflow.app"].items()]
    (record / "entry_points.txt").write_text("[mlflow.app]\n" + "\n".join(lines) + "\n")
    return [str(folder)]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A ``fedsweep ui`` on a sweep-shaped store: (its printed lines, the experiment list URL)."""
    folder = tmp_path_factory.mktemp("ui-browser")
    uri = _sweep_shaped_store(folder / "store")
    extra = _plugin_path(folder / "plugin")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *extra]),
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    port = free_port()
    cmd = [sys.executable, "-m", "fedsweep", "ui", "--port", str(port), "--workers", "1"]
    proc = subprocess.Popen(
        [*cmd, "--tracking-uri", uri],
        env=env,
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = _Lines(proc.stdout)
    try:
        line = out.wait_for("experiments: http://", proc, START_S)
        yield out.lines, line.split("experiments: ", 1)[1].split()[0]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        out.join()


def _screens(browser: Browser, tmp_path: Path, name: str) -> None:
    shot = browser.screenshot(tmp_path / f"{name}.png")
    if os.environ.get("FEDSWEEP_UI_SCREENS"):
        shutil.copy(shot, Path(os.environ["FEDSWEEP_UI_SCREENS"]) / shot.name)


#: the texts of the run list's group rows ("Group: <name>"), once MLflow has drawn them
GROUPS = (
    "[...document.querySelectorAll('*')].filter(e => e.children.length === 0"
    " && /^Group: /.test(e.textContent)).map(e => e.textContent.slice(7))"
)
#: the texts of the charts' legends (MLflow's legend under each chart)
LEGENDS = (
    "[...document.querySelectorAll('*')].filter(e => e.children.length === 0"
    " && / · .*profile/.test(e.textContent) && !/^(Group: |seed )/.test(e.textContent))"
    ".map(e => e.textContent)"
)
LINES = {
    f"{curve} · data.partition={case} · smoke profile"
    for curve in ("α=1.0", "FedAvg (RR)")
    for case in ("case1", "case2")
}


def test_the_printed_link_of_a_figure_shows_its_trials_grouped_by_readable_line(served, tmp_path):
    lines, _ = served
    (printed,) = [x for x in lines if x.strip().startswith(FIGURE + " ")]
    link = next(word for word in printed.split() if word.startswith("http://"))
    assert "viewStateShareKey=fedsweep-trials" in link, lines
    with Browser(find_chromium()) as browser:  # a fresh profile: a first visit
        browser.open(link)
        browser.wait_for(f"{GROUPS}.length >= {len(LINES)}", DRAW_S)
        groups = browser.js(GROUPS)
        # one group per figure line (curve, panel), named by its label alone: no tag keys
        assert set(groups) == LINES, groups
        assert not any("fedsweep." in g for g in groups), groups
        # the charts' legends name the lines the same way, the curve first
        legends = browser.wait_for(f"{LEGENDS}.length ? {LEGENDS} : null", DRAW_S)
        assert {x.split(" · ")[0] for x in legends} == {"α=1.0", "FedAvg (RR)"}, legends
        assert not any("fedsweep." in x for x in legends), legends
        # the charts have drawn their lines (plotly's traces), for what a person sees
        browser.wait_for(
            "document.querySelectorAll('.js-plotly-plot .scatterlayer .trace').length", DRAW_S
        )
        _screens(browser, tmp_path, "ui-figure-link")
    assert printed.endswith("(+2 panel views: its Views menu)"), printed
    with Browser(find_chromium()) as browser:  # a panel's view: its lines alone in the charts
        browser.open(link.replace("fedsweep-trials", "fedsweep-panel-2"))
        browser.wait_for(f"{GROUPS}.length >= 2", DRAW_S)
        assert set(browser.js(GROUPS)) == {x for x in LINES if "case2" in x}
        browser.wait_for(
            "document.querySelectorAll('.js-plotly-plot .scatterlayer .trace').length", DRAW_S
        )
        _screens(browser, tmp_path, "ui-panel-view")


def test_a_click_on_the_experiment_in_a_fresh_browser_lands_on_its_grouped_runs(served, tmp_path):
    _, experiments = served
    with Browser(find_chromium()) as browser:
        browser.open(experiments)
        link = "[data-testid=experiment-list-item-link]"
        browser.wait_for(f"[...document.querySelectorAll('{link}')].length", DRAW_S)
        _screens(browser, tmp_path, "ui-experiment-list")
        clicked = browser.js(
            f"(() => {{ const a = [...document.querySelectorAll('{link}')]"
            f".find(a => a.textContent === '{FIGURE}'); if (a) a.click(); return !!a; }})()"
        )
        assert clicked
        # MLflow redirects #/experiments/N to a tab: the runs, not the GenAI overview
        where = browser.wait_for(
            "/#\\/experiments\\/\\d+\\/[a-z]/.test(location.href) ? location.href : null",
            DRAW_S,
        )
        assert re.search(r"#/experiments/\d+/runs\b", where), where
        assert "overview" not in where and "workflowType=genai" not in where, where
        # its trials, flat and grouped by figure line as the saved view shows them (not one
        # collapsed parent run)
        browser.wait_for(f"{GROUPS}.length >= {len(LINES)}", DRAW_S)
        assert set(browser.js(GROUPS)) == LINES
        _screens(browser, tmp_path, "ui-experiment-click")
