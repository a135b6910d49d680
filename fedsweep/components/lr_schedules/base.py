"""The learning-rate-schedule interface: ``lr(t)``, the client rate of round ``t``."""

from __future__ import annotations

from fedsweep.core.registry import Component


class LRSchedule(Component):
    def __init__(self, config) -> None:
        self.config = config
        self.base = config.train.lr

    def lr(self, t: int) -> float:
        raise NotImplementedError
