"""Issue 48, item 15 (part): a trial that starts, or a driver that waits, during an outage of the
tracking server waits it out with bounded backoff instead of failing (and using up a retry), and
the console says "MLflow server ... unreachable since HH:MM:SS, retrying"."""

from __future__ import annotations

import http.server
import re
import threading
import time

import pytest

from fedsweep.core.processes import free_port
from fedsweep.tracking import outage
from fedsweep.tracking import uri as uri_mod
from fedsweep.tracking.uri import TrackingUriError, probe_server


def test_an_outage_is_waited_out_with_growing_pauses_and_said_once():
    calls, pauses, said = [], [], []

    def step():
        calls.append(1)
        if len(calls) <= 3:
            raise TrackingUriError(
                "tracking URI 'http://h:5001': the tracking server does not answer"
            )
        return "client"

    got = outage.patiently(step, "http://alice:pw@h:5001", said.append, max_wait=60,
                           sleep=pauses.append)  # fmt: skip
    assert got == "client" and len(calls) == 4
    assert pauses == [1.0, 2.0, 4.0]
    assert len(said) == 2, said
    assert re.fullmatch(
        r"note: MLflow server http://alice:\*\*\*@h:5001 unreachable since \d\d:\d\d:\d\d, "
        r"retrying \(for up to 60 s; FEDSWEEP_OUTAGE_WAIT_S sets it\)",
        said[0],
    ), said[0]
    assert said[1].startswith("note: MLflow server http://alice:***@h:5001 answers again")


def test_other_errors_and_an_outage_longer_than_the_wait_are_raised():
    def bad():
        raise ValueError("a bad config")

    with pytest.raises(ValueError, match="a bad config"):
        outage.patiently(bad, "http://h", sleep=lambda s: None)
    now = [0.0]

    def down():
        raise ConnectionRefusedError("connection refused")

    def sleep(seconds):
        now[0] += seconds

    with pytest.raises(ConnectionRefusedError):
        outage.patiently(down, "http://h", max_wait=20, sleep=sleep, clock=lambda: now[0])
    assert now[0] == 20  # the pauses never run past the wait: 1 + 2 + 4 + 8 + 5


def test_a_server_that_comes_back_is_waited_for(monkeypatch):
    """A real HTTP server that starts 3 s after the first try: the plain probe fails in
    seconds (what failed every trial starting during an outage), ``patiently`` waits for it."""
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    monkeypatch.setattr(uri_mod, "_REACHABLE", set())
    with pytest.raises(TrackingUriError, match="does not answer"):
        probe_server(uri)

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"OK")

        def log_message(self, *args):
            pass

    servers = []

    def later():
        time.sleep(3)
        server = http.server.HTTPServer(("127.0.0.1", port), Health)
        servers.append(server)
        server.serve_forever()

    threading.Thread(target=later, daemon=True).start()
    said: list[str] = []
    started = time.monotonic()
    try:
        outage.patiently(lambda: probe_server(uri), uri, said.append, max_wait=60)
    finally:
        for server in servers:
            server.shutdown()
    assert 2.5 < time.monotonic() - started < 30
    assert said[0].startswith(f"note: MLflow server {uri} unreachable since ")
    assert said[-1].startswith(f"note: MLflow server {uri} answers again")


def test_ctrl_c_handed_to_the_handler_in_place_makes_the_clean_up_brief(monkeypatch):
    """Issue 62, item 7: Ray Tune installs its own SIGINT handler for a fit; wrapped
    (``relay_sigint``), a Ctrl-C still reaches it, after every MLflow request of the command
    was made brief (one try, 5 s), as SIGTERM did; outside the command nothing is left."""
    import os
    import signal

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    seen = []

    def tune_handler(signum, frame):  # what Ray Tune's does: note the stop, no exception
        seen.append(os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES"))

    previous = signal.signal(signal.SIGINT, tune_handler)
    try:
        with outage.brief_once_stopped() as stop:
            outage.relay_sigint()
            outage.relay_sigint()  # wrapped once
            assert not stop.requested
            signal.raise_signal(signal.SIGINT)
            assert seen == ["0"] and stop.requested
            assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "5"
        assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ
    finally:
        signal.signal(signal.SIGINT, previous)
