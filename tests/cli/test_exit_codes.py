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
from fedsweep.core.processes import free_port
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
    from fedsweep.tracking.connect import prepare_store

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
    from fedsweep.tracking.connect import prepare_store

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


def test_issue_62_figures_that_drew_nothing_exits_1(tmp_path):
    """A store without runs of the figure at the profile (a wrong --profile or store, a sweep
    not run): "nothing drawn" and exit 1, as docs/concepts/exit-codes.md says (it exited 0, so
    a script went on with empty figures)."""
    from fedsweep.tracking.connect import prepare_store

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    prepare_store(uri)
    res = invoke("figures", "--tracking-uri", uri, "--out", tmp_path / "figs", "--figure",
                 "bherd-fig4e", "--sweeps-dir", ROOT / "sweeps", "--profile", "smoke",
                 "--format", "svg")  # fmt: skip
    assert res.exit_code == common.EXIT_FAILED, res.output
    assert "nothing drawn: the store" in res.output and "Traceback" not in res.output


def test_ui_that_cannot_listen_exits_2_before_starting_a_server(tmp_path):
    from fedsweep.tracking.connect import prepare_store

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


# ------------------------------------------------------------------------------ issue 48
def test_issue_48_a_set_on_a_key_the_curves_or_panels_vary_is_refused(tmp_path):
    """issue 48, item 5: ``figures --set data.partition=case2`` on Fig. 4e drew the Case 2 runs
    under the labels "Case 1" and "Case 3": a ``--set`` on a key the figure's curves (or
    panels) set is refused, naming the key and the curves; ``sweep`` refuses it too."""
    from fedsweep.specs.load import expand, load_spec
    from fedsweep.tracking.connect import prepare_store

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    prepare_store(uri)
    sweeps = ROOT / "sweeps"
    common_args = ("--profile", "smoke", "--sweeps-dir", sweeps, "--tracking-uri", uri)
    out = one_line_exit_2(
        invoke(
            "figures",
            "--figure",
            "bherd-fig4e",
            "--set",
            "data.partition=case2",
            "--out",
            tmp_path / "figs",
            *common_args,
        ),
        "--set data.partition=case2: bherd-fig4e varies data.partition by its curves "
        "'Case 1, RR', 'Case 1, no RR', 'Case 2, RR', 'Case 2, no RR', 'Case 3, RR', "
        "'Case 3, no RR'",
        "extends: bherd-fig4e",
    )
    assert "Traceback" not in out and not (tmp_path / "figs").exists()
    one_line_exit_2(
        invoke("sweep", "bherd-fig4e", "--plan", "--set", "train.order=rr", *common_args),
        "--set train.order=rr: bherd-fig4e varies train.order by its curves",
    )
    # a panel axis of override sets (Fig. 3's setting: model and data set per panel)
    one_line_exit_2(
        invoke("sweep", "fedveca-fig3", "--plan", "--set", "data.dataset=mnist", *common_args),
        "--set data.dataset=mnist: fedveca-fig3 varies data.dataset by its panel axis setting",
    )
    # a key nothing of the figure sets is a --set as before
    spec = load_spec(sweeps / "bherd-fig4e.yaml")
    trials = expand(spec, "smoke", extra={"bherd.alpha": 0.3})
    assert {t.config.bherd.alpha for t in trials} == {0.3}
    assert [t.config.data.partition for t in trials][::2] == ["case1", "case2", "case3"]


def test_issue_62_runs_names_a_figure_typo_before_opening_the_store(tmp_path, monkeypatch):
    """``runs --figure TYPO``: the typo with a did-you-mean, exit 2, before any store is opened
    (a tracking server that takes connections and never answers made it wait for the store's
    timeout first, then name the store instead); an id only the store knows (far from every
    local one) is still looked up there."""
    import socket
    import time

    from mlflow import MlflowClient

    monkeypatch.setenv("FEDSWEEP_TRACKING_TIMEOUT", "30")
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        start = time.monotonic()
        res = invoke("runs", "--figure", "bherd-fig3x", "--tracking-uri", uri)
        took = time.monotonic() - start
    one_line_exit_2(res, "--figure 'bherd-fig3x': no such figure (did you mean 'bherd-fig3a'?)")
    assert took < 10, took
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    client = MlflowClient(uri)
    run = client.create_run(client.create_experiment("my-own-study"), tags={
        "fedsweep.figure": "my-own-study"})  # fmt: skip
    client.set_terminated(run.info.run_id)
    res = invoke("runs", "--figure", "my-own-study", "--tracking-uri", uri)
    assert res.exit_code == 0 and run.info.run_id[:8] in res.output, res.output


