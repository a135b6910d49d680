"""Hyperparameter search for one's own studies (issue 52): a curve's ``search:`` over ranges.

A curve may declare ``search: {space, budget, metric, mode, algorithm, seed, parallel}``
(:class:`SearchSpec`). In every panel cell it then has ``budget`` **search trials**: ordinary
fedsweep runs of the curve (logged to MLflow with their config hash, reused by it) at one seed,
each with one point of the space set after the curve's and the profile's layers; and a
**tuned curve** ``"<label> (tuned)"`` (:func:`tuned_curve`), a derived curve
(:mod:`fedsweep.specs.derive`) whose values are the best search trial's point, run over the
figure's seeds and drawn beside the others. The best trial is the one with the best **final**
value (the value at its last logged round) of ``metric`` (``mode: max`` or ``min``) among its
finished or diverged runs; a non-finite value never wins. The search is complete (and the tuned
curve resolvable) once every search trial of the cell has a run.

The points come from Ray Tune's samplers and searchers, never our own:

* ``algorithm: random``: Ray Tune's domains (``tune.loguniform``, ``tune.uniform``,
  ``tune.randint``, ``tune.choice``) sampled with one ``numpy`` generator seeded by ``seed``:
  every point is known before anything runs (``fedsweep sweep --plan`` lists them), and a
  smaller budget (``profiles.<p>.search_budget``) is a prefix of a larger one (its runs are
  reused);
* ``algorithm: optuna``: ``ray.tune.search.optuna.OptunaSearch`` (TPE, seeded by ``seed``)
  asked ``parallel`` points at a time, each batch told the final metric of its runs before
  the next is asked. The search is **replayed** from the store (:func:`search_state`): the same
  seed and the same results give the same points, so a rerun finds every finished trial by its
  config hash and asks only for what is missing.

An optional **early-stopping scheduler** (``scheduler: {kind: asha, grace_period,
reduction_factor}``, :class:`EarlyStop`) is Ray Tune's ``ASHAScheduler`` over each cell's search
trials (one population per panel cell and curve: ``fedsweep.sweep.early_stop``): a trial reports
the metric at its rung rounds and ASHA stops those below the top ``1/reduction_factor`` there.
A stopped trial's run ends ``FINISHED`` with ``fedsweep.status: stopped_early`` and the round in
``fedsweep.stopped_at_round``; it counts as done for its search (a rerun asks nothing again) and
the optuna searcher is told its last value, as Ray Tune tells it, but only trials that ran the
whole horizon can be the best (ASHA lets at least the first one through). A stopped run is never
reused for anything else (its config is trained in full when a curve needs it). Which trials ASHA
stops depends on the order their rung reports arrive: with one trial at a time (the order of the
plan) it is the same on every run; with several at once it may differ, and a rerun of the same
store reuses the recorded outcome.

Floats are rounded to 4 significant digits (readable labels and parameters; the config hash is
taken on the rounded value). A config never runs code: the space is data (numbers, choices).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from fedsweep.core.section import NoBoolNumbers
from fedsweep.core.suggest import did_you_mean
from fedsweep.tracking.direct import STOPPED_STATUS

#: ``fedsweep.specs.model``'s spec and trial (this module sits below it: curves.py imports it)
SweepSpec = Any
Trial = Any

#: the derivation name of a tuned curve's values (``derive.set: {train.lr: tuned}``): the best
#: search trial's value of the key (:mod:`fedsweep.specs.derive`)
TUNED = "tuned"
TUNED_SUFFIX = " (tuned)"
ALGORITHMS = ("random", "optuna")
#: the default seed of a search (its sampler's and its trials'): far from the 0, 1, 2, ... of
#: the figures' seeds
SEARCH_SEED = 1000
MODES = ("max", "min")
KINDS = ("log", "linear", "int", "choice")
SCHEDULERS = ("asha",)
#: the most search trials per panel cell (``search.budget``, ``profiles.<p>.search_budget``):
#: ``fedsweep sweep``'s own bound on a spec's trials (``MAX_TRIALS``); a budget of 10**9 grew
#: past 3 GB of sampled points before anything ran
MAX_SEARCH_BUDGET = 2000
#: keys neither a search nor ``sweep --grid`` may vary, and why: each changes what a curve is
#: (or is set for every trial by the sweep itself) rather than tunes it
NOT_VARIED = {
    "seed": (
        "the seed stream, set for every trial from the seeds (a search's trials run at "
        "search.seed; a grid over it drew seed-0 runs labelled seeds 1 and 2, a search picked "
        "the luckiest seed); more seeds: --seeds or the profile's seeds"
    ),
    "train.rounds": (
        "the horizon the curves are compared over (a search over it planned 521,386-round "
        "trials; ASHA measures time in rounds); set it in base, a profile or with --set"
    ),
}


def not_varied(key: str) -> str | None:
    """Why a search or ``--grid`` may not vary ``key`` (:data:`NOT_VARIED`, or a key the
    config hash leaves out: its curves would be one config, the same runs under several
    labels), None when it may."""
    from fedsweep.config.hashing import HASH_EXCLUDED

    if key in NOT_VARIED:
        return NOT_VARIED[key]
    for excluded in HASH_EXCLUDED:
        if key == excluded or key.startswith(f"{excluded}."):
            return (
                "a setting the config hash leaves out (where or how a run runs, not what it "
                "computes): every value would be the same runs under another label"
            )
    return None


#: ``fedsweep.status`` of a search trial's run that the scheduler stopped early
STOPPED = STOPPED_STATUS
#: tag of such a run: the round it stopped at (its last logged round)
STOPPED_AT = "fedsweep.stopped_at_round"


def tuned_label(label: str) -> str:
    return f"{label}{TUNED_SUFFIX}"


def search_label(label: str, index: int) -> str:
    """The curve label of a search trial (its trial id and run name): ``"FedAvg · search 3"``."""
    return f"{label} · search {index + 1}"


def _round(value: float) -> float:
    return float(f"{value:.4g}")


class SearchRange(NoBoolNumbers):
    """One dimension of a search space: exactly one of ``log: [lo, hi]`` (log-uniform,
    ``0 < lo < hi``), ``linear: [lo, hi]`` (uniform), ``int: [lo, hi]`` (an integer, both
    ends included) or ``choice: [values]``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    log: list[float] | None = None
    linear: list[float] | None = None
    int_: list[int] | None = Field(None, alias="int")
    choice: list[Any] | None = None

    @model_validator(mode="after")
    def _one(self) -> SearchRange:
        given = [k for k in KINDS if self.bounds(k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"a range needs exactly one kind, got {given or 'none'}; allowed: "
                "{log: [lo, hi]}, {linear: [lo, hi]}, {int: [lo, hi]} or {choice: [values]}"
            )
        kind = given[0]
        values = self.bounds(kind)
        if kind == "choice":
            if not values or len({repr(v) for v in values}) != len(values):
                raise ValueError(f"choice: got {values} (allowed: one or more distinct values)")
            return self
        lo_hi_ok = len(values) == 2 and values[0] < values[1]
        if not lo_hi_ok or (kind == "log" and values[0] <= 0):
            floor = "0 < lo < hi" if kind == "log" else "lo < hi"
            raise ValueError(f"{kind}: got {values} (allowed: [lo, hi] with {floor})")
        return self

    def bounds(self, kind: str) -> list | None:
        return self.int_ if kind == "int" else getattr(self, kind)

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if self.bounds(k) is not None)

    @property
    def placeholder(self) -> Any:
        """A valid value for key checks before the search ran: ``lo``, or the first choice."""
        return self.bounds(self.kind)[0]

    @property
    def ends(self) -> list:
        """The values at the ends of the range (every choice): checked against the run schema."""
        values = self.bounds(self.kind)
        return list(values)

    def domain(self):
        """This range as a Ray Tune domain."""
        from ray import tune

        kind, values = self.kind, self.bounds(self.kind)
        if kind == "log":
            return tune.loguniform(*values)
        if kind == "linear":
            return tune.uniform(*values)
        if kind == "int":
            return tune.randint(values[0], values[1] + 1)  # Ray's upper end is exclusive
        return tune.choice(values)

    def clean(self, value: Any) -> Any:
        """A sampled value as the config takes it: a Python number, floats rounded."""
        if hasattr(value, "item"):  # a numpy scalar
            value = value.item()
        if self.kind in ("log", "linear"):
            return _round(float(value))
        if self.kind == "int":
            return int(value)
        return value

    @property
    def text(self) -> str:
        return f"{self.kind}{self.bounds(self.kind)}"


