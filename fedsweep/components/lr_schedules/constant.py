"""``constant`` (the default): ``η_t = train.lr``."""

from __future__ import annotations

from fedsweep.components.lr_schedules.base import LRSchedule
from fedsweep.core.registry import register


@register("lr_schedule", "constant", default=True)
class ConstantLR(LRSchedule):
    def lr(self, t):
        return self.base
