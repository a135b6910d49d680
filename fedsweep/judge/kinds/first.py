"""``first``: the margin, per seed, by which the best claimed curve beats the best rival (a ranking)."""

from __future__ import annotations

from fedsweep.judge.kinds.common import rank, ref_of


def first(claim, comp, data, panel, m, mine, theirs):
    refs = {c: ref_of(c, comp.curve, data) for c in mine}
    refs |= {c: ref_of(c, comp.versus, data) for c in theirs}
    ev = rank(data, panel, m, mine, theirs, refs, claim.after)
    return None if ev is None else [("", ev)]
