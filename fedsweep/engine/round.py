"""One communication round as a pipeline of components (docs/algorithms.md §1.4).

``federated_round`` reads as the spec's loop; every step is a component passed in (built from
the config by ``fedsweep.components.compose``), and the function knows no particular algorithm::

    S_t, q   = sampler.sample(t, w, rng, oracle)           # §7 (default: every client, q = p)
    tasks    = step_policy.tasks(t, S_t, lr_schedule(t))   # τ_{t,i}, η_t
    updates  = [local training of i (base method + upload selector) for i in S_t]
    u_t      = method.aggregate(w, updates, q)             # the server's direction
    buffers  = Σ q_i buffers_i                             # BatchNorm statistics (§8.4)
    step_policy.observe(t, w, updates, S_t, q)              # FedVeca: τ_{t+1,i}
    w        = server_opt.step(w, u_t)                     # SGD(η_s, momentum) / Adagrad / Adam / Yogi
    w        = hook(w) for each post-aggregation hook      # FedWalk's leash (§6)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedsweep.core.messages import ClientUpdate, Cohort, RoundContext
from fedsweep.engine.batches import Client
from fedsweep.engine.local import LocalTrainer


@dataclass
class RoundOutput:
    w: torch.Tensor
    cohort: Cohort
    updates: list[ClientUpdate]


def federated_round(
    t: int,
    w: torch.Tensor,
    parts,
    clients: list[Client],
    trainer: LocalTrainer,
    oracle,
    rng: np.random.Generator,
    local_epochs: float,
) -> RoundOutput:
    """Round ``t`` from the global model ``w``; ``parts`` is a ``compose.Components``."""
    lr = parts.lr_schedule.lr(t)
    ctx = RoundContext(t, lr, local_epochs)
    cohort = parts.sampler.sample(t, w, rng, oracle)
    tasks = parts.step_policy.tasks(t, cohort.clients, lr)
    trainer.begin_round(tasks)
    updates = [trainer.train(clients[task.client], task, w, ctx) for task in tasks]
    parts.selector.finish_round(updates, cohort.weights, ctx)
    direction = parts.method.aggregate(w, updates, cohort.weights, ctx)
    # BatchNorm statistics (models with buffers): averaged like the parameters (§8.4)
    trainer.buffers.end_round(updates, parts.method.buffer_weights(updates, cohort.weights))
    parts.step_policy.observe(t, w, updates, cohort, lr)  # next round's τ (adaptive policies)
    w = parts.server_opt.step(w, direction, ctx)
    for hook in parts.hooks:
        w = hook.after_aggregation(w, ctx, updates, oracle)
    return RoundOutput(w, cohort, updates)
