"""The regime of a profile's panel, by one rule (issue 51, item 1).

A claim is judged only on runs that can test it, and what they can test depends on how the runs
stand to the paper's. The spec's ``paper`` profile declares its own standing (its ``regime``:
``paper``, or ``reconstructed`` where we filled in what the paper does not give, or ``scaled``
where even the paper profile departs from the paper's stated settings); every other profile's
regime then follows from what it changes against the paper profile, compared on the trials'
typed configs (the same panel and curve, seeds aside):

* the horizon (``train.rounds``, and the schedule tied to it: ``lr_step.milestones``) alone:
  ``truncated``, a regime that can test claims about the start of a run (which curve falls
  faster over the first T rounds), not those about its end (final-loss rankings, a plateau's
  oscillation, the best B);
* the data (``data.*`` but its folder, the test subset), the model (``model.*``, FedWalk's leash
  stand-ins), the step size (``train.lr``) or any other setting of the method: ``scaled``;
* only seeds, curves or panels left out, evaluation cadence: the paper profile's own regime.

Regimes from the least to the most removed: ``paper`` < ``reconstructed`` < ``truncated`` <
``scaled``; a profile's regime is the most removed of its paper profile's and the rule's, and
its reason names every change (``T=100 of the paper profile's 500 rounds``). A profile may
still declare a regime (a departure no config key shows), but never a less removed one than the
rule gives: :func:`regime_problems` says so when the spec loads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fedsweep.config.load import flatten
from fedsweep.specs.model import Regime

#: regime kinds from the least to the most removed from the paper's
ORDER = ("paper", "reconstructed", "truncated", "scaled")
#: keys whose change is the horizon's
HORIZON = ("train.rounds", "lr_step.milestones")
#: keys that change no result (where data are read from, how metrics are batched or logged)
INERT = ("data.root", "eval.batch_size", "eval.train_metrics", "device", "threads")
#: key prefixes that name the kind of change in the reason
WHAT = (
    ("data.", "data"),
    ("eval.test_subset", "test set"),
    ("model.", "model"),
    ("leash.", "leash"),
    ("leash_pretrain.", "leash"),
    ("train.lr", "η"),
)


def most_removed(kinds: Iterable[str]) -> str:
    """The kind furthest from the paper's among ``kinds`` (``paper`` for none)."""
    return max(kinds, key=ORDER.index, default="paper")


def _inert(key: str) -> bool:
    return key in INERT or key.startswith("checkpoint.") or key.endswith(".log_every")


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def changes(profile_config: dict, paper_config: dict) -> list[tuple[str, Any, Any]]:
    """``(key, value, paper value)`` for every dotted key (of two flattened run configs) whose
    value differs and could change a result, sorted by key."""
    keys = sorted(set(profile_config) | set(paper_config))
    return [
        (k, profile_config.get(k), paper_config.get(k))
        for k in keys
        if not _inert(k) and profile_config.get(k) != paper_config.get(k)
    ]


def describe(key: str, value: Any, paper: Any) -> str:
    """One change in words: ``T=100 of the paper profile's 500 rounds``, ``η=0.01 (paper
    profile 0.0001)``, ``data.train_subset=3000 (paper profile None)``."""
    if key == "train.rounds":
        return f"T={_fmt(value)} of the paper profile's {_fmt(paper)} rounds"
    if key == "train.lr":
        return f"η={_fmt(value)} (paper profile {_fmt(paper)})"
    return f"{key}={_fmt(value)} (paper profile {_fmt(paper)})"


def rule_regime(base: Regime | None, found: list[tuple[str, Any, Any]]) -> Regime | None:
    """The regime of a panel whose configs differ from the paper profile's by ``found``
    (:func:`changes`), its paper profile's regime being ``base`` (None: not declared)."""
    if not found:
        return base
    kind = "truncated" if all(k in HORIZON for k, _, _ in found) else "scaled"
    kind = most_removed([kind, base.kind if base is not None else "paper"])
    reason = "; ".join(describe(*c) for c in found)
    if base is not None and base.kind != "paper" and base.reason:
        reason = f"{base.reason}; {reason}"
    return Regime(kind=kind, reason=reason)


