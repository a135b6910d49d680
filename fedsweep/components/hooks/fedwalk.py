"""FedWalk's leash task as a post-aggregation hook (docs/algorithms.md §6.1–6.5), and the
pre-training baseline of FedWalk Fig. 4.

After the base method's aggregation gave ``W̄`` (round ``t``, cohort ``C`` of ``m`` clients)::

    L_k  = L(V_k, D_k)                          final local model on its whole local set (task
                                                loss only; option last_batches, W13) — observer
    L^c  = β L^c + (1 − β) (1/m) Σ_{k∈C} L_k      Eq. 5, simple mean, L^c starts at 0 (W1: β = 0.9)
    LLR  = log2(max(L^c, ε) / max(L^s, ε))        Eq. 7, base 2, the updated L^c (ε = 1e-12)
    if LLR < τ:
        T_s times: W̄ = W̄ − γ_t ∇L_leash(W̄; batch of B_s from D_s)     γ_t = η_t
        L^s = L_leash(W̄, D_s)                   refreshed only when leashing ran
    W = W̄

``L^s`` starts at ``L_leash(W_0, D_s)`` with the fresh leash head (§6.3, W2; option ``inf``: the
first LLR is −∞ and round 1 leashes). The base method's rules are untouched (§6.5): FedProx's
anchor is the broadcast model, FedNova normalises as always, SCAFFOLD's ``c``/``c_i`` are
updated by the base method before the leash and never see a leash gradient. FedWalk-FedAvg
aggregates with the simple mean (Eq. 4, W6): the sampler's ``uniform.weighting: simple`` (or
``divfl.weighting: simple``, ``replacement``, ``poc``); a config whose sampler weights by ``p_i``
(``full``, ``renorm``, ...) is refused (``FedWalk.simple_mean_bases``).

Logged per round: ``Lc``, ``Ls`` (after this round's refresh), ``LLR``, ``leashed`` (0/1); per
client ``L_k``. ``LLR`` is −∞ in round 1 under ``ls_init: inf`` (a diagnostic, not divergence);
a non-finite ``L^s`` or model ends the run as diverged.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from fedsweep.components.hooks.base import PostAggregationHook
from fedsweep.components.hooks.leash import LeashTask
from fedsweep.core.registry import register
from fedsweep.core.section import Section
from fedsweep.data.leash import LeashConfig, leash_problems
from fedsweep.engine.local import StepObserver
from fedsweep.models.registry import FEATURE_MODEL_NAMES

EPS = 1e-12


class FedWalkConfig(Section):
    beta: float = Field(0.9, ge=0, lt=1, description="β, the momentum of L^c (Eq. 5; W1).")
    tau: float = Field(0.0, description="The LLR threshold τ: leash when log2(L^c/L^s) < τ.")
    steps: int = Field(1, ge=0, description="T_s, leash steps per leashed round.")
    batch_size: int = Field(64, ge=1, description="B_s, the leash batch size.")
    ls_init: Literal["leash", "inf"] = Field(
        "leash", description="L^s before round 1: L_leash(W_0, D_s), or inf (§6.3, W2)."
    )
    lk: Literal["full", "last_batches"] = Field(
        "full",
        description="L_k: final local model on the whole local set, or on its last batch (W13).",
    )
    head: Literal["separate", "mapped"] = Field(
        "separate", description="Server-only leash head, or FL head with mapped labels (W3)."
    )
    ls_subset: int | None = Field(
        None, ge=1, description="Measure L^s on a fixed random subset of this many leash images."
    )


class LeashPretrainConfig(Section):
    steps: int = Field(300, ge=0, description="Leash steps before round 1 (Fig. 4 baseline).")
    lr: float | None = Field(None, gt=0, description="Their rate; default: round 1's client rate.")


#: FedWalk is defined on top of the passive methods of §6.5 with their own uploads (no
#: definition exists for an upload selector), with fixed or epoch-based steps
LEASH_REQUIRES = {
    "algorithm": ("fedavg", "fedprox", "fednova", "scaffold"),
    "selector": ("none",),
    "step_policy": ("epochs", "fixed"),
}


def head_errors(config) -> list[str]:
    """The leash head against the model and the leash task (both leash hooks)."""
    out = []
    if config.fedwalk.head == "separate" and config.model.name not in FEATURE_MODEL_NAMES:
        out.append(
            f"field `fedwalk.head`: got 'separate', which needs a model with features, but "
            f"model.name is {config.model.name!r} (allowed models: "
            f"{', '.join(FEATURE_MODEL_NAMES)}; or fedwalk.head 'mapped')"
        )
    if config.fedwalk.head == "mapped":
        leash = config.leash
        task = leash.task if leash.wnids is None else "custom wnids"
        mapped = (task == "LH" and config.data.dataset == "cifar10") or (
            leash.source == "standin" and task in ("LH", "C100-LH")
        )  # the LH list's class order (§6.4); a stand-in's held-out FL rows keep their labels
        if not mapped:
            out.append(
                f"field `fedwalk.head`: got 'mapped', but the leash task {task!r} "
                f"(leash.source {leash.source!r}) has no mapping to the "
                f"{config.data.dataset} classes (allowed: 'mapped' with leash.task LH on "
                "CIFAR-10, or a stand-in of the FL data; 'separate' otherwise)"
            )
    return out


class LkObserver(StepObserver):
    """``L_k`` of each client (§6.1): the task loss of its final local model, on its whole local
    set through the client oracle (eval mode, the client's own BatchNorm statistics), or on the
    last local batch (``last_batches``)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._last = None

    def bind(self, fm, oracle) -> None:
        self.fm, self.oracle = fm, oracle

    def on_step(self, t, y, g, v, lr, batch) -> None:
        if self.mode == "last_batches":
            self._last = batch

    def end_client(self, y, next_batch, update) -> None:
        if self.mode == "full":
            value = self.oracle.losses([update.client], y, penalty=False)[0]
        else:
            x, target = self._last
            module = self.fm.module
            was_training = module.training
            module.eval()
            with torch.no_grad():
                loss, _ = self.fm.evaluate(y, x, target, len(x))
            module.train(was_training)
            value = (loss / len(x)).to(torch.float64)
        update.metrics["L_k"] = value


def _leash_task(config, env, head: str, batch_size: int, ls_subset=None) -> LeashTask:
    return LeashTask(
        env.fm,
        env.public,
        head=head,
        batch_size=batch_size,
        seed=env.seed,
        eval_batch=env.eval_batch,
        eval_subset=ls_subset,
    )


@register("hooks", "fedwalk", sections={"fedwalk": FedWalkConfig, "leash": LeashConfig})
class FedWalk(PostAggregationHook):
    needs_public_data = True
    diagnostics = ("LLR",)
    requires = LEASH_REQUIRES
    #: FedWalk's Eq. 4 is FedAvg's simple mean 1/m (W6); FedProx, FedNova and SCAFFOLD with the
    #: leash keep their own weights (§6.5)
    simple_mean_bases = ("fedavg",)
    excludes = ("leash_pretrain",)

    @classmethod
    def method_label(cls, algorithm: str) -> str:
        """FedWalk = FedAvg + leash; the others: ``scaffold-fedwalk``, ..."""
        return "fedwalk" if algorithm == "fedavg" else f"{algorithm}-fedwalk"

    @classmethod
    def config_errors(cls, config) -> list[str]:
        return head_errors(config)

    @classmethod
    def data_errors(cls, config, files: bool = True) -> list[str]:
        """The leash data's task, holdout and (``files``) folder and classes."""
        return leash_problems(config.leash, config.data, files=files)

    def __init__(self, config) -> None:
        super().__init__(config)
        self.cfg = config.fedwalk

    def local_observer(self):
        return LkObserver(self.cfg.lk)

    def setup(self, w):
        cfg = self.cfg
        self.task = _leash_task(self.config, self.env, cfg.head, cfg.batch_size, cfg.ls_subset)
        self.lc = torch.zeros((), dtype=torch.float64, device=w.device)  # L^c = 0 [P]
        if cfg.ls_init == "inf":
            self.ls = torch.full((), math.inf, dtype=torch.float64, device=w.device)
        else:
            self.ls = self.task.loss(w)  # L_leash(W_0, D_s) (§6.3)
        return w

    def after_aggregation(self, w, ctx, updates, oracle):
        cfg = self.cfg
        mean_lk = torch.stack([u.metrics["L_k"].to(torch.float64) for u in updates]).mean()
        self.lc = cfg.beta * self.lc + (1 - cfg.beta) * mean_lk  # Eq. 5
        llr = torch.log2(self.lc.clamp_min(EPS) / self.ls.clamp_min(EPS))  # Eq. 7, base 2
        leashed = bool(llr < cfg.tau)  # one host transfer per round
        if leashed:
            for _ in range(cfg.steps):
                w = self.task.step(w, ctx.lr)  # γ_t = η_t
            self.ls = self.task.loss(w)  # only refreshed when leashing ran
        self.metrics = {
            "Lc": self.lc,
            "Ls": self.ls,
            "LLR": llr,
            "leashed": torch.tensor(float(leashed), dtype=torch.float64),
        }
        return w

    def state_dict(self) -> dict:
        return {"lc": self.lc.cpu(), "ls": self.ls.cpu(), "task": self.task.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if not state:
            return
        self.lc = state["lc"].to(self.lc.device)
        self.ls = state["ls"].to(self.ls.device)
        self.task.load_state_dict(state["task"])


@register(
    "hooks",
    "leash_pretrain",
    sections={
        "leash_pretrain": LeashPretrainConfig,
        "fedwalk": FedWalkConfig,
        "leash": LeashConfig,
    },
)
class LeashPretrain(PostAggregationHook):
    """FedWalk Fig. 4's baseline: ``leash_pretrain.steps`` leash steps from ``W_0`` (batch
    ``fedwalk.batch_size``, head ``fedwalk.head``, rate ``leash_pretrain.lr`` or round 1's client
    rate) before round 1, then the base method alone [I: the paper gives no schedule; the
    default 300 steps equals the most leash steps FedWalk can take in its 300 rounds at
    ``T_s = 1``]."""

    needs_public_data = True
    requires = LEASH_REQUIRES
    excludes = ("fedwalk",)

    @classmethod
    def method_label(cls, algorithm: str) -> str:
        return f"pretrain-{algorithm}"

    @classmethod
    def config_errors(cls, config) -> list[str]:
        return head_errors(config)

    @classmethod
    def data_errors(cls, config, files: bool = True) -> list[str]:
        """The leash data's task, holdout and (``files``) folder and classes."""
        return leash_problems(config.leash, config.data, files=files)

    def setup(self, w):
        cfg = self.config.leash_pretrain
        task = _leash_task(
            self.config, self.env, self.config.fedwalk.head, self.config.fedwalk.batch_size
        )
        lr = cfg.lr if cfg.lr is not None else self.env.first_lr
        for _ in range(cfg.steps):
            w = task.step(w, lr)
        self.metrics = {}
        return w

    def after_aggregation(self, w, ctx, updates, oracle):
        return w