def test_issue_48_runs_with_an_empty_figure_is_refused(tmp_path):
    """issue 48, item 8: ``runs --figure ''`` listed every run of the store."""
    from fedsweep.tracking.connect import prepare_store

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    prepare_store(uri)
    for command in ("runs", "compare"):
        one_line_exit_2(
            invoke(command, "--figure", "", "--tracking-uri", uri),
            "--figure '': an empty name names no figure",
        )
        one_line_exit_2(invoke(command, "--figure", "  ", "--tracking-uri", uri), "an empty name")


def test_issue_48_sweep_names_each_spec_once(tmp_path):
    """issue 48, item 8: ``sweep F F`` planned F twice; two files of one figure id too."""
    (tmp_path / "sweeps").mkdir()  # the working folder's sweeps/: figure ids resolve there
    spec = write_yaml(tmp_path / "sweeps" / "once.yaml", small_spec("once"))
    one_line_exit_2(
        invoke("sweep", "once", "once", "--plan", "--profile", "smoke"),
        "FIGURE: 'once' is given twice (sweeps/once.yaml); name each figure once",
    )
    one_line_exit_2(
        invoke("sweep", "once", spec, "--plan", "--profile", "smoke"),
        f"FIGURE: 'once' and '{spec}' are the same spec",
    )
    copy = write_yaml(tmp_path / "copy.yaml", small_spec("once"))
    one_line_exit_2(
        invoke("sweep", spec, copy, "--plan", "--profile", "smoke"),
        f"FIGURE: {spec} and {copy} are both figure 'once'",
    )
    res = invoke("sweep", "once", "--plan", "--profile", "smoke")
    assert res.exit_code == 0 and res.output.count("once [smoke]: 2 trials") == 1, res.output


def test_issue_48_unknown_claims_are_refused_before_the_plan(tmp_path):
    """issue 48, item 8: a claim text no criterion judges passed ``--plan`` (and would read
    "n/a" after the whole sweep)."""
    spec = write_yaml(tmp_path / "c.yaml", small_spec("claimy", claims=["alpha=1.0 matches FedAv"]))
    one_line_exit_2(
        invoke("sweep", spec, "--plan", "--profile", "smoke"),
        "claims[0]: 'alpha=1.0 matches FedAv' is not a claim fedsweep can judge",
        "allowed: a declared claim (docs/how-to/own-claims.md)",
        "`claims: []` for none",
    )
    # a declared claim whose measure is misspelled: the same line, with the measure's did-you-mean
    claim = {
        "id": "a1-matches-a05",
        "text": "α=1.0 matches α=0.5",
        "kind": "equivalent",
        "measure": "final_ac",
        "curve": {"set": {"bherd.alpha": 1.0}},
        "versus": {"set": {"bherd.alpha": 0.5}},
        "margin": 0.01,
    }
    typo = write_yaml(tmp_path / "t.yaml", small_spec("claimy", claims=[claim]))
    one_line_exit_2(
        invoke("sweep", typo, "--plan", "--profile", "smoke"),
        "claims[0] (a1-matches-a05).measure: unknown measure 'final_ac'",
        "(did you mean 'final_acc'?)",
    )
    ok = write_yaml(
        tmp_path / "k.yaml", small_spec("claimy", claims=[{**claim, "measure": "final_acc"}])
    )
    assert invoke("sweep", ok, "--plan", "--profile", "smoke").exit_code == 0


