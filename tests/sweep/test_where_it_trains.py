"""Issue 62, item 2: a member whose environment names the team's Ray cluster trained on a
private local Ray without a word. ``team.env`` sets ``$FEDSWEEP_RAY_ADDRESS`` (``fedsweep
sweep --address``), and the sweep says where it trains."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.core.processes import free_port
from tests.helpers import small_spec, smoke_sweep, write_yaml


@pytest.mark.slow
def test_a_sweep_says_it_trains_on_a_private_ray_though_ray_address_is_set(
    ray_session, tmp_path, monkeypatch
):
    monkeypatch.setenv("RAY_ADDRESS", "192.0.2.7:6380")
    spec = write_yaml(tmp_path / "where.yaml", small_spec("where", alphas=(0.5,), rounds=1))
    lines = []
    report = smoke_sweep(spec, f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path, echo=lines.append)
    assert (report.finished, report.errored) == (1, 0)
    said = [line for line in lines if line.startswith("Ray: ")]
    assert said == [
        "Ray: a private local Ray on this machine (1 CPUs); $RAY_ADDRESS=192.0.2.7:6380 is not "
        "used: pass --address 192.0.2.7:6380 (or set $FEDSWEEP_RAY_ADDRESS) to train on that "
        "cluster"
    ], lines


def test_fedsweep_ray_address_is_the_sweeps_address(tmp_path, monkeypatch):
    """``$FEDSWEEP_RAY_ADDRESS`` (team.env's) is ``--address``: an unreachable one is refused
    in one line naming it, before anything runs (it was ignored: a private local Ray)."""
    address = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("FEDSWEEP_RAY_ADDRESS", address)
    monkeypatch.chdir(tmp_path)
    spec = write_yaml(tmp_path / "env.yaml", small_spec("env", alphas=(0.5,), rounds=1))
    res = CliRunner().invoke(
        app, ["sweep", str(spec), "--profile", "smoke", "--tracking-uri",
              f"sqlite:///{tmp_path / 'mlflow.db'}"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().startswith(f"--address {address}: cannot reach a Ray cluster"), (
        res.stderr
    )
