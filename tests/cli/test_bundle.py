"""``fedsweep bundle`` and ``fedsweep verify`` (issue 65, item 7): a smoke figure bundled,
verified (all match), then tampered: a metric with the manifest fixed up names the trial, the
metric and the round (exit 1); a member changed behind the manifest's back is named as
tampered (exit 2); a verdict changed in claims.json is caught by the rebuilt verdicts. The
archive reader refuses links, paths out of the archive and unlisted members."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.core.archive import BundleError, read_archive, write_archive
from tests.helpers import small_spec, smoke_sweep, write_yaml

runner = CliRunner()

CLAIM = {
    "id": "alpha-equivalent",
    "summary": "alpha 0.5 and 1.0 end alike",
    "text": "the two alphas end at about the same accuracy",
    "where": "tests",
    "kind": "equivalent",
    "measure": "final_acc",
    "curve": {"set": {"bherd.alpha": 0.5}},
    "versus": {"set": {"bherd.alpha": 1.0}},
    "pair": True,
    "margin": 0.5,
}


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def rewrite(path: Path, change, *, fix_manifest: bool) -> None:
    """``change(members)`` applied to the bundle at ``path``; with ``fix_manifest`` the
    manifest's hashes are recomputed (a consistent forgery), else the old manifest is kept."""
    manifest, members = read_archive(path)
    change(members)
    if fix_manifest:
        write_archive(path, members, {k: v for k, v in manifest.items() if k != "members"})
        return
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in {"manifest.json": json.dumps(manifest).encode(), **members}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())


@pytest.mark.slow
def test_bundle_verifies_then_names_a_tampered_metric(tmp_path, ray_session):
    from dashboards.bundle import sample_runs, trial_label

    spec = write_yaml(
        tmp_path / "bundle-study.yaml",
        small_spec("bundle-study", seeds=(0, 1, 2), rounds=2, claims=[CLAIM]),
    )
    store = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    report = smoke_sweep(spec, store, tmp_path)
    assert (report.total, report.finished) == (6, 6)

    res = invoke("bundle", spec, "--profile", "smoke", "--tracking-uri", store, "--out", tmp_path)
    assert res.exit_code == 0, res.output
    bundle = tmp_path / "bundle-study-smoke.fedsweep.tar.gz"
    manifest, members = read_archive(bundle)
    assert (manifest["figure"], manifest["profile"], manifest["runs"]) == (
        "bundle-study",
        "smoke",
        6,
    )
    assert {
        "spec.yaml",
        "runs.json",
        "claims.json",
        "environment.json",
        "bundle-study.html",
    } <= set(members)
    claims = json.loads(members["claims.json"])
    assert [c["id"] for c in claims] == ["alpha-equivalent"]
    # the claim's numbers come from all six runs: a rebuild that drew none would not match them
    assert claims[0]["effect"] is not None and claims[0]["seeds"] == 3, claims[0]
    assert json.loads(members["environment.json"])["torch"]["cpu_capability"]

    res = invoke("verify", bundle, "--sample", 2, "--seed", 0)
    assert res.exit_code == 0, res.output
    assert "bit-identical" in res.output and "all matched" in res.output, res.output
    assert "2 of 2 trials and 1 of 1 claims matched" in res.output, res.output

    # a metric changed and the manifest fixed up: the rerun names trial, metric and round
    runs = json.loads(members["runs.json"])["runs"]
    target = sample_runs(runs, 2, 0)[1]

    def tamper_metric(members):
        table = json.loads(members["runs.json"])
        for run in table["runs"]:
            if run["config_hash"] == target["config_hash"]:
                run["history"]["test_loss"][1][1] += 1e-3  # round 2
        members["runs.json"] = json.dumps(table).encode()

    rewrite(bundle, tamper_metric, fix_manifest=True)
    res = invoke("verify", bundle, "--sample", 2, "--seed", 0)
    assert res.exit_code == 1, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("mismatch:"))
    assert trial_label(target) in line and target["config_hash"] in line, line
    assert "test_loss at round 2" in line, line

    # the same change behind the manifest's back: a tampered bundle, its member named
    rewrite(bundle, tamper_metric, fix_manifest=False)
    res = invoke("verify", bundle, "--sample", 2, "--seed", 0)
    assert res.exit_code == 2, res.output
    assert "tampered: member runs.json" in res.output, res.output
    assert "Traceback" not in res.output

    # a verdict changed in claims.json (manifest fixed up): the rebuilt verdict disagrees
    bundled = claims[0]["verdict"]
    forged = "contradicted" if bundled != "contradicted" else "supported"

    def tamper_verdict(members):
        rows = json.loads(members["claims.json"])
        rows[0]["verdict"] = forged
        members["claims.json"] = json.dumps(rows).encode()

    write_archive(bundle, members, {k: v for k, v in manifest.items() if k != "members"})
    rewrite(bundle, tamper_verdict, fix_manifest=True)
    res = invoke("verify", bundle, "--sample", 0)
    assert res.exit_code == 1, res.output
    assert f"claim alpha-equivalent: bundle says {forged}" in res.output, res.output
    assert f"rebuilt from its runs: {bundled}" in res.output, res.output


def _tar(path: Path, entries) -> Path:
    """A .tar.gz of ``entries``: (TarInfo, bytes or None)."""
    with tarfile.open(path, "w:gz") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info, None


@pytest.mark.parametrize(
    "entries, needle",
    [
        ([_file("../evil.json", b"{}")], "'../evil.json': not a plain file name"),
        ([_file("/etc/passwd", b"x")], "'/etc/passwd': not a plain file name"),
        ([_file("dir/x.json", b"x")], "'dir/x.json': not a plain file name"),
        ([_link("link.json", "/etc/passwd")], "'link.json' is not a regular file"),
        ([_file("a.json", b"x"), _file("a.json", b"y")], "'a.json' appears twice"),
        ([_file("a.json", b"x")], "no manifest.json"),
    ],
)
def test_archive_reader_refuses_unsafe_members(tmp_path, entries, needle):
    path = _tar(tmp_path / "b.tar.gz", entries)
    with pytest.raises(BundleError) as err:
        read_archive(path)
    assert needle in str(err.value)


def test_archive_names_an_unlisted_or_changed_member(tmp_path):
    path = write_archive(tmp_path / "b.tar.gz", {"runs.json": b"[]"}, {"figure": "f"})
    manifest, members = read_archive(path)
    assert members == {"runs.json": b"[]"} and manifest["figure"] == "f"
    listed = json.dumps(manifest).encode()
    _tar(path, [_file("manifest.json", listed), _file("runs.json", b"[1]")])
    with pytest.raises(BundleError, match="tampered: member runs.json") as err:
        read_archive(path)
    assert err.value.member == "runs.json"
    _tar(path, [_file("manifest.json", listed), _file("runs.json", b"[]"), _file("x.txt", b"")])
    with pytest.raises(BundleError, match="tampered: member x.txt is not in the manifest"):
        read_archive(path)
