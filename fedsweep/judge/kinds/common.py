"""What the kinds share: a curve's per-seed values with its failure rule, a claimed side's advantage per seed, tuned grids and their chosen points, pairs of curves, a ranking's margin."""

from __future__ import annotations

import json
import math
from typing import Any

from fedsweep.judge.evidence import Bounds, grid_edge
from fedsweep.judge.measures import MEASURES, MeasureDef
from fedsweep.judge.runs import ClaimData
from fedsweep.judge.stats import Evidence, interval
from fedsweep.specs.claims import Comparison, CurveRef

NO_SEEDS = interval([])


def values(
    data: ClaimData, panel: str, label: str, m: MeasureDef, ref: CurveRef | None, after: int
) -> dict[int, Any]:
    """Seed -> the measure of one cell; a failed seed counted as ``ref.failed`` says."""
    failed = ref.failed if ref is not None else "untestable"
    if failed == "untestable":
        return m.fn(data, panel, label, after)
    out = m.fn(data, panel, label, after, mark=False)
    bad = data.failed_seeds(panel, label)
    if failed == "last":
        out.update(dict.fromkeys(bad, math.inf if m.lower_is_better else -math.inf))
        if not bad:
            data.used.add((panel, label))
    else:  # chance: the failure is the evidence
        chance = data.chance(label)
        out.update(dict.fromkeys(bad, 0.1 if chance is None else chance))
    return out


def resolve(data: ClaimData, refs, exclude=()) -> list[str]:
    """The labels ``refs`` name among the figure's curves (spec order; ``others``: every curve),
    each once, none of ``exclude`` (the other side's); ``{set: ...}`` by typed config
    (:meth:`ClaimData.names`)."""
    return [
        c.label
        for c in data.curves
        if c.label not in exclude
        and any((r.others and r.admits(c)) or data.names(r, c) for r in refs)
    ]


def ref_of(label: str, refs: list[CurveRef], data: ClaimData) -> CurveRef | None:
    for ref in refs:
        if any(c.label == label and (data.names(ref, c) or ref.others) for c in data.curves):
            return ref
    return None


def log2_ratio(a: float, b: float) -> float:
    """``log2(a / b)`` of rounds (``a`` finite or infinite, ``b`` ≥ 0): ∞ for ``b = 0``, −∞
    for a ratio of 0."""
    x = math.inf if b == 0 else a / b
    return -math.inf if x <= 0 else math.log2(x)


def advantage(m: MeasureDef, kind: str, base: Any, mine: Any) -> Any:
    """The claimed value's advantage over ``base`` on one seed: a relative reduction (a
    relative lower-is-better measure, ``faster``), ``log2(base / mine)`` (a ``ratio`` measure,
    lower is better; else ``log2(mine / base)``), ``base − mine`` (lower is better) or ``mine −
    base``; censored values give ``(low, high)``."""
    if isinstance(base, tuple) or isinstance(mine, tuple):
        b0, b1 = base if isinstance(base, tuple) else (base, base)
        m0, m1 = mine if isinstance(mine, tuple) else (mine, mine)
        if m.ratio:
            if m.lower_is_better:
                return (log2_ratio(b0, m1), log2_ratio(b1, m0))
            return (log2_ratio(m0, b1), log2_ratio(m1, b0))
        if m.lower_is_better and kind == "faster":
            return (b0 - m1, b1 - m0)
        return (m0 - b1, m1 - b0)
    if m.ratio:
        return log2_ratio(base, mine) if m.lower_is_better else log2_ratio(mine, base)
    if kind == "faster" and m.lower_is_better:
        if m.relative:
            return (base - mine) / base if base else math.nan
        return base - mine
    return mine - base


def effects(pairs: dict[int, Any]) -> Evidence | Bounds | None:
    if not pairs:
        return None
    seeds = sorted(pairs)
    if any(isinstance(v, tuple) for v in pairs.values()):
        low = {s: v[0] if isinstance(v, tuple) else v for s, v in pairs.items()}
        high = {s: v[1] if isinstance(v, tuple) else v for s, v in pairs.items()}
        return Bounds(low, high)
    return interval([pairs[s] for s in seeds], seeds)


def grids(comp: Comparison, data: ClaimData, labels: list[str]) -> list[list[str]]:
    """One side's curves as grids: each curve its own, or (``tune``) those whose typed configs
    differ only in the keys ``tune.over``, in spec order."""
    if comp.tune is None:
        return [[label] for label in labels]
    out: dict[str, list[str]] = {}
    for label in labels:
        out.setdefault(config_without(data, label, comp.tune.over), []).append(label)
    return list(out.values())


def config_of(data: ClaimData, label: str) -> dict[str, Any]:
    curve = next(c for c in data.curves if c.label == label)
    return data.config(curve).model_dump(mode="json")


def config_without(data: ClaimData, label: str, keys) -> str:
    """The typed config of curve ``label`` without ``keys``, as text (to compare curves)."""
    dump = config_of(data, label)
    for key in keys:
        *head, last = key.split(".")
        node = dump
        for h in head:
            node = node.get(h, {})
        node.pop(last, None)
    return json.dumps(dump, sort_keys=True)


