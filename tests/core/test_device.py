"""engine.device: the allocator setting that keeps freed memory, and the round's finiteness test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from fedsweep.core.device import _libc_name, keep_freed_memory
from fedsweep.engine.observers import all_finite

GLIBC = sys.platform.startswith("linux") and _libc_name().startswith("glibc")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.0, -2.0, 3.0], True),
        ([1.0, float("inf"), 3.0], False),
        ([1.0, float("-inf"), float("inf")], False),
        ([1.0, float("nan"), 3.0], False),
        # finite entries whose float32 sum overflows to inf: the entries decide, not the sum
        ([3e38, 3e38, -1.0], True),
        ([3e38, 3e38, -3e38, -3e38, 5.0], True),
    ],
)
def test_all_finite_is_exact(values, expected):
    w = torch.tensor(values, dtype=torch.float32)
    assert all_finite(w) is expected
    assert expected == bool(torch.isfinite(w).all())


def test_all_finite_on_a_large_vector_with_one_nan_at_the_end():
    w = torch.zeros(1_000_003)
    assert all_finite(w)
    w[-1] = float("nan")
    assert not all_finite(w)


RUN = """
import sys, torch
from fedsweep.core.device import keep_freed_memory
from fedsweep.experiment import FLRun
from tests.helpers import tiny_config, tiny_dataset
data = tiny_dataset(n_train=300, n_test=1000, side=28)
# evaluating 1,000 images at once makes 100 MB activations: above glibc's mmap threshold
cfg = tiny_config(model__name="cnn", train__rounds=2, eval__batch_size=1000)
run = FLRun(cfg, dataset=data)
for _ in range(2):
    metrics = run.step()
torch.save({"w": run.w, "loss": metrics["test_loss"], "kept": keep_freed_memory()}, sys.argv[1])
"""


@pytest.mark.slow
@pytest.mark.skipif(not GLIBC, reason="the setting is glibc's")
def test_kept_freed_memory_changes_no_number(tmp_path):
    out = {}
    for switch in ("1", "0"):
        path = tmp_path / f"run-{switch}.pt"
        env = {**os.environ, "FEDSWEEP_MALLOC": switch}
        subprocess.run([sys.executable, "-c", RUN, str(path)], check=True, env=env, cwd=os.getcwd())
        out[switch] = torch.load(path)
    assert out["1"]["kept"] is True and out["0"]["kept"] is False
    assert torch.equal(out["1"]["w"], out["0"]["w"])
    assert torch.equal(out["1"]["loss"], out["0"]["loss"])


@pytest.mark.skipif(not GLIBC, reason="the setting is glibc's")
def test_keep_freed_memory_is_on_by_default_on_glibc():
    assert keep_freed_memory() is True
