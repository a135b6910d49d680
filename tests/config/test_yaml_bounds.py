"""Issue 62, item 10: tiny YAML files that exhaust memory. A few hundred bytes of nested aliases
(a "billion laughs") stand for 10^9 values; PyYAML builds them as shared references at once,
and the first walk (a validation message, a hash) ran for minutes and gigabytes: ``validate``
of such a config (2.8 GB at 60 s), and every ``sweep --plan`` of a figure one of whose runs
logged it as its ``config.yaml`` (5 GB at 120 s). Every YAML read from a file or a store is
bounded in :mod:`fedsweep.config.yamlio`: expanded values, text size, depth."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from fedsweep.config import yamlio

ROOT = Path(__file__).resolve().parents[2]


def alias_bomb(levels: int = 8, key: str = "name") -> str:
    """Each level nine aliases of the one before: 9^levels values in about 40 bytes a level
    (the last is the value of ``key``, which a validation message quotes)."""
    lines = ["a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    lines.append(f"{key}: [" + ",".join([f"*a{levels - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


#: ``fedsweep argv[2:]`` with its address space capped at 2 GB (the old code then fails fast
#: instead of filling the machine); at exit it writes its peak resident size (VmHWM, kB: this
#: process's own, where ``ru_maxrss`` would include the forking pytest's) to argv[1]
_MEASURED = """
import atexit, resource, runpy, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
out = sys.argv[1]

def peak():
    hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")]
    open(out, "w").write(hwm[0].split()[1])

atexit.register(peak)
sys.argv = ["fedsweep", *sys.argv[2:]]
runpy.run_module("fedsweep", run_name="__main__")
"""


def test_the_alias_bomb_is_refused_by_validate_in_under_5_s_and_200_mb(tmp_path):
    """The issue's probe: ``fedsweep validate bomb.yaml`` (412 bytes) now exits 2 with one
    line naming the file, in under 5 s and 200 MB (the child's own peak resident size, VmHWM;
    it runs capped at 2 GB of address space, so that the old code fails fast)."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    assert bomb.stat().st_size < 500

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    hwm = tmp_path / "peak-kB"
    start = time.monotonic()
    try:
        res = subprocess.run(
            [sys.executable, "-c", _MEASURED, str(hwm), "validate", str(bomb)],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("fedsweep validate of the alias bomb still runs after 60 s")
    seconds = time.monotonic() - start
    peak_mb = int(hwm.read_text()) / 1024
    out, err = res.stdout, res.stderr
    assert res.returncode == 2, (res.returncode, err[-2000:])
    lines = (out + err).strip().splitlines()
    assert len(lines) == 1, out + err
    assert lines[0].startswith(f"{bomb}: refused: the document expands to more than")
    assert seconds < 5, seconds
    assert peak_mb < 200, peak_mb


def test_loads_refuses_expansion_size_and_depth_at_once():
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(yamlio.YamlBoundsError, match=r"^bomb\.yaml: refused: the document"):
            yamlio.loads(alias_bomb(levels=9), "bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 2 and peak < 50 * 2**20
    with pytest.raises(yamlio.YamlBoundsError, match="refused: .* characters"):
        yamlio.loads("a: " + "x" * (yamlio.MAX_YAML_BYTES + 1), "big.yaml")
    with pytest.raises(yamlio.YamlBoundsError, match="nested more than 100 deep"):
        yamlio.loads("[" * 100_000 + "]" * 100_000, "deep.yaml")  # crashed libyaml's composer
    block = "".join(f"{' ' * i}k{i}:\n" for i in range(3000)) + " " * 3000 + "x: 1\n"
    with pytest.raises(yamlio.YamlBoundsError, match="nested more than 100 deep"):
        yamlio.loads(block, "deep.yaml")
    # anchors, aliases and merge keys of an ordinary size still read as before
    tree = yamlio.loads("base: &b {lr: 0.1, rounds: 5}\nrun:\n  <<: *b\n  seed: 2\nruns: [*b, *b]")
    assert tree["run"] == {"lr": 0.1, "rounds": 5, "seed": 2}
    assert tree["runs"] == [tree["base"]] * 2


def test_read_yaml_reads_at_most_the_cap(tmp_path):
    """A file larger than the cap is refused without reading it all (a FIFO or /dev/zero named
    as a config would otherwise be read forever)."""
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (yamlio.MAX_YAML_BYTES + 10))
    with pytest.raises(yamlio.YamlBoundsError, match=f"^config {big}: refused: larger"):
        yamlio.read_yaml(big, "config")
    with pytest.raises(yamlio.YamlBoundsError, match="refused: larger"):
        yamlio.read_yaml("/dev/zero", "config")


@pytest.mark.slow
def test_sweep_plan_skips_a_run_whose_logged_config_is_the_bomb_at_once(tmp_path):
    """The issue's second probe: a finished run of a figure's trial whose logged ``config.yaml``
    is replaced by the bomb. ``sweep --plan`` checks the logged config of every run it would
    reuse (:func:`fedsweep.tracking.provenance.hash_problem`), which validated 10^8 values
    (5 GB at 120 s). Now the run is not reused, with one warning, at once. The plan runs in a
    child capped at 2 GB and 60 s, so that the old code fails the test rather than the
    machine. (Slow: a real run in a real store, then the plan in a fresh process.)"""
    from fedsweep.specs.load import expand, load_spec
    from tests.helpers import small_spec, write_yaml
    from tests.sweep.test_forged_reuse import _run

    spec_path = write_yaml(tmp_path / "bombed.yaml", small_spec("bombed", alphas=(0.5,)))
    (trial,) = expand(load_spec(spec_path), "smoke")
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    run_id = _run(store, trial.config, trial.config_hash)
    (logged,) = (tmp_path / "store").rglob(f"{run_id}/**/config.yaml")
    logged.write_text(alias_bomb())
    code = (
        "import sys, time\n"
        "from fedsweep.sweep.plan import plan_sweep\n"
        "start = time.monotonic()\n"
        "plan = plan_sweep(sys.argv[1], 'smoke', tracking_uri=sys.argv[2])\n"
        "print([r.status for r in plan.trials], time.monotonic() - start)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        res = subprocess.run(
            [sys.executable, "-c", _CAPPED + code, str(spec_path), store],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("sweep --plan over the run with the bombed config still runs after 60 s")
    assert res.returncode == 0, res.stderr[-2000:]
    statuses, seconds = res.stdout.strip().rsplit("] ", 1)
    assert statuses == "['run'" and float(seconds) < 30, res.stdout  # the store's imports too
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and run_id in warnings[0], res.stderr
    assert "its logged config cannot be read (YamlBoundsError)" in warnings[0]


#: caps the child's address space at 2 GB (prepended to a ``-c`` program)
_CAPPED = "import resource\nresource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
