"""Credentials in a tracking URI stay in the process environment (``tracking.credentials``), a
missing database driver is one sentence, links follow an http(s) store, leases in the store are
exclusive (``tracking.leases``), and an adopted run never logs a (key, step) twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fedsweep.tracking import credentials
from fedsweep.tracking import leases as leases_mod
from fedsweep.tracking.connect import connect_uri
from fedsweep.tracking.store import ui_base
from fedsweep.tracking.uri import TrackingUriError, check_tracking_uri, resolve_tracking_uri

SECRET = "pa:ss@w/rd%"  # every URI-special character a password may hold


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in (credentials.USER_ENV, credentials.PASSWORD_ENV, credentials.SECRETS_ENV):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _quoted(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def test_redact_masks_every_password_in_a_text():
    text = "a postgresql+psycopg2://u:SECRET@h:5432/db and http://bob:TOKEN@x/y, sqlite:///a.db"
    out = credentials.redact(text)
    assert "SECRET" not in out and "TOKEN" not in out
    assert out == "a postgresql+psycopg2://u:***@h:5432/db and http://bob:***@x/y, sqlite:///a.db"


def test_a_database_password_moves_into_the_environment_and_back_for_connections():
    uri = f"postgresql://alice:{_quoted(SECRET)}@db.lab:5433/mlflow"
    clean = resolve_tracking_uri(uri)
    assert clean == "postgresql://alice@db.lab:5433/mlflow"
    assert json.loads(os.environ[credentials.SECRETS_ENV]) == {clean: SECRET}
    assert connect_uri(clean) == uri  # the connection gets it back, exactly as typed
    assert connect_uri("postgresql://bob@db.lab/mlflow") == "postgresql://bob@db.lab/mlflow"
    # what a sweep hands to trials on other nodes, and what a trial does with it
    env = credentials.secret_env()
    os.environ.pop(credentials.SECRETS_ENV)
    credentials.apply_env(env)
    assert connect_uri(clean) == uri


def test_http_credentials_become_mlflows_variables(monkeypatch):
    clean = resolve_tracking_uri(f"https://bob:{_quoted(SECRET)}@mlflow.lab/base")
    assert clean == "https://mlflow.lab/base"
    assert os.environ[credentials.USER_ENV] == "bob"
    assert os.environ[credentials.PASSWORD_ENV] == SECRET
    # credentials that contradict the environment: refused, without echoing them
    monkeypatch.setenv(credentials.PASSWORD_ENV, "other")
    with pytest.raises(TrackingUriError) as err:
        resolve_tracking_uri("https://bob:NEWSECRET@mlflow.lab")
    assert "NEWSECRET" not in str(err.value) and "MLFLOW_TRACKING_PASSWORD" in str(err.value)


def test_a_uri_without_credentials_is_unchanged():
    for uri in ("sqlite:////tmp/x/mlflow.db", "http://127.0.0.1:5000", "postgresql://u@h/db"):
        assert resolve_tracking_uri(uri) == uri
    assert credentials.SECRETS_ENV not in os.environ


def test_a_missing_database_driver_is_one_sentence_naming_the_extra():
    # pg8000 is a PostgreSQL driver fedsweep does not install
    uri = resolve_tracking_uri("postgresql+pg8000://u:SECRET@127.0.0.1:1/db")
    with pytest.raises(TrackingUriError) as err:
        check_tracking_uri(uri)
    text = str(err.value)
    assert "'pg8000'" in text and "not installed" in text and "fedsweep[team]" in text
    assert "SECRET" not in text


def test_run_with_a_credentialed_uri_fails_in_one_line_without_the_password(tmp_path):
    """The CLI path: exit 2, one line, the password nowhere in the output (a refused
    connection: nothing listens on port 1)."""
    from tests.helpers import small_run, write_yaml

    cfg = write_yaml(tmp_path / "run.yaml", small_run("cred", "cred"))
    proc = subprocess.run(
        [sys.executable, "-m", "fedsweep.cli.main", "run", str(cfg), "--tracking-uri",
         "postgresql://alice:SECRET123@127.0.0.1:1/mlflow"],
        capture_output=True, text=True, cwd=tmp_path, timeout=180,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "SECRET123" not in out
    assert "Traceback" not in out and len(proc.stderr.strip().splitlines()) == 1, out
    assert "postgresql://alice@127.0.0.1:1/mlflow" in out


def test_links_follow_an_http_tracking_uri(monkeypatch):
    monkeypatch.delenv("FEDSWEEP_UI_URL", raising=False)
    assert ui_base("http://mlflow.lab:8080/") == "http://mlflow.lab:8080"
    assert ui_base("sqlite:////x/mlflow.db") == "http://127.0.0.1:5000"
    monkeypatch.setenv("FEDSWEEP_UI_URL", "http://127.0.0.1:5055")
    assert ui_base("sqlite:////x/mlflow.db") == "http://127.0.0.1:5055"
    assert ui_base("https://m.lab", explicit="http://other:1/") == "http://other:1"


# ------------------------------------------------------------------------------ leases
@pytest.fixture
def store(tmp_path):
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


def test_a_lease_is_exclusive_and_released(store):
    name = leases_mod.lease_name("driver", "fig.smoke")
    first = leases_mod.holder_tags(figure="fig")
    with leases_mod.hold(store, name, first, wait=False):
        with pytest.raises(leases_mod.LeaseBusy) as err:
            with leases_mod.hold(store, name, leases_mod.holder_tags(), wait=False):
                pass
        assert f"PID {os.getpid()}" in str(err.value)
        assert leases_mod.Leases(store).holder(name)["token"] == first["token"]
    assert leases_mod.Leases(store).holder(name) is None  # released: nothing left


def test_a_release_deletes_only_its_own_lease(store):
    """A holder whose lease was taken over (stale) releases nothing of the new holder's; a
    lease released twice, or never held, is no error."""
    c = leases_mod.Leases(store)
    name = leases_mod.lease_name("trial", "own")
    old, new = leases_mod.holder_tags(), leases_mod.holder_tags()
    assert c.try_acquire(name, old)
    assert c.take_over(name, c.holder(name), new)
    c.release(name, old["token"])
    assert c.holder(name)["token"] == new["token"]
    c.release(name, new["token"])
    assert c.holder(name) is None
    c.release(name, new["token"])
    assert c.try_acquire(name, old)  # the name is free again, its tags gone with it
    assert c.holder(name) == old


def test_an_abandoned_lease_is_taken_over(store, monkeypatch):
    c = leases_mod.Leases(store)
    name = leases_mod.lease_name("trial", "abc")
    # a holder on this host whose process has ended: at once
    dead = leases_mod.holder_tags()
    dead["pid"] = "999999999"
    assert c.try_acquire(name, dead)
    with leases_mod.hold(store, name, leases_mod.holder_tags(), wait=False) as tags:
        assert c.holder(name)["token"] == tags["token"]
    # the same trial of the same sweep (Ray's retry): at once
    assert c.try_acquire(name, leases_mod.holder_tags("parent/trial-1"))
    with leases_mod.hold(store, name, leases_mod.holder_tags("parent/trial-1"), wait=False):
        pass
    # a holder on another host: only once its heartbeat has not moved for STALE_S
    other = leases_mod.holder_tags()
    other["host"] = "elsewhere"
    assert c.try_acquire(name, other)
    with pytest.raises(leases_mod.LeaseBusy):
        with leases_mod.hold(store, name, leases_mod.holder_tags(), wait=False):
            pass
    monkeypatch.setattr(leases_mod, "STALE_S", 0.0)
    waited = []
    with leases_mod.hold(
        store, name, leases_mod.holder_tags(), wait=True, on_wait=waited.append, poll_s=0.01
    ):
        pass
    assert len(waited) == 1 and waited[0]["host"] == "elsewhere"


def test_an_adopted_run_logs_each_key_and_step_once(store):
    """A flush cut between two requests left round 3 half written; the adopting attempt
    writes only the missing rows of round 3, then round 4."""
    from fedsweep.tracking.run_logger import GLOBAL_SECTION, MlflowRunLogger

    first = MlflowRunLogger(store, "adopt")
    run_id = first.start({"name": "x"}, {"fedsweep.status": "running"}, run_name="x")
    for t in (1, 2):
        first.log_round(t, {"test_acc": 0.1 * t, "round_time": 1.0})
    first.flush()
    first.log_round(3, {"test_acc": 0.3, "round_time": 1.0})
    first._pending = [r for r in first._pending if r[0] != "test_acc"]  # the cut
    first.flush()

    again = MlflowRunLogger(store, "adopt")
    again.start({"name": "x"}, {}, run_id=run_id)
    logged_until = max(0, again.last_logged_step() - 1)
    assert logged_until == 2
    again.guard_rewrites(logged_until)
    for t in (3, 4):
        again.log_round(t, {"test_acc": 0.1 * t, "round_time": 1.0})
    again.flush()
    for key in ("test_acc", "round_time", f"{GLOBAL_SECTION}/round_time"):
        steps = [m.step for m in again.client.get_metric_history(run_id, key)]
        assert sorted(steps) == [1, 2, 3, 4], (key, steps)