def test_issue_48_plan_says_trials_can_never_start_here(tmp_path):
    """issue 48, item 8: ``resources: {cpu: 64}`` planned a wall time for trials no local Ray
    can start; the plan says they never start here (a cluster, ``--address``, decides itself)."""
    import os

    cpus = os.cpu_count() or 1
    spec = write_yaml(tmp_path / "big.yaml", small_spec("big-cpu", resources={"cpu": cpus + 1}))
    res = invoke("sweep", spec, "--plan", "--profile", "smoke")
    assert res.exit_code == 0, res.output
    summary = res.output.splitlines()[0]
    assert summary == (
        f"big-cpu [smoke]: 2 trials: 2 to run, 0 reused; each trial asks for resources "
        f"cpu={cpus + 1}, gpu=0, but this machine has {cpus} CPUs and 0 GPUs: no trial can ever "
        "start here (lower resources in the spec, or sweep on a cluster that has them: --address)"
    ), res.output
    on_cluster = invoke("sweep", spec, "--plan", "--profile", "smoke", "--address", "auto")
    assert on_cluster.exit_code == 0 and "never start" not in on_cluster.output


def test_issue_48_a_huge_grid_is_counted_and_needs_yes(tmp_path, monkeypatch):
    """issue 48, item 8: a 10,000-curve grid planned silently for minutes: beyond 2,000 trials
    at the profile it is refused without ``--yes`` (before a trial is built), and the count is
    said first."""
    import fedsweep.cli.sweep_specs as sweep_specs

    grid = [round(0.0001 * i, 6) for i in range(1, 2002)]  # 2,001 curves x 1 seed
    huge = write_yaml(tmp_path / "huge.yaml", small_spec("huge", alphas=grid))
    one_line_exit_2(
        invoke("sweep", huge, "--plan", "--profile", "smoke"),
        f"{huge}: huge has 2,001 trials at --profile smoke (panels x curves x seeds), more than "
        "2,000",
        "Add --yes to go ahead",
    )
    monkeypatch.setattr(sweep_specs, "MAX_TRIALS", 3)  # the same at a size a test can build
    small = write_yaml(tmp_path / "small.yaml", small_spec("small", alphas=(0.2, 0.4, 0.6, 0.8)))
    one_line_exit_2(
        invoke("sweep", small, "--plan", "--profile", "smoke"), "small has 4 trials", "than 3"
    )
    res = invoke("sweep", small, "--plan", "--profile", "smoke", "--yes")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == (
        "small: 4 trials at --profile smoke (12 in its 3 profiles); checking them before "
        "anything starts takes a while"
    ), res.output
    assert lines[1].startswith("small [smoke]: 4 trials: 4 to run"), res.output


# ------------------------------------------------ issue 48: outputs, storage, URIs, team up
def _one_stderr_line(res, code: int = 2) -> str:
    """The command ended with ``code`` and exactly one line on stderr, no traceback."""
    assert res.exit_code == code, (res.output, res.exception)
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_report_out_that_cannot_be_a_folder_is_one_line(tmp_path):
    """issue 48, item 10 (and item 8's `report --out ''`): `report --out` on a file, under
    /proc (which even root cannot write) or empty was a traceback, or wrote the reports into
    the current folder; now one line naming --out, the value and what is allowed, before the
    store is read, and nothing written."""
    from fedsweep.tracking.connect import prepare_store

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    prepare_store(uri)
    afile = tmp_path / "afile"
    afile.write_text("keep\n")
    before = _entries(tmp_path)
    common_args = (
        "--tracking-uri",
        uri,
        "--figure",
        "bherd-fig2a",
        "--sweeps-dir",
        ROOT / "sweeps",
    )
    for out, line in [
        (afile, f"--out {afile}: is a file, not a folder (allowed: a folder that exists"),
        (afile / "sub", f"--out {afile / 'sub'}: is inside the file {afile}, not a folder"),
        ("/proc/fedsweep-48", "--out /proc/fedsweep-48: a system folder; refusing to write"),
        ("", "--out '': empty (allowed: a folder that exists or can be created"),
    ]:
        res = invoke("report", "--out", out, *common_args)
        assert _one_stderr_line(res).startswith(line), (out, res.stderr)
        assert res.stdout == ""  # not even the profile line: the store was not read
    assert _entries(tmp_path) == before and afile.read_text() == "keep\n"


