"""Issue 62, item 10: an output folder option (``--out`` of report, figures, compare; ``--home``,
``--storage``) refuses, in one line with exit 2, a name longer than file systems take (a
300-character ``--out`` ended in an OSError traceback) and a folder that is, or resolves to
through links, ``/``, the home folder itself or a system folder (``--out`` a link to ``/``
wrote the reports there: root may write anywhere)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dashboards.export import OutputFolderError, output_folder
from fedsweep.cli.main import app
from fedsweep.core.atomic import folder_problem


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    from fedsweep.tracking.connect import get_client

    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    get_client(uri, create=True)
    return uri


def _cases(tmp_path: Path) -> list[tuple[str, str]]:
    (tmp_path / "to-root").symlink_to("/")
    (tmp_path / "to-etc").symlink_to("/etc")
    (tmp_path / "chain").symlink_to(tmp_path / "to-root")
    home = tmp_path / "home"
    home.mkdir()
    long = str(tmp_path / ("r" * 300))
    return [
        ("/", " /: a system folder; refusing to write outputs there"),
        (str(tmp_path / "to-root"), "a system folder (it resolves to /); refusing"),
        (str(tmp_path / "chain"), "a system folder (it resolves to /); refusing"),
        (str(tmp_path / "to-etc"), "a system folder (it resolves to /etc); refusing"),
        ("/usr/share/fedsweep-reports", "a system folder; refusing"),
        ("/proc/self", "a system folder (it resolves to /proc/"),
        (str(home), "the home folder; refusing to write outputs there"),
        (long, "a name of 300 bytes, longer than file systems take (255 bytes a name"),
    ]


def test_report_refuses_system_folders_links_to_them_and_long_names(tmp_path, monkeypatch, store):
    """The command line: exit 2, one line. (Only cases that the old code fails without writing
    outside tmp_path: it wrote the reports into ``/`` for ``--out /``; every case is checked
    below through the shared functions.)"""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cases = _cases(tmp_path)
    for out, words in [cases[-1], cases[-2], cases[-3]]:  # too long, home, /proc/self
        res = CliRunner().invoke(app, ["report", "--out", out, "--tracking-uri", store])
        assert res.exit_code == 2 and isinstance(res.exception, SystemExit), (out, res.output)
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (out, res.output)
        assert lines[0].startswith(f"--out {out[:60]}"), lines[0]
    assert not (tmp_path / "home" / "claims.json").exists()


def test_every_output_folder_option_shares_the_check(tmp_path, monkeypatch):
    """figures and compare (``dashboards.export.output_folder``), team ``--home`` and sweep
    ``--storage`` (``folder_problem``) refuse the same folders; a folder inside the home
    folder, or a link to one, is fine."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for out, words in _cases(tmp_path):
        with pytest.raises(OutputFolderError, match="refusing|longer than") as err:
            output_folder(out)
        assert words in str(err.value)
        assert words in (folder_problem(out, "--home") or "")
    inside = tmp_path / "home" / "figures"
    inside.mkdir()
    os.symlink(inside, tmp_path / "to-figures")
    assert folder_problem(inside, "--out") is None
    assert output_folder(tmp_path / "to-figures") == tmp_path / "to-figures" and inside.is_dir()
