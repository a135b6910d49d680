"""``monotone``: each step up the config key ``over`` beats the step below, per seed."""

from __future__ import annotations

from fedsweep.judge.kinds.common import advantage, effects, ordered


def monotone(claim, comp, data, panel, m, mine, theirs):
    grid = ordered(comp, data, mine)
    have = [(v, c) for v, c in grid if m.fn(data, panel, c, claim.after, mark=False)]
    out = []
    for (v0, c0), (v1, c1) in zip(have, have[1:], strict=False):
        a = m.fn(data, panel, c0, claim.after)
        b = m.fn(data, panel, c1, claim.after)
        seeds = set(a) & set(b)
        if seeds:
            kind = "faster" if m.lower_is_better else "higher"
            ev = effects({s: advantage(m, kind, a[s], b[s]) for s in seeds})
            out.append((f"{comp.over.rsplit('.', 1)[-1]}={v0:g}→{v1:g}", ev))
    return out or None
