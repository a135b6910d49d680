"""A tracking server that does not answer: urllib3's retries (what MLflow's REST client does)
become one console line, not silence (``tracking.retries``)."""

from __future__ import annotations

import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from fedsweep.core.processes import free_port
from fedsweep.tracking import retries


def _session(total: int) -> requests.Session:
    session = requests.Session()
    session.mount("http://", HTTPAdapter(max_retries=Retry(total=total, backoff_factor=0)))
    return session


def test_retries_of_a_silent_server_give_one_line_per_outage():
    lines: list[str] = []
    url = f"http://127.0.0.1:{free_port()}/api/2.0/mlflow/runs/log-batch"
    with retries.watching(lines.append):
        for _ in range(2):  # two requests, 3 retries each, within EVERY_S: one line
            with pytest.raises(requests.ConnectionError):
                _session(3).get(url, timeout=2)
    assert len(lines) == 1, lines
    assert lines[0].startswith("note: the tracking server does not answer (Connection refused)")
    assert "/api/2.0/mlflow/runs/log-batch" in lines[0]
    # outside the block nothing is said; a new outage after EVERY_S says it again
    with pytest.raises(requests.ConnectionError):
        _session(1).get(url, timeout=2)
    assert len(lines) == 1
    with retries.watching(lines.append, every_s=0.0):
        with pytest.raises(requests.ConnectionError):
            _session(2).get(url, timeout=2)
    assert len(lines) == 3