class EarlyStop(NoBoolNumbers):
    """A search's early-stopping scheduler: Ray Tune's ``ASHAScheduler`` (one bracket), with
    rounds as its time: the first decision at round ``grace_period``, the next ones at
    ``grace_period * reduction_factor**k``, each moved to the first evaluated round at or after
    it (``eval.every``), all before the last round (:meth:`rungs`)."""

    model_config = ConfigDict(extra="forbid")

    kind: str = "asha"
    #: rounds every trial runs before it can be stopped
    grace_period: int = Field(ge=1)
    #: a rung keeps the top 1/reduction_factor of the trials that reached it
    reduction_factor: int = Field(3, ge=2)

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        return _one_of("scheduler", value, SCHEDULERS)

    def rungs(self, rounds: int, every: int = 1) -> list[int]:
        """The rounds at which a trial of ``rounds`` rounds evaluated every ``every`` reports
        to the scheduler (empty: the scheduler could never stop it)."""
        out: list[int] = []
        milestone = self.grace_period
        while milestone < rounds:
            at = -(-milestone // every) * every  # the first evaluated round at or after it
            if at < rounds and at not in out:
                out.append(at)
            milestone *= self.reduction_factor
        return out

    @property
    def text(self) -> str:
        return f"ASHA (grace {self.grace_period} rounds, reduction factor {self.reduction_factor})"


class SearchSpec(NoBoolNumbers):
    """A curve's hyperparameter search (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    #: config key -> its range
    space: dict[str, SearchRange] = Field(min_length=1)
    #: search trials per panel cell (``profiles.<p>.search_budget`` replaces it)
    budget: int = Field(ge=1)
    #: the run metric whose final value ranks the trials (one of the spec's ``metrics``)
    metric: str = "test_acc"
    mode: str = "max"
    algorithm: str = "random"
    #: the searcher's seed, and the seed every search trial runs at; by default one outside any
    #: figure's seeds, so that the runs the tuned curve was selected on are not among those it
    #: reports (a seed among them makes that seed's tuned run the selection run itself)
    seed: int = Field(SEARCH_SEED, ge=0)
    #: points asked at once by an adaptive search (optuna); random search asks them all
    parallel: int = Field(1, ge=1)
    #: an early-stopping scheduler over the search trials (None: every trial runs in full)
    scheduler: EarlyStop | None = None

    @field_validator("space")
    @classmethod
    def _space(cls, value: dict[str, SearchRange]) -> dict[str, SearchRange]:
        for key in value:
            why = not_varied(key)
            if why:
                raise ValueError(
                    f"a search cannot vary {key}: it is {why} (allowed: any other config key, "
                    "e.g. train.lr)"
                )
        return value

    @field_validator("budget")
    @classmethod
    def _budget(cls, value: int) -> int:
        return bounded_budget(value)

    @field_validator("mode")
    @classmethod
    def _mode(cls, value: str) -> str:
        return _one_of("mode", value, MODES)

    @field_validator("algorithm")
    @classmethod
    def _algorithm(cls, value: str) -> str:
        return _one_of("algorithm", value, ALGORITHMS)

    def worse(self, a: float, b: float) -> bool:
        """Whether ``a`` ranks below ``b``."""
        return a < b if self.mode == "max" else a > b

    @property
    def text(self) -> str:
        space = ", ".join(f"{k}~{r.text}" for k, r in self.space.items())
        stop = f"; {self.scheduler.text} stops trials early" if self.scheduler else ""
        return (
            f"{self.algorithm} search (seed {self.seed}) over {space}; best final "
            f"{self.metric} ({self.mode}){stop}"
        )


def bounded_budget(value: int | None) -> int | None:
    """``value`` if it is at most :data:`MAX_SEARCH_BUDGET`, else a ``ValueError`` naming it and
    the allowed range (checked when the spec loads, before any point is sampled)."""
    if value is not None and value > MAX_SEARCH_BUDGET:
        raise ValueError(
            f"got {value} (allowed: 1 to {MAX_SEARCH_BUDGET} search trials per panel cell)"
        )
    return value


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(
            f"unknown {name} {value!r}{did_you_mean(value, allowed)}; allowed: {', '.join(allowed)}"
        )
    return value


# ------------------------------------------------------------------------------ points
def random_points(search: SearchSpec, budget: int) -> list[dict[str, Any]]:
    """``budget`` points sampled by Ray Tune's domains from one generator seeded by
    ``search.seed`` (keys in the space's order): a smaller budget is a prefix of a larger."""
    import numpy as np

    rng = np.random.default_rng(search.seed)
    domains = {k: r.domain() for k, r in search.space.items()}
    return [
        {k: search.space[k].clean(d.sample(random_state=rng)) for k, d in domains.items()}
        for _ in range(budget)
    ]


def optuna_searcher(search: SearchSpec):
    """Ray Tune's ``OptunaSearch`` over the space (TPE seeded by ``search.seed``)."""
    import logging

    import optuna
    from ray.tune.search.optuna import OptunaSearch

    optuna.logging.set_verbosity(logging.WARNING)
    space = OptunaSearch.convert_search_space({k: r.domain() for k, r in search.space.items()})
    return OptunaSearch(space=space, metric=search.metric, mode=search.mode, seed=search.seed)


# ------------------------------------------------------------------------------ early stop
def early_stop_of(spec: SweepSpec, trial: Trial) -> dict[str, Any] | None:
    """What a search trial's scheduler needs (``fedsweep.sweep.early_stop``): its population
    (panel cell and curve), the metric and mode, ASHA's settings, the trial's horizon and its
    rung rounds; None for a trial outside a search with a scheduler."""
    if not trial.search_of:
        return None
    curve = next(
        (c for c in spec.profile_curves(trial.profile) if c.label == trial.search_of), None
    )
    search = curve.search if curve is not None else None
    if search is None or search.scheduler is None:
        return None
    rounds, every = trial.config.train.rounds, trial.config.eval.every
    return {
        "group": f"{trial.panel_id} | {trial.search_of}",
        "metric": search.metric,
        "mode": search.mode,
        "grace_period": search.scheduler.grace_period,
        "reduction_factor": search.scheduler.reduction_factor,
        "max_t": rounds,
        "rungs": search.scheduler.rungs(rounds, every),
    }


def scheduler_problems(spec: SweepSpec, profile: str, trials: Iterable[Trial]) -> list[str]:
    """A search scheduler that could never stop some trial of its curve under ``profile`` (in
    a panel whose horizon has no rung before the last round; panels may set their own rounds):
    one line per curve, for the plan to refuse before anything runs."""
    trials = list(trials)
    out = []
    for curve in spec.profile_curves(profile):
        stop = curve.search.scheduler if curve.search is not None else None
        if stop is None:
            continue
        horizons = dict.fromkeys(
            (t.config.train.rounds, t.config.eval.every)
            for t in trials
            if t.curve == curve.label and t.derive is None
        )
        for rounds, every in horizons:
            if stop.rungs(rounds, every):
                continue
            last = (rounds - 1) // every * every  # the last evaluated round before the end
            allowed = f"1 to {last}" if last else "none: no evaluated round before the last"
            out.append(
                f"curves[{curve.label!r}].search.scheduler.grace_period: "
                f"{stop.grace_period} leaves no decision before the last round "
                f"({rounds} rounds under profile {profile!r}, evaluated every {every}); "
                f"allowed: {allowed}"
            )
            break
    return out


# ------------------------------------------------------------------------------ replay
@dataclass(frozen=True)
class Done:
    """A search trial's done run: its id, its metrics' final values, and whether the
    scheduler stopped it early (:data:`STOPPED`)."""

    run_id: str
    metrics: dict[str, float]
    stopped: bool = False


#: config hashes -> {hash: its done run} for those with one
Lookup = Callable[[Iterable[str]], dict[str, Done]]


def store_lookup(client) -> Lookup:
    """A :data:`Lookup` on an MLflow store: each hash's verified finished, diverged or stopped
    early run (``tracking.provenance.verified_done_runs``; a full run before a stopped one) and
    its metrics' final values."""
    from fedsweep.tracking.direct import DONE_STATUSES, load_runs
    from fedsweep.tracking.provenance import verified_done_runs

    def lookup(hashes: Iterable[str]) -> dict[str, Done]:
        wanted = set(hashes)
        full = verified_done_runs(client, wanted)
        ids = {**verified_done_runs(client, wanted - set(full), statuses=(STOPPED,)), **full}
        runs = load_runs(client, (run_id for run_id, _ in ids.values()))
        return {
            h: Done(
                run_id,
                dict(runs[run_id].data.metrics),
                runs[run_id].data.tags.get("fedsweep.status") not in DONE_STATUSES,
            )
            for h, (run_id, _) in ids.items()
            if run_id in runs
        }

    return lookup


@dataclass(frozen=True)
class Best:
    """A finished search's best trial in one panel cell."""

    run_id: str
    point: dict[str, Any]
    value: float


@dataclass
class SearchState:
    """Where a figure's searches stand (:func:`search_state`)."""

    #: the search trials asked so far (all of them for a random search), in order
    trials: list[Trial] = field(default_factory=list)
    #: those of them without a finished or diverged run: what the sweep runs next
    pending: list[Trial] = field(default_factory=list)
    #: (panel id, curve label) -> its best trial, for each finished search
    best: dict[tuple[str, str], Best] = field(default_factory=dict)
    #: the searches (panel id, curve label) not finished: a trial without a run
    open: list[tuple[str, str]] = field(default_factory=list)


def search_state(
    spec: SweepSpec,
    profile: str,
    lookup: Lookup | None,
    expand_points: Callable[[dict[tuple[str, str], list[dict]]], list[Trial]],
    cells: list[str],
) -> SearchState:
    """Replay every search of ``spec`` under ``profile`` against the store (``lookup``; None:
    nothing ran yet). ``expand_points({(panel id, label): [point, ...]})`` gives the search
    trials of those points (:meth:`fedsweep.specs.figure.FigurePlan.search_trials`);
    ``cells``: the plan's panel ids."""
    state = SearchState()
    prof = spec.profiles[profile]
    for curve in spec.profile_curves(profile):
        search = curve.search
        if search is None:
            continue
        budget = prof.search_budget or search.budget
        for cell in cells:
            key = (cell, curve.label)
            if search.algorithm == "random":
                asked = expand_points({key: random_points(search, budget)})
                done = lookup([t.config_hash for t in asked]) if lookup and asked else {}
            else:
                asked, done = _replay_optuna(search, budget, key, lookup, expand_points)
            state.trials += asked
            missing = [t for t in asked if t.config_hash not in done]
            state.pending += missing
            if missing or not asked:
                state.open.append(key)
                continue
            best = _best(search, asked, done)
            if best is not None:
                state.best[key] = best
    return state


def _replay_optuna(search, budget, key, lookup, expand_points):
    """Ask OptunaSearch ``parallel`` points at a time, telling it each batch's results found
    in the store, until a batch has a trial without a run (the pending batch) or the budget is
    spent."""
    searcher = optuna_searcher(search)
    asked: list[Trial] = []
    done: dict[str, Done] = {}
    while len(asked) < budget:
        ids = [f"t{i}" for i in range(len(asked), min(len(asked) + search.parallel, budget))]
        points = [
            {k: search.space[k].clean(v) for k, v in searcher.suggest(i).items()} for i in ids
        ]
        batch = expand_points({key: points})
        # the batch's trial labels count on from the earlier batches'
        batch = [_renumber(t, key[1], len(asked) + j) for j, t in enumerate(batch)]
        asked += batch
        found = lookup([t.config_hash for t in batch]) if lookup else {}
        done.update(found)
        if any(t.config_hash not in found for t in batch):
            break
        for trial_id, t in zip(ids, batch, strict=True):
            value = found[t.config_hash].metrics.get(search.metric, math.nan)
            searcher.on_trial_complete(trial_id, {search.metric: _told(value)})
    return asked, done


def _told(value: float) -> float:
    return value if math.isfinite(value) else math.nan  # optuna marks the trial failed


def _renumber(trial: Trial, label: str, index: int) -> Trial:
    from dataclasses import replace

    return replace(trial, curve=search_label(label, index))


def _best(search: SearchSpec, asked: list[Trial], done: dict[str, Done]) -> Best | None:
    """The trial with the best final value among those that ran the whole horizon (a trial
    the scheduler stopped early is never the best)."""
    best: Best | None = None
    for t in asked:
        run = done[t.config_hash]
        value = run.metrics.get(search.metric)
        if run.stopped or value is None or not math.isfinite(value):
            continue
        if best is None or search.worse(best.value, value):
            best = Best(run.run_id, dict(t.search_point), value)
    return best
