"""The README's quick start, run as written on a fresh store (issue 37): a demo run, a change
of one key, a smoke sweep of one figure named by its id, then ``fedsweep figures`` without
``--profile``, which must find and draw the smoke runs. Only ``fedsweep ui`` (a server that
runs until Ctrl-C) is left out: tests/cli/test_ui_ready.py starts it. On the same store, the
notebook docs/notebooks/analyse-a-figure.ipynb runs as written (issue 52: ``fedsweep.api``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def quickstart() -> list[str]:
    """The commands of the README's block marked ``<!-- quickstart ... -->``, comments dropped."""
    found = re.search(r"<!-- quickstart[^>]*-->\s*```bash\n(.*?)```", README.read_text(), re.S)
    assert found, "README.md: no bash block marked <!-- quickstart -->"
    lines = [line.split("#", 1)[0].strip() for line in found.group(1).splitlines()]
    return [line for line in lines if line]


def test_the_quick_start_block_is_the_documented_path():
    commands = quickstart()
    assert [c.split()[1] for c in commands] == ["run", "run", "sweep", "figures", "ui"]
    sweep = next(c for c in commands if c.startswith("fedsweep sweep"))
    figures = next(c for c in commands if c.startswith("fedsweep figures"))
    assert "--profile smoke" in sweep and "--profile" not in figures  # the newcomer's path


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The README's quick start, every command but ``fedsweep ui``, as written, in a fresh
    folder: the folder and each command's output. Its store (``./mlruns``) is the one the
    tests of this module read, as a newcomer's next commands would."""
    work = tmp_path_factory.mktemp("clone")
    for folder in ("configs", "sweeps"):
        (work / folder).symlink_to(ROOT / folder)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    for var in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS", "FEDSWEEP_DATA_DIR"):
        env.pop(var, None)
    outputs = {}
    for command in quickstart():
        if command.startswith("fedsweep ui"):
            continue
        done = subprocess.run(
            ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        outputs[command] = done.stdout
    return work, outputs


@pytest.mark.slow
def test_readme_quick_start_runs_as_written_on_a_fresh_store(quick_start, monkeypatch):
    work, outputs = quick_start
    figures = next(out for cmd, out in outputs.items() if cmd.startswith("fedsweep figures"))
    assert "profile: smoke" in figures, figures
    assert "bherd-fig4e: 6 runs" in figures, figures
    assert "missing" not in figures and "nothing drawn" not in figures, figures
    out = work / "figures" / "smoke"
    assert (out / "bherd-fig4e.html").stat().st_size > 10_000
    index = (out / "index.html").read_text()
    assert "bherd-fig4e" in index
    entry = json.loads((out / "bherd-fig4e.json").read_text())  # the figure's index entry
    assert (entry["profile"], entry["runs"], entry["expected_runs"]) == ("smoke", 6, 6), entry
    # the sweep ran into the fresh store the other commands then read
    assert (work / "mlruns" / "mlflow.db").is_file()
    sweep = next(out for cmd, out in outputs.items() if cmd.startswith("fedsweep sweep"))
    assert "6 run, 0 skipped" in " ".join(sweep.split()), sweep
    # the end of the sweep: its results per curve, the next command; all within 80 columns
    assert "bherd-fig4e [smoke]: 6 of 6 trials have a run" in sweep, sweep
    assert "fedsweep figures --figure bherd-fig4e --profile smoke" in sweep, sweep
    for text in outputs.values():  # a line naming the store's path is as long as the path
        assert all(len(line) <= 80 for line in text.splitlines() if str(work) not in line), text
    # the notebook, on this store: the runs, a curve, an effect per seed, the verdict, the figure
    texts = run_notebook(ROOT / "docs" / "notebooks" / "analyse-a-figure.ipynb", work, monkeypatch)
    joined = "\n".join(texts)
    assert "Case 2, no RR" in joined and "rr-differs-little" in joined, joined[-3000:]


@pytest.mark.slow
def test_own_claims_example_reuses_the_quick_starts_runs_and_reports(quick_start, tmp_path):
    """docs/how-to/own-claims.md's study, written to an empty folder: ``fedsweep sweep FILE
    --profile smoke`` then ``fedsweep report --figure FILE --profile smoke --json --out DIR``
    give a row per claim id with its verdict and numbers (issue 50). On the quick start's store,
    as the how-to says, the sweep reuses Fig. 4e's finished runs: it trains nothing and starts
    no Ray."""
    import json
    import sys

    from fedsweep.specs.load import load_spec
    from tests.helpers import own_example

    work, _ = quick_start
    folder = tmp_path / "study"
    folder.mkdir()
    path = folder / "my-study.yaml"
    path.write_text(own_example())
    ids = [c.id for c in load_spec(path).claims]
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlruns' / 'mlflow.db'}",
           "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT)}  # fmt: skip

    def fedsweep(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "fedsweep", *args], cwd=folder, capture_output=True,
            text=True, env=env, timeout=1800,
        )  # fmt: skip

    swept = fedsweep("sweep", str(path), "--profile", "smoke")
    assert swept.returncode == 0, swept.stderr[-3000:]
    flat = " ".join((swept.stdout + swept.stderr).split())
    assert "my-rr-study [smoke]: all 6 runnable trials already have a finished run" in flat, flat
    out = tmp_path / "report"
    done = fedsweep(
        "report", "--figure", str(path), "--profile", "smoke", "--json", "--out", str(out)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["id"]: r for r in json.loads(done.stdout)}
    for claim_id in ids:
        row = rows[claim_id]
        for key in ("id", "verdict", "effect", "ci_low", "ci_high", "margin", "seeds"):
            assert key in row
        assert row["verdict"] in ("supported", "contradicted", "inconclusive", "not-testable")
    assert set(ids) <= set(rows)


def run_notebook(path: Path, cwd: Path, monkeypatch) -> list[str]:
    """Execute the notebook at ``path`` in a fresh kernel started in ``cwd`` (nbclient); the
    text of every cell's outputs. A cell that raises fails the test with its error."""
    nbclient = pytest.importorskip("nbclient")
    import nbformat

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the default store of ``cwd``
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )
    client.execute()
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out.get("output_type") != "error", (out.get("ename"), out.get("evalue"))
            texts.append(str(out.get("data", {}).get("text/plain", out.get("text", ""))))
    return texts