def panel_changes(spec, profile: str) -> dict[str, list[tuple[str, Any, Any]]]:
    """Per panel id of ``profile``, the changes of its trials' configs against the paper
    profile's trial of the same panel and curve (both at seed 0: the seed is no change; a curve
    or panel the paper profile lacks is compared with nothing and adds none)."""
    from fedsweep.specs.load import expand

    def firsts(name: str) -> dict[tuple[str, str], dict]:
        out: dict[tuple[str, str], dict] = {}
        first = spec.with_seeds(name, [0])  # one seed (the same on both sides) per cell
        for t in expand(first, name):
            if t.derive is None:  # a derived trial's values come from runs, not the profile
                out.setdefault((t.panel_id, t.curve), flatten(t.config.model_dump()))
        return out

    here, paper = firsts(profile), firsts("paper")
    if not here or not paper:
        return {}
    found: dict[str, dict[str, tuple[str, Any, Any]]] = {}
    for (panel, curve), config in here.items():
        other = paper.get((panel, curve))
        if other is None:
            continue
        for change in changes(config, other):
            found.setdefault(panel, {}).setdefault(change[0], change)
    return {panel: sorted(c.values()) for panel, c in found.items()}


def regime_problems(spec, source: str, profiles: Iterable[str] | None = None) -> list[str]:
    """A profile (of ``profiles``; None: every one) that declares a regime less removed than
    the rule gives (e.g. ``paper`` for a profile of 100 of the paper profile's 500 rounds): one
    line each."""
    if "paper" not in spec.profiles:
        return []
    problems = []
    wanted = None if profiles is None else set(profiles)
    for name, prof in spec.profiles.items():
        if wanted is not None and name not in wanted:
            continue
        if name == "paper" or (prof.regime is None and not prof.panel_regime):
            continue
        found = panel_changes(spec, name)
        base = spec.profiles["paper"]
        for cell in spec.panel_cells(name):
            declared = prof.regime_of(cell.pairs)
            if declared is None or cell.panel_id not in found:
                continue
            ruled = rule_regime(base.regime_of(cell.pairs), found[cell.panel_id])
            if ruled is not None and ORDER.index(declared.kind) < ORDER.index(ruled.kind):
                where = (
                    f"profiles.{name}: panel {cell.label!r}" if cell.label else f"profiles.{name}"
                )
                problems.append(
                    f"{source}: {where} declares regime "
                    f"{declared.kind!r}, but the profile changes {ruled.reason}: its regime is "
                    f"{ruled.kind!r} at least (allowed: {', '.join(ORDER[ORDER.index(ruled.kind) :])})"
                )
    return problems


def panel_regimes(spec, profile: str | None) -> dict[str, Regime | None]:
    """Per panel id of ``profile``, its regime by the rule (the module's docstring): the most
    removed of what the profile declares for the panel and what its changes against the paper
    profile give (a declared regime at least as removed keeps its own reason); None where
    neither says anything (a spec without a ``paper`` profile declares its own regimes)."""
    prof = spec.profiles.get(profile) if profile is not None else None
    cells = spec.panel_cells(profile)
    if prof is None:
        return {cell.panel_id: None for cell in cells}
    declared = {cell.panel_id: prof.regime_of(cell.pairs) for cell in cells}
    if profile == "paper" or "paper" not in spec.profiles:
        return declared
    found = panel_changes(spec, profile)
    base = spec.profiles["paper"]
    out: dict[str, Regime | None] = {}
    for cell in cells:
        mine = declared[cell.panel_id]
        ruled = rule_regime(base.regime_of(cell.pairs), found.get(cell.panel_id, []))
        if mine is None or (ruled is not None and ORDER.index(ruled.kind) > ORDER.index(mine.kind)):
            out[cell.panel_id] = ruled
        else:
            out[cell.panel_id] = mine
    return out
