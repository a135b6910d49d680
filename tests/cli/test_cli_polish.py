"""CLI polish: help without type placeholders, profile choices, one clean error path (exit 2,
one message, no traceback) with "did you mean", validate's applicable sections + config hash,
start-up stages and labels of the progress bar, the run summary's width and time, and
``fedsweep ui`` leaving no process behind."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fedsweep.cli.main import app
from tests.helpers import small_run

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ["run", "validate", "sweep", "figures", "runs", "compare", "ui"]

TINY = small_run("polish", "polish")


def write(tmp_path: Path, tree: dict, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(tree))
    return path


def assert_clean_exit_2(res, *needles: str) -> None:
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit)  # not an uncaught exception
    assert "Traceback" not in res.output
    flat = _flat(res.output)  # typer boxes and wraps usage errors
    for needle in needles:
        assert _flat(needle) in flat, (needle, res.output)


def _flat(text: str) -> str:
    return re.sub(r"[│╭╮╰╯─\s]+", " ", text)


# ------------------------------------------------------------------------------- help
@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_has_metavars_not_type_placeholders(command):
    res = runner.invoke(app, [command, "--help"] if command else ["--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    placeholders = re.findall(r"<(?:bool|str|int|float|list\[[^>]*\]|file|path|Path)>", res.output)
    assert placeholders == [], placeholders
    if not command:
        for name in COMMANDS:
            assert name in res.output


@pytest.mark.parametrize("command", ["sweep", "figures"])
def test_profile_is_a_choice(command):
    from fedsweep.cli.common import PROFILES
    from fedsweep.specs.load import PROFILES as SPEC_PROFILES

    assert tuple(PROFILES) == tuple(SPEC_PROFILES)
    res = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert "paper|quick|smoke" in res.output
    res = runner.invoke(app, [command, "--profile", "quik"])
    # issue 52, item 6: a mistyped profile gets a did-you-mean
    assert_clean_exit_2(res, "got 'quik'; did you mean 'quick'? allowed: paper, quick, smoke")


# ----------------------------------------------------------------------- error paths
def test_did_you_mean_for_a_set_key_a_yaml_key_and_names(tmp_path):
    cfg = write(tmp_path, TINY)
    res = runner.invoke(app, ["validate", str(cfg), "--set", "bherd.alpah=0.3"])
    assert_clean_exit_2(res, "field `bherd.alpah`: unknown key (did you mean `bherd.alpha`?)")
    # issue 52, item 6: the typo is the command line's, not the file's
    assert f"invalid --set (applied to {cfg}):" in res.output
    typo = write(tmp_path, {**TINY, "bherd": {"alpah": 0.3}}, "typo.yaml")
    res = runner.invoke(app, ["run", str(typo), "-q", "--no-track"])
    assert_clean_exit_2(res, "typo.yaml", "unknown key (did you mean `bherd.alpha`?)")
    res = runner.invoke(app, ["validate", str(cfg), "--set", "alpha=0.3"])
    assert_clean_exit_2(res, "did you mean `bherd.alpha`?")
    res = runner.invoke(app, ["validate", str(cfg), "--set", "data.dataset=mnsit"])
    assert_clean_exit_2(res, "'mnsit'", "'mnist-5k'", "(did you mean 'mnist'?)")
    res = runner.invoke(app, ["validate", str(cfg), "--set", "algorithm=fedavgg"])
    assert_clean_exit_2(res, "unknown algorithm 'fedavgg'", "(did you mean 'fedavg'?)")
    res = runner.invoke(app, ["validate", str(cfg), "--set", "selector=hberd"])
    assert_clean_exit_2(res, "(did you mean 'bherd'?)")
    # a sweep spec's keys too
    spec = yaml.safe_load((ROOT / "sweeps" / "bherd-fig3a.yaml").read_text())
    spec["curvs"] = spec.pop("curves")
    res = runner.invoke(app, ["sweep", str(write(tmp_path, spec, "study.yaml"))])
    assert_clean_exit_2(res, "key `curvs`: unknown key; did you mean `curves`?")


def test_every_command_answers_bad_input_with_exit_2_and_one_message(tmp_path):
    cfg = write(tmp_path, TINY)
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    cases = [
        (["run", str(tmp_path / "missing.yaml")], "config file not found"),
        # issue 52, item 6: a mistyped config file gets a did-you-mean
        (["run", str(tmp_path / "rnu.yaml")], f"(did you mean '{tmp_path / 'run.yaml'}'?)"),
        (["run", str(cfg), "--set", "train.order=shuffled", "--tracking-uri", store], "'rr'"),
        (["run", str(cfg), "--set", "oops"], "key=value"),
        (["validate", str(cfg), "--set", "bherd.alpha=2"], "bherd.alpha"),
        (["sweep", str(tmp_path / "nospec.yaml")], "sweep spec not found"),
        # issue 52, item 6: a --set value a spec's trials refuse names --set, not the spec
        (
            [
                "sweep",
                str(ROOT / "sweeps" / "bherd-fig4e.yaml"),
                "--plan",
                "--profile",
                "smoke",
                "--set",
                "bherd.alpha=abc",
                "--tracking-uri",
                store,
            ],
            "invalid --set (applied to every trial of",
        ),
        (["sweep", "--profile", "fast"], "allowed: paper, quick, smoke"),
        (["figures", "--profile", "fast"], "allowed: paper, quick, smoke"),
        (["runs", "--tracking-uri", store], "no MLflow store"),
        (["compare", "--tracking-uri", store, "--hash", "zz"], "16 hex digits"),
        (["ui", "--port", "0"], "--port"),
    ]
    for args, needle in cases:
        assert_clean_exit_2(runner.invoke(app, args), needle)
    assert not Path(store[len("sqlite:///") :]).exists()  # nothing ran, no store created


def test_ui_refuses_a_port_in_use(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        store = f"sqlite:///{tmp_path / 'mlflow.db'}"
        res = runner.invoke(app, ["ui", "--port", str(port), "--tracking-uri", store])
    assert_clean_exit_2(res, f"port {port} on 127.0.0.1 is already in use")


# --------------------------------------------------------------------------- validate
def test_validate_prints_only_the_sections_that_apply_then_hash_and_ok(tmp_path):
    from fedsweep.config.load import load_config
    from fedsweep.specs.load import config_hash

    cfg = write(tmp_path, TINY)
    res = runner.invoke(app, ["validate", str(cfg)])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert lines[-1] == "OK"
    assert lines[-2] == f"config hash: {config_hash(load_config(cfg))}"
    shown = yaml.safe_load(res.output.split("config hash:")[0])
    sections = [k for k, v in shown.items() if isinstance(v, dict)]
    assert sections == ["data", "model", "train", "bherd", "server_sgd", "eval", "tracking"]
    assert shown["algorithm"] == "fedavg" and shown["bherd"]["alpha"] == 0.5
    assert "# not used by bherd-fedavg: fednova, fedprox, scaffold, grab, cohort" in res.output
    res = runner.invoke(
        app, ["validate", str(cfg), "--set", "algorithm=fednova", "--set", "selector=none"]
    )
    shown = yaml.safe_load(res.output.split("config hash:")[0])
    assert [k for k, v in shown.items() if isinstance(v, dict)] == [
        "data",
        "model",
        "train",
        "fednova",
        "server_sgd",
        "eval",
        "tracking",
    ]


def test_config_sections_cover_the_registry():
    from fedsweep.components.compose import (
        COMPONENT_SECTIONS,
        GENERAL_SECTIONS,
        SLOTS,
        config_sections,
    )
    from fedsweep.config.schema import RunConfig

    assert all(name in SLOTS[slot] for slot, name in COMPONENT_SECTIONS)
    sections = {
        k for k, f in RunConfig.model_fields.items() if hasattr(f.annotation, "model_fields")
    }
    used = set(GENERAL_SECTIONS) | {s for v in COMPONENT_SECTIONS.values() for s in v}
    assert used == sections  # every section is general or belongs to a component
    assert set(SLOTS) <= set(RunConfig.model_fields)  # every slot is a config key
    cfg = {"algorithm": "scaffold", "selector": "bherd", "sampler": "poc"}
    assert config_sections(cfg)[-5:] == ("scaffold", "bherd", "cohort", "poc", "server_sgd")


# ----------------------------------------------------------------- progress and summary
def test_start_up_stages_are_reported_in_order(tmp_path):
    from fedsweep.config.load import load_config
    from fedsweep.tracking.tracked_run import run_tracked

    cfg = load_config(write(tmp_path, TINY), {"tracking.uri": f"sqlite:///{tmp_path / 'm.db'}"})
    stages: list[str] = []
    events: list[str] = []
    run_tracked(
        cfg,
        on_stage=stages.append,
        on_start=lambda run, rid: events.append(f"start {len(stages)}"),
        on_round=lambda t, m, r: events.append(f"round {t}"),
    )
    assert stages == [
        "loading data (mnist-5k)",
        "partitioning, building the model (svm)",
        "opening the MLflow run",
    ]
    assert events == ["start 3", "round 1", "round 2", "round 3"]


def test_progress_labels_train_and_test_metrics():
    from fedsweep.cli.progress import round_stats

    assert round_stats({"train_loss": 0.25, "test_loss": 0.5, "test_acc": 0.75}) == (
        "train loss 0.2500 · test acc 0.7500"
    )
    assert round_stats({"test_loss": 0.5, "test_acc": 0.75}) == "test loss 0.5000 · test acc 0.7500"


def test_run_summary_fits_80_columns_and_reports_the_wall_time(tmp_path):
    cfg = write(tmp_path, TINY)
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    start = time.perf_counter()
    res = runner.invoke(app, ["run", str(cfg), "--tracking-uri", store])
    measured = time.perf_counter() - start
    assert res.exit_code == 0, res.output
    ours = res.output[res.output.index("fedsweep run: ") :].splitlines()
    assert all(len(x) <= 80 for x in ours if store not in x), res.output  # a path is as long
    assert "next: fedsweep compare " in res.output and "fedsweep ui" in res.output
    wall = float(re.search(r"time=([\d.]+)s", res.output).group(1))
    training = float(re.search(r"training=([\d.]+)s", res.output).group(1))
    # the summary's time is the command's wall time (start-up included), not the rounds only
    assert training <= wall <= measured + 0.05
    assert wall >= measured - 1.0
    assert "mlflow_run_id=" in res.output and f"store={store}" in res.output


def test_summary_lines_stay_within_80_columns_for_extreme_values():
    from types import SimpleNamespace

    from fedsweep.cli.run import summary_lines

    result = SimpleNamespace(
        status="diverged",
        rounds=100000,
        final={"test_acc": 0.1, "test_loss": 1.0e30, "train_loss": float("nan")},
    )
    tracked = SimpleNamespace(result=result, run_id="f" * 32, tracking_uri="sqlite:////x.db")
    lines = summary_lines(tracked, wall=123456.7, training=123000.0)
    assert all(len(x) <= 80 for x in lines if "sqlite:" not in x), lines
    assert "test_loss=1e+30" in lines[0] and "time=123456.7s" in lines[1]
    assert "mlflow_run_id=" + "f" * 32 in lines[2]


# ---------------------------------------------------------------------------------- ui
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to list processes")
def test_stop_tree_ends_descendants_in_other_sessions_too():
    """MLflow's job processes may open sessions of their own: stop_tree finds them by parent
    pid, not only by process group; a child that ignores SIGTERM gets SIGKILL."""
    from fedsweep.cli.ui import alive, descendants, stop_tree

    script = (
        "import os, signal, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
        " start_new_session=True)\n"
        "subprocess.Popen([sys.executable, '-c', 'import signal, time;"
        " signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)'])\n"
        "time.sleep(300)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(descendants(proc.pid)) < 2:
            assert time.monotonic() < deadline, "children did not start"
            time.sleep(0.1)
        time.sleep(0.5)  # let the second child install its SIGTERM handler
        tree = descendants(proc.pid)
        stop_tree(proc, grace=1.0)  # then SIGKILL for the child that ignores SIGTERM
        assert proc.returncode is not None
        deadline = time.monotonic() + 10
        while any(alive(p) for p in tree) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p in tree if alive(p)] == []
    finally:
        if proc.poll() is None:
            proc.kill()
