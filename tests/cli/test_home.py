"""Issue 65, item 6: any folder is home. The shipped specs (``sweeps/``) and run configs
(``configs/``) resolve from any working directory, in a checkout and in an installed package
(``fedsweep/shipped`` links them; a wheel carries copies: ``fedsweep.core.shipped``), while what
a command writes (the store, figures, studies) stays in the working directory. A name that is a
file here wins, then ``./sweeps``, then the shipped copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.core import shipped
from fedsweep.specs import extends

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(p.name for p in (ROOT / "sweeps").glob("*.yaml"))
CONFIGS = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))


def fedsweep(cwd: Path, *args: str, path: Path = ROOT) -> subprocess.CompletedProcess:
    """``fedsweep ARGS`` in a fresh interpreter in ``cwd``, importing fedsweep from ``path``."""
    env = {**os.environ, "PYTHONPATH": str(path), "COLUMNS": "200"}
    for var in ("MLFLOW_TRACKING_URI", "FEDSWEEP_STORE_DIR", "RAY_ADDRESS"):
        env.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "fedsweep", *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def plan_rows(out: str, figure: str = "bherd-fig4e") -> list[str]:
    return [line for line in out.splitlines() if f"{figure}|smoke|" in line]


def test_a_figure_id_lists_its_trials_from_an_empty_folder(tmp_path):
    """The issue's check, as a user types it: the shipped spec's trials, nothing written."""
    here = tmp_path / "empty"
    here.mkdir()
    done = fedsweep(here, "sweep", "bherd-fig4e", "--profile", "smoke", "--plan")
    assert done.returncode == 0, done.stderr
    assert len(plan_rows(done.stdout)) == 6, done.stdout  # the trials of the shipped spec
    assert "note:" not in done.stderr  # a figure id means the shipped spec: nothing to say
    assert list(here.iterdir()) == []  # --plan writes nothing


@pytest.fixture
def fresh(monkeypatch):
    """In-process commands print their once-per-process notes and warnings again."""
    monkeypatch.setattr(shipped, "_NOTED", set())
    monkeypatch.setattr(extends, "_WARNED", set())
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("FEDSWEEP_STORE_DIR", raising=False)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_spec_path_and_a_config_name_fall_back_to_the_shipped_copy(tmp_path, monkeypatch, fresh):
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    by_id = invoke("sweep", "bherd-fig4e", "--profile", "smoke", "--plan")
    by_path = invoke("sweep", "sweeps/bherd-fig4e.yaml", "--profile", "smoke", "--plan")
    assert by_path.exit_code == 0, by_path.output
    assert plan_rows(by_path.stdout) == plan_rows(by_id.stdout) and plan_rows(by_id.stdout)
    spec = ROOT / "sweeps" / "bherd-fig4e.yaml"
    # a path that is no file here: the shipped copy, said in one line
    assert f"no sweeps/bherd-fig4e.yaml here; using fedsweep's shipped {spec}" in by_path.stderr
    typo = invoke("sweep", "bherd-fig4x", "--plan")  # the nearest shipped id
    assert typo.exit_code == 2 and "did you mean 'bherd-fig4e'?" in typo.output, typo.output
    config = ROOT / "configs" / "demo-mnist5k.yaml"
    for name in ("configs/demo-mnist5k.yaml", "demo-mnist5k", "demo-mnist5k.yaml"):
        valid = invoke("validate", name)
        assert valid.exit_code == 0 and valid.stdout.rstrip().endswith("OK"), valid.output
        assert "name: demo-bherd-mnist5k" in valid.stdout
        assert f"no {name} here; using fedsweep's shipped {config}" in valid.stderr
    missing = invoke("validate", "configs/demo-mnist5.yaml")
    assert missing.exit_code == 2, missing.output
    assert "did you mean 'configs/demo-mnist5k.yaml', shipped with fedsweep?" in missing.output
    assert list(here.iterdir()) == []  # --plan and validate write nothing


def test_a_file_here_and_a_local_sweeps_folder_come_before_the_shipped_copy(
    tmp_path, monkeypatch, fresh
):
    here = tmp_path / "mine"
    (here / "sweeps").mkdir(parents=True)
    (here / "configs").mkdir()
    monkeypatch.chdir(here)
    # ./sweeps holds the user's own copy of bherd-fig4e (two curves fewer) and nothing else
    own = yaml.safe_load((ROOT / "sweeps" / "bherd-fig4e.yaml").read_text())
    own["curves"] = own["curves"][:4]
    (here / "sweeps" / "bherd-fig4e.yaml").write_text(yaml.safe_dump(own, sort_keys=False))
    local = invoke("sweep", "bherd-fig4e", "--profile", "smoke", "--plan")
    assert local.exit_code == 0, local.output
    assert len(plan_rows(local.stdout)) == 4, local.stdout
    assert "shadows it" in local.stderr  # the local spec overrides the shipped one, said so
    # an id ./sweeps lacks still means the shipped spec
    other = invoke("sweep", "bherd-fig4d", "--profile", "smoke", "--plan")
    assert other.exit_code == 0 and plan_rows(other.stdout, "bherd-fig4d"), other.output
    typo = invoke("sweep", "bherd-fig4dd", "--plan")  # the nearest id, shipped ones included
    assert typo.exit_code == 2 and "did you mean 'bherd-fig4d'?" in typo.output, typo.output
    # a config file here wins over the shipped one of the same path, without a note
    text = (ROOT / "configs" / "demo-mnist5k.yaml").read_text()
    (here / "configs" / "demo-mnist5k.yaml").write_text(text.replace("alpha: 0.5", "alpha: 0.25"))
    valid = invoke("validate", "configs/demo-mnist5k.yaml")
    assert valid.exit_code == 0 and "alpha: 0.25" in valid.stdout, valid.output
    assert "note:" not in valid.stderr


@pytest.mark.slow
def test_a_shipped_config_runs_from_an_empty_folder_into_the_store_there(tmp_path):
    here = tmp_path / "empty"
    here.mkdir()
    done = fedsweep(here, "run", "configs/demo-mnist5k.yaml", "--set", "train.rounds=1", "-q")
    assert done.returncode == 0, done.stderr
    assert "status=finished rounds=1" in done.stdout, done.stdout
    assert (here / "mlruns" / "mlflow.db").is_file()  # the store is where the user is
    assert "using fedsweep's shipped" in done.stderr


def test_an_installed_wheel_carries_the_shipped_specs_and_configs(tmp_path):
    """A non-editable install (a wheel, ``pip install --target``) finds every shipped spec and
    config inside the package, from a folder that is not a checkout."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("fedsweep", "dashboards", "sweeps", "configs"):
        shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=skip)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    wheels = tmp_path / "wheels"
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels)]
    done = subprocess.run([*build, str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (wheel,) = wheels.glob("fedsweep-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"fedsweep/shipped/sweeps/{n}" for n in SPECS} <= names
    assert {f"fedsweep/shipped/configs/{n}" for n in CONFIGS} <= names
    target = tmp_path / "site"
    install = [*pip, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)]
    done = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    here = tmp_path / "empty"
    here.mkdir()
    probe = (
        "import fedsweep.specs.names as n, fedsweep.core.shipped as s;"
        "print(n.spec_path('bherd-fig4e'));print(s.shipped_copy('configs/demo-mnist5k.yaml',"
        "'configs'));print(len(n.spec_paths()))"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=here, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spec, config, count = done.stdout.split()
    shipped = target.resolve() / "fedsweep" / "shipped"
    assert Path(spec) == shipped / "sweeps" / "bherd-fig4e.yaml"
    assert Path(config) == shipped / "configs" / "demo-mnist5k.yaml"
    assert int(count) == len(SPECS)
