"""The server's leash task (docs/algorithms.md §6.4): SGD steps of the global model on a public
data set the clients never see, with a head that never leaves the server.

``LeashTask`` is shared by FedWalk's post-aggregation leash (§6.1) and by the pre-training
baseline of FedWalk Fig. 4 (leash steps before round 1, then the base method alone).

Heads (W3, ``fedwalk.head``):

* ``separate`` (default): the leash task has its own linear head ``feature_dim -> C_s`` on the
  model's features (``forward(x, features_only=True)``). It lives here, in the server's state: it
  is not part of ``w``, so it is never in a client message and never averaged. A leash step
  updates the backbone (the FL head gets a zero gradient: it is not in the leash loss) and the
  leash head.
* ``mapped`` (LH only): every leash image is relabelled with its FL class and the FL head is used.

Randomness: the leash batches come from their own stream (``leash_sampler``: random reshuffling
over the leash set, ``B_s`` per step), the head's initialisation from ``leash_head`` and the
optional subset ``L^s`` is measured on from ``leash_eval`` (§1.6), so adding the leash shifts no
other stream. A leash step runs in train mode (BatchNorm uses batch statistics and updates the
global running statistics: the leash step trains the global model [I]); ``L^s`` is measured in
eval mode, like every other evaluation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from fedsweep.core.seeding import torch_generator, torch_seed
from fedsweep.engine.batches import BatchSchedule
from fedsweep.engine.functional import FunctionalModel

HEADS = ("separate", "mapped")


class LeashTask:
    def __init__(
        self,
        fm: FunctionalModel,
        data,
        *,
        head: str,
        batch_size: int,
        seed: int,
        eval_batch: int,
        eval_subset: int | None = None,
    ) -> None:
        """``data``: a ``fedsweep.data.leash.LeashData`` (already on the run's device/dtype)."""
        if head not in HEADS:
            raise ValueError(f"leash head {head!r} not in {HEADS}")
        self.fm, self.head_mode = fm, head
        self.x = data.x
        self.num_classes = data.num_classes
        device, dtype = self.x.device, self.x.dtype
        if head == "mapped":
            if data.mapping is None:
                raise ValueError(f"the leash data ({data.description}) has no FL-class mapping")
            self.y = torch.as_tensor(data.mapping, device=device)[data.y]
            self.head = None
        else:
            self.y = data.y
            width = fm.module.feature_dim
            if width is None:
                raise ValueError(f"{type(fm.module).__name__} has no features for a leash head")
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(torch_seed(seed, "leash_head"))
                layer = nn.Linear(width, self.num_classes)  # PyTorch's default init [I]
            self.head = torch.cat([layer.weight.reshape(-1), layer.bias]).to(device, dtype).detach()
            self.width = width
        self.schedule = BatchSchedule(
            len(self.x), batch_size, "rr", torch_generator(seed, "leash_sampler")
        )
        self.eval_batch = eval_batch
        self.eval_rows = None
        if eval_subset is not None and eval_subset < len(self.x):
            gen = torch_generator(seed, "leash_eval")
            self.eval_rows = torch.randperm(len(self.x), generator=gen)[:eval_subset].to(device)

    # ------------------------------------------------------------------ the loss
    def _head(self, head: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c, f = self.num_classes, self.width
        return head[: c * f].view(c, f), head[c * f :]

    def _logits(self, params, head, x):
        if self.head is None:
            return functional_call(self.fm.module, (params, self.fm.buffers), (x,))
        h = functional_call(
            self.fm.module, (params, self.fm.buffers), (x,), {"features_only": True}
        )
        weight, bias = self._head(head)
        return F.linear(h, weight, bias)

    def step(self, w: torch.Tensor, lr: float) -> torch.Tensor:
        """One leash step ``w <- w − lr ∇L_leash(w; batch of B_s)`` (the separate head too)."""
        rows = self.schedule.take(1)[0].to(self.x.device)
        x, y = self.x.index_select(0, rows), self.y.index_select(0, rows)
        leaf = w.detach().requires_grad_(True)
        params = self.fm.unflatten(leaf)
        if self.head is None:
            loss = self.fm.module.criterion(self._logits(params, None, x), y)
            (g,) = torch.autograd.grad(loss, leaf)
        else:
            head = self.head.detach().requires_grad_(True)
            loss = F.cross_entropy(self._logits(params, head, x), y)
            g, gh = torch.autograd.grad(loss, (leaf, head))
            self.head = (self.head - lr * gh).detach()
        return (w - lr * g).detach()

    @torch.no_grad()
    def loss(self, w: torch.Tensor) -> torch.Tensor:
        """``L_leash(w, D_s)``: the mean cross-entropy over the leash set (or its fixed subset),
        in eval mode; float64, 0-dim."""
        module = self.fm.module
        was_training = module.training
        module.eval()
        params = self.fm.unflatten(w)
        rows = self.eval_rows
        n = len(self.x) if rows is None else len(rows)
        total = torch.zeros((), dtype=torch.float64, device=w.device)
        for start in range(0, n, self.eval_batch):
            if rows is None:
                x, y = (
                    self.x[start : start + self.eval_batch],
                    self.y[start : start + self.eval_batch],
                )
            else:
                r = rows[start : start + self.eval_batch]
                x, y = self.x.index_select(0, r), self.y.index_select(0, r)
            out = self._logits(params, self.head, x)
            total += F.cross_entropy(out, y, reduction="sum").to(torch.float64)
        module.train(was_training)
        return total / n

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        out = {"schedule": self.schedule.state_dict()}
        if self.head is not None:
            out["head"] = self.head.detach().cpu().clone()
        return out

    def load_state_dict(self, state: dict) -> None:
        if not state:
            return
        self.schedule.load_state_dict(state["schedule"])
        if self.head is not None:
            self.head = state["head"].to(self.head.device, self.head.dtype).clone()
