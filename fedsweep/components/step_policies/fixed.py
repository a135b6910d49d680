"""``fixed``: ``τ_i = fixed_steps.steps`` for every client (``K`` local steps, the FedOpt slides'
"K steps"; FedWalk's ``T_c``; FedVeca's fixed-τ baselines)."""

from __future__ import annotations

from pydantic import Field

from fedsweep.components.step_policies.base import StepPolicy
from fedsweep.core.registry import register
from fedsweep.core.section import Section


class FixedStepsConfig(Section):
    steps: int = Field(1, ge=1, description="Local steps per round for every client (K).")


@register("step_policy", "fixed", sections={"fixed_steps": FixedStepsConfig})
class FixedSteps(StepPolicy):
    def steps(self, t, client):
        return self.config.fixed_steps.steps
