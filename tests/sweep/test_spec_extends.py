"""Issue 32: ``extends:`` stays inside the specs' world (item 2), a figure id names exactly one
spec of a folder and a broken sibling does not break the lookup (item 11), and ``fedsweep
validate`` on a sweep spec points to ``fedsweep sweep`` (item 15). Spec loading and CLI checks
only: nothing here starts Ray or MLflow."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.specs.load import SpecError, expand, load_spec
from tests.helpers import small_spec, write_yaml

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
runner = CliRunner()


def invoke(*args) -> object:
    return runner.invoke(app, [str(a) for a in args])


def assert_clean(res, *needles: str) -> str:
    """Exit 2, no traceback, one message containing every needle."""
    out = res.output
    assert res.exit_code == 2, out
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out, out
    for needle in needles:
        assert needle in out, (needle, out)
    return out


@pytest.fixture(autouse=True)
def _no_ray_no_mlflow(tmp_path, monkeypatch):
    """A sweep that gets as far as MLflow or Ray fails the test at once (and the default store
    is under tmp_path)."""
    import fedsweep.sweep.runner as runner_mod
    import fedsweep.sweep.stage as stage_mod

    def boom(*a, **k):
        raise AssertionError("MLflow or Ray was started")

    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "default-store"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(runner_mod, "get_client", boom)
    monkeypatch.setattr(stage_mod, "fit_trials", boom)


def spec_file(path: Path, figure: str, **kw) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_yaml(path, small_spec(figure, **kw))


def extension(path: Path, ref: str, figure: str = "my-ext") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"extends: {ref}\nfigure: {figure}\ntitle: my extension\n")
    return path


def hashes(spec, profile: str = "smoke") -> list[str]:
    """The config hashes of ``spec``'s trials (equal for an extension that changes nothing)."""
    return [t.config_hash for t in expand(spec, profile)]


def trials(spec, profile: str) -> list[tuple[str, str]]:
    return [(t.trial_id, t.config_hash) for t in expand(spec, profile)]


# ------------------------------------------------------------- item 2: the specs' world
def outside_refs(tmp_path: Path) -> dict[str, str]:
    """``extends`` values that reach a valid spec (or a system file) outside both the
    extending spec's folder and sweeps/."""
    outside = spec_file(tmp_path / "outside" / "parent.yaml", "parent-fig")
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "link.yaml").symlink_to(outside)
    (mine / "sub" / "dirlink").symlink_to(outside.parent, target_is_directory=True)
    return {
        "absolute": str(outside),
        "dotdot": "../outside/parent.yaml",
        "dotdot-chain": "sub/../../outside/parent.yaml",
        "symlinked-file": "link.yaml",
        "symlinked-folder": "sub/dirlink/parent.yaml",
        "proc": "/proc/self/environ",
        "sweeps-escape": str(SWEEPS / ".." / "README.md"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "absolute",
        "dotdot",
        "dotdot-chain",
        "symlinked-file",
        "symlinked-folder",
        "proc",
        "sweeps-escape",
    ],
)
def test_extends_outside_the_spec_folder_and_sweeps_is_refused(tmp_path, case):
    ref = outside_refs(tmp_path)[case]
    ext = extension(tmp_path / "mine" / "ext.yaml", ref)
    with pytest.raises(SpecError) as err:
        load_spec(ext)
    message = str(err.value)
    assert str(ext) in message and repr(ref) in message, message
    assert "allowed: a figure id" in message and "sweeps" in message, message


def test_extends_outside_is_exit_2_on_the_command_line(tmp_path):
    ext = extension(tmp_path / "ext.yaml", "/proc/self/environ")
    out = assert_clean(invoke("sweep", ext, "--profile", "smoke"), "'/proc/self/environ'")
    assert "allowed: a figure id" in out and "NUL" not in out, out


