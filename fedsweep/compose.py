"""Which components exist, which compose, and what each reads: the one table of fedsweep.

A run is one choice per slot of the round (docs/algorithms.md §1.4)::

    sampler ─► step policy + lr schedule ─► local training (base method's local rule,
    upload selector) ─► base method's aggregate (direction u_t) ─► server optimizer ─►
    post-aggregation hooks ─► evaluation ─► observers

Components never test which other component runs: what a pairing needs is written here
(``SELECTOR_BASES`` gives a selector the form of its upload for each base method), and the config
is checked against this table before anything runs (``composition_errors``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from fedsweep.algorithms.base import BaseMethod
from fedsweep.algorithms.centralized import CentralizedSGD
from fedsweep.algorithms.fedavg import FedAvg
from fedsweep.algorithms.fednova import FedNova
from fedsweep.algorithms.fedprox import FedProx
from fedsweep.algorithms.fedveca import FedVecaSteps
from fedsweep.algorithms.scaffold import Scaffold
from fedsweep.engine.schedules import (
    ConstantLR,
    EpochSteps,
    FixedSteps,
    LRSchedule,
    StepLR,
    StepPolicy,
)
from fedsweep.hooks.base import PostAggregationHook
from fedsweep.hooks.fedwalk import FedWalk, LeashPretrain
from fedsweep.samplers.base import Sampler
from fedsweep.samplers.divfl import DivFL
from fedsweep.samplers.full import FullParticipation
from fedsweep.samplers.poc import PowerOfChoice
from fedsweep.samplers.replacement import ReplacementSampler
from fedsweep.samplers.uniform import UniformSampler
from fedsweep.selectors.base import Selector
from fedsweep.selectors.bherd import BHerd
from fedsweep.selectors.grab import GraB
from fedsweep.selectors.none import NoSelector
from fedsweep.server_optimizers.adaptive import FedAdagrad, FedAdam, FedYogi
from fedsweep.server_optimizers.base import ServerOptimizer
from fedsweep.server_optimizers.sgd import ServerSGD

# ------------------------------------------------------------------------------- registries
ALGORITHMS = {c.name: c for c in (FedAvg, CentralizedSGD, FedProx, FedNova, Scaffold)}
SELECTORS = {c.name: c for c in (NoSelector, BHerd, GraB)}
SAMPLERS = {
    c.name: c for c in (FullParticipation, UniformSampler, ReplacementSampler, PowerOfChoice, DivFL)
}
SERVER_OPTIMIZERS = {c.name: c for c in (ServerSGD, FedAdagrad, FedAdam, FedYogi)}
STEP_POLICIES = {c.name: c for c in (EpochSteps, FixedSteps, FedVecaSteps)}
LR_SCHEDULES = {c.name: c for c in (ConstantLR, StepLR)}
HOOKS: dict[str, type[PostAggregationHook]] = {c.name: c for c in (FedWalk, LeashPretrain)}

#: config key -> registry of the component it names (``hooks`` is a list of names)
SLOTS: dict[str, dict[str, type]] = {
    "algorithm": ALGORITHMS,
    "selector": SELECTORS,
    "sampler": SAMPLERS,
    "server_optimizer": SERVER_OPTIMIZERS,
    "step_policy": STEP_POLICIES,
    "lr_schedule": LR_SCHEDULES,
    "hooks": HOOKS,
}
#: the slot's value when a config does not name one
DEFAULTS = {
    "algorithm": "fedavg",
    "selector": "none",
    "sampler": "full",
    "server_optimizer": "sgd",
    "step_policy": "epochs",
    "lr_schedule": "constant",
}

# ------------------------------------------------------------------------------ the sections
#: config sections every run uses
GENERAL_SECTIONS = ("data", "model", "train", "eval", "tracking")
#: the config sections each component reads (slot, name) -> sections
COMPONENT_SECTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("algorithm", "fedprox"): ("fedprox",),
    ("algorithm", "fednova"): ("fednova",),
    ("algorithm", "scaffold"): ("scaffold",),
    ("selector", "bherd"): ("bherd",),
    ("selector", "grab"): ("grab",),
    ("sampler", "uniform"): ("cohort", "uniform"),
    ("sampler", "replacement"): ("cohort",),
    ("sampler", "poc"): ("cohort", "poc"),
    ("sampler", "divfl"): ("cohort", "divfl"),
    ("server_optimizer", "sgd"): ("server_sgd",),
    ("server_optimizer", "adagrad"): ("fedopt",),
    ("server_optimizer", "adam"): ("fedopt",),
    ("server_optimizer", "yogi"): ("fedopt",),
    ("step_policy", "fixed"): ("fixed_steps",),
    ("step_policy", "fedveca"): ("fedveca",),
    ("lr_schedule", "step"): ("lr_step",),
    ("hooks", "fedwalk"): ("fedwalk", "leash"),
    ("hooks", "leash_pretrain"): ("leash_pretrain", "fedwalk", "leash"),
}

# ---------------------------------------------------------------------------- compositions
#: selector -> {base method it composes with: the form of its upload for that base}
#: ("own": the base method's own message; "descent": η·scale·Σ_π v, Eq. 7 and §3.8;
#: "normalised": FedNova's g_sel/k_i with a_i = τ_i, §3.7)
SELECTOR_BASES: dict[str, dict[str, str]] = {
    "none": {base: "own" for base in ALGORITHMS},
    "bherd": {"fedavg": "descent", "scaffold": "descent", "fednova": "normalised"},
    "grab": {"fedavg": "descent"},
}
#: base methods that train one client on the pooled data: only full participation applies
POOLED = tuple(name for name, cls in ALGORITHMS.items() if cls.pools_data)
#: sampler -> base methods it composes with (every server optimizer composes with every base)
SAMPLER_BASES: dict[str, tuple[str, ...]] = {
    name: tuple(ALGORITHMS) if name == "full" else tuple(b for b in ALGORITHMS if b not in POOLED)
    for name in SAMPLERS
}


#: step policy -> what it composes with, where it is not everything: the base methods, upload
#: selectors and samplers it is defined for. FedVeca's estimates (§5.3) assume plain local SGD
#: and every client uploading its whole trajectory; its β̂ compares ĝ of consecutive rounds,
#: which needs the same clients every round (full participation).
STEP_POLICY_RULES: dict[str, dict[str, tuple[str, ...]]] = {
    "fedveca": {
        "algorithm": ("fednova", "fedavg"),
        "selector": ("none",),
        "sampler": ("full",),
    },
}


#: hook -> what it composes with: FedWalk is defined on top of the passive methods of §6.5 with
#: their own uploads (no definition exists for an upload selector), fixed or epoch-based steps
HOOK_RULES: dict[str, dict[str, tuple[str, ...]]] = {
    name: {
        "algorithm": ("fedavg", "fedprox", "fednova", "scaffold"),
        "selector": ("none",),
        "step_policy": ("epochs", "fixed"),
    }
    for name in ("fedwalk", "leash_pretrain")
}
#: models a separate leash head can sit on (they return features: ``FLModel.feature_dim``)
FEATURE_MODELS = ("mlp", "cnn-mcmahan", "resnet18")
#: hook -> the base methods it aggregates with the simple mean ``1/m`` on: FedWalk's Eq. 4 is
#: FedAvg's (W6); FedProx, FedNova and SCAFFOLD with the leash keep their own weights (§6.5)
HOOK_SIMPLE_MEAN: dict[str, tuple[str, ...]] = {"fedwalk": ("fedavg",)}
#: sampler -> the field and values that make its weights the simple mean ``1/m`` of its cohort
#: (None: always; ``full`` is absent: it weights by ``p_i``)
SIMPLE_MEAN_SAMPLERS: dict[str, tuple[str, tuple[str, ...]] | None] = {
    "uniform": ("uniform.weighting", ("simple",)),
    "replacement": None,  # 1/m per draw (scheme 1)
    "poc": None,
    "divfl": ("divfl.weighting", ("simple",)),
}


def _get(config: Any, key: str) -> Any:
    if isinstance(config, Mapping):
        value = config.get(key)
    else:
        value = getattr(config, key, None)
    if value in (None, ""):
        return [] if key == "hooks" else DEFAULTS.get(key)
    return value


def method_label(config: Any) -> str:
    """``bherd-fedavg``, ``fedavg``: the base method with its upload selector; ``fedveca``
    (FedNova's aggregation with FedVeca's steps) or ``fedveca-fedavg``."""
    algorithm, selector = _get(config, "algorithm"), _get(config, "selector")
    if _get(config, "step_policy") == "fedveca":
        return "fedveca" if algorithm == "fednova" else f"fedveca-{algorithm}"
    hooks = _get(config, "hooks")
    if "fedwalk" in hooks:  # FedWalk = FedAvg + leash; the others: scaffold-fedwalk, ...
        return "fedwalk" if algorithm == "fedavg" else f"{algorithm}-fedwalk"
    if "leash_pretrain" in hooks:
        return f"pretrain-{algorithm}"
    return algorithm if selector == "none" else f"{selector}-{algorithm}"


def config_sections(config: Any) -> tuple[str, ...]:
    """The config sections a run uses: the general ones, then each chosen component's own
    (e.g. BHerd-FedAvg with Power-of-Choice: ..., bherd, cohort, poc, server_sgd).
    ``config``: a ``RunConfig`` or its (nested) dict."""
    out = list(GENERAL_SECTIONS)
    for slot in SLOTS:
        names = _get(config, slot)
        for name in names if isinstance(names, list) else [names]:
            for section in COMPONENT_SECTIONS.get((slot, name), ()):
                if section not in out:
                    out.append(section)
    return tuple(out)


def section_readers(section: str) -> list[tuple[str, str]]:
    """The components that read config ``section``: ``[("selector", "bherd")]`` for ``bherd``."""
    return [key for key, sections in COMPONENT_SECTIONS.items() if section in sections]


def readers_text(section: str) -> str:
    """``"server_optimizer 'adagrad' or 'adam' or 'yogi'"``: who reads ``section``, for messages."""
    by_slot: dict[str, list[str]] = {}
    for slot, name in section_readers(section):
        by_slot.setdefault(slot, []).append(repr(name))
    return "; ".join(f"{slot} {' or '.join(names)}" for slot, names in by_slot.items())


def valid_compositions() -> list[str]:
    """Every valid ``selector-base`` pairing, then what the other slots allow."""
    out = [f"{base} (no selector)" for base in ALGORITHMS]
    for selector, bases in SELECTOR_BASES.items():
        if selector != "none":
            out += [f"{selector}-{base}" for base in bases]
    return out


def composition_errors(config) -> list[str]:
    """What this table forbids in a validated ``RunConfig`` (one message per problem)."""
    out = []
    algorithm, selector, sampler = config.algorithm, config.selector, config.sampler
    if algorithm not in SELECTOR_BASES[selector]:
        combos = "; ".join(valid_compositions())
        out.append(
            f"selector {selector!r} cannot be composed with algorithm {algorithm!r}; "
            f"valid combinations: {combos}"
        )
    if (selector, algorithm) == ("bherd", "fednova"):
        nova = config.fednova
        if nova.momentum != 0 or nova.mu != 0:
            out.append(
                "bherd-fednova is defined for plain local SGD (docs/algorithms.md §3.7): "
                "set fednova.momentum = 0 and fednova.mu = 0"
            )
    if algorithm not in SAMPLER_BASES[sampler]:
        allowed = ", ".join(s for s, bases in SAMPLER_BASES.items() if algorithm in bases)
        out.append(
            f"sampler {sampler!r} cannot be composed with algorithm {algorithm!r}: it trains one "
            f"client on the pooled data (allowed samplers: {allowed})"
        )
    out += SAMPLERS[sampler].config_errors(config)
    for slot, allowed in STEP_POLICY_RULES.get(config.step_policy, {}).items():
        value = getattr(config, slot)
        if value not in allowed:
            offered = ", ".join(SLOTS[slot])
            out.append(
                f"step_policy {config.step_policy!r} is not defined with {slot} {value!r} "
                f"(allowed: {', '.join(allowed)}; {slot}s that exist: {offered})"
            )
    for hook in config.hooks:
        for slot, allowed in HOOK_RULES.get(hook, {}).items():
            value = getattr(config, slot)
            if value not in allowed:
                offered = ", ".join(SLOTS[slot])
                out.append(
                    f"hook {hook!r} is not defined with {slot} {value!r} (allowed: "
                    f"{', '.join(allowed)}; {slot}s that exist: {offered})"
                )
    for hook in config.hooks:
        if algorithm in HOOK_SIMPLE_MEAN.get(hook, ()):
            out += _simple_mean_errors(config, hook)
    if len(set(config.hooks)) != len(config.hooks):
        out.append(f"hooks: each hook once, got {config.hooks}")
    if {"fedwalk", "leash_pretrain"} <= set(config.hooks):
        out.append("hooks: fedwalk and leash_pretrain are alternatives (Fig. 4), not a pair")
    if any(HOOKS[h].needs_public_data for h in config.hooks):
        if config.fedwalk.head == "separate" and config.model.name not in FEATURE_MODELS:
            out.append(
                f"field `fedwalk.head`: got 'separate', which needs a model with features, but "
                f"model.name is {config.model.name!r} (allowed models: "
                f"{', '.join(FEATURE_MODELS)}; or fedwalk.head 'mapped')"
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
    if config.step_policy == "fedveca" and config.algorithm == "fednova":
        nova = config.fednova
        if nova.momentum != 0 or nova.mu != 0:
            out.append(
                "step_policy 'fedveca' is defined for plain local SGD (docs/algorithms.md §5.1): "
                "set fednova.momentum = 0 and fednova.mu = 0"
            )
    return out


def _simple_mean_errors(config, hook: str) -> list[str]:
    """A sampler that does not weight ``hook``'s cohort by ``1/m`` (FedWalk Eq. 4, W6)."""
    rule = (
        f"hook {hook!r} with algorithm {config.algorithm!r} aggregates with the simple mean "
        "1/m of FedWalk's Eq. 4, not by data size (docs/algorithms.md §6.1, W6)"
    )
    offered = ", ".join(
        name if need is None else f"{name} with {need[0]} {' or '.join(need[1])}"
        for name, need in SIMPLE_MEAN_SAMPLERS.items()
    )
    if config.sampler not in SIMPLE_MEAN_SAMPLERS:
        return [
            f"field `sampler`: got {config.sampler!r}, which weights clients by p_i, but {rule} "
            f"(allowed: {offered}; every client each round: sampler uniform with cohort.size = "
            "data.num_clients and uniform.weighting simple)"
        ]
    need = SIMPLE_MEAN_SAMPLERS[config.sampler]
    if need is None:
        return []
    key, allowed = need
    section, name = key.split(".")
    value = getattr(getattr(config, section), name)
    if value in allowed:
        return []
    return [f"field `{key}`: got {value!r}, but {rule} (allowed: {', '.join(allowed)})"]


