"""The selector hooks: record each local step, then hand the base method the vector to upload.

Per client and round the engine calls ``begin_client``, then ``record(step, g, v)`` after each
local direction is known (``g`` the raw gradient, ``v`` the direction the step uses; ``v is g``
for plain SGD), then ``finish_client`` **before** the base method builds its message: the
returned ``Selection.delta`` is passed to ``method.client_update(..., delta=...)``, and the
selection's metrics/records/extras are merged into the ``ClientUpdate`` (same keys: the
selection wins). After all clients, ``finish_round`` may rewrite the updates in place before
``method.aggregate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from fedsweep.core.messages import ClientUpdate, LocalDirection, RoundContext
from fedsweep.core.registry import Component


@dataclass
class Selection:
    """A selector's per-client result: the vector the base method uploads in place of ``w − y``."""

    delta: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # 0-dim, logged per client
    records: dict[str, torch.Tensor] = field(default_factory=dict)  # per-round arrays
    extras: dict[str, torch.Tensor] = field(default_factory=dict)  # message parts (e.g. FedNova a)
    #: True: the base method's own client state (SCAFFOLD's ``c_i``) follows the whole
    #: trajectory ``w − y``, not ``delta`` (BHerd's ``scaffold_ci: full``)
    state_from_trajectory: bool = False


class Selector(Component):
    """Which base methods a selector composes with, and the form of its upload for each
    (``upload``), is declared in ``uploads``; the selector is told its ``upload`` form at construction and never
    asks which method runs.
    """

    #: base method -> the form of this selector's upload for it (None: no selection, the base
    #: method's own message, with every base); base methods absent are not defined
    uploads: ClassVar[dict[str, str] | None] = None
    #: whether the engine must hand every local step to ``record``
    records_gradients: ClassVar[bool] = False

    @classmethod
    def method_label(cls, algorithm: str) -> str | None:
        return None if cls.uploads is None else f"{cls.name}-{algorithm}"

    def __init__(self, config, upload: str = "descent") -> None:
        self.config = config
        self.upload = upload
        #: round-level metrics (0-dim tensors) a selector may set in ``finish_round``; the
        #: experiment logs them with the round (e.g. BHerd's ``bherd.diagnostics``)
        self.metrics: dict[str, torch.Tensor] = {}

    @classmethod
    def check_config(cls, config) -> None:
        """Raise ``ValueError`` for a config this selector cannot run (beyond the table)."""

    def begin_client(self, client: int, num_steps: int, dim: int, dtype, device) -> None:
        pass

    def record(self, step: int, g: torch.Tensor, v: torch.Tensor) -> None:
        pass

    def fused_buffers(self, direction: LocalDirection):
        """For a fast path that runs the client's whole trajectory in one call (the seam's
        protocol, ``fedsweep.engine.fast``): the ``[τ, d]``
        tensors it writes every step's ``g`` and ``v`` into, ``(g_buffer, v_buffer)`` (None:
        not kept), in place of ``record``; called after ``begin_client``. None: this selector
        must see the steps one at a time (the engine then does not fuse). A selector that
        records nothing needs no buffer."""
        return None if self.records_gradients else (None, None)

    def finish_client(self, client: int, ctx: RoundContext) -> Selection | None:
        """``None``: upload the base method's own message."""
        return None

    def finish_round(
        self, updates: list[ClientUpdate], weights: torch.Tensor, ctx: RoundContext
    ) -> None:
        """Server-side hook before ``method.aggregate`` (may modify ``updates`` in place)."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
