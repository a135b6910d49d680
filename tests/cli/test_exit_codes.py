"""Every command's exit status means one thing, is documented in ``fedsweep --help``, and no
failure exits 0 (issue 14): reading commands refuse a store that does not exist instead of
creating an empty one; a figure that fails, a diverged run and a UI that cannot listen each
have their code; bad inputs that used to raise tracebacks are one line and exit 2."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from fedsweep.cli import common
from fedsweep.cli.main import app
from fedsweep.config.schema import RunConfig
from tests.helpers import small_run, small_spec, write_yaml

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_line_exit_2(res, *needles: str) -> str:
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    for needle in needles:
        assert needle in out, (needle, res.output)
    return out


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "default-store"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)


def test_help_lists_every_exit_code_and_the_constants_agree():
    text = " ".join(invoke("--help").output.split())
    for code, meaning in [
        (common.EXIT_OK, "done"),
        (common.EXIT_FAILED, "failed"),
        (common.EXIT_USAGE, "bad input"),
        (common.EXIT_DATA, "data set missing"),
        (common.EXIT_DIVERGED, "diverged"),
        (common.EXIT_INTERRUPTED, "Ctrl-C"),
        (common.EXIT_TERMINATED, "SIGTERM"),
    ]:
        assert f"{code} {meaning}" in text, (code, text)
    from fedsweep.cli.run import EXIT_TERMINATED

    assert EXIT_TERMINATED == common.EXIT_TERMINATED == 143


# ------------------------------------------------------------- reading never creates a store
def test_reading_commands_refuse_a_store_that_does_not_exist(tmp_path):
    missing = tmp_path / "MISTYPED" / "mlflow.db"
    uri = f"sqlite:///{missing}"
    one_line_exit_2(
        invoke(
            "figures",
            "--tracking-uri",
            uri,
            "--figure",
            "bherd-fig2a",
            "--sweeps-dir",
            ROOT / "sweeps",
            "--out",
            tmp_path / "figs",
        ),
        "no MLflow store at",
        str(missing),
    )
    one_line_exit_2(invoke("ui", "--port", "5999", "--tracking-uri", uri), "no MLflow store at")
    one_line_exit_2(invoke("runs", "--tracking-uri", uri), "no MLflow store at")
    assert not missing.parent.exists()  # not even its folder
    assert not (tmp_path / "figs").exists()  # and no "0 runs" figures
    # an empty file (a typo'd `touch`) is no store either, and stays as it is
    missing.parent.mkdir()
    missing.touch()
    one_line_exit_2(invoke("runs", "--tracking-uri", uri), "no MLflow store at")
    assert missing.stat().st_size == 0


def test_figures_out_must_be_a_folder(tmp_path):
    from fedsweep.tracking.store import prepare_store

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    prepare_store(uri)
    afile = tmp_path / "passwd"
    afile.write_text("root:x:0:0\n")
    one_line_exit_2(
        invoke(
            "figures",
            "--tracking-uri",
            uri,
            "--out",
            afile,
            "--figure",
            "bherd-fig2a",
            "--sweeps-dir",
            ROOT / "sweeps",
        ),
        f"--out {afile}: is a file, not a folder",
    )
    assert afile.read_text() == "root:x:0:0\n"
    from dashboards.export import OutputFolderError, output_folder

    with pytest.raises(OutputFolderError, match="cannot create the folder"):
        output_folder(afile / "sub")


def test_a_figure_that_fails_exits_1_after_drawing_the_others(tmp_path, monkeypatch):
    import dashboards.build as build
    from fedsweep.tracking.store import prepare_store

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    prepare_store(uri)

    def broken(ctx):
        raise RuntimeError("a builder bug")

    monkeypatch.setattr(build, "builder_for", lambda fid: broken)
    res = invoke(
        "figures",
        "--tracking-uri",
        uri,
        "--out",
        tmp_path / "figs",
        "--figure",
        "bherd-fig2a",
        "--sweeps-dir",
        ROOT / "sweeps",
        "--format",
        "svg",
    )
    assert res.exit_code == common.EXIT_FAILED, res.output
    assert "a builder bug" in res.output and "1 figure(s) failed" in res.output
    assert (tmp_path / "figs" / "index.html").is_file()


def test_ui_that_cannot_listen_exits_2_before_starting_a_server(tmp_path):
    from fedsweep.tracking.store import prepare_store

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    prepare_store(uri)
    one_line_exit_2(invoke("ui", "--port", "99999", "--tracking-uri", uri), "--port")
    one_line_exit_2(
        invoke("ui", "--host", "host.invalid", "--port", "5999", "--tracking-uri", uri),
        "--host host.invalid: not an address of this machine",
    )


# ------------------------------------------------------------- inputs that got tracebacks
def _numeric_fields(model=RunConfig, prefix=""):
    """(dotted key, 'int' | 'list') of every integer field of the run config, however it is
    typed (``int``, ``int | None``, ``Annotated[int, ...] | Literal['full']``, ``list[int]``)."""

    def kind(ann):
        origin = typing.get_origin(ann)
        if origin is typing.Annotated:
            return kind(typing.get_args(ann)[0])
        if origin in (typing.Union, types.UnionType):
            kinds = {kind(a) for a in typing.get_args(ann)}
            return "list" if "list" in kinds else ("int" if "int" in kinds else None)
        if origin is list:
            return "list" if kind(typing.get_args(ann)[0]) == "int" else None
        return "int" if ann is int else None

    out = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        for sub in typing.get_args(ann) or (ann,):
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                out += _numeric_fields(sub, f"{prefix}{name}.")
        if kind(ann):
            out.append((f"{prefix}{name}", kind(ann)))
    return out


def test_yes_and_on_are_refused_by_every_integer_field(tmp_path):
    """YAML 1.1 reads yes/on/true as True, which pydantic would take as 1 (``rounds: yes`` ran
    one round); ``train.batch_size`` (an int or 'full') and ``lr_step.milestones`` (a list)
    slipped through the first fix."""
    fields = _numeric_fields()
    keys = {k for k, _ in fields}
    assert {"train.rounds", "data.num_clients", "train.batch_size", "lr_step.milestones"} <= keys
    assert len(fields) >= 20
    cfg = write_yaml(tmp_path / "c.yaml", small_run("b", "bools"))
    accepted = []
    for key, kind in fields:
        for word in ("yes", "on"):
            value = f"[{word}]" if kind == "list" else word
            res = invoke("validate", cfg, "--set", f"{key}={value}")
            if res.exit_code != 2 or "a boolean is not an integer" not in res.output:
                accepted.append((key, word, res.exit_code))
    assert accepted == []
    # in the file itself, and in a sweep spec's own numbers
    text = (tmp_path / "c.yaml").read_text().replace("rounds: 3", "rounds: yes")
    (tmp_path / "d.yaml").write_text(text)
    one_line_exit_2(invoke("run", tmp_path / "d.yaml", "--no-track"), "`train.rounds`", "boolean")
    for key, word in (("seeds", [0, "on"]), ("max_failures", "yes"), ("checkpoint_every", "on")):
        spec = small_spec("bools-spec", seeds=(0,))
        spec[key] = word
        path = tmp_path / "s.yaml"
        path.write_text(
            write_yaml(path, spec).read_text().replace("'on'", "on").replace("'yes'", "yes")
        )
        one_line_exit_2(invoke("sweep", path, "--profile", "smoke"), f"`{key}`", "boolean")


def test_python_object_tags_are_refused_in_one_line(tmp_path):
    run_cfg = tmp_path / "c.yaml"
    run_cfg.write_text("name: !!python/object/apply:os.system ['touch PWNED']\n")
    one_line_exit_2(
        invoke("run", run_cfg, "--no-track"), "c.yaml, line 1", "tags that build Python objects"
    )
    spec = write_yaml(tmp_path / "s.yaml", small_spec("tagged"))
    spec.write_text(
        spec.read_text().replace("title: test sweep", "title: !!python/object:os.system {}")
    )
    one_line_exit_2(
        invoke("sweep", spec, "--profile", "smoke"), "s.yaml", "tags that build Python objects"
    )
    one_line_exit_2(
        invoke(
            "validate",
            write_yaml(tmp_path / "ok.yaml", small_run("t", "t")),
            "--set",
            "name=!!python/object/apply:os.system ['touch PWNED']",
        ),
        "tags that build Python objects",
    )
    assert not (tmp_path / "PWNED").exists()


def test_fewer_training_samples_than_clients_is_one_line(tmp_path):
    cfg = write_yaml(tmp_path / "c.yaml", small_run("few", "few"))
    one_line_exit_2(
        invoke("run", cfg, "--no-track", "--set", "data.train_subset=2"),
        "`data.num_clients`",
        "has 2 training samples",
    )


@pytest.mark.parametrize(
    ("outcome", "code"),
    [("finished", 0), ("errored", common.EXIT_FAILED), ("ctrl-c", 130)],
)
def test_sweep_exit_status_follows_its_trials(tmp_path, monkeypatch, outcome, code):
    """The sweep command's mapping from what its trials did to the exit status (the trials'
    own counting is tested on real Ray sweeps in test_sweep.py): a failed trial is exit 1,
    Ctrl-C is 130."""
    import fedsweep.sweep.runner as runner_mod
    from fedsweep.sweep.report import SweepReport

    spec = write_yaml(tmp_path / "exits.yaml", small_spec("exits"))

    def fake_run_sweep(path, profile, **kw):
        if outcome == "ctrl-c":
            raise KeyboardInterrupt
        report = SweepReport("exits", profile, 2, scheduled=2, finished=2)
        if outcome == "errored":
            report.finished, report.errored = 1, 1
            report.errors.append("exits-0: RuntimeError: boom")
        return report

    monkeypatch.setattr(runner_mod, "run_sweep", fake_run_sweep)
    res = invoke("sweep", spec, "--profile", "smoke", "--verbose")
    assert res.exit_code == code, res.output
