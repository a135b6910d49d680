"""Full participation (the default): every client trains every round, ``q_i = p_i``
(renormalised, which leaves them as they are: ``Σ p_i = 1``)."""

from __future__ import annotations

from fedsweep.components.samplers.base import Sampler
from fedsweep.core.messages import Cohort
from fedsweep.core.registry import register


@register("sampler", "full", default=True)
class FullParticipation(Sampler):
    pooled_ok = True
    records_cohort = False

    @classmethod
    def config_errors(cls, config) -> list[str]:
        cohort = config.cohort
        for key, value in (("size", cohort.size), ("fraction", cohort.fraction)):
            if value is not None:
                return [
                    f"field `cohort.{key}`: got {value!r}, but sampler 'full' trains every "
                    "client (allowed: sampler uniform, replacement, poc or divfl with a cohort)"
                ]
        return []

    def sample(self, t, w, rng, oracle) -> Cohort:
        q = self.p / self.p.sum()  # the arithmetic of the engine before samplers (bit-identical)
        return Cohort(list(range(self.num_clients)), q)
