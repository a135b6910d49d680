"""One figure's runs as its claims read them.

:class:`RunTable` is what the judge is given (:func:`fedsweep.judge.store.load_runs` reads it
from a store; a test makes one by hand): each run's metric histories, their seed aggregates, the
runs found per (panel, curve), and the seeds that diverged or whose loss blew up.
:class:`ClaimData` is the same runs with what names them (the figure's curves and panels, each
curve's typed config from the plan, the profile's target accuracy), read per seed and per
round by the measures (:mod:`fedsweep.judge.measures`): a measure that reads a (panel, curve)
cell marks it read, so that a diverged seed there makes the claim not testable
(:meth:`ClaimData.unusable`). Each claim is judged on its own :meth:`ClaimData.view`, whose
record of what it read, its evidence rows and its degenerate parts start empty.

Curves are named by their label or by the settings they write, matched as the typed config
reads them (:meth:`ClaimData.names`); a curve's parameters (its learning rate, server
optimizer, hooks, ...) are read from its typed run config (:meth:`ClaimData.config`)."""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fedsweep.config.hashing import drop_unused
from fedsweep.config.load import build_config, set_dotted
from fedsweep.config.schema import RunConfig
from fedsweep.data.catalog import CLASS_COUNTS
from fedsweep.judge.panels import Panel
from fedsweep.judge.reducers import Stat, per_run, stat_of
from fedsweep.judge.stats import Evidence, Verdict, interval
from fedsweep.judge.targets import Reach, rounds_to_target
from fedsweep.specs.claims import CurveRef, same_setting
from fedsweep.specs.figure import FigurePlan
from fedsweep.specs.load import CurveSpec


def curve_configs(plan: FigurePlan) -> dict[str, RunConfig]:
    """Curve label -> the typed config its runs ran with: its first trial's in ``plan`` (the
    first panel, the first seed; the profile's and ``--set`` layers applied, the sections its
    components do not read dropped), with the seed and the run name blanked (what the curve
    computes, not which run)."""
    out: dict[str, RunConfig] = {}
    for trial in plan.trials:
        if trial.curve not in out:
            out[trial.curve] = drop_unused(trial.config).model_copy(update={"seed": 0, "name": ""})
    missing = [c for c in plan.spec.curve_list() if c.label not in out]
    if missing:  # a curve the profile does not run: the config its runs would have
        tree = copy.deepcopy(plan.spec.base)
        for key, value in [
            *plan.spec.panel_cells(plan.profile)[0].overrides.items(),
            *plan.extra.items(),
        ]:
            set_dotted(tree, key, value)
        for curve in missing:
            config = build_config(
                tree, curve.set, source=f"curve {curve.label!r}", files=False, unused="keep"
            )
            out[curve.label] = drop_unused(config)
    return out


_UNREAD = object()


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


@functools.lru_cache(maxsize=4096)
def _typed_setting(key: str, value: str) -> Any:
    """The setting ``key: value`` (JSON text) as the typed config reads it on the defaults
    (``1e-4``, a string in YAML, is 0.0001), or ``_UNREAD`` when the config refuses it alone."""
    try:
        config = build_config({}, {key: json.loads(value)}, files=False, unused="keep")
    except Exception:  # noqa: BLE001 - any refusal: compared as written instead
        return _UNREAD
    return config_value(config, key)


def config_of(curve: CurveSpec, configs: Mapping[str, RunConfig]) -> RunConfig:
    """``configs[curve.label]`` (:func:`curve_configs`), else the curve's own overrides on the
    defaults (a curve of data made by hand, without a plan)."""
    known = configs.get(curve.label)
    if known is not None:
        return known
    return _own_config(json.dumps(curve.set, sort_keys=True, default=repr), curve.label)


@functools.lru_cache(maxsize=4096)
def _own_config(overrides: str, label: str) -> RunConfig:
    return drop_unused(
        build_config(
            {}, json.loads(overrides), source=f"curve {label!r}", files=False, unused="keep"
        )
    )


