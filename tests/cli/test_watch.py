"""``fedsweep figures --watch`` (issue 52, item 5): the figure is drawn at once as a page that
reloads itself, drawn again when a run of its experiment ends, and left static on Ctrl-C; the
sweep names the command at its start."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from dashboards.export import reload_tag

ROOT = Path(__file__).resolve().parents[2]


def _reader(proc) -> queue.Queue:
    """The process's output lines, read in a thread of their own: a wait for a line that never
    comes times out instead of blocking in ``readline`` for ever."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for(proc, out: queue.Queue, lines: list[str], needle: str, timeout=120.0) -> None:
    """Collect ``proc``'s lines from ``out`` into ``lines`` until one holds ``needle``; fails
    when the process ended or ``timeout`` seconds passed without it."""
    deadline = time.monotonic() + timeout
    while not any(needle in ln for ln in lines):
        assert time.monotonic() < deadline, f"no {needle!r} in:\n" + "".join(lines)
        try:
            lines.append(out.get(timeout=0.5))
        except queue.Empty:
            assert proc.poll() is None, "".join(lines)


def test_watch_redraws_when_a_run_ends_and_stops_static(tmp_path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    client = MlflowClient(uri)
    experiment = client.create_experiment("bherd-fig4e")
    out = tmp_path / "figs"
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "fedsweep", "figures", "--figure", "bherd-fig4e",
         "--profile", "smoke", "--watch", "--every", "1", "--tracking-uri", uri,
         "--out", str(out)],
        cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    out_lines = _reader(proc)
    lines: list[str] = []
    try:
        _wait_for(proc, out_lines, lines, "watching ")
        page = out / "index.html"  # a figure without runs is listed there, no page of its own
        assert reload_tag(1) in page.read_text()
        run = client.create_run(experiment)  # a run of the figure's experiment ends
        client.set_terminated(run.info.run_id)
        _wait_for(proc, out_lines, lines, " redrawn: ")
        proc.send_signal(signal.SIGINT)
        _wait_for(proc, out_lines, lines, "stopped watching")
        assert proc.wait(timeout=60) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert reload_tag(1) not in page.read_text()  # static again
    assert "Traceback" not in "".join(lines)