# ---------------------------------------------------------------------------------- building
@dataclass
class Components:
    """One run's choice for every slot of the round, built from its config."""

    method: BaseMethod
    selector: Selector
    sampler: Sampler
    server_opt: ServerOptimizer
    step_policy: StepPolicy
    lr_schedule: LRSchedule
    hooks: list[PostAggregationHook] = field(default_factory=list)

    def step_observers(self) -> list:
        """The local-step observers the components ask for (``engine.local.StepObserver``)."""
        parts = (self.method, self.selector, self.step_policy, *self.hooks)
        found = (getattr(p, "local_observer", lambda: None)() for p in parts)
        return [o for o in found if o is not None]

    def diagnostics(self) -> set[str]:
        """Metric names that are estimates (non-finite values do not mean divergence)."""
        out = set(self.step_policy.diagnostics)
        for hook in self.hooks:
            out.update(hook.diagnostics)
        return out

    def parts(self) -> dict[str, Any]:
        """The stateful parts by checkpoint key."""
        out = {
            "method": self.method,
            "selector": self.selector,
            "sampler": self.sampler,
            "server_opt": self.server_opt,
            "step_policy": self.step_policy,
        }
        out.update({f"hook/{h.name}": h for h in self.hooks})
        return out


def build_method(config) -> BaseMethod:
    return ALGORITHMS[config.algorithm](config)


def build_components(config, method: BaseMethod, p: torch.Tensor, sizes: list[int]) -> Components:
    """Every other component of a run whose clients have data weights ``p`` and sizes ``sizes``
    (the base method is built first: it decides whether the data is pooled)."""
    upload = SELECTOR_BASES[config.selector][config.algorithm]
    return Components(
        method=method,
        selector=SELECTORS[config.selector](config, upload),
        sampler=SAMPLERS[config.sampler](config, p),
        server_opt=SERVER_OPTIMIZERS[config.server_optimizer](config),
        step_policy=STEP_POLICIES[config.step_policy](config, sizes),
        lr_schedule=LR_SCHEDULES[config.lr_schedule](config),
        hooks=[HOOKS[name](config) for name in config.hooks],
    )
