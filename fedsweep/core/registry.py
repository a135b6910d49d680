"""The one registry of components: every component registers itself, in its own file.

A component is a class that fills one slot of the round (docs/algorithms.md §1.4)::

    @register("server_optimizer", "adam", sections={"fedopt": FedOptConfig})
    class FedAdam(AdaptiveServer): ...

``sections`` are the config sections the component reads, each with its typed config class (its
defaults live there, once); a section may be shared by several components (the three adaptive
server optimizers read ``fedopt``) as long as they name the same class. The run config
(``fedsweep.config.schema.RunConfig``) is assembled from this registry, composition rules are
attributes of the component classes (``fedsweep.components.compose`` checks them), and a
component is built with :func:`component_view` of the run config: the general sections and its
own, nothing of the other components.

Registering is importing: ``fedsweep.components.load_components`` imports every module under
``fedsweep/components/``, so a new component is one new file there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

#: the slots of a round, in the order a round runs them (``hooks`` holds a list of names)
SLOTS = (
    "algorithm",
    "selector",
    "sampler",
    "server_optimizer",
    "step_policy",
    "lr_schedule",
    "hooks",
)
#: run-config sections every component may read (the data, the model, the local schedule, the
#: evaluation) besides its own
GENERAL_SECTIONS = ("data", "model", "train", "eval")
#: run-config fields every component may read besides sections
GENERAL_FIELDS = ("seed", "device")


class RegistryError(ValueError):
    """A component registered twice, in an unknown slot, or with a clashing section class."""


@dataclass(frozen=True)
class Entry:
    """One registered component."""

    slot: str
    name: str
    cls: type
    sections: tuple[str, ...]


_ENTRIES: dict[str, dict[str, Entry]] = {slot: {} for slot in SLOTS}
#: slot -> {name: class}, the slot's default first: live (a component registered later, e.g. by
#: a ``--plugin`` module, appears in every view of it)
_CLASSES: dict[str, dict[str, type]] = {slot: {} for slot in SLOTS}
_SECTIONS: dict[str, type] = {}
_DEFAULTS: dict[str, str] = {}


def register(
    slot: str, name: str, *, sections: dict[str, type] | None = None, default: bool = False
) -> Callable[[type], type]:
    """Class decorator: ``cls`` fills ``slot`` under ``name`` and reads ``sections`` (name ->
    config class). ``default``: the slot's value when a config names none."""
    if slot not in _ENTRIES:
        raise RegistryError(f"unknown slot {slot!r}; slots: {', '.join(SLOTS)}")
    sections = dict(sections or {})

    def decorate(cls: type) -> type:
        known = _ENTRIES[slot].get(name)
        if known is not None and _where(known.cls) != _where(cls):
            raise RegistryError(
                f"{slot} {name!r} is registered twice: {known.cls.__module__}.{known.cls.__name__}"
                f" and {cls.__module__}.{cls.__name__}"
            )
        for section, config_cls in sections.items():
            if section in SLOTS or section in GENERAL_SECTIONS or section in GENERAL_FIELDS:
                raise RegistryError(f"section name {section!r} is taken by the run config")
            seen = _SECTIONS.get(section)
            if seen is not None and _where(seen) != _where(config_cls):
                raise RegistryError(
                    f"section {section!r} of {slot} {name!r} is {config_cls.__name__}, but "
                    f"another component declared it as {seen.__name__}"
                )
            _SECTIONS[section] = config_cls
        cls.name = name
        cls.slot = slot
        cls.sections = tuple(sections)
        _ENTRIES[slot][name] = Entry(slot, name, cls, tuple(sections))
        if default:
            _DEFAULTS[slot] = name
        first = _DEFAULTS.get(slot)
        ordered = {n: e.cls for n, e in _ENTRIES[slot].items()}
        _CLASSES[slot].clear()
        _CLASSES[slot].update(sorted(ordered.items(), key=lambda item: item[0] != first))
        return cls

    return decorate


