"""``fedsweep sweep FIGURE --until-decided``: add seeds in batches until every claim is decided.

An inconclusive claim usually needs more seeds, not a different reading. This command runs the
figure at its profile's seeds, judges its claims, and while some claim is open it runs more
seeds of the same configs (new Ray Tune trials; the runs it has are reused by config hash) and
judges again, until every claim is decided or the cap (``--max-seeds``) or the time budget
(``--budget``) is reached. Each open claim's ``seeds_needed`` (the seeds that would decide it at
the spread observed) is printed with it; it is an estimate from few seeds, so the loop does not
stop on it.

Looking at the data after every batch and stopping once it decides would inflate the error of
a 95% interval. The looks are planned before the first batch (:func:`look_schedule`: the
profile's seed count, then doubling up to the cap) and every look judges at the level
:func:`fedsweep.judge.stats.look_level` gives for that many looks (the error split evenly over
them, Bonferroni's alpha spending): whatever look a claim is decided at, and whichever the
command stops at, the stated error holds. The verdicts it prints are at that level, and the
report command it prints repeats it (``--seeds``, ``--level``).

:func:`until_decided` is the loop itself, given how to run a batch and how to judge; the CLI
passes the real sweep (``fedsweep.sweep.runner`` through the sweep console) and the real judge
(the figure's claims, built from the store as ``fedsweep report`` does).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: verdicts that more seeds may change (the others are final: decided, not testable, degenerate)
OPEN = "inconclusive"


def look_schedule(start: int, cap: int) -> list[int]:
    """The seed counts the claims are judged at: ``start`` (the profile's seeds), then doubling,
    the last one ``cap`` (``start`` alone when it is at the cap already)."""
    if start < 1 or cap < 1:
        raise ValueError(f"seed counts are >= 1 (got start {start}, cap {cap})")
    looks = [start]
    while looks[-1] < cap:
        looks.append(min(cap, looks[-1] * 2))
    return looks


@dataclass
class Look:
    """One look: how many seeds, at which level, what was open after it and why it stopped."""

    seeds: int
    level: float
    decided: list[str]
    open: list[str]
    needed: dict[str, int | None]
    seconds: float


@dataclass
class Outcome:
    """What the loop did: its looks, the seeds of the last one, and why it stopped."""

    looks: list[Look] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    level: float = 0.95
    stopped: str = ""

    @property
    def open(self) -> list[str]:
        return self.looks[-1].open if self.looks else []


def until_decided(
    seeds: Sequence[int],
    cap: int,
    run_batch: Callable[[list[int]], bool],
    judge: Callable[[list[int], float], list[dict]],
    *,
    budget_s: float | None = None,
    echo: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
) -> Outcome:
    """Run ``seeds`` (``run_batch(seeds)``: every run of those seeds, the ones it has reused;
    True when a trial failed, which stops the loop),
    judge (``judge(seeds, level)``: the claim rows, each with ``id`` or ``claim``, ``verdict`` and
    ``seeds_needed``), and add seeds up to the next planned look while a claim is open; stop at
    ``cap`` seeds, or past ``budget_s`` seconds (a batch that would not fit in what is left, by
    the time a seed took so far, is not started)."""
    from fedsweep.judge.stats import look_level

    seeds = sorted(seeds)
    looks = look_schedule(len(seeds), max(cap, len(seeds)))
    level = look_level(len(looks))
    outcome = Outcome(seeds=list(seeds), level=level)
    began = clock()
    per_seed: float | None = None
    for index, count in enumerate(looks, 1):
        if count > len(seeds):
            added = _next_seeds(seeds, count - len(seeds))
            if budget_s is not None and per_seed is not None:
                left = budget_s - (clock() - began)
                if per_seed * len(added) > left:
                    outcome.stopped = (
                        f"budget: {len(added)} more seeds take about "
                        f"{per_seed * len(added) / 3600:.2g} h, {max(left, 0) / 3600:.2g} h left"
                    )
                    break
            seeds = sorted(seeds + added)
            echo(
                f"until-decided: look {index} of {len(looks)}: adding seeds "
                f"{', '.join(map(str, added))} ({len(seeds)} seeds)"
            )
        start = clock()
        if run_batch(list(seeds)):
            outcome.stopped = f"a trial failed at {len(seeds)} seeds (see above)"
            break
        took = clock() - start
        if index > 1:
            per_seed = took / max(1, count - looks[index - 2])
        elif per_seed is None:
            per_seed = took / max(1, count)
        rows = judge(list(seeds), level)
        look = _look(rows, len(seeds), level, took)
        outcome.looks.append(look)
        outcome.seeds = list(seeds)
        echo(
            f"until-decided: look {index} of {len(looks)}, {len(seeds)} seeds, intervals at "
            f"{100 * level:.4g}%: {len(look.decided)} decided, {len(look.open)} open"
            + (f" ({', '.join(look.open)})" if look.open else "")
        )
        if not look.open:
            outcome.stopped = "every claim decided (or not testable at this profile)"
            break
        if count >= looks[-1]:
            outcome.stopped = f"the cap: {looks[-1]} seeds"
            break
        reachable = [n for n in look.needed.values() if n is not None and n <= looks[-1]]
        if not reachable:  # an estimate from few seeds: said, but the cap is the user's
            echo(
                f"until-decided: at the spread observed no open claim would be decided within "
                f"{looks[-1]} seeds; going on to the cap"
            )
        if budget_s is not None and clock() - began >= budget_s:
            outcome.stopped = f"budget: {budget_s / 3600:.2g} h spent"
            break
    return outcome


def _next_seeds(seeds: list[int], count: int) -> list[int]:
    """The ``count`` smallest seeds not in ``seeds``."""
    have, out, s = set(seeds), [], 0
    while len(out) < count:
        if s not in have:
            out.append(s)
        s += 1
    return out


def _name(row: dict) -> str:
    return str(row.get("id") or row.get("claim") or "?")


def _look(rows: list[dict], seeds: int, level: float, took: float) -> Look:
    decided = [_name(r) for r in rows if r.get("verdict") != OPEN]
    still = [r for r in rows if r.get("verdict") == OPEN]
    return Look(
        seeds,
        level,
        decided,
        [_name(r) for r in still],
        {_name(r): r.get("seeds_needed") for r in still},
        took,
    )


def summary_lines(outcome: Outcome, report_command: str) -> list[str]:
    """The lines the command ends with: why it stopped, each open claim with the seeds it would
    need, and the report at the same seeds and level."""
    lines = [f"until-decided: stopped: {outcome.stopped}"]
    last = outcome.looks[-1] if outcome.looks else None
    if last is not None:
        for name in last.open:
            needed = last.needed.get(name)
            lines.append(
                f"  open: {name}: "
                + (
                    f"about {needed} seeds would decide it at the spread observed"
                    if needed is not None
                    else "no seed count up to 1000 decides it at the spread observed"
                )
            )
    lines.append(f"  the verdicts at these seeds and this level: {report_command}")
    return lines


def level_text(level: float) -> str:
    """``--level`` as the report command repeats it (enough digits to be the same level)."""
    return f"{level:.6g}" if not math.isclose(level, 0.95) else "0.95"
