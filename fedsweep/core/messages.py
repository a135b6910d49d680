"""What flows between the parts of a round (docs/algorithms.md §1.4): the round's context, the
cohort a sampler draws, each client's task, and each client's message to the server.

Every component (base method, upload selector, client sampler, server optimizer, step policy,
hook) speaks these types and nothing else of the engine, so no component imports another.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class RoundContext:
    round: int  # t, 1-based
    lr: float  # eta_t, the client learning rate of this round (the lr schedule's value)
    local_epochs: float  # E


@dataclass
class Cohort:
    """``S_t`` and the aggregation weights ``q_i`` (§7): who trains this round.

    ``clients`` are distinct and train once each, in this order; ``weights`` (float64, aligned)
    need not sum to 1 (scheme 2). ``draws`` are the ``m`` sampled indices as drawn (with
    duplicates under sampling with replacement), kept as the round's cohort record."""

    clients: list[int]
    weights: torch.Tensor
    draws: list[int] | None = None
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # 0-dim, logged per round


@dataclass
class ClientTask:
    """What one client does this round: ``num_steps`` local steps at learning rate ``lr``."""

    client: int
    num_steps: int  # tau_{t,i}
    lr: float  # eta_t


@dataclass
class LocalDirection:
    """A base method's local step direction in closed form, ``v = g + mu (y − w_t) + offset``
    (plain SGD: ``mu = 0``, no offset; FedProx: ``mu``; SCAFFOLD: ``offset = c − c_i``), for a
    fast path that runs a client's whole trajectory in one call (``fedsweep.engine.fast``).
    A method whose direction is not of this form (momentum) returns None instead."""

    mu: float = 0.0
    offset: torch.Tensor | None = None  # constant during the client's round

    @property
    def is_gradient(self) -> bool:
        """``v = g`` (the selector keeps one buffer)."""
        return self.mu == 0 and self.offset is None


@dataclass
class ClientUpdate:
    """What a client sends to the server, plus what it reports for logging."""

    client: int
    delta: torch.Tensor  # Δ_i = w_t − y_i (or a selector's replacement for it)
    num_samples: int  # |D_i|
    num_steps: int  # τ_i
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # 0-dim, logged per client
    records: dict[str, torch.Tensor] = field(default_factory=dict)  # per-round arrays (artifacts)
    extras: dict[str, torch.Tensor] = field(default_factory=dict)  # method-specific message parts
    #: the client's model buffers after its local steps (BatchNorm running statistics), sent
    #: with the update and averaged by the server (``engine.buffers``); empty for models without
    #: buffers
    buffers: dict[str, torch.Tensor] = field(default_factory=dict)
