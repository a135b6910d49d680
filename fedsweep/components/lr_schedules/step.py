"""``step``: ``η_t = train.lr · γ^{#{m ∈ milestones : t > m}}`` (FedWalk's "1e-2 until round 100,
then 1e-5" is ``milestones: [100]``, ``gamma: 0.001``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from fedsweep.components.lr_schedules.base import LRSchedule
from fedsweep.core.registry import register
from fedsweep.core.section import Section


class StepLRConfig(Section):
    milestones: list[int] = Field(
        default_factory=list, description="Rounds after which the rate is multiplied by gamma."
    )
    gamma: float = Field(0.1, gt=0, description="Factor applied at every milestone.")

    @field_validator("milestones")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(m < 1 for m in value) or any(b <= a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError(
                f"milestones must be rounds >= 1 in increasing order (allowed: e.g. [100] or "
                f"[100, 200]), got {value}"
            )
        return value


@register("lr_schedule", "step", sections={"lr_step": StepLRConfig})
class StepLR(LRSchedule):
    def lr(self, t):
        passed = sum(1 for m in self.config.lr_step.milestones if t > m)
        return self.base if passed == 0 else self.base * self.config.lr_step.gamma**passed
