"""``sweep --until-decided`` (issue 51, item 9): seeds added in planned looks (the profile's
count, then doubling to the cap), each judged at the level that keeps the stated error over all
of them; a noisy claim with a real effect is decided along the way, pure noise stops at the cap;
the budget stops it too; and the real command sweeps new seeds through Ray Tune and prints the
report that repeats its seeds and level."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fedsweep.cli.until_decided import look_schedule, until_decided
from fedsweep.judge.evidence import evidence_row
from fedsweep.judge.stats import Measure, claim_seeds_needed, confidence, interval, look_level
from tests.helpers import small_spec, write_yaml

FASTER = Measure("reduction, per seed", 0.0, "greater")


def _judge(mean: float, sd: float, calls: list):
    """A claim whose per-seed effect is ``mean + sd · z`` (z fixed per seed), judged as the
    report judges a part (interval at the look's level, verdict, seeds_needed)."""

    def effect(seed: int) -> float:
        return mean + sd * float(np.random.default_rng(1000 + seed).normal())

    def judge(seeds: list[int], level: float) -> list[dict]:
        calls.append((tuple(seeds), level))
        with confidence(level):
            row = evidence_row("p", interval([effect(s) for s in seeds], seeds), FASTER)
            return [
                {"id": "c", "verdict": row["verdict"], "seeds_needed": claim_seeds_needed([row])}
            ]

    return judge


def test_the_looks_are_planned_doubling_to_the_cap():
    assert look_schedule(2, 16) == [2, 4, 8, 16]
    assert look_schedule(3, 10) == [3, 6, 10]
    assert look_schedule(10, 10) == [10]
    assert look_level(len(look_schedule(3, 10))) == pytest.approx(1 - 0.05 / 3)


def test_a_real_effect_is_decided_by_adding_seeds():
    calls, batches = [], []
    out = until_decided(
        [0, 1], 16, lambda s: batches.append(s) or False, _judge(1.5, 1.0, calls), echo=print
    )
    assert out.stopped.startswith("every claim decided")
    assert [len(b) for b in batches] == [2, 4, 8] and batches[-1] == list(range(8))
    assert [look.open for look in out.looks] == [["c"], ["c"], []]
    level = 1 - 0.05 / 4  # four planned looks: 2, 4, 8, 16
    assert out.level == pytest.approx(level) and {lv for _, lv in calls} == {out.level}
    with confidence(out.level):  # decided at the sequential level, not only at 95%
        row = evidence_row("p", interval([1.5 + float(np.random.default_rng(1000 + s).normal())
                                          for s in range(8)]), FASTER)  # fmt: skip
    assert row["verdict"] == "supported" and row["ci_low"] > 0.2


def test_pure_noise_stays_open_and_stops_at_the_cap():
    calls, batches = [], []
    out = until_decided([0, 1], 16, lambda s: batches.append(s) or False, _judge(0.0, 1.0, calls),
                        echo=print)  # fmt: skip
    assert out.stopped == "the cap: 16 seeds" and out.open == ["c"]
    assert [len(b) for b in batches] == [2, 4, 8, 16] and out.seeds == list(range(16))


def test_the_budget_stops_before_a_batch_that_would_not_fit():
    now = [0.0]

    def run(seeds):  # every new seed takes 100 s
        now[0] += 100.0 * (len(seeds) - run.had)
        run.had = len(seeds)
        return False

    run.had = 0
    out = until_decided([0, 1], 16, run, _judge(0.0, 1.0, []), budget_s=500.0, echo=print,
                        clock=lambda: now[0])  # fmt: skip
    # 2 seeds (200 s) and 2 more (400 s): 4 more would end at 800 s > 500 s
    assert out.seeds == [0, 1, 2, 3] and out.stopped.startswith("budget: 4 more seeds")


def test_a_failed_trial_stops_the_loop():
    out = until_decided([0, 1], 8, lambda s: True, _judge(1.5, 1.0, []), echo=print)
    assert out.looks == [] and out.stopped.startswith("a trial failed at 2 seeds")


def test_the_command_adds_seeds_through_ray_tune_and_names_the_report(
    ray_session, tmp_path, monkeypatch
):
    """A two-curve study with one declared claim, 2 seeds, ``--max-seeds 3``: two planned looks
    (2, then 3 seeds) at 97.5%; the second batch runs only the new seed's trials; the printed
    report command gives the claim's row at 3 seeds and that level."""
    spec = small_spec("decide", alphas=(0.5, 1.0), seeds=(0, 1), rounds=5)
    spec["claims"] = [{"id": "half-faster", "text": "α=0.5 converges faster than α=1",
                       "where": "a test", "kind": "faster", "measure": "loss_auc",
                       "curve": {"set": {"bherd.alpha": 0.5}},
                       "versus": {"set": {"bherd.alpha": 1.0}}, "margin": 0.0}]  # fmt: skip
    path = write_yaml(tmp_path / "decide.yaml", spec)
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": store, "RAY_USAGE_STATS_ENABLED": "0"}

    def fedsweep(*args):
        return subprocess.run([sys.executable, "-m", "fedsweep", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=900)  # fmt: skip

    # the sweep: the same command in this process, on the session's Ray (a Python start-up
    # and a Ray start less than a `fedsweep sweep` process; issue 63 item 7)
    from typer.testing import CliRunner

    from fedsweep.cli.main import app

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.delenv("FEDSWEEP_STORE_DIR", raising=False)  # as the command run alone
    monkeypatch.chdir(tmp_path)
    swept = CliRunner().invoke(app, ["sweep", str(path), "--profile", "smoke", "--until-decided",
                                     "--max-seeds", "3", "--max-concurrent", "1"])  # fmt: skip
    out = swept.output
    assert swept.exit_code == 0, (out[-3000:], swept.exception)
    assert "decide [smoke]: 4 run, 0 skipped" in out, out[-3000:]
    assert "until-decided: look 2 of 2: adding seeds 2 (3 seeds)" in out, out[-3000:]
    assert "decide [smoke]: 2 run, 4 skipped" in out, out[-3000:]  # only the new seed ran
    line = next(ln for ln in out.splitlines() if "these seeds and this level:" in ln)
    command = line.split("this level: ", 1)[1].split()
    assert command[:2] == ["fedsweep", "report"] and "--seeds" in command and "0-2" in command
    assert command[command.index("--level") + 1] == "0.975"
    report = fedsweep(*command[1:], "--json", "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-3000:]
    (row,) = [r for r in json.loads(report.stdout) if r["id"] == "half-faster"]
    assert row["seeds"] == 3 and row["interval"].startswith("two-sided 97.5% ")
    assert (row["seeds_needed"] is None) == (row["verdict"] != "inconclusive")
