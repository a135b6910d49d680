"""Issue 62, item 2: the team's secrets. The Ray cluster's token (whoever reads it runs code on
the cluster) is readable by its owner only, in a folder no one else may write."""

from __future__ import annotations

import stat
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
