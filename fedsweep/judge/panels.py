"""The panels of a figure: one cell of a spec's panel grid each, with its label, the config
values it sets and its regime at a profile."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fedsweep.specs.load import SweepSpec
from fedsweep.specs.regimes import panel_regimes


@dataclass(frozen=True)
class Panel:
    """One cell of a spec's panel grid: its id (as in ``Trial.panel_id``), label and values."""

    panel_id: str
    label: str
    values: dict[str, Any] = field(default_factory=dict)
    #: the regime its runs are in at the profile (``fedsweep.specs.model.Regime``): paper,
    #: reconstructed, truncated or scaled; None: not declared (and no paper profile to rule by)
    regime: Any = None


def panels_of(spec: SweepSpec, profile: str | None = None) -> list[Panel]:
    """The spec's panels in grid order, labelled as the spec says ("Case 1", "CNN, MNIST", ...).

    ``values`` holds the axis values (a named axis gives its choice id) and the config overrides
    of the cell (e.g. ``data.partition``, ``model.name``); ``regime`` its regime by the rule
    (:func:`fedsweep.specs.regimes.panel_regimes`: a profile that runs fewer rounds than the
    paper profile is ``truncated`` whatever it declares)."""
    regimes = panel_regimes(spec, profile)
    return [
        Panel(
            cell.panel_id,
            cell.label,
            {**cell.overrides, **dict(cell.pairs)},
            regimes.get(cell.panel_id),
        )
        for cell in spec.panel_cells(profile)
    ]