def config_value(data: ClaimData, label: str, key: str) -> Any:
    node: Any = config_of(data, label)
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def choose(claim, comp, data, panel, grid: list[str]) -> tuple[str | None, str | None]:
    """(the grid point a tuned comparison reads in ``panel``, the reason it blocks: its grid's
    edge), or (None, why none): the best seed mean of ``tune.by`` among the points without a
    failed seed (a tie: the first in spec order); the edge is ``tune.over[0]``'s smallest or
    largest value among the points with runs (a failed one counts: that side is worse). Read
    without marking. Untuned: the one curve, (label, None)."""
    if comp.tune is None:
        return grid[0], None
    by = MEASURES[comp.tune.by]
    best: tuple[str, float] | None = None
    ran, failed_any = [], False
    for label in grid:
        failed = data.failed_seeds(panel, label)
        got = by.fn(data, panel, label, claim.after, mark=False)
        if failed or got:
            ran.append(label)
        failed_any = failed_any or bool(failed)
        if failed or not got:
            continue
        mean = math.fsum(got.values()) / len(got)
        if best is None or (mean < best[1] if by.lower_is_better else mean > best[1]):
            best = (label, mean)
    if best is None:
        return None, f"{grid[0]}: " + ("every point failed" if failed_any else "no runs")
    if not comp.tune.over:
        return best[0], None
    key = comp.tune.over[0]
    points = [float(config_value(data, label, key)) for label in ran]
    return best[0], grid_edge(
        points, float(config_value(data, best[0], key)), f"{key} of {best[0]}"
    )


def edges_text(edges: list[str]) -> str:
    """One reason from the :func:`grid_edge` texts of both sides."""
    if len(edges) < 2:
        return "".join(edges)
    head, tail = "grid not converged: ", ": widen it"
    return head + "; ".join(e.removeprefix(head).removesuffix(tail) for e in edges) + tail


def pairs(comp: Comparison, data: ClaimData, mine: list[list[str]], theirs: list[list[str]]):
    """(claimed, other) grid pairs: each with each, or (``pair``) those whose typed configs
    differ only in the keys the two sides set (and ``tune.over``), or (``pair: KEY``) those with
    the same value of that key (the first of each)."""
    if not comp.pair:
        return [(c, v) for c in mine for v in theirs]
    if isinstance(comp.pair, str):
        key = comp.pair

        def rest(label: str) -> str:
            return json.dumps(config_value(data, label, key), sort_keys=True)

        theirs_by: dict[str, list[str]] = {}
        for v in theirs:
            theirs_by.setdefault(rest(v[0]), v)
        out, seen = [], set()
        for c in mine:
            if rest(c[0]) in theirs_by and rest(c[0]) not in seen:
                seen.add(rest(c[0]))
                out.append((c, theirs_by[rest(c[0])]))
        return out
    keys = {k for ref in [*comp.curve, *comp.versus] for k in (ref.set or {})}
    keys |= set(comp.tune.over if comp.tune is not None else ())
    theirs_by = {config_without(data, v[0], keys): v for v in theirs}
    return [
        (c, theirs_by[config_without(data, c[0], keys)])
        for c in mine
        if config_without(data, c[0], keys) in theirs_by
    ]


def rank(data, panel, m, claimed, rivals, refs, after, every=False) -> Evidence | Bounds | None:
    """The margin, per seed, by which the best claimed curve beats the best rival
    (:func:`fedsweep.judge.evidence.rank_margin`, with each side's failure rule); censored values
    give the margin's bounds (the best of a side: the best of its lows, of its highs)."""
    if not claimed or not rivals:
        return None
    got = [values(data, panel, c, m, refs.get(c), after) for c in [*claimed, *rivals]]
    seeds = sorted(set.intersection(*(set(v) for v in got)))
    if not seeds:
        return None
    mine, theirs = got[: len(claimed)], got[len(claimed) :]
    pick = min if m.lower_is_better else max

    def best(side: list[dict[int, Any]], s: int) -> tuple[float, float]:
        spans = [v[s] if isinstance(v[s], tuple) else (v[s], v[s]) for v in side]
        return pick(lo for lo, _ in spans), pick(hi for _, hi in spans)

    def margin(a: float, b: float) -> float:
        if m.ratio:
            return log2_ratio(b, a) if m.lower_is_better else log2_ratio(a, b)
        out = (b - a) if m.lower_is_better else (a - b)
        return out / abs(b) if m.relative and b and math.isfinite(b) else out

    low, high = {}, {}
    for s in seeds:
        (a0, a1), (b0, b1) = best(mine, s), best(theirs, s)
        if m.lower_is_better:
            low[s], high[s] = margin(a1, b0), margin(a0, b1)
        else:
            low[s], high[s] = margin(a0, b1), margin(a1, b0)
    if any(isinstance(v[s], tuple) for v in got for s in seeds):
        return Bounds(low, high)
    return interval([low[s] for s in seeds], seeds)


def ordered(comp: Comparison, data: ClaimData, mine: list[str]) -> list[tuple[Any, str]]:
    out = [(c.set[comp.over], c.label) for c in data.curves if comp.over in c.set]
    if comp.curve:
        out = [(v, label) for v, label in out if label in mine]
    return sorted(out, key=lambda p: p[0])
