"""``faster``, ``higher``, ``equivalent``: per pair of curves (tuned grids each at its chosen point), the claimed curve's advantage per seed."""

from __future__ import annotations

from fedsweep.judge.kinds.common import (
    NO_SEEDS,
    advantage,
    choose,
    edges_text,
    effects,
    grids,
    pairs,
    ref_of,
    resolve,
    values,
)


def two(claim, comp, data, panel, m, mine, theirs) -> list[tuple] | None:
    """faster / higher / equivalent: per pair of curves (of grids, tuned: each at its chosen
    point), the claimed curve's advantage; ``(name, effect, blocked, curves)`` per part (``absent:
    inconclusive``: a pair without runs of both, or a side a named curve of which the figure
    lacks, is a blocked part)."""
    tuned = comp.tune is not None
    groups = [grids(comp, data, labels) for labels in (mine, theirs)]
    out, have = [], False
    for gc, gv in pairs(comp, data, *groups):
        (c, why_c), (v, why_v) = (choose(claim, comp, data, panel, g) for g in (gc, gv))
        name = f"{c or gc[0]} − {v or gv[0]}"
        if c is None or v is None:
            if comp.absent == "no_data":
                return None
            why = " and ".join(w for w in (why_c, why_v) if w)
            out.append((name, NO_SEEDS, why, [x for x in (c, v) if x]))
            continue
        have = have or tuned
        a = values(data, panel, v, m, ref_of(v, comp.versus, data), claim.after)
        b = values(data, panel, c, m, ref_of(c, comp.curve, data), claim.after)
        seeds = set(a) & set(b)
        if not seeds:
            if comp.absent == "no_data":
                return None
            out.append((name, NO_SEEDS, "no seed with runs of both", [c, v]))
            continue
        have = True
        kind = "faster" if comp.kind == "faster" else "higher"
        ev = effects({s: advantage(m, kind, a[s], b[s]) for s in seeds})
        edges = [e for e in (why_c, why_v) if e]
        out.append((name, ev, edges_text(edges) or None, [c, v]))
    if comp.absent == "inconclusive" and not comp.pair:  # a named curve the figure lacks
        for ref in [*comp.curve, *comp.versus]:
            if not ref.others and not resolve(data, [ref]):
                out.append((ref.text(), NO_SEEDS, f"the spec has no {ref.text()} curve", []))
    return out if have else None
