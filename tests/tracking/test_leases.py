"""Issue 62, item 1: a lease is taken over only when its holder is known to be gone.
A live process on this host keeps its lease however long its heartbeat stood still (an outage
stops every heartbeat); a PID the system reused is not the holder; a holder on another host is
stale only after ``stale_s()`` seconds counted while this process's reads of the store
succeeded. Also: a holder names its team member; a bad ``FEDSWEEP_CLAIM_STALE_S`` is one line,
exit 2; an outage of a tracking server is said within seconds, and its end too."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fedsweep.core.processes import free_port
from fedsweep.tracking import leases as leases_mod
from fedsweep.tracking import outage

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path):
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


def test_a_live_process_on_this_host_keeps_its_lease_however_still_its_heartbeat(
    store, monkeypatch
):
    """The outage case: no heartbeat moved for longer than the stale time, the holder (this
    process) is alive: never taken over."""
    monkeypatch.setattr(leases_mod, "STALE_S", 0.0)
    c = leases_mod.Leases(store)
    name = leases_mod.lease_name("driver", "fig.smoke")
    live = leases_mod.holder_tags(figure="fig")
    assert c.try_acquire(name, live)
    for _ in range(3):
        assert not c.abandoned(name, c.holder(name))
    with pytest.raises(leases_mod.LeaseBusy):
        with leases_mod.hold(store, name, leases_mod.holder_tags(), wait=False):
            pass
    assert c.holder(name)["token"] == live["token"]


def test_a_reused_pid_is_not_the_holder(store):
    """The holder's PID runs again, but another process (its start time differs): gone."""
    c = leases_mod.Leases(store)
    name = leases_mod.lease_name("trial", "reused")
    old = leases_mod.holder_tags()
    assert old["pid_start"]  # this process's start, on Linux
    old["pid_start"] = str(int(old["pid_start"]) - 1)
    assert c.try_acquire(name, old)
    with leases_mod.hold(store, name, leases_mod.holder_tags(), wait=False) as tags:
        assert c.holder(name)["token"] == tags["token"]


def test_another_hosts_staleness_counts_only_while_the_store_answers(monkeypatch):
    """Reads 1 s apart count; a gap longer than MAX_GAP_S between two successful reads (an
    outage the reads waited out) counts nothing; a failed read starts the count afresh."""
    monkeypatch.setattr(leases_mod, "STALE_S", 5.0)
    c = object.__new__(leases_mod.Leases)
    c._seen = {}
    holder = {"host": "elsewhere", "pid": "1", "beat": "t:1"}
    name = "fedsweep.claim.driver.x"
    assert not c.abandoned(name, holder, now=0.0)
    assert not c.abandoned(name, holder, now=3.0)  # 3 s still
    # the store was away for 80 s: the reads between did not answer, nothing counts
    assert not c.abandoned(name, holder, now=83.0)
    assert not c.abandoned(name, holder, now=84.0)  # 4 s
    c.unsure(name)  # a read failed
    assert not c.abandoned(name, holder, now=85.0)
    assert not c.abandoned(name, holder, now=89.0)  # 4 s since the failure
    assert c.abandoned(name, holder, now=91.0)  # 6 s of successful reads
    # a heartbeat that moves starts it afresh
    moved = {**holder, "beat": "t:2"}
    assert not c.abandoned(name, moved, now=92.0)
    assert not c.abandoned(name, moved, now=96.0)


def test_a_holder_names_its_member(monkeypatch):
    monkeypatch.setenv("FEDSWEEP_MEMBER", "alice")
    tags = leases_mod.holder_tags(figure="fig")
    assert tags["member"] == "alice"
    text = leases_mod.describe(tags)
    assert text.startswith(f"PID {os.getpid()} on {socket.gethostname()} (since ")
    assert text.endswith("; member alice)"), text
    monkeypatch.delenv("FEDSWEEP_MEMBER")
    assert leases_mod.holder_tags()["member"] == leases_mod.member() != ""


@pytest.mark.parametrize("value", ["abc", "-3", "nan", "inf"])
def test_a_bad_stale_setting_is_one_line_exit_2(tmp_path, value):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDSWEEP_CLAIM_STALE_S": value}
    proc = subprocess.run(
        [sys.executable, "-m", "fedsweep.cli.main", "sweep", "bherd-fig4e", "--sweeps-dir",
         str(ROOT / "sweeps"), "--profile", "smoke", "--tracking-uri",
         f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"FEDSWEEP_CLAIM_STALE_S: got {value!r} (allowed: a finite number of seconds >= 0, "
        "e.g. 90; unset: 90)"
    ], proc.stderr
    assert not (tmp_path / "store").exists()  # refused before anything was created


class _Registry(http.server.BaseHTTPRequestHandler):
    """A tracking server's answers to the outage watch: /health, and "no such model"."""

    status = 404

    def do_GET(self):  # noqa: N802
        body = (
            b"OK"
            if self.path.startswith("/health")
            else json.dumps(
                {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no model"}
            ).encode()
        )
        code = 200 if self.path.startswith("/health") else self.status
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _until(said: list[str], words: str, count: int = 1, timeout: float = 60.0) -> float:
    """Seconds until ``count`` of the lines said hold ``words`` (polled)."""
    started = time.monotonic()
    while sum(words in line for line in said) < count:
        assert time.monotonic() - started < timeout, said
        time.sleep(0.05)
    return time.monotonic() - started


def test_an_outage_of_a_tracking_server_is_said_when_it_starts_and_ends(monkeypatch):
    """A real HTTP server: up, away (nothing listens), back, then up but its database down
    (5xx). Each change is said within seconds, once."""
    from fedsweep.tracking import uri as uri_mod

    monkeypatch.setattr(uri_mod, "_REACHABLE", set())
    port = free_port()
    uri = f"http://127.0.0.1:{port}"

    def serve() -> http.server.HTTPServer:
        server = http.server.HTTPServer(("127.0.0.1", port), _Registry)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    said: list[str] = []
    server = serve()
    try:
        with outage.watching(uri, said.append, every_s=0.2):
            time.sleep(1.0)  # (a fixed span on purpose: nothing may be said while it answers)
            assert said == []
            server.shutdown()
            server.server_close()
            assert _until(said, "unreachable since") < 10
            assert said[0].startswith(f"note: MLflow server {uri} unreachable since ")
            server = serve()
            assert _until(said, "answers again") < 10
            _Registry.status = 500  # the server answers, its database does not
            assert _until(said, "unreachable since", 2) < 10
            assert "answered 500" in said[-1], said
            _Registry.status = 404
            assert _until(said, "answers again", 2) < 10
        assert len(said) == 4, said
    finally:
        _Registry.status = 404
        server.shutdown()
        server.server_close()
