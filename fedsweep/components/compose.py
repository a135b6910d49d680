"""Which components exist, which compose, and what each reads, read from the registry.

A run is one choice per slot of the round (docs/algorithms.md §1.4)::

    sampler ─► step policy + lr schedule ─► local training (base method's local rule,
    upload selector) ─► base method's aggregate (direction u_t) ─► server optimizer ─►
    post-aggregation hooks ─► evaluation ─► observers

Components never test which other component runs: what a pairing needs is declared by the
components themselves (a selector's ``uploads``, a step policy's or hook's ``requires``, each
one's ``config_errors``), and this module checks a config against all of it before anything
runs (``composition_errors``), names the sections a config uses (``config_sections``) and
builds a run's components, each with its view of the config (``build_components``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from fedsweep.components import load_components
from fedsweep.components.algorithms.base import BaseMethod
from fedsweep.components.hooks.base import PostAggregationHook
from fedsweep.components.lr_schedules.base import LRSchedule
from fedsweep.components.samplers.base import Sampler
from fedsweep.components.selectors.base import Selector
from fedsweep.components.server_optimizers.base import ServerOptimizer
from fedsweep.components.step_policies.base import StepPolicy
from fedsweep.core import registry
from fedsweep.core.registry import component_view

load_components()


# ------------------------------------------------------------------------------- registries
# each slot's components, its default first (the order of every "allowed: ..." message): the
# registry's live dicts, so a component a ``--plugin`` module registers later is in them
ALGORITHMS: dict[str, type[BaseMethod]] = registry.components("algorithm")
SELECTORS: dict[str, type[Selector]] = registry.components("selector")
SAMPLERS: dict[str, type[Sampler]] = registry.components("sampler")
SERVER_OPTIMIZERS: dict[str, type[ServerOptimizer]] = registry.components("server_optimizer")
STEP_POLICIES: dict[str, type[StepPolicy]] = registry.components("step_policy")
LR_SCHEDULES: dict[str, type[LRSchedule]] = registry.components("lr_schedule")
HOOKS: dict[str, type[PostAggregationHook]] = registry.components("hooks")

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
#: the slot's value when a config does not name one (each declared by its component)
DEFAULTS = {slot: registry.default(slot) for slot in SLOTS if slot != "hooks"}

# ------------------------------------------------------------------------------ the sections
#: config sections every run uses
GENERAL_SECTIONS = ("data", "model", "train", "eval", "tracking")


def component_sections() -> dict[tuple[str, str], tuple[str, ...]]:
    """The config sections each component reads, (slot, name) -> sections (declared when it
    registered)."""
    return {
        (slot, name): cls.sections
        for slot, found in SLOTS.items()
        for name, cls in found.items()
        if cls.sections
    }


# ---------------------------------------------------------------------------- compositions
# Every rule below is read from the component classes (their ``uploads``, ``requires``,
# ``simple_mean``... attributes and ``config_errors``); these tables are views of them.


def selector_bases() -> dict[str, dict[str, str]]:
    """selector -> {base method it composes with: the form of its upload for that base}
    ("own": the base method's own message; "descent": η·scale·Σ_π v, Eq. 7 and §3.8;
    "normalised": FedNova's g_sel/k_i with a_i = τ_i, §3.7)."""
    return {
        name: {base: "own" for base in ALGORITHMS} if cls.uploads is None else dict(cls.uploads)
        for name, cls in SELECTORS.items()
    }


def pooled() -> tuple[str, ...]:
    """Base methods that train one client on the pooled data: only full participation applies."""
    return tuple(name for name, cls in ALGORITHMS.items() if cls.pools_data)


def sampler_bases() -> dict[str, tuple[str, ...]]:
    """sampler -> the base methods it composes with (every server optimizer composes with every
    base)."""
    pool = pooled()
    return {
        name: tuple(ALGORITHMS) if cls.pooled_ok else tuple(b for b in ALGORITHMS if b not in pool)
        for name, cls in SAMPLERS.items()
    }


_TABLES = {
    "COMPONENT_SECTIONS": component_sections,
    "SELECTOR_BASES": selector_bases,
    "SAMPLER_BASES": sampler_bases,
    "POOLED": pooled,
}


def __getattr__(name: str) -> Any:
    """The tables as module constants (``compose.SELECTOR_BASES``), computed from the registry
    when asked, so a component registered later is in them."""
    if name in _TABLES:
        return _TABLES[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _get(config: Any, key: str) -> Any:
    if isinstance(config, Mapping):
        value = config.get(key)
    else:
        value = getattr(config, key, None)
    if value in (None, ""):
        return [] if key == "hooks" else DEFAULTS.get(key)
    if isinstance(value, dict):  # a component block, {name: adam, lr: 0.1}
        return value.get("name") or DEFAULTS.get(key)
    if key == "hooks" and isinstance(value, list):
        return [v.get("name") if isinstance(v, dict) else v for v in value]
    return value


def method_label(config: Any) -> str:
    """The method's display name: the first component that names the composition (step policy,
    then hooks, then the upload selector: ``fedveca``, ``fedwalk``, ``pretrain-fedprox``,
    ``bherd-fedavg``), else the base method (``fedavg``). ``config``: a ``RunConfig`` or its
    (nested) dict."""
    algorithm = _get(config, "algorithm")
    parts = [STEP_POLICIES.get(_get(config, "step_policy"))]
    parts += [HOOKS.get(name) for name in _get(config, "hooks")]
    parts.append(SELECTORS.get(_get(config, "selector")))
    for cls in parts:
        label = cls.method_label(algorithm) if cls is not None else None
        if label:
            return label
    return algorithm


def config_sections(config: Any) -> tuple[str, ...]:
    """The config sections a run uses: the general ones, then each chosen component's own
    (e.g. BHerd-FedAvg with Power-of-Choice: ..., bherd, cohort, poc, server_sgd).
    ``config``: a ``RunConfig`` or its (nested) dict."""
    out = list(GENERAL_SECTIONS)
    sections = component_sections()
    for slot in SLOTS:
        names = _get(config, slot)
        for name in names if isinstance(names, list) else [names]:
            for section in sections.get((slot, name), ()):
                if section not in out:
                    out.append(section)
    return tuple(out)


def section_readers(section: str) -> list[tuple[str, str]]:
    """The components that read config ``section``: ``[("selector", "bherd")]`` for ``bherd``."""
    return [key for key, sections in component_sections().items() if section in sections]


def readers_text(section: str) -> str:
    """``"server_optimizer 'adagrad' or 'adam' or 'yogi'"``: who reads ``section``, for messages."""
    by_slot: dict[str, list[str]] = {}
    for slot, name in section_readers(section):
        by_slot.setdefault(slot, []).append(repr(name))
    return "; ".join(f"{slot} {' or '.join(names)}" for slot, names in by_slot.items())


def valid_compositions() -> list[str]:
    """Every valid ``selector-base`` pairing, then what the other slots allow."""
    out = [f"{base} (no selector)" for base in ALGORITHMS]
    for selector, bases in selector_bases().items():
        if SELECTORS[selector].uploads is not None:
            out += [f"{selector}-{base}" for base in bases]
    return out


def _chosen(config) -> list[tuple[str, type]]:
    """``(slot, class)`` of every component ``config`` names, hooks last."""
    out = [(slot, SLOTS[slot][getattr(config, slot)]) for slot in SLOTS if slot != "hooks"]
    return out + [("hooks", HOOKS[name]) for name in config.hooks]


def composition_errors(config) -> list[str]:
    """What the components' rules forbid in a validated ``RunConfig`` (one message per
    problem): the selector's upload for the base method, pooled data, each component's
    ``requires`` (the other slots it is defined with), the hooks' simple mean, and each
    component's own ``config_errors``."""
    out = []
    algorithm, selector, sampler = config.algorithm, config.selector, config.sampler
    if algorithm not in selector_bases()[selector]:
        combos = "; ".join(valid_compositions())
        out.append(
            f"selector {selector!r} cannot be composed with algorithm {algorithm!r}; "
            f"valid combinations: {combos}"
        )
    samplers = sampler_bases()
    if algorithm not in samplers[sampler]:
        allowed = ", ".join(s for s, bases in samplers.items() if algorithm in bases)
        out.append(
            f"sampler {sampler!r} cannot be composed with algorithm {algorithm!r}: it trains one "
            f"client on the pooled data (allowed samplers: {allowed})"
        )
    for slot, cls in _chosen(config):
        what = f"{slot} {cls.name!r}" if slot != "hooks" else f"hook {cls.name!r}"
        for other, allowed in cls.requires.items():
            value = getattr(config, other)
            if value not in allowed:
                offered = ", ".join(SLOTS[other])
                out.append(
                    f"{what} is not defined with {other} {value!r} (allowed: "
                    f"{', '.join(allowed)}; {other}s that exist: {offered})"
                )
    for name in config.hooks:
        if algorithm in HOOKS[name].simple_mean_bases:
            out += _simple_mean_errors(config, name)
    if len(set(config.hooks)) != len(config.hooks):
        out.append(f"hooks: each hook once, got {config.hooks}")
    for name in config.hooks:
        for other in HOOKS[name].excludes:
            if other in config.hooks and name < other:
                out.append(f"hooks: {name} and {other} are alternatives, not a pair")
    seen = set()
    for _slot_name, cls in _chosen(config):
        errors = cls.config_errors(config)
        for problem in errors:  # two hooks sharing a rule report it once
            if problem not in seen:
                seen.add(problem)
                out.append(problem)
    return out


def data_errors(config, files: bool = True) -> list[str]:
    """Each chosen component's own checks of ``config`` against its data (``data_errors``:
    FedVeca's τ_max against the training set, the leash folder of FedWalk's hooks), one message
    per problem; a rule two hooks share is reported once."""
    out: list[str] = []
    for _slot, cls in _chosen(config):
        out += [p for p in cls.data_errors(config, files=files) if p not in out]
    return out


def _simple_mean_samplers() -> dict[str, tuple[str, tuple[str, ...]] | None]:
    """sampler -> the field and values that make its weights ``1/m`` (None: always); samplers
    that always weight by ``p_i`` are absent."""
    return {name: cls.simple_mean for name, cls in SAMPLERS.items() if cls.simple_mean is not False}


def _simple_mean_errors(config, hook: str) -> list[str]:
    """A sampler that does not weight ``hook``'s cohort by ``1/m`` (FedWalk Eq. 4, W6)."""
    rule = (
        f"hook {hook!r} with algorithm {config.algorithm!r} aggregates with the simple mean "
        "1/m of FedWalk's Eq. 4, not by data size (docs/algorithms.md §6.1, W6)"
    )
    simple = _simple_mean_samplers()
    offered = ", ".join(
        name if need is None else f"{name} with {need[0]} {' or '.join(need[1])}"
        for name, need in simple.items()
    )
    if config.sampler not in simple:
        return [
            f"field `sampler`: got {config.sampler!r}, which weights clients by p_i, but {rule} "
            f"(allowed: {offered}; every client each round: sampler uniform with cohort.size = "
            "data.num_clients and uniform.weighting simple)"
        ]
    need = simple[config.sampler]
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


def _view(config, cls: type):
    return component_view(config, cls)


def build_method(config) -> BaseMethod:
    cls = ALGORITHMS[config.algorithm]
    return cls(_view(config, cls))


def build_components(config, method: BaseMethod, p: torch.Tensor, sizes: list[int]) -> Components:
    """Every other component of a run whose clients have data weights ``p`` and sizes ``sizes``
    (the base method is built first: it decides whether the data is pooled)."""
    upload = selector_bases()[config.selector][config.algorithm]
    selector = SELECTORS[config.selector]
    sampler = SAMPLERS[config.sampler]
    server_opt = SERVER_OPTIMIZERS[config.server_optimizer]
    step_policy = STEP_POLICIES[config.step_policy]
    lr_schedule = LR_SCHEDULES[config.lr_schedule]
    return Components(
        method=method,
        selector=selector(_view(config, selector), upload),
        sampler=sampler(_view(config, sampler), p),
        server_opt=server_opt(_view(config, server_opt)),
        step_policy=step_policy(_view(config, step_policy), sizes),
        lr_schedule=lr_schedule(_view(config, lr_schedule)),
        hooks=[HOOKS[name](_view(config, HOOKS[name])) for name in config.hooks],
    )
