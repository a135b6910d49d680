"""Issue 32: ``fedsweep figures`` / ``runs`` / ``compare`` never destroy good outputs and refuse
bad input. Every output is written atomically (a temporary file renamed into place), so a build
killed or failing mid-write leaves the previous files intact; an unknown ``--metric``, an empty
``--diff-from`` and an unknown ``runs --figure`` exit 2 before anything is written; Fig. 4a-c
without its selection records fails (exit 1) naming the runs, and keeps the previous figure; a
broken store's message names its file.

The store is hand-logged (metrics and npz artifacts, no training): fig4e's and fig4abc's smoke
trials, fig4abc's Case 1 run with every selection record, Case 2's without client 3's, Case 3's
with none. Image export uses a fake kaleido (no browser needed).
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dashboards import build_figures
from fedsweep.cli.main import app
from tests.helpers import log_config

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
runner = CliRunner()


def log_smoke_runs(client, uri: str, figure: str, records=None) -> list[str]:
    """Finished runs of ``figure``'s smoke trials with 3 rounds of test metrics and per-client
    distances; ``records(panel_index)`` = the clients whose selection record is logged."""
    from mlflow.entities import Metric

    from fedsweep.specs.load import expand, load_spec
    from fedsweep.tracking.store import ensure_experiment

    spec = load_spec(SWEEPS / f"{figure}.yaml")
    exp = ensure_experiment(client, figure, uri)
    ids = []
    for k, trial in enumerate(expand(spec, "smoke")):
        tags = {
            "fedsweep.config_hash": trial.config_hash,
            "fedsweep.figure": figure,
            "fedsweep.status": "finished",
        }
        run = client.create_run(exp, tags=tags).info.run_id
        log_config(client, run, trial.config)
        metrics = []
        for t in range(1, 4):
            metrics += [Metric("test_loss", 0.5 - 0.02 * t, 0, t)]
            metrics += [Metric("test_acc", 0.6 + 0.05 * t, 0, t)]
            metrics += [Metric(f"client/{i}/dist_paper", 0.1 * i + t, 0, t) for i in range(5)]
        client.log_batch(run, metrics=metrics)
        clients = records(k) if records else []
        if clients:
            with tempfile.TemporaryDirectory() as tmp:
                for i in clients:
                    arr = np.zeros((3, 4), dtype=bool)
                    arr[:, i % 4] = True
                    np.savez_compressed(Path(tmp) / f"selected_client{i}.npz", data=arr)
                client.log_artifacts(run, tmp, "records")
        ids.append(run)
    return ids


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """(uri, fig4abc run ids by case)."""
    from fedsweep.tracking.connect import get_client

    uri = f"sqlite:///{tmp_path_factory.mktemp('i32-store') / 'mlflow.db'}"
    client = get_client(uri)
    log_smoke_runs(client, uri, "bherd-fig4e")
    abc = log_smoke_runs(
        client, uri, "bherd-fig4abc", records=lambda k: [[0, 1, 2, 3, 4], [0, 1, 2, 4], []][k]
    )
    return uri, abc


@pytest.fixture
def fake_browser(monkeypatch):
    """kaleido writes each image's bytes to the path it is given (no browser runs); returns
    the list of calls' paths. ``fake_browser.mode``: "ok", or "kill"/"fail" = write half the
    bytes of every image, then raise KeyboardInterrupt (the process is being killed) / an
    error."""
    import kaleido

    monkeypatch.setenv("BROWSER_PATH", sys.executable)  # an executable: find_browser takes it

    class Fake:
        def __init__(self):
            self.mode = "ok"
            self.paths: list[Path] = []

        def __call__(self, specs, **kw):
            for spec in specs:
                path = Path(spec["path"])
                self.paths.append(path)
                data = f"NEW {spec['opts']['format']} image ".encode() * 200
                if self.mode == "ok":
                    path.write_bytes(data)
                else:
                    path.write_bytes(data[: len(data) // 2])
                    if self.mode == "kill":
                        raise KeyboardInterrupt  # SIGINT/SIGKILL mid-render: nothing after runs
                    raise RuntimeError("browser crashed")
            return []

    fake = Fake()
    monkeypatch.setattr(kaleido, "write_fig_from_object_sync", fake)
    return fake


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def no_parts(folder: Path) -> None:
    left = [p.name for p in folder.iterdir() if ".part-" in p.name]
    assert not left, left


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def figures(uri: str, out: Path, *args):
    return invoke(
        "figures", "--tracking-uri", uri, "--sweeps-dir", SWEEPS, "--profile", "smoke",
        "--out", out, *args,
    )  # fmt: skip


def one_line_exit_2(res, *needles: str) -> str:
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)
    for needle in needles:
        assert needle in text, (needle, res.output)
    return text


@pytest.fixture
def good(store, tmp_path, fake_browser):
    """A folder holding a good build of fig4e (HTML, PNG, PDF, SVG, entry, index)."""
    uri, _ = store
    out = tmp_path / "figs"
    (r,) = build_figures(uri, "smoke", out, ["bherd-fig4e"], SWEEPS)
    names = {p.name for p in r.files}
    assert names == {f"bherd-fig4e.{k}" for k in ("html", "png", "pdf", "svg", "csv")} | {
        "bherd-fig4e-parcoords.html",
        "bherd-fig4e-runs.csv",
    }, names
    assert (out / "bherd-fig4e.pdf").read_bytes().startswith(b"NEW pdf")
    return out


# ------------------------------------------------------------ 4: atomic outputs (kill -9)
def test_a_build_killed_during_image_export_keeps_the_previous_images(store, good, fake_browser):
    uri, _ = store
    before = snapshot(good)
    fake_browser.mode = "kill"
    with pytest.raises(KeyboardInterrupt):
        build_figures(uri, "smoke", good, ["bherd-fig4e"], SWEEPS)
    after = snapshot(good)
    for fmt in ("png", "pdf", "svg", "json"):  # old and complete: not 0 bytes, not half
        assert after[f"bherd-fig4e.{fmt}"] == before[f"bherd-fig4e.{fmt}"], fmt
    assert after["index.html"] == before["index.html"]
    assert after["bherd-fig4e.html"].rstrip().endswith(b"</html>")  # old or new, never cut
    no_parts(good)
    # the renderer was handed temporary names beside the images, never the images themselves
    assert fake_browser.paths and not any(
        p.name.startswith("bherd-fig4e.") for p in fake_browser.paths
    )


def test_a_write_that_fails_midway_keeps_every_previous_file(store, good, monkeypatch):
    """The disk fills up while the HTML is written (the text writer writes half, then raises
    ENOSPC): the command exits 1 naming the file; every file of the previous build is as it
    was (the images too: nothing is deleted before the new files are complete)."""
    uri, _ = store
    before = snapshot(good)
    real = Path.write_text

    def half_then_full_disk(self, data, *args, **kwargs):
        if Path(self).parent == good:
            real(self, data[: len(data) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", half_then_full_disk)
    res = figures(uri, good, "--figure", "bherd-fig4e")
    monkeypatch.undo()
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)
    text = " ".join(res.output.split())
    assert "bherd-fig4e.html: No space left on device" in text and "kept" in text
    assert snapshot(good) == before
    no_parts(good)


def test_compare_writes_its_files_atomically(monkeypatch, tmp_path):
    """``compare``'s writer (fedsweep/cli/explore.py ``_write``): HTML and CSV go through the
    same atomic writes; a write failing halfway leaves the previous files as they were."""
    import pandas as pd
    import plotly.graph_objects as go

    from fedsweep.cli import explore

    out = tmp_path / "cmp"
    out.mkdir()
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    explore._write(fig, pd.DataFrame({"a": [1]}), out, "c", "t", png=False)
    assert (out / "c.csv").read_text() == "a\n1\n"
    before = snapshot(out)
    real = Path.write_text

    def half_then_full_disk(self, data, *args, **kwargs):
        if Path(self).parent == out:
            real(self, data[: len(data) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", half_then_full_disk)
    with pytest.raises(OSError, match="No space left"):
        explore._write(fig, pd.DataFrame({"a": [2]}), out, "c", "t", png=False)
    monkeypatch.undo()
    assert snapshot(out) == before
    no_parts(out)
    stale = out / f".c.csv.part-{_dead_pid()}-abcd1234"
    stale.write_text("half")
    explore._write(fig, pd.DataFrame({"a": [3]}), out, "c", "t", png=False)
    assert (out / "c.csv").read_text() == "a\n3\n"
    assert not stale.exists()  # left by a killed process: removed


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temporary_files_of_killed_builds_are_removed(store, good):
    uri, _ = store
    dead = good / f".bherd-fig4e.pdf.part-{_dead_pid()}-0123abcd"
    live = good / f".bherd-fig4e.pdf.part-{os.getppid()}-0123abcd"  # a build running now
    dead.write_bytes(b"%PDF half")
    live.write_bytes(b"%PDF half")
    entry = good / f".bherd-fig4e.json.part-{_dead_pid()}-0123abcd"  # a complete, stale entry
    entry.write_text((good / "bherd-fig4e.json").read_text().replace("smoke", "quick"))
    build_figures(uri, "smoke", good, ["bherd-fig4e"], SWEEPS, png=False)
    assert not dead.exists() and not entry.exists() and live.exists()
    live.unlink()


def test_atomic_write_failure_keeps_the_file_and_leaves_no_part(tmp_path):
    from fedsweep.core import atomic

    path = tmp_path / "t.csv"
    path.write_text("good")

    def writer(part: Path):
        part.write_text("ha")
        raise OSError(errno.EFBIG, "File too large")

    with pytest.raises(atomic.OutputWriteError, match=r"cannot write .*t\.csv: File too large"):
        atomic.write_with(path, writer)
    assert path.read_text() == "good" and [p.name for p in tmp_path.iterdir()] == ["t.csv"]


# ------------------------------------------------------------------- 9: --metric is checked
@pytest.mark.parametrize(
    ("metric", "needles"),
    [
        ("test_acc_typo", ["none of the runs of bherd-fig4e logged it", "did you mean 'test_acc'"]),
        ("client/{j}/tau", ["unknown placeholder {j}", "client/{i}/"]),
        ("{", ["a stray brace"]),
    ],
)
def test_an_unknown_metric_exits_2_and_overwrites_nothing(store, good, metric, needles):
    uri, _ = store
    before = snapshot(good)
    res = figures(uri, good, "--figure", "bherd-fig4e", "--metric", metric)
    one_line_exit_2(res, f"--metric {metric!r}", *needles, "metrics: client/{i}/dist_paper")
    assert snapshot(good) == before


def test_a_logged_metric_and_a_per_client_pattern_are_accepted(store, tmp_path, fake_browser):
    uri, _ = store
    res = figures(
        uri, tmp_path, "--figure", "bherd-fig4e", "--format", "svg",
        "--metric", "client/{i}/dist_paper", "--metric", "client/0/dist_paper",
    )  # fmt: skip
    assert res.exit_code == 0, res.output


# ----------------------------------------------- 10: Fig. 4a-c without its selection records
def test_fig4abc_without_selection_records_fails_and_keeps_the_good_figure(store, tmp_path):
    uri, (case1, case2, case3) = store
    out = tmp_path / "figs"
    out.mkdir()
    # the previous build's good figure (as a build writes it: files + index entry)
    old = {f"bherd-fig4abc.{k}": f"good {k}".encode() for k in ("html", "png", "pdf", "svg")}
    for name, data in old.items():
        (out / name).write_bytes(data)
    files = {k: [f"bherd-fig4abc.{k}"] for k in ("html", "png", "pdf", "svg")}
    (out / "bherd-fig4abc.json").write_text(
        '{{"fedsweep_index_entry": 1, "figure_id": "bherd-fig4abc", "files": {}}}'.format(
            str(files).replace("'", '"')
        )
    )
    res = figures(uri, out, "--figure", "bherd-fig4abc", "--format", "png")
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "bherd-fig4abc: 3 runs" in text and "nothing drawn" in text
    assert f"run {case2} (Case 2, seed 0) lacks records/selected_client3.npz" in text
    assert f"run {case3} (Case 3, seed 0) lacks records/selected_client{{0..4}}.npz" in text
    assert case1 not in text  # it has all its records
    assert text.count("selection records missing") == 1  # the error once, no warning echo
    assert "1 figure(s) failed" in text
    for name, data in old.items():
        assert (out / name).read_bytes() == data, name
    index = (out / "index.html").read_text()
    assert "selection records missing" in index and 'href="bherd-fig4abc.png"' in index


def test_missing_records_lists_each_absent_artifact():
    from dashboards.papers.bherd.fig4abc import missing_records

    assert missing_records(3, {0: np.zeros((1, 1)), 2: np.zeros((1, 1))}) == [
        "records/selected_client1.npz"
    ]


# ------------------------------------------------------------- 13: --diff-from '', runs --figure
def test_empty_diff_from_exits_2(store, tmp_path):
    uri, _ = store
    res = figures(uri, tmp_path / "o", "--figure", "bherd-fig4e", "--diff-from", "")
    one_line_exit_2(res, "--diff-from ''", "an empty label", "curves: Case 1, RR")
    assert not (tmp_path / "o").exists()


def test_runs_refuses_an_unknown_figure_id(store, tmp_path, monkeypatch):
    uri, _ = store
    monkeypatch.chdir(tmp_path)  # no sweeps/ here: the registry and the store know the ids
    one_line_exit_2(
        invoke("runs", "--tracking-uri", uri, "--figure", "bherd-fig4ee"),
        "--figure 'bherd-fig4ee': no such figure",
        "did you mean 'bherd-fig4e'",
    )
    one_line_exit_2(invoke("runs", "--tracking-uri", uri, "--figure", "nosuchfig"), "no such")
    # a known figure without runs of its own is no error (fig4d's runs are fig4abc's)
    res = invoke("runs", "--tracking-uri", uri, "--figure", "bherd-fig2a")
    assert res.exit_code == 0 and "no runs match" in res.output, res.output
    res = invoke("runs", "--tracking-uri", uri, "--figure", "bherd-fig4e")
    assert res.exit_code == 0 and "6 run(s)" in res.output, res.output


# ----------------------------------------------------------- 15: a broken store names its file
def test_a_corrupted_store_is_named_in_the_message(tmp_path):
    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    db.write_bytes(os.urandom(20_000))
    uri = f"sqlite:///{db}"
    for args in (
        ["runs", "--tracking-uri", uri],
        ["figures", "--tracking-uri", uri, "--figure", "bherd-fig4e", "--sweeps-dir", SWEEPS,
         "--out", tmp_path / "figs"],
    ):  # fmt: skip
        one_line_exit_2(invoke(*args), f"the MLflow store {db} cannot be opened")
    assert not (tmp_path / "figs").exists()
