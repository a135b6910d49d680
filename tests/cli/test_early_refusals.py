"""Issue 49, item 4: a bad key, tracking URI or ``--storage`` answers before torch, Ray and
MLflow's store are imported (``fedsweep.cli.early``; the keys from the run config's key index,
``fedsweep.config.keys``), with exit code 2, the full validation's message and no traceback.
Each refusal runs in a fresh interpreter, which reports the heavy modules it had imported when
it exited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedsweep.config import keys
from fedsweep.config.load import ConfigError, build_config, write_key_index
from tests.helpers import small_run, write_yaml

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "ray", "mlflow.store")

#: runs the CLI in this interpreter, then says which heavy modules it had imported
DRIVER = """
import atexit, json, sys
atexit.register(lambda: print("HEAVY=" + json.dumps(
    [m for m in {heavy!r} if m in sys.modules]), file=sys.__stderr__, flush=True))
from fedsweep.cli.main import app
sys.argv = ["fedsweep", *json.loads(sys.argv[1])]
app()
"""


@pytest.fixture
def index(tmp_path, monkeypatch):
    """This source's key index, in a folder of the test's own."""
    folder = tmp_path / "key-index"
    monkeypatch.setenv(keys.CACHE_ENV, str(folder))
    write_key_index()
    assert keys.load_index() is not None
    return folder


def refuse(tmp_path, index_dir, *args: str) -> tuple[int, list[str], list[str]]:
    """(exit code, stderr lines without the report, heavy modules imported) of one command."""
    env = {
        **os.environ,
        keys.CACHE_ENV: str(index_dir),
        "FEDSWEEP_STORE_DIR": str(tmp_path / "store"),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER.format(heavy=HEAVY), json.dumps(list(args))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    report = [ln for ln in lines if ln.startswith("HEAVY=")]
    assert report, done.stderr
    return done.returncode, [ln for ln in lines if ln not in report], json.loads(report[-1][6:])


def test_unknown_keys_and_bad_uris_refuse_before_the_heavy_imports(tmp_path, index):
    bad_file = write_yaml(tmp_path / "typo.yaml", {**small_run("t", "e"), "trian": {"lr": 0.1}})
    unknown_top = "  field `nosuch`: unknown key; keys here: " + ", ".join(
        keys.load_index()["keys"][""]
    )
    cases = [
        (["run", "configs/fedavg-svm.yaml", "--set", "nosuch.key=1"],
         ["invalid --set (applied to configs/fedavg-svm.yaml):", unknown_top]),
        (["run", str(bad_file)],
         [f"invalid config ({bad_file}):", "  field `trian`: unknown key (did you mean `train`?)"]),
        (["run", "configs/fedavg-svm.yaml", "--set", "bherd.alpah=0.3"],
         ["invalid --set (applied to configs/fedavg-svm.yaml):",
          "  field `bherd.alpah`: unknown key (did you mean `bherd.alpha`?)"]),
        (["sweep", "bherd-fig4e", "--profile", "smoke", "--set", "nosuch.key=1"],
         [f"invalid --set (applied to every trial of {ROOT / 'sweeps' / 'bherd-fig4e.yaml'}):",
          unknown_top]),
        (["run", "configs/fedavg-svm.yaml", "--tracking-uri", "foo://bar"], None),
        (["sweep", "bherd-fig4e", "--profile", "smoke", "--tracking-uri", "foo://bar"], None),
        (["sweep", "bherd-fig4e", "--profile", "smoke", "--storage", "/proc/nope"], None),
        # the report's store that does not exist (was 6 s: the specs expanded first; `figures`
        # reports its options' errors first: tests/figures/test_figures_generic.py)
        (["report", "--tracking-uri", f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}",
          "--out", str(tmp_path / "reports")], None),
    ]  # fmt: skip
    for args, expected in cases:
        code, lines, heavy = refuse(tmp_path, index, *args)
        assert code == 2, (args, lines)
        assert heavy == [], (args, heavy)
        assert not any("Traceback" in ln for ln in lines), (args, lines)
        if expected is None:  # a URI or storage: one line
            assert len(lines) == 1, (args, lines)
        else:  # the full validation's message: its header and one line per unknown key
            assert lines == expected, (args, lines)
    assert not (tmp_path / "store").exists()  # a refused URI or storage created nothing
    assert not (tmp_path / "none").exists() and not (tmp_path / "reports").exists()


def test_without_an_index_the_full_validation_refuses_and_writes_it(tmp_path, monkeypatch):
    folder = tmp_path / "fresh-index"
    code, lines, heavy = refuse(
        tmp_path, folder, "run", "configs/fedavg-svm.yaml", "--set", "nosuch.key=1"
    )
    assert code == 2 and "torch" in heavy  # refused by the full validation, as before
    assert lines[0] == "invalid --set (applied to configs/fedavg-svm.yaml):"  # the typo is --set's
    monkeypatch.setenv(keys.CACHE_ENV, str(folder))
    assert keys.load_index() is not None  # written by it: the next refusal is early
    code, again, heavy = refuse(
        tmp_path, folder, "run", "configs/fedavg-svm.yaml", "--set", "nosuch.key=1"
    )
    assert (code, again, heavy) == (2, lines, [])


@pytest.mark.parametrize(
    ("tree", "overrides"),
    [
        ({"zeta": 1, "train": {"lr": 0.1, "foo": 2}, "alpha": 1, "bherd": {"alph": 0.3},
          "data": {"datset": "x"}, "fednova": {"gmf": 0.5}}, {"trian.lr": 1, "eval.evry": 2}),
        ({"train": {"lr": 0.1}}, {"nosuch.key": 1, "tracking.tags.x": "y"}),
        ({"trian": {"lrr": 1}, "model": {"nam": "svm"}}, {}),
    ],
)  # fmt: skip
def test_the_early_lines_are_the_full_validations(tree, overrides, index):
    with pytest.raises(ConfigError) as err:
        build_config(tree, overrides)
    full = [ln for ln in str(err.value).splitlines()[1:] if "unknown key" in ln]
    assert keys.unknown_key_lines(tree, overrides) == full


@pytest.mark.parametrize(
    ("tree", "overrides"),
    [
        ({"server_optimizer": {"name": "adam", "lr": 0.1}}, {}),  # a component block
        ({"train": {"lr": 0.1}}, {"server_optimizer.lr": 0.1}),  # a component's setting
        ({"seed": 3}, {"seed.x": 1}),  # a value where a section would be
    ],
)
def test_what_needs_the_components_is_left_to_the_full_validation(tree, overrides, index):
    assert keys.unknown_key_lines(tree, overrides) is None
    assert keys.unknown_key_lines({"train": {"lr": 0.1}}) == []


def test_a_uri_checked_early_creates_nothing(tmp_path):
    from fedsweep.tracking.uri import TrackingUriError, check_tracking_uri

    missing = tmp_path / "a" / "b"
    check_tracking_uri(f"sqlite:///{missing / 'mlflow.db'}", write=True, create=False)
    assert not (tmp_path / "a").exists() and list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(TrackingUriError, match="cannot create the folder"):
        check_tracking_uri(f"sqlite:///{tmp_path / 'file' / 'x' / 'mlflow.db'}", create=False)
