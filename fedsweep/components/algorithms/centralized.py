"""Centralized SGD (docs/algorithms.md §2.1, BHerd version): one client holds all of D.

A "round" is ``E`` epochs of minibatch SGD on the pooled training set (the BHerd baseline runs
500 rounds of one RR epoch = 500 epochs). The update rule is FedAvg's with a single client,
so ``w_{t+1} = y``.
"""

from __future__ import annotations

from fedsweep.components.algorithms.fedavg import FedAvg
from fedsweep.core.registry import register


@register("algorithm", "centralized")
class CentralizedSGD(FedAvg):
    pools_data = True