EPS = 1e-12  # float representation slack at a threshold


def config_value(config: RunConfig, key: str) -> Any:
    """The value of the dotted ``key`` in ``config`` (None where it has none)."""
    node: Any = config.model_dump(mode="json")
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


AGG_COLUMNS = ["panel_id", "curve", "metric", "round", "mean", "std", "n"]


def aggregate(long: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std (0 for one seed) and seed count per (panel, curve, metric, round), over
    the finite values only (a diverged seed's NaN/inf round is dropped)."""
    finite = long[np.isfinite(long["value"].astype(float))]
    if finite.empty:
        return pd.DataFrame(columns=AGG_COLUMNS)
    grouped = finite.groupby(["panel_id", "curve", "metric", "round"], sort=True)["value"]
    agg = grouped.agg(mean="mean", std="std", n="count").reset_index()
    agg["std"] = agg["std"].fillna(0.0)
    return agg[AGG_COLUMNS]


@dataclass(frozen=True)
class RunTable:
    """One figure's finished runs as the judge reads them: the per-run histories (``long``:
    panel_id, curve, seed, run_id, round, metric, value), their seed aggregates (``agg``:
    panel_id, curve, metric, round, mean, std, n), the runs found per (panel_id, curve), and per
    (panel_id, curve) the seeds that diverged (seed, round) or whose loss blew up (seed, tag)."""

    long: pd.DataFrame
    agg: pd.DataFrame
    runs: Mapping[tuple[str, str], int] = field(default_factory=dict)
    diverged: Mapping[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)
    blowups: Mapping[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """No run found (or none with a value)."""
        return not self.runs or self.agg.empty

    @classmethod
    def from_long(cls, long: pd.DataFrame, **cells: Any) -> RunTable:
        """The table of the per-run histories ``long`` (their aggregate computed here); the
        runs found per cell counted from ``long`` unless ``runs`` is given; ``diverged`` and
        ``blowups`` as the fields."""
        runs = cells.pop("runs", None)
        if runs is None:
            counts = long.groupby(["panel_id", "curve"])["run_id"].nunique() if len(long) else {}
            runs = {key: int(n) for key, n in dict(counts).items()}
        return cls(long, aggregate(long), runs, **cells)


Result = tuple[Verdict, str]


@dataclass
class ClaimData:
    """Seed-mean curves of one figure (``store.aggregate`` output) plus what names them."""

    agg: pd.DataFrame  # panel_id, curve, metric, round, mean, std, n
    curves: list[CurveSpec]
    panels: list[Panel]
    #: (panel_id, curve) -> [(seed, round)] of the runs that diverged (non-finite values)
    diverged: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)
    #: (panel_id, curve) -> [(seed, tag text)] of the finished runs whose loss blew up
    blowups: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    #: (panel_id, curve) -> runs found; a cell not given counts its largest seed count ``n``
    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    #: the (panel_id, curve) cells read since the last ``used.clear()`` (by ``series``)
    used: set[tuple[str, str]] = field(default_factory=set, repr=False, compare=False)
    #: the profile's ``target_acc`` (rounds-to-target figures), None when it has none
    target: float | None = None
    #: per-run histories (``store.load_metrics``: panel_id, curve, seed, run_id, round, metric,
    #: value), for criteria about single runs (catastrophic training failures); may be None
    long: pd.DataFrame | None = field(default=None, repr=False)
    #: per-run reductions of ``long`` by (metric, reducer), see :meth:`run_stat`
    reduced: dict[tuple[str, str], pd.DataFrame] = field(
        default_factory=dict, repr=False, compare=False
    )
    #: the statistics of the claim judged on this view (``evidence_row`` per part), read by
    #: :func:`fedsweep.judge.verdicts.judge_claims` once it is judged
    evidence: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)
    #: the parts the claim left out as the same computation on both sides ("Case 1 · FedNova:
    #: why"), read by :func:`fedsweep.judge.verdicts.judge_claims` once it is judged
    degenerate: list[str] = field(default_factory=list, repr=False, compare=False)
    #: curve label -> the typed config its runs ran with (:func:`curve_configs`, from the
    #: figure's plan); a curve not named: its own overrides on the defaults (data made by hand)
    configs: Mapping[str, RunConfig] = field(default_factory=dict, repr=False)
    #: the ``long`` the caches below were made from (:meth:`_memo`), ``long`` grouped by cell
    #: (:meth:`_indexed`; None: not grouped yet) and :meth:`per_seed`'s results
    _cached_of: Any = field(default=None, init=False, repr=False, compare=False)
    _index: dict | None = field(default=None, init=False, repr=False, compare=False)
    _memos: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def view(self, panels: list[Panel] | None = None) -> ClaimData:
        """This data for judging one claim (on ``panels``; None: every panel): what a claim
        reads, its evidence rows and degenerate parts start empty; the caches are shared."""
        out = copy.copy(self)
        out.used, out.evidence, out.degenerate = set(), [], []
        if panels is not None:
            out.panels = list(panels)
        return out

    def config(self, curve: CurveSpec) -> RunConfig:
        """The typed run config of ``curve``'s runs (:attr:`configs`)."""
        return config_of(curve, self.configs)

    def names(self, ref: CurveRef, curve: CurveSpec) -> bool:
        """Whether ``ref`` names ``curve``: a label, or ``{set: {key: value}}`` matched by typed
        config (the curve sets every key, to the value the claim writes as the typed config
        reads both: ``1e-4`` is 0.0001); ``{sets: key}`` and ``unset`` by what the curve sets
        (``fedsweep.specs.claims.CurveRef``)."""
        if ref.set is None or not ref.admits(curve):
            return ref.matches(curve)
        return all(key in curve.set and self._typed_is(curve, key, v) for key, v in ref.set.items())

    def _typed_is(self, curve: CurveSpec, key: str, value: Any) -> bool:
        have, want = _typed_setting(key, _text(curve.set[key])), _typed_setting(key, _text(value))
        if have is _UNREAD or want is _UNREAD:  # a value the config refuses alone: as written
            return same_setting(curve.set[key], value)
        return same(have, want)

    def chance(self, label: str) -> float | None:
        """Chance accuracy of curve ``label``'s runs: 1 / the classes of its data set
        (``fedsweep.data.catalog``); None for an unknown curve or data set."""
        curve = next((c for c in self.curves if c.label == label), None)
        if curve is None:
            return None
        counts = CLASS_COUNTS.get(self.config(curve).data.dataset)
        return 1.0 / len(counts) if counts else None

    def run_stat(
        self, panel: str, curve: str, metric: str, how: str = "best", *, mark: bool = True
    ) -> Stat | None:
        """Seed mean ± std of each run's ``metric`` reduced by ``how`` (``reducers``: "best" =
        max over rounds, "final" = last finite round), from the per-run histories ``long``;
        None without runs (or without ``long``). ``mark``: count the cell as read (as
        ``series`` does); False to compare candidates, e.g. a learning-rate grid."""
        if mark:
            self.used.add((panel, curve))
        if self.long is None:
            return None
        key = (metric, how)
        if key not in self.reduced:
            self.reduced[key] = per_run(self.long, metric, how)
        return stat_of(self.reduced[key], panel, curve)

    def per_seed(
        self,
        panel: str,
        curve: str,
        metric: str,
        how: str | Callable[[pd.Series], float] = "final",
        *,
        mark: bool = True,
    ) -> dict[int, float]:
        """Seed -> one number per run of the cell: ``how`` = "final" (the last finite round),
        "best" (max over rounds), "mean" (the mean over rounds: the per-run loss AUC / T),
        "first" (the first finite round), "rises" (round-to-round increases, :func:`rises`), or
        a function of the run's history (:meth:`seed_series`). ``mark``: count the cell as
        read (a diverged seed then makes the claim not testable)."""
        key = (panel, curve, metric, how) if isinstance(how, str) else None
        memo = self._memo()
        if key is not None and key in memo:  # the same cell read again (another part, pair)
            if mark:
                self.used.add((panel, curve))
            return dict(memo[key])
        sel = self._cell(panel, curve, metric, mark)
        if sel.empty:
            out: dict[int, float] = {}
        elif how == "mean":
            out = {int(s): float(v) for s, v in sel.groupby("seed")["value"].mean().items()}
        elif callable(how) or how in ("first", "rises"):
            fn = {"first": lambda s: float(s.iloc[0]), "rises": rises}.get(how, how)
            runs = self.seed_series(panel, curve, metric, mark=False)
            out = {seed: float(fn(s)) for seed, s in runs.items()}
        else:
            rows = per_run(sel, metric, how)
            out = {int(s): float(v) for s, v in zip(rows["seed"], rows["value"], strict=True)}
        if key is not None:
            memo[key] = dict(out)
        return out

    def seed_series(
        self, panel: str, curve: str, metric: str, *, mark: bool = True
    ) -> dict[int, pd.Series]:
        """Seed -> the run's ``metric`` history of one cell (indexed by round, finite values
        only; a run without a finite value has no entry). ``mark`` as in :meth:`per_seed`."""
        sel = self._cell(panel, curve, metric, mark)
        return {
            int(seed): g.set_index("round")["value"].astype(float).sort_index()
            for seed, g in sel.groupby("seed")
        }

    def _cell(self, panel: str, curve: str, metric: str, mark: bool) -> pd.DataFrame:
        """The finite per-run rows of one (panel, curve, metric) cell of ``long``; ``mark``:
        count the cell as read."""
        if mark:
            self.used.add((panel, curve))
        if self.long is None or self.long.empty:
            return pd.DataFrame(columns=["seed", "round", "value"])
        cells = self._indexed()
        if (panel, curve, metric) not in cells:
            return self.long.iloc[0:0]
        return cells[(panel, curve, metric)]

    def _indexed(self) -> dict[tuple[str, str, str], pd.DataFrame]:
        """``long``'s finite rows per (panel_id, curve, metric), in ``long``'s order: grouped
        once per ``long`` (a test or caller that sets another ``long`` gets a new index), so a
        cell is a lookup, not three masks over the whole table."""
        self._memo()  # (a new ``long``: both caches start empty)
        if self._index is None:
            long = self.long
            finite = long[np.isfinite(long["value"].to_numpy(dtype=float))]
            self._index = {
                key: group
                for key, group in finite.groupby(["panel_id", "curve", "metric"], sort=False)
            }
        return self._index

    def _memo(self) -> dict:
        """:meth:`per_seed`'s results by (panel, curve, metric, reducer) for this ``long``;
        a ``long`` set since empties this and :meth:`_indexed`'s cache."""
        if self._cached_of is not self.long:
            self._cached_of, self._index, self._memos = self.long, None, {}
        return self._memos

    def series(self, panel: str, curve: str, metric: str) -> pd.Series:
        self.used.add((panel, curve))
        a = self.agg
        sel = a[(a["panel_id"] == panel) & (a["curve"] == curve) & (a["metric"] == metric)]
        s = sel.set_index("round")["mean"].sort_index().astype(float)
        return s[s.map(math.isfinite)]

    def peek(self, panel: str, curve: str, metric: str) -> pd.Series:
        """``series`` without marking the cell as read (to choose among curves, e.g. the best
        grid point, before reading the chosen one)."""
        was_read = (panel, curve) in self.used
        s = self.series(panel, curve, metric)
        if not was_read:
            self.used.discard((panel, curve))
        return s

    def curve_where(self, key: str, value) -> str | None:
        """Label of the curve whose overrides set ``key`` to ``value``."""
        for c in self.curves:
            if key in c.set and same(c.set[key], value):
                return c.label
        return None

    def curve_matching(self, **conds) -> str | None:
        """Label of the first curve whose overrides set every dotted key (``__`` for ``.``)
        to the given value, e.g. ``curve_matching(algorithm="fedavg", selector="bherd")``."""
        want = {k.replace("__", "."): v for k, v in conds.items()}
        for c in self.curves:
            if all(k in c.set and same(c.set[k], v) for k, v in want.items()):
                return c.label
        return None

    def curves_with(self, key: str) -> list[tuple[object, str]]:
        """(value, label) of every curve that sets ``key``, sorted by value."""
        pairs = [(c.set[key], c.label) for c in self.curves if key in c.set]
        return sorted(pairs, key=lambda p: p[0])

    def cases(self) -> list[Panel]:
        return [p for p in self.panels if "data.partition" in p.values] or self.panels

    def failed_seeds(self, panel: str, curve: str) -> dict[int, str]:
        """Seed -> "diverged at round r" / "loss blew up: <tag>" of the cell's runs that are no
        evidence of convergence (read without marking the cell as used)."""
        out = {s: f"loss blew up ({text})" for s, text in self.blowups.get((panel, curve), [])}
        out.update({s: f"diverged at round {r}" for s, r in self.diverged.get((panel, curve), [])})
        return out

    def unusable(self, cells) -> tuple[int, int, int]:
        """(diverged, blown up, total) run counts over ``cells`` ((panel_id, curve) pairs); a
        seed both diverged and blown up counts as diverged."""
        div = blow = total = 0
        a = self.agg
        for key in sorted(cells):
            d = {s for s, _ in self.diverged.get(key, [])}
            b = {s for s, _ in self.blowups.get(key, [])} - d
            div, blow = div + len(d), blow + len(b)
            if key in self.runs:
                total += self.runs[key]
            else:
                sel = a[(a["panel_id"] == key[0]) & (a["curve"] == key[1])]
                total += max(int(sel["n"].max()) if len(sel) else 0, len(d | b))
        return div, blow, total


# ------------------------------------------------------------------------------ helpers
def same(a, b) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b))
    return a == b


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    return "inf (diverged)" if math.isinf(x) else f"{x:.{digits}f}"


