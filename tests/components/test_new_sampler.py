"""A new client sampler is one class that registers itself: the registry, the run config, the
composition check and the round pick it up with nothing else edited. The sampler here (cyclic
cohorts, the how-to's example) lives in this test; in fedsweep it would be one new file under
``fedsweep/components/samplers/``."""

from __future__ import annotations

import pytest
import torch

from fedsweep.components.compose import SAMPLERS, config_sections, sampler_bases
from fedsweep.components.samplers.base import CohortConfig, Sampler, cohort_size
from fedsweep.config.load import ConfigError
from fedsweep.core import registry
from fedsweep.core.messages import Cohort
from fedsweep.core.registry import RegistryError, register
from tests.helpers import run_rounds, tiny_config, tiny_dataset


@pytest.fixture
def cyclic():
    @register("sampler", "cyclic-test", sections={"cohort": CohortConfig})
    class CyclicSampler(Sampler):
        """Round t trains clients (t−1)m, ..., tm − 1 modulo N, weighted 1/m."""

        simple_mean = None

        def __init__(self, config, p: torch.Tensor) -> None:
            super().__init__(config, p)
            self.m = cohort_size(config, self.num_clients)

        def sample(self, t, w, rng, oracle) -> Cohort:
            draws = [((t - 1) * self.m + k) % self.num_clients for k in range(self.m)]
            clients = sorted(draws)
            q = torch.full((self.m,), 1.0 / self.m, dtype=torch.float64)
            return Cohort(clients, q, draws)

    yield CyclicSampler
    registry.unregister("sampler", "cyclic-test")


def test_a_registered_sampler_is_a_config_value_and_runs(cyclic):
    assert SAMPLERS["cyclic-test"] is cyclic
    assert "centralized" not in sampler_bases()["cyclic-test"]  # pooled data: full only
    cfg = tiny_config(sampler="cyclic-test", cohort__size=2, train__rounds=3)
    assert config_sections(cfg)[-2:] == ("cohort", "server_sgd")
    run = run_rounds(cfg, tiny_dataset())
    assert [r.tolist() for r in run.records["cohort"]] == [[0, 1], [2, 0], [1, 2]]  # as drawn


def test_its_rules_are_checked_before_anything_runs(cyclic):
    with pytest.raises(ConfigError, match="needs the cohort"):  # the base Sampler's rule
        tiny_config(sampler="cyclic-test")
    with pytest.raises(ConfigError, match="pooled data"):
        tiny_config(sampler="cyclic-test", cohort__size=2, algorithm="centralized")


def test_gone_when_unregistered_and_the_registry_refuses_clashes(cyclic):
    registry.unregister("sampler", "cyclic-test")
    with pytest.raises(ConfigError, match="cyclic-test"):
        tiny_config(sampler="cyclic-test", cohort__size=2)
    with pytest.raises(RegistryError, match="registered twice"):
        register("sampler", "uniform")(type("Other", (Sampler,), {}))
    with pytest.raises(RegistryError, match="another component declared it"):
        register("sampler", "x-test", sections={"cohort": dict})(type("X", (Sampler,), {}))
    with pytest.raises(RegistryError, match="alone reads"):
        registry.unregister("sampler", "poc")
    register("sampler", "cyclic-test", sections={"cohort": CohortConfig})(cyclic)