def test_sweep_storage_that_cannot_hold_checkpoints_is_one_line(tmp_path):
    """issue 48, item 10: `sweep --storage` on a file or under /proc was a traceback from the
    log file Ray's output goes to; now one line naming --storage, before Ray starts, and
    nothing created (no store folder, no log)."""
    spec = write_yaml(tmp_path / "st.yaml", small_spec("st"))
    afile = tmp_path / "afile"
    afile.write_text("")
    before = _entries(tmp_path)
    for storage, line in [
        (afile, f"--storage {afile}: is a file, not a folder (allowed: a folder that exists"),
        ("/proc/fedsweep-48", "--storage /proc/fedsweep-48: a system folder; refusing"),
        ("file:///proc/fedsweep-48/x", "--storage /proc/fedsweep-48/x: a system folder; refusing"),
    ]:
        res = invoke("sweep", spec, "--profile", "smoke", "--storage", storage)
        text = _one_stderr_line(res)
        assert text.startswith(line) and text.endswith(
            "or an object store, e.g. s3://bucket/prefix"
        )
    assert _entries(tmp_path) == before  # no default-store/ray_results/logs/...


SECRET = "S3cr3t"


@pytest.mark.parametrize(
    "uri",
    [
        f"postgresql://alice:{SECRET}@[::1/db",  # urlsplit: "Invalid IPv6 URL"
        f"postgresql://alice:p/{SECRET}@localhost:5432/db",  # a "/" in the password: the port
        f"postgresql://alice:{SECRET}@localhost:99999/db",  # port out of range
        "postgresql://[::1/db",  # no password: the same line
    ],
)
def test_a_malformed_tracking_uri_is_one_line_without_its_password(tmp_path, uri):
    """issue 48, item 10: a malformed URI with a password was a ValueError traceback from
    urllib in every command that read it; now one line, the password masked, and a sweep
    leaves no log file behind."""
    spec = write_yaml(tmp_path / "uri.yaml", small_spec("uri"))
    before = _entries(tmp_path)
    for args in (("runs",), ("sweep", spec, "--profile", "smoke")):
        res = invoke(*args, "--tracking-uri", uri)
        line = _one_stderr_line(res)
        assert line.startswith("tracking URI postgresql://") and "not a valid URI" in line, line
        assert SECRET not in res.output, res.output
    assert _entries(tmp_path) == before


@pytest.fixture
def enterable_folder():
    """A new folder every user may enter (pytest's own are mode 700 under root's): as root,
    ``team up`` refuses a --home the postgres user cannot enter before its other checks."""
    import shutil
    import tempfile

    made = []

    def make() -> Path:
        folder = Path(tempfile.mkdtemp(prefix="fedsweep-test-"))
        folder.chmod(0o711)
        made.append(folder)
        return folder

    yield make
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def test_team_up_checks_host_ports_and_home_before_creating_anything(
    tmp_path, monkeypatch, enterable_folder
):
    """issue 48, item 14: port 70000 was accepted, an address not of this machine and a port
    in use gave a vague pg_ctl line after a database cluster was created, --home under /proc
    a traceback. Now each is one line naming the option and value, and nothing is created:
    not the folder, not a cluster in the postgres user's home."""
    import socket

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home = enterable_folder() / "team"  # as root, the postgres user may enter it
    ports = ["--pg-port", free_port(), "--mlflow-port", free_port(), "--ray-port", free_port()]
    pg_home = Path("/var/lib/postgresql")
    pg_before = _entries(pg_home) if pg_home.is_dir() else []
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        for args, line in [
            (["--pg-port", "70000"], "--pg-port 70000: not a port (allowed: 1-65535)"),
            (["--ray-port", "0"], "--ray-port 0: not a port (allowed: 1-65535)"),
            (["--mlflow-port", ports[1]], f"--mlflow-port {ports[1]}: already --pg-port's"),
            (["--host", "192.0.2.1"], "--host 192.0.2.1: not an address of this machine"),
            (["--host", "host.invalid"], "--host host.invalid: not an address of this machine"),
            (["--host", "::1"], "--host ::1: an IPv6 address (allowed: an IPv4 address"),
            (["--pg-port", taken], f"--pg-port {taken}: in use on 127.0.0.1; choose another"),
            (
                ["--home", "/proc/fedsweep-48"],
                "--home /proc/fedsweep-48: a system folder; refusing",
            ),
            (
                ["--home", tmp_path / "afile" / "team"],
                f"--home {tmp_path / 'afile' / 'team'}: is inside the file {tmp_path / 'afile'}",
            ),
        ]:
            (tmp_path / "afile").write_text("")
            given = dict(zip(ports[::2], ports[1::2], strict=True))
            given.update(dict(zip(args[::2], args[1::2], strict=True)))
            flat = [str(x) for kv in given.items() for x in kv]
            home_args = [] if "--home" in given else ["--home", home]
            res = invoke("team", "up", *home_args, *flat)
            assert _one_stderr_line(res).startswith(line), (args, res.stderr)
            assert res.stdout == "" and not home.exists(), (args, res.stdout)
    assert (_entries(pg_home) if pg_home.is_dir() else []) == pg_before