def missing_curve(*named: tuple[str | None, str]) -> str | None:
    """The description of the first curve that the spec does not define, if any."""
    for label, what in named:
        if label is None:
            return f"the spec has no {what} curve"
    return None


def rises(s: pd.Series) -> int:
    """Number of round-to-round increases of a curve."""
    return int((s.diff().dropna() > 0).sum())


def rounds_of(data: ClaimData) -> int:
    """T of a figure: the last round of its longest curve."""
    return int(data.agg["round"].max()) if len(data.agg) else 0


def paired_effect(
    data: ClaimData,
    panel: str,
    base: str,
    other: str,
    metric: str,
    how: str = "final",
    *,
    relative: bool = False,
    mark: bool = True,
) -> Evidence | None:
    """Per seed ``other − base`` of the cell values (``ClaimData.per_seed``), paired by seed
    (the same seed: the same partition and initial model), with its 95% interval; with
    ``relative``, ``(base − other) / base`` (a relative reduction, e.g. of the loss AUC). None
    when the two curves share no seed."""
    a = data.per_seed(panel, base, metric, how, mark=mark)
    b = data.per_seed(panel, other, metric, how, mark=mark)
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    if relative:
        effects = [(a[s] - b[s]) / a[s] if a[s] else math.nan for s in seeds]
    else:
        effects = [b[s] - a[s] for s in seeds]
    return interval(effects, seeds)


def seed_reach(
    data: ClaimData, panel: str, curve: str, target: float, metric: str = "test_acc"
) -> dict[int, Reach]:
    """Seed -> when that run's ``metric`` first reached ``target`` (a run that never does: not
    reached within its last round, :class:`dashboards.targets.Reach`)."""
    out = {}
    for seed, s in data.seed_series(panel, curve, metric).items():
        reach = rounds_to_target(s, target)
        if reach is not None:
            out[seed] = reach
    return out