def _where(cls: type) -> tuple[str, str]:
    """A class's identity across re-imports of its module (a plugin imported twice)."""
    return cls.__module__, cls.__qualname__


def components(slot: str) -> dict[str, type]:
    """``{name: class}`` of a slot, its default first, then in registration order. The same
    (live) dict every call: do not change it."""
    return _CLASSES[slot]


def unregister(slot: str, name: str) -> None:
    """Remove a component (tests, plugins that unload) whose sections other components also
    read: the run config's sections are fixed when it is built."""
    entry = _ENTRIES[slot].get(name)
    if entry is None:
        return
    others = {s for e in entries() if e is not entry for s in e.sections}
    own = [s for s in entry.sections if s not in others]
    if own:
        raise RegistryError(f"{slot} {name!r} alone reads {', '.join(own)}: it stays registered")
    del _ENTRIES[slot][name]
    _CLASSES[slot].pop(name, None)


def entries() -> Iterable[Entry]:
    for slot in SLOTS:
        yield from _ENTRIES[slot].values()


def section_classes() -> dict[str, type]:
    """Every component section and its config class, in slot order."""
    out: dict[str, type] = {}
    for entry in entries():
        for section in entry.sections:
            out.setdefault(section, _SECTIONS[section])
    return out


def default(slot: str) -> str | None:
    """The slot's value when a config names none (``hooks``: none)."""
    return _DEFAULTS.get(slot)


def sections_of(slot: str, name: str) -> tuple[str, ...]:
    entry = _ENTRIES[slot].get(name)
    return entry.sections if entry else ()


class ComponentView:
    """What one component sees of a run config: the general sections and fields, and its own
    sections. Reading another component's section is an error, so no component can come to
    depend on another's settings (composition rules that relate two components live in
    ``fedsweep.components.compose`` and in the components' ``composition_errors``)."""

    __slots__ = ("_config", "_allowed", "_owner")

    def __init__(self, config: Any, owner: str, sections: Iterable[str]) -> None:
        object.__setattr__(self, "_config", config)
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(
            self, "_allowed", frozenset((*GENERAL_SECTIONS, *GENERAL_FIELDS, *sections))
        )

    def __getattr__(self, key: str) -> Any:
        if key in self._allowed:
            return getattr(self._config, key)
        raise AttributeError(
            f"{self._owner} reads only its own config sections and the general ones "
            f"({', '.join(sorted(self._allowed))}), not {key!r}"
        )

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("a component's view of the run config is read-only")


def component_view(config: Any, cls: type) -> ComponentView:
    """``config`` as component class ``cls`` (registered) may read it."""
    return ComponentView(config, f"{cls.slot} {cls.name!r}", getattr(cls, "sections", ()))


class Component:
    """What every component class carries besides its slot's interface: its name and sections
    (set by :func:`register`), the other slots' values it is defined with (``requires``), the
    checks of its own settings against the run (``config_errors``) and its data
    (``data_errors``) and the display name it
    gives a composition (``method_label``)."""

    name: ClassVar[str] = ""
    slot: ClassVar[str] = ""
    sections: ClassVar[tuple[str, ...]] = ()
    #: other slot -> the values this component is defined with (absent: every value)
    requires: ClassVar[dict[str, tuple[str, ...]]] = {}

    @classmethod
    def config_errors(cls, config: Any) -> list[str]:
        """What makes the (whole, validated) run config unrunnable with this component, one
        message per problem; checked before anything starts."""
        return []

    @classmethod
    def data_errors(cls, config: Any, files: bool = True) -> list[str]:
        """What makes the run unrunnable on its data with this component (sizes, a folder this
        component reads; ``files``: it may look at the disk), one message per problem; checked
        before anything starts, after ``config_errors``."""
        return []

    @classmethod
    def method_label(cls, algorithm: str) -> str | None:
        """The method's display name when this component names the composition (``bherd-fedavg``,
        ``fedveca``), else None."""
        return None
