"""``bound``: the measure itself (of a curve, or of the panel) against the line ``margin``."""

from __future__ import annotations

from fedsweep.judge.kinds.common import effects, ref_of, values


def bound(claim, comp, data, panel, m, mine, theirs):
    if m.scope == "panel":
        got = m.fn(data, panel, claim.after)
        ev = effects(got)
        return None if ev is None else [("", ev)]
    out = []
    for c in mine:
        ev = effects(values(data, panel, c, m, ref_of(c, comp.curve, data), claim.after))
        if ev is None:
            return None
        out.append((c if len(mine) > 1 else "", ev))
    return out or None
