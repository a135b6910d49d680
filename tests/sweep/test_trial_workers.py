"""Issue 49, item 2: a trial actor is a plain Ray worker (``ray_backend.plain_trial_workers``):
Tune's default ``runtime_env`` (``PL_DISABLE_FORK=1``) would start each one through Ray's
``setup_worker.py`` (Ray imported twice); during a fit Tune's defaults are empty, after it they
are back."""

from __future__ import annotations

import os

import pytest

from fedsweep.sweep.ray_backend import plain_trial_workers


def _environment(config):
    from ray import tune

    tune.report({"pl": os.environ.get("PL_DISABLE_FORK", "unset")})


@pytest.mark.slow
def test_a_fits_trial_actors_get_no_runtime_env_and_tunes_defaults_come_back(ray_session, tmp_path):
    from ray import tune
    from ray.tune.execution import class_cache

    before = dict(class_cache.DEFAULT_ENV_VARS)
    assert before == {"PL_DISABLE_FORK": "1"}  # Ray 2.60's: this test is about it

    def fit(function):
        grid = tune.Tuner(
            function, run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)
        ).fit()
        assert not grid.errors
        return grid[0].metrics["pl"]

    # (without it, Tune's runtime_env gives the actor PL_DISABLE_FORK=1: checked once, and
    # left out of the suite as it costs a second actor's start)
    with plain_trial_workers():
        assert class_cache.DEFAULT_ENV_VARS == {}
        assert fit(tune.with_resources(_environment, {"cpu": 1})) == "unset"
    assert class_cache.DEFAULT_ENV_VARS == before
