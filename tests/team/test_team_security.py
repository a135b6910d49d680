"""Issue 62, item 2: the team's secrets. The Ray cluster's token (whoever reads it runs code on
the cluster) is readable by its owner only, in a folder no one else may write."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import stat
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from fedsweep.core.processes import free_port
from fedsweep.team import local


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    return tmp_path / "user"


@pytest.mark.slow
def test_team_ups_ray_head_has_a_token_only_its_owner_reads(home, tmp_path):
    """`team up`'s Ray head: the token it generates is mode 600 in a folder of mode 700 (Ray's
    own generator wrote it with mode 644), and the head starts with it."""
    team = local.Team(tmp_path / "team", ray_port=free_port(), ray_cpus=0)
    (team.home / "logs").mkdir(parents=True)
    lines = []
    try:
        local.start_ray(team, lines.append)
    finally:
        if team.pids.get("ray"):
            local.stop_group(team.pids["ray"])
    token = home / ".ray" / "auth_token"
    assert _mode(token) == 0o600 and _mode(token.parent) == 0o700
    assert len(token.read_text()) == 64 and int(token.read_text(), 16) >= 0
    assert token.read_text() not in "\n".join(lines)
    assert f"Ray head:    {team.ray_address}  (token authentication: {token})" in lines


def test_an_existing_token_and_its_folder_are_closed_to_others(home):
    """A token file others may read becomes mode 600 and a folder of the user's that others
    may write loses that, each said in one line; the token itself is kept."""
    folder = home / ".ray"
    folder.mkdir(parents=True)
    folder.chmod(0o777)
    token = folder / "auth_token"
    token.write_text("ab" * 32)
    token.chmod(0o644)
    lines = []
    assert local.ensure_ray_token(lines.append) == token
    assert _mode(token) == 0o600 and _mode(folder) == 0o755
    assert token.read_text() == "ab" * 32
    assert lines == [
        f"Ray: {folder} was writable by others (mode 777); now 755",
        f"Ray: {token} was readable by others (mode 644); now 600",
    ]
    lines.clear()
    assert local.ensure_ray_token(lines.append) == token and lines == []  # nothing to say


def test_the_token_goes_where_ray_reads_it(home, tmp_path, monkeypatch):
    """With $RAY_AUTH_TOKEN_PATH the token is generated there (Ray's generator wrote
    ~/.ray/auth_token whatever it said, and the head then found none); with $RAY_AUTH_TOKEN
    no file is written."""
    path = tmp_path / "tokens" / "cluster"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(path))
    lines = []
    assert local.ensure_ray_token(lines.append) == path
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    assert not (home / ".ray").exists()
    assert lines == [f"Ray: generated the cluster's authentication token in {path} (mode 600)"]
    path.unlink()
    monkeypatch.setenv("RAY_AUTH_TOKEN", "cd" * 32)
    assert local.ensure_ray_token(lines.append) is None and not path.exists()


def _auth_missing() -> str | None:
    if not (shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))):
        return "PostgreSQL's server programs (initdb, pg_ctl) are not installed"
    for module, package in (("psycopg", "psycopg"), ("flask_wtf", "Flask-WTF")):
        try:
            importlib.import_module(module)
        except ImportError:
            return f"{package} is not installed (pip install 'fedsweep[team]')"
    return None


@pytest.mark.slow
@pytest.mark.team
def test_with_auth_the_server_refuses_anonymous_requests_and_takes_the_admins(home, monkeypatch):
    """`team up --auth`: MLflow's basic-auth app. A request without credentials to delete a
    run is refused (401); with MLflow's own variables (the admin's password read from its
    file) a run is logged; the secrets are files of mode 600, on no command line and not in
    team.env."""
    why = _auth_missing()
    if why:
        pytest.skip(why)
    folder = Path(tempfile.mkdtemp(prefix="fedsweep-test-"))
    folder.chmod(0o711)  # as root the postgres user enters it
    team = local.Team(folder / "team", pg_port=free_port(), mlflow_port=free_port(), auth=True)
    (team.home / "logs").mkdir(parents=True)
    lines = []
    try:
        local.start_postgres(team, lines.append)
        local.start_mlflow(team, lines.append)
        password = (team.home / local.ADMIN_FILE).read_text().strip()
        for name in (local.ADMIN_FILE, local.SECRET_KEY_FILE, local.AUTH_CONFIG, local.AUTH_DB):
            assert _mode(team.home / name) == 0o600, name
        pgid = os.getpgid(team.pids["mlflow"])
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError, ValueError):
                if proc.name.isdigit() and os.getpgid(int(proc.name)) == pgid:
                    assert password.encode() not in (proc / "cmdline").read_bytes()
        assert password not in "\n".join(lines)
        assert password not in (team.home / "team.env").read_text()

        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", local.AUTH_ADMIN)
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=team.tracking_uri)
        run = client.create_run(client.create_experiment("auth-check"))
        client.log_metric(run.info.run_id, "acc", 0.5)
        assert client.get_run(run.info.run_id).data.metrics == {"acc": 0.5}

        request = urllib.request.Request(
            f"{team.tracking_uri}/api/2.0/mlflow/runs/delete",
            data=json.dumps({"run_id": run.info.run_id}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401
        assert client.get_run(run.info.run_id).info.lifecycle_stage == "active"
    finally:
        if team.pids.get("mlflow"):
            local.stop_group(team.pids["mlflow"])
        local.stop_postgres(team, lambda _line: None)
        shutil.rmtree(local.db_folder(team), ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)


def test_auth_without_flask_wtf_is_refused_before_anything(tmp_path, monkeypatch):
    """MLflow's basic-auth app needs Flask-WTF: without it `up --auth` is one line naming the
    option and the package, before anything is created (the server would exit on start)."""
    monkeypatch.setitem(sys.modules, "flask_wtf", None)  # as if not installed
    team = local.Team(tmp_path / "team", pg_port=free_port(), mlflow_port=free_port(),
                      ray_port=free_port(), auth=True)  # fmt: skip
    with pytest.raises(local.TeamError, match=r"^--auth: MLflow's basic-auth app needs the "):
        local.check(team)
    assert not team.home.exists()
