"""The kinds of claim (``fedsweep.specs.claims.KINDS``), one small object each: how a
comparison's parts in one panel are formed (``parts``) and what it reads (two sides of curves, or curves ordered by the config key ``over``). Adding a
kind is one file here with its ``parts`` and one entry below (and its name in the spec's
``KINDS``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fedsweep.judge.kinds.bound import bound
from fedsweep.judge.kinds.compare import two
from fedsweep.judge.kinds.first import first
from fedsweep.judge.kinds.interior import interior
from fedsweep.judge.kinds.monotone import monotone

#: ``parts(claim, comparison, data, panel_id, measure, claimed, other)`` -> ``[(name, effect[,
#: why blocked[, the part's curves]])]``, or None when the panel has no data for it
Parts = Callable[..., list[tuple[Any, ...]] | None]


@dataclass(frozen=True)
class Kind:
    """One kind of claim: its name, how it forms its parts, and what it reads (two sides, or
    curves ordered by ``over``)."""

    name: str
    parts: Parts
    ordered: bool = False
    #: its effect compares two named curves (a part may be degenerate: one computation twice)
    paired: bool = False
    #: it ranks curves (the seed means of the curves it reads are shown beside the parts)
    ranks: bool = False
    #: its other side is a set of rivals, not one curve per part
    rivals: bool = False
    #: it reads one side only (no ``versus``)
    one_sided: bool = False


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("faster", two, paired=True),
        Kind("higher", two, paired=True),
        Kind("equivalent", two, paired=True),
        Kind("first", first, ranks=True, rivals=True),
        Kind("monotone", monotone, ordered=True, ranks=True),
        Kind("interior_optimum", interior, ordered=True, ranks=True),
        Kind("bound", bound, one_sided=True),
    )
}