def test_team_up_as_root_refuses_a_home_postgres_cannot_enter(tmp_path, monkeypatch):
    """issue 48, item 14: as root the database stays under --home, run by the postgres user;
    a --home it cannot reach (under a folder of mode 700) is refused in one line naming that
    folder, before anything is created."""
    import os

    if os.geteuid() != 0:
        pytest.skip("only root runs PostgreSQL as another user (postgres)")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    closed.chmod(0o700)
    res = invoke("team", "up", "--home", closed / "team", "--pg-port", free_port(),
                 "--mlflow-port", free_port(), "--ray-port", free_port())  # fmt: skip
    line = _one_stderr_line(res)
    assert line.startswith(f"--home {closed / 'team'}: as root, PostgreSQL runs as the postgres"), (
        line
    )
    blocked = Path(line.split("cannot enter ", 1)[1].split(" (mode 700)")[0])
    assert blocked == closed or blocked in closed.parents, line  # pytest's own may be 700 too
    assert _entries(closed) == []


# ------------------------------------------------ issue 62, item 10: team up, the server's wait
def test_team_up_refuses_a_negative_ray_cpus_before_anything(
    tmp_path, monkeypatch, enterable_folder
):
    """`team up --ray-cpus -1` started the database and the MLflow server, then `ray start`
    failed on it behind a 0 exit: now one line naming the option, the value and what is
    allowed, exit 2, and nothing created (the check comes first, as the ports')."""
    from fedsweep.team.local import Team, TeamError, check

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    home = enterable_folder() / "team"
    ports = dict(pg_port=free_port(), mlflow_port=free_port(), ray_port=free_port())
    line = "--ray-cpus -1: not a number of CPUs (allowed: 0 or more"
    with pytest.raises(TeamError, match=line.replace("(", r"\(")):
        check(Team(home, ray_cpus=-1, **ports))  # before: passed, and up went on
    flat = [x for k, v in ports.items() for x in (f"--{k.replace('_', '-')}", v)]
    res = invoke("team", "up", "--home", home, *flat, "--ray-cpus", "-1")
    assert _one_stderr_line(res).startswith(line), res.stderr
    assert res.stdout == "" and not home.exists()


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "inf"])
def test_a_bad_tracking_timeout_is_one_line_naming_the_variable(monkeypatch, value):
    """$FEDSWEEP_TRACKING_TIMEOUT not a number of seconds > 0: a traceback (a word: float's
    ValueError; nan, inf, -1: the socket's) or an immediate "does not answer" (0), before.
    Now one line with the variable, its value and what is allowed, exit 2."""
    monkeypatch.setenv("FEDSWEEP_TRACKING_TIMEOUT", value)
    res = invoke("runs", "--tracking-uri", f"http://127.0.0.1:{free_port()}")
    assert _one_stderr_line(res) == (
        f"$FEDSWEEP_TRACKING_TIMEOUT={value!r}: not a number of seconds (allowed: a number > 0, "
        "e.g. 30; unset: 10)"
    )
