"""The measures and guards a declared claim names (``fedsweep.specs.claims``): one registry.

A **measure** is a small function giving one number per seed: of one curve in one panel
(``scope="curve"``: ``fn(data, panel, label, after) -> {seed: value}``, a value being a float or,
censored, a ``(low, high)`` pair: rounds to a target not reached within T are only known to be
> T), or of a panel itself (``scope="panel"``: ``fn(data, panel, after)``, e.g. BHerd's client
distances). Its declaration says whether lower is better (what "faster" / "first" read) and
whether a comparison of two curves is relative (a loss AUC: ``(base − claimed) / base``) or a
ratio on a log scale (``ratio``: ``log2(base / claimed)``, a speed-up in rounds; censored
values give its bounds). Built in: ``loss_auc``, ``final_loss``, ``final_acc``, ``best_acc``,
``loss_rises`` (a count), ``loss_oscillation`` (the rises' size: their sum as a share of the
loss's drop, what a figure shows), ``rounds_to_target``, ``log2_speedup`` (the rounds to the target, compared as
``log2(R_versus / R_claimed)``: McMahan et al.'s speed-up, 1 = twice as fast); a paper registers its own (``dashboards.papers.<paper>.measures``) with
:func:`measure`. A measure about the end of a run (``end_of_run``: a final or best value, the
plateau's oscillation) is not tested by a run cut short of the paper's horizon: a claim that
reads one is not testable in a ``truncated`` regime (:func:`regimes_that_test`).

A **guard** is a named test ``fn(data, panel_or_None, labels) -> reason | None``: a claim's
``leave_out`` guards leave a panel out (e.g. a curve that never updated the model), its
``inconclusive_if`` guards make it hold "by construction" (the statistics shown, the verdict
inconclusive).

Reading a curve's cell counts it as read (``ClaimData.per_seed``): a diverged seed then makes
the claim not testable, unless the claim's curve reference says what a failed seed counts as
(``failed: last`` or ``chance``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from fedsweep.data.catalog import TEST_SIZES
from fedsweep.judge.runs import ClaimData, rises, seed_reach
from fedsweep.specs.claims import MEASURE_NEEDS, Needs

Value = float | tuple[float, float]


@dataclass(frozen=True)
class MeasureDef:
    """A registered measure (the module's docstring)."""

    name: str
    fn: Callable[..., dict[int, Value]]
    what: str
    lower_is_better: bool
    relative: bool = False
    scope: Literal["curve", "panel"] = "curve"
    #: the metric a failed seed's chance level applies to ("test_acc" measures)
    accuracy: bool = False
    #: a comparison of two curves is ``log2(base / claimed)`` (lower is better) or
    #: ``log2(claimed / base)``: a speed-up on a log scale
    ratio: bool = False
    #: the smallest step the measure moves in on one curve (a count: 1; an accuracy: 1 / the
    #: test images, :func:`accuracy_step`), a number or ``fn(data, label) -> step | None``; an
    #: effect's interval is never narrower than ± it (issue 51, item 3: three seeds at the
    #: same quantised value prove nothing); None: continuous (a loss to float precision)
    resolution: float | Callable[..., float | None] | None = None
    #: the measure is about the end of a run (a final or best value, the plateau's
    #: oscillation): a run cut short of the paper's horizon (a ``truncated`` regime) cannot
    #: test it; False: about the whole run from its start (a loss AUC, rounds to a target), which
    #: the first T rounds test as far as they go
    end_of_run: bool = False
    #: the metric keys it reads (``client/{i}/...``: one per client), which the judge loads
    #: beside the spec's ``metrics``
    metrics: tuple[str, ...] = ()

    @property
    def needs(self) -> Needs:
        """What it needs beyond a curve's runs (``fedsweep.specs.claims.MEASURE_NEEDS``: a
        sweep checks it there without importing this module)."""
        return MEASURE_NEEDS.get(self.name, Needs())


MEASURES: dict[str, MeasureDef] = {}
GUARDS: dict[str, Callable[..., str | None]] = {}
#: guard name -> the metric keys it reads beyond its claim's measures (loaded by the judge)
GUARD_METRICS: dict[str, tuple[str, ...]] = {}
#: name -> ``fn(configs) -> text | None``: a reconstruction the runs of a figure depend on
#: (``configs``: the typed configs of its trials), named after every claim's numbers ("[τ rule R1
#: (our reconstruction)]"): a verdict that rests on our reading says so
LABELS: dict[str, Callable[..., str | None]] = {}


def measure(
    name: str,
    what: str,
    *,
    lower_is_better: bool,
    relative: bool = False,
    scope: Literal["curve", "panel"] = "curve",
    accuracy: bool = False,
    ratio: bool = False,
    end_of_run: bool = False,
    resolution: float | Callable[..., float | None] | None = None,
    needs: Needs | None = None,
    metrics: tuple[str, ...] = (),
):
    """Register ``fn`` as the measure ``name`` (a name given twice is an error at import);
    ``needs``: what it needs beyond a curve's runs, recorded in
    ``fedsweep.specs.claims.MEASURE_NEEDS`` (a built-in measure's stand there already)."""

    def add(fn):
        if name in MEASURES:
            raise ValueError(f"measure {name!r} is registered twice")
        if needs is not None:
            MEASURE_NEEDS[name] = needs
        MEASURES[name] = MeasureDef(
            name, fn, what, lower_is_better, relative, scope, accuracy, ratio, resolution,
            end_of_run, tuple(metrics),
        )  # fmt: skip
        return fn

    return add


def label(name: str):
    """Register ``fn`` as the label ``name`` (:data:`LABELS`)."""

    def add(fn):
        if name in LABELS:
            raise ValueError(f"label {name!r} is registered twice")
        LABELS[name] = fn
        return fn

    return add


def guard(name: str, *, metrics: tuple[str, ...] = ()):
    """Register ``fn`` as the guard ``name``; ``metrics``: the keys it reads (:data:`GUARD_METRICS`)."""

    def add(fn):
        if name in GUARDS:
            raise ValueError(f"guard {name!r} is registered twice")
        GUARDS[name] = fn
        GUARD_METRICS[name] = tuple(metrics)
        return fn

    return add


def metrics_read(claims) -> list[str]:
    """The metric keys the declared ``claims`` read (their measures', ``tune.by`` measures' and
    guards' declared ``metrics``), sorted; the judge loads them beside the spec's ``metrics``."""
    keys: set[str] = set()
    for claim in claims:
        guards = [*claim.leave_out, *claim.inconclusive_if, *claim.vacuous_if]
        for comp in claim.comparisons:
            names = [comp.measure, *([comp.tune.by] if comp.tune is not None else [])]
            keys.update(k for n in names if n in MEASURES for k in MEASURES[n].metrics)
            guards += [*comp.blocked_if, *comp.degenerate_if]
        keys.update(k for g in guards for k in GUARD_METRICS.get(g, ()))
    return sorted(keys)


def accuracy_step(data: ClaimData, label: str) -> float | None:
    """1 / the test images curve ``label``'s runs are evaluated on (``eval.test_subset``, else
    the data set's test set: ``fedsweep.data.catalog.TEST_SIZES``); None when unknown."""
    curve = next((c for c in data.curves if c.label == label), None)
    if curve is None:
        return None
    config = data.config(curve)
    size = config.eval.test_subset or TEST_SIZES.get(config.data.dataset)
    if size is None:
        return None
    return 1.0 / min(size, TEST_SIZES.get(config.data.dataset, size))


def step_of(m: MeasureDef, data: ClaimData, labels: list[str]) -> float:
    """The measure's resolution over a part's curves (the coarsest of their steps), 0 where it
    has none."""
    if m.resolution is None:
        return 0.0
    if not callable(m.resolution):
        return float(m.resolution)
    steps = [m.resolution(data, label) for label in labels]
    return max((s for s in steps if s is not None), default=0.0)


def _after(how: str, after: int) -> Any:
    """``how`` (a ``ClaimData.per_seed`` reducer) over the rounds after ``after``."""
    if not after:
        return how
    reduce = (
        how
        if callable(how)
        else {
            "mean": lambda s: float(s.mean()),
            "final": lambda s: float(s.iloc[-1]),
            "best": lambda s: float(s.max()),
            "rises": rises,
        }[how]
    )

    def fn(s: pd.Series) -> float:
        s = s[s.index > after]
        return reduce(s) if len(s) else math.nan

    return fn


def _metric(metric: str, how: str):
    def fn(data: ClaimData, panel: str, label: str, after: int = 0, mark: bool = True):
        return data.per_seed(panel, label, metric, _after(how, after), mark=mark)

    return fn


LOSS, ACC = ("test_loss",), ("test_acc",)
measure("loss_auc", "loss AUC (mean test loss over the rounds)", lower_is_better=True,
        relative=True, metrics=LOSS)(_metric("test_loss", "mean"))  # fmt: skip
measure("final_loss", "final test loss", lower_is_better=True, end_of_run=True, metrics=LOSS)(
    _metric("test_loss", "final")
)
measure("final_acc", "final test accuracy", lower_is_better=False, accuracy=True,
        end_of_run=True, resolution=accuracy_step, metrics=ACC)(_metric("test_acc", "final"))  # fmt: skip
measure("best_acc", "best test accuracy", lower_is_better=False, accuracy=True,
        end_of_run=True, resolution=accuracy_step, metrics=ACC)(_metric("test_acc", "best"))  # fmt: skip
measure("loss_rises", "round-to-round rises of the test loss", lower_is_better=False,
        end_of_run=True, resolution=1.0, metrics=LOSS)(_metric("test_loss", "rises"))  # fmt: skip


def oscillation(s: pd.Series) -> float:
    """The sum of a loss history's round-to-round rises as a share of its drop (first − lowest
    value): how much it oscillates on the scale a figure draws it at (0.01: rises adding up to 1%
    of the drop); 0 for a history that never falls."""
    values = s.to_numpy(dtype=float)
    if len(values) < 2:
        return math.nan
    drop = float(values[0] - values.min())
    ups = float(np.clip(np.diff(values), 0.0, None).sum())
    return ups / drop if drop > 0 else 0.0


measure(
    "loss_oscillation",
    "the test loss's round-to-round rises summed, as a share of its drop (first − lowest): "
    "oscillation by its size on the figure's scale",
    lower_is_better=False,
    end_of_run=True,
    metrics=LOSS,
)(_metric("test_loss", oscillation))


@measure(
    "rounds_to_target", "rounds to the profile's target accuracy", lower_is_better=True,
    resolution=1.0, metrics=ACC,
)  # fmt: skip
def rounds_to_target(
    data: ClaimData, panel: str, label: str, after: int = 0, mark: bool = True
) -> dict[int, Value]:
    """Per seed the rounds the run took to reach ``ClaimData.target`` (censored: ``(T + 1,
    inf)`` when not reached within its T rounds); {} without a target."""
    if data.target is None:
        return {}
    if not mark:
        was = (panel, label) in data.used
    reach = seed_reach(data, panel, label, data.target)
    if not mark and not was:
        data.used.discard((panel, label))
    return {s: float(r.rounds) if r.reached else (float(r.low), math.inf) for s, r in reach.items()}


measure(
    "log2_speedup",
    "log2 speed-up in rounds to the profile's target accuracy, log2(R_versus / R_claimed)",
    lower_is_better=True,
    ratio=True,
    metrics=ACC,
)(rounds_to_target)


def regimes_that_test(claim) -> tuple[str, ...]:
    """The regimes whose panels can test a declared claim: its ``regimes`` when it declares
    them; else the paper's and a reconstruction of it, and a ``truncated`` one (the first T of
    the paper's rounds) unless a comparison reads a measure about the end of a run."""
    if claim.regimes is not None:
        return tuple(claim.regimes)
    ends = any(
        (m := MEASURES.get(c.measure)) is not None and m.end_of_run for c in claim.comparisons
    )
    return ("paper", "reconstructed") if ends else ("paper", "reconstructed", "truncated")