def test_extends_inside_the_spec_folder_or_sweeps_still_works(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    parent = spec_file(mine / "sub" / "parent.yaml", "parent-fig")
    ours = hashes(load_spec(parent))
    for ref in ("sub/parent.yaml", "sub/../sub/parent.yaml", str(parent)):
        assert hashes(load_spec(extension(mine / "ext.yaml", ref))) == ours, ref
    # a symlink inside the folder to a spec inside the folder
    (mine / "alias.yaml").symlink_to(parent)
    assert hashes(load_spec(extension(mine / "ext.yaml", "alias.yaml"))) == ours
    # the project's sweeps/ (fedsweep's own), by figure id, by absolute path, by ../ chain
    shipped = hashes(load_spec(SWEEPS / "bherd-fig4abc.yaml"))
    rel = os.path.relpath(SWEEPS / "bherd-fig4abc.yaml", mine)
    for ref in ("bherd-fig4abc", str(SWEEPS / "bherd-fig4abc.yaml"), rel):
        assert hashes(load_spec(extension(mine / "ext.yaml", ref))) == shipped, ref
    # from another working directory: sweeps/ of the working directory, then fedsweep's own
    work = tmp_path / "work"
    spec_file(work / "sweeps" / "local-fig.yaml", "local-fig")
    local = hashes(load_spec(work / "sweeps" / "local-fig.yaml"))
    monkeypatch.chdir(work)
    for ref in ("local-fig", "../work/sweeps/local-fig.yaml"):
        assert hashes(load_spec(extension(mine / "ext.yaml", ref))) == local, ref
    assert hashes(load_spec(extension(mine / "ext.yaml", "bherd-fig4abc"))) == shipped


# ------------------------------------------------------ item 11: one figure id, one spec
def test_two_specs_with_one_figure_id_are_refused_naming_both(tmp_path):
    a = write_yaml(tmp_path / "a.yaml", small_spec("base-fig", alphas=(0.5,)))
    b = write_yaml(tmp_path / "b.yaml", small_spec("base-fig", alphas=(0.7,)))
    ext = extension(tmp_path / "ext.yaml", "base-fig")
    with pytest.raises(SpecError) as err:
        load_spec(ext)
    message = str(err.value)
    assert str(a) in message and str(b) in message and "'base-fig'" in message, message
    assert_clean(invoke("sweep", ext, "--profile", "smoke"), str(a), str(b))


def test_a_duplicate_of_a_shipped_figure_id_in_a_copy_of_sweeps_is_refused(tmp_path):
    sweeps = Path(shutil.copytree(SWEEPS, tmp_path / "sweeps"))
    dup = sweeps / "zz-fig3-copy.yaml"
    dup.write_text((sweeps / "fedveca-fig3.yaml").read_text())
    out = assert_clean(
        invoke("sweep", sweeps / "fedveca-fig4.yaml", "--profile", "smoke"),
        "'fedveca-fig3'",
        str(sweeps / "fedveca-fig3.yaml"),
        str(dup),
    )
    assert out.count("fedveca-fig3") < 10, out


BROKEN = {
    "bad-yaml.yaml": "figure: [unclosed\n",
    "tabs.yml": "figure: x\n\tbase: 1\n",
    "deep.yaml": "figure: " + "[" * 3000 + "]" * 3000 + "\n",
    "binary.yaml": "\udcff\udcfe",
    "a-list.yaml": "- 1\n- 2\n",
}


def write_broken(folder: Path) -> None:
    for name, text in BROKEN.items():
        (folder / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    (folder / "a-folder.yaml").mkdir()


def test_broken_siblings_do_not_break_extends_by_figure_id(tmp_path):
    # a copy of sweeps/ with broken files: the shipped extensions load exactly as before
    sweeps = Path(shutil.copytree(SWEEPS, tmp_path / "sweeps"))
    write_broken(sweeps)
    for name in ("fedveca-fig4.yaml", "fedwalk-fig2.yaml"):
        copy, shipped = load_spec(sweeps / name), load_spec(SWEEPS / name)
        assert copy.model_dump() == shipped.model_dump(), name
        assert trials(copy, "smoke") == trials(shipped, "smoke"), name
    # a folder of one's own: the figure id's file has another name, so every file is read
    mine = tmp_path / "mine"
    mine.mkdir()
    write_broken(mine)
    parent = write_yaml(mine / "zz-parent.yaml", small_spec("parent-fig"))
    ext = extension(mine / "ext.yaml", "parent-fig")
    assert hashes(load_spec(ext)) == hashes(load_spec(parent))
    assert load_spec(ext).extends == "parent-fig"


def test_a_broken_spec_that_is_the_match_names_itself(tmp_path):
    # named like the figure id: its YAML error, not "no spec with figure id"
    named = tmp_path / "parent-fig.yaml"
    named.write_text("figure: parent-fig\ntitle: [unclosed\n")
    ext = extension(tmp_path / "ext.yaml", "parent-fig")
    with pytest.raises(SpecError) as err:
        load_spec(ext)
    assert str(named) in str(err.value) and "not valid YAML" in str(err.value), str(err.value)
    named.write_bytes(b"\xff\xfe\x00")  # not even text
    with pytest.raises(SpecError) as err:
        load_spec(ext)
    assert str(named) in str(err.value) and "not a text file" in str(err.value), str(err.value)
    # another name, but its text claims the figure id
    named.unlink()
    other = tmp_path / "wip.yaml"
    other.write_text("figure: parent-fig\ntitle: [unclosed\n")
    with pytest.raises(SpecError) as err:
        load_spec(ext)
    assert str(other) in str(err.value) and "not valid YAML" in str(err.value), str(err.value)


def test_an_invalid_extended_spec_is_named_in_the_error(tmp_path):
    tree = small_spec("parent-fig")
    tree["bsae"] = tree.pop("base")
    parent = write_yaml(tmp_path / "zz-parent.yaml", tree)
    ext = extension(tmp_path / "ext.yaml", "parent-fig")
    out = assert_clean(invoke("sweep", ext, "--profile", "smoke"), str(parent), "`bsae`")
    assert "extended by" in out and str(ext) in out, out


# ------------------------------------------------------------------------------ issue 48
def test_issue_48_a_broken_sibling_claiming_the_id_is_skipped_with_one_warning(tmp_path, capsys):
    """issue 48, item 9: an invalid copy of a spec beside it (a half-edited ``wip.yaml``
    claiming the same figure id) broke every valid ``extends:`` of that id in the folder; with
    exactly one valid claimant the broken ones are skipped, one warning line each."""
    parent = write_yaml(tmp_path / "zz-parent.yaml", small_spec("parent-fig"))
    invalid = small_spec("parent-fig")
    invalid["bsae"] = invalid.pop("base")
    wip = write_yaml(tmp_path / "wip.yaml", invalid)
    bad_yaml = tmp_path / "wip2.yaml"
    bad_yaml.write_text("figure: parent-fig\ntitle: [unclosed\n")
    ext = extension(tmp_path / "ext.yaml", "parent-fig")
    assert hashes(load_spec(ext)) == hashes(load_spec(parent))
    load_spec(ext)  # loaded again: no second warning
    warnings = [line for line in capsys.readouterr().err.splitlines() if line]
    assert warnings == [
        f"warning: {ext}: extends 'parent-fig': skipped {bad_yaml}, which sets figure "
        f"'parent-fig' but is not a valid spec ({bad_yaml}, line 3, column 1: not valid YAML: "
        "while parsing a flow sequence expected ',' or ']', but got '<stream end>'); using "
        f"{parent}",
        f"warning: {ext}: extends 'parent-fig': skipped {wip}, which sets figure 'parent-fig' "
        f"but is not a valid spec (invalid sweep spec {wip}: key `base`: Field required); "
        f"using {parent}",
    ]
    # on the command line: the sweep goes on (to its plan), the warnings on stderr
    res = invoke("sweep", ext, "--plan", "--profile", "smoke")
    assert res.exit_code == 0 and "my-ext [smoke]: 2 trials" in res.output, res.output
    # two valid claimants stay an error naming both; a broken one alone names itself
    other = write_yaml(tmp_path / "other.yaml", small_spec("parent-fig", alphas=(0.7,)))
    assert_clean(invoke("sweep", ext, "--profile", "smoke"), str(parent), str(other))
    for path in (parent, other, wip):
        path.unlink()
    with pytest.raises(SpecError, match="cannot be read"):
        load_spec(ext)


def test_issue_48_a_local_spec_shadowing_a_shipped_id_warns_in_one_line(
    tmp_path, monkeypatch, capsys
):
    """issue 48, item 9: a spec of the extending spec's folder (or of ./sweeps for a command's
    FIGURE) with a shipped figure's id silently shadowed the shipped figure: one warning line
    names both; a byte-identical copy shadows nothing and says nothing."""
    mine = tmp_path / "mine"
    mine.mkdir()
    shipped = SWEEPS / "bherd-fig4abc.yaml"
    local = mine / "bherd-fig4abc.yaml"
    local.write_text(shipped.read_text() + "\nmax_failures: 5  # my change\n")
    ext = extension(mine / "ext.yaml", "bherd-fig4abc")
    assert load_spec(ext).title == "my extension"
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {ext}: extends: figure id 'bherd-fig4abc' is {local}, not the shipped "
        f"{shipped}: the local spec shadows it (give the shipped spec's path to use it, or give "
        "yours its own id)"
    ]
    local.write_text(shipped.read_text())  # an exact copy
    load_spec(extension(mine / "ext2.yaml", "bherd-fig4abc", "my-ext2"))
    assert capsys.readouterr().err == ""
    # a command's FIGURE looked up in ./sweeps
    work = tmp_path / "work"
    (work / "sweeps").mkdir(parents=True)
    copy = work / "sweeps" / "bherd-fig4d.yaml"
    copy.write_text((SWEEPS / "bherd-fig4d.yaml").read_text() + "\n# my change\n")
    monkeypatch.chdir(work)
    res = invoke("sweep", "bherd-fig4d", "--plan", "--profile", "smoke")
    assert res.exit_code == 0, res.output
    shown = [line for line in res.output.splitlines() if line.startswith("warning:")]
    assert shown == [
        f"warning: FIGURE bherd-fig4d: figure id 'bherd-fig4d' is sweeps/bherd-fig4d.yaml, not "
        f"the shipped {SWEEPS / 'bherd-fig4d.yaml'}: the local spec shadows it (give the "
        "shipped spec's path to use it, or give yours its own id)"
    ], res.output
    from dashboards.build import load_specs  # fedsweep figures --figure bherd-fig4d

    capsys.readouterr()
    assert list(load_specs(Path("sweeps"), ["bherd-fig4d"])) == ["bherd-fig4d"]
    assert capsys.readouterr().err.startswith(
        "warning: --figure bherd-fig4d: figure id 'bherd-fig4d' is sweeps/bherd-fig4d.yaml, not "
        "the shipped"
    )


# ------------------------------------------------- item 15: validate on a sweep spec
@pytest.mark.parametrize("name", ["bherd-fig3a.yaml", "fedveca-fig4.yaml", "intro-fedavg.yaml"])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_validate_or_run_on_a_sweep_spec_points_to_fedsweep_sweep(name, command):
    """issue 52, item 6: ``fedsweep run`` on a sweep spec answered with a list of unknown keys
    per spec key (13 lines); now, as validate: one line naming ``fedsweep sweep``."""
    path = SWEEPS / name
    out = assert_clean(
        invoke(command, path), "this is a sweep spec", f"use `fedsweep sweep {path} --profile P`"
    )
    assert f"`fedsweep {command}` takes one run config" in out, out
    assert "unknown key" not in out and out.count("sweep spec") == 1, out
    assert len(out.strip().splitlines()) <= 3, out


def test_validate_on_a_minimal_extension_is_a_sweep_spec(tmp_path):
    ext = extension(tmp_path / "ext.yaml", "bherd-fig3a")
    assert_clean(invoke("validate", ext), "this is a sweep spec", str(ext))


def test_validate_still_validates_run_configs_and_reports_their_keys(tmp_path):
    res = invoke("validate", ROOT / "configs" / "bherd-default.yaml")
    assert res.exit_code == 0 and res.output.rstrip().endswith("OK"), res.output
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("model: {name: svm}\nseeds: [0, 1]\n")  # a run config with a typo
    out = assert_clean(invoke("validate", cfg), "`seeds`", "unknown key")
    assert "sweep spec" not in out, out
