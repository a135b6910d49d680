"""``fedsweep sweep --plan``: what a sweep would do, without starting Ray or writing anything.

For every trial of a spec under a profile: its id (``figure|profile|panel|curve|seed=N``), its
config hash, the legacy hash where the hash changed (``config.hashing.legacy_config_hash``), and
what the sweep would do with it:

* ``run``: no finished run has its hash; it would be scheduled (with an estimate of its time);
* ``reuse``: a finished or diverged run has its hash (or its legacy hash): skipped;
* ``shared``: an earlier trial of the plan has the same config: they share one run;
* ``derived``: a derived curve whose source has no finished run yet: it runs after the source
  (its config, and so its hash, is known only then);
* ``no data``: its data set (or leash data) is missing and the profile skips such trials.

A curve with a ``search:`` (:mod:`fedsweep.specs.search`) adds its search trials (noted with
their point; an adaptive search's trials appear as it asks them) and its tuned curve (``derived``
until the search has finished).

The estimate of a trial to run is its rounds times the seconds per round of the store's finished
runs of the same figure and profile: the same panel and curve (other seeds) if there are any,
else the same curve, else the whole figure. Without such a run, the figure's finished runs under
its other profiles are scaled by the work of a round (training samples × local epochs: e.g. the
quick profile's CNN rounds on 3,000 images, scaled to the paper's 60,000), with the trial noting
it ("scaled from the quick profile"); evaluation and fixed costs do not scale, so such an
estimate is rough. Trials without either have no estimate. The
sweep's wall time is the trials' sum over the trials that run at once (the CPUs here divided by
a trial's ``resources.cpu``, or ``--max-concurrent``). A trial that asks for more CPUs (or GPUs)
than this machine has can never start on the local Ray: the plan says so instead of a wall
time (``SweepPlan.never_starts``; with ``--address`` the cluster decides, as the sweep checks).
Reading the store never creates it.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fedsweep.data.datasets import resolve_data_root
from fedsweep.specs.figure import FigurePlan, figure_plan
from fedsweep.specs.load import SweepSpec, Trial, load_spec
from fedsweep.specs.search import STOPPED_AT, store_lookup
from fedsweep.sweep.report import duration
from fedsweep.sweep.store_index import stopped_search_runs, trial_runs
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.uri import resolve_tracking_uri, store_missing

RUN, REUSE, SHARED, DERIVED, NO_DATA = "run", "reuse", "shared", "derived", "no data"


@dataclass
class PlannedTrial:
    """One row of a plan (``--json`` prints these fields)."""

    figure: str
    profile: str
    trial_id: str
    config_hash: str
    legacy_hash: str | None
    status: str
    run_id: str | None = None  # the reused run
    matched_by: str | None = None  # "hash" or "legacy hash" (reuse)
    derived_from: str | None = None  # the source curve (derived trials)
    rounds: int = 0
    estimate_s: float | None = None  # run: rounds x the measured seconds per round
    note: str = ""

    def as_json(self) -> dict:
        return asdict(self)


@dataclass
class SweepPlan:
    figure: str
    profile: str
    trials: list[PlannedTrial] = field(default_factory=list)
    workers: int = 1
    data_note: str = ""
    measured_runs: int = 0  # finished runs of the figure the estimates come from
    #: why no trial can start on this machine's Ray (:func:`never_starts`), "" where they can
    never_starts: str = ""

    def count(self, status: str) -> int:
        return sum(t.status == status for t in self.trials)

    @property
    def to_run(self) -> list[PlannedTrial]:
        return [t for t in self.trials if t.status == RUN]

    @property
    def trial_seconds(self) -> float:
        return sum(t.estimate_s or 0.0 for t in self.to_run)

    @property
    def unestimated(self) -> int:
        return sum(t.estimate_s is None for t in self.to_run)

    @property
    def wall_s(self) -> float:
        """The estimated wall time: the trials' seconds over the trials run at once (the
        longest trial at least)."""
        longest = max((t.estimate_s or 0.0 for t in self.to_run), default=0.0)
        return max(self.trial_seconds / max(1, self.workers), longest)


def plan_sweep(
    spec_path: str | Path,
    profile: str,
    *,
    tracking_uri: str | None = None,
    data_dir: str | Path | None = None,
    overrides: dict | None = None,
    max_concurrent: int | None = None,
    check_data: bool = True,
    panels: dict[str, list[str]] | None = None,
    address: str | None = None,
    seeds: list[int] | None = None,
) -> SweepPlan:
    """The plan of one spec under ``profile`` against the store (see the module docstring).
    ``check_data``: look for the data sets as the sweep would (fallbacks, skipped panels);
    ``panels``: only these panels (``--panel``); ``address``: a Ray cluster the sweep attaches
    to (its nodes, not this machine, decide whether a trial can start); ``seeds``: instead of
    the profile's (``--seeds``)."""
    spec = load_spec(spec_path)
    data_root = resolve_data_root(data_dir)
    extra = {"data.root": str(data_root), **(overrides or {})}
    figure = figure_plan(spec, profile, extra=extra, panels=panels, seeds=seeds)
    spec = figure.spec
    uri = resolve_tracking_uri(tracking_uri)
    plan = SweepPlan(spec.figure, profile, workers=_workers(spec, max_concurrent))
    plan.never_starts = "" if address else never_starts(spec)
    skipped: set = set()
    if check_data:
        figure = figure.with_data(data_root)
        plan.data_note = figure.data.note
        kept = {t.trial_id for t in figure.runnable}
        skipped = {t.trial_id for t in figure.trials if t.trial_id not in kept}
    trials = list(figure.trials)
    client = None if store_missing(uri) else get_client(uri, create=False)
    runs = {}
    searched: list[Trial] = []
    if figure.search_curves:  # the search trials asked so far (a random search's all)
        searched = figure.search_state(store_lookup(client) if client else None).trials
    if client is not None:
        runs = trial_runs(client, [t for t in trials if t.derive is None] + searched)
        # a search trial its scheduler stopped early: done for its search (not run again)
        runs.update(stopped_search_runs(client, [t for t in searched if t.config_hash not in runs]))
        trials = _resolve_derived(figure, runs, client)
        runs.update(trial_runs(client, [t for t in trials if t.derive is not None]))
    trials = (
        [t for t in trials if t.derive is None]
        + searched
        + [t for t in trials if t.derive is not None]
    )
    searches = {c.label: c.search for c in figure.search_curves}
    per_round, plan.measured_runs = _round_times(client, spec.figure, profile)
    scaled = _scaled_times(client, spec.figure, profile)
    seen: dict[str, str] = {}
    for t in trials:
        row = PlannedTrial(
            t.figure,
            t.profile,
            t.trial_id,
            t.config_hash,
            t.legacy_hash,
            RUN,
            rounds=t.config.train.rounds,
        )
        run = runs.get(t.config_hash)
        if t.trial_id in skipped:
            row.status, row.note = NO_DATA, plan.data_note
        elif t.unresolved and t.derive.tuned:
            row.status, row.derived_from = DERIVED, t.derive.from_
            search = searches.get(t.derive.from_)
            how = f" ({search.text})" if search is not None else ""
            row.note = (
                f"tuned: the best trial of {t.derive.from_}'s search{how}; runs once the "
                "search has finished"
            )
        elif t.unresolved:
            row.status, row.derived_from = DERIVED, t.derive.from_
            row.note = f"derived from {t.derive.from_}: runs once its run has finished"
        elif run is not None:
            tag = run.data.tags.get("fedsweep.config_hash")
            row.status, row.run_id = REUSE, run.info.run_id
            row.matched_by = "hash" if tag == t.config_hash else "legacy hash"
            at = run.data.tags.get(STOPPED_AT)
            row.note = f"stopped early by ASHA at round {at}" if at else row.note
        elif t.config_hash in seen:
            row.status, row.note = SHARED, f"the same config as {seen[t.config_hash]}"
        else:
            seen[t.config_hash] = t.trial_id
            row.estimate_s = _estimate(per_round, t)
            if row.estimate_s is None:
                row.estimate_s, row.note = _scaled_estimate(scaled, t)
        if t.derive is not None and t.derived_from:
            row.derived_from = t.derive.from_
        if t.search_of:
            point = ", ".join(f"{k}={v}" for k, v in t.search_point)
            row.note = "; ".join(filter(None, [f"search of {t.search_of}: {point}", row.note]))
        plan.trials.append(row)
    return plan


def _workers(spec: SweepSpec, max_concurrent: int | None) -> int:
    """The trials a local Ray runs at once: the CPUs over a trial's, at most ``max_concurrent``."""
    cpus = os.cpu_count() or 1
    workers = max(1, math.floor(cpus / max(spec.resources.cpu, 1e-9)))
    return min(workers, max_concurrent) if max_concurrent else workers


def never_starts(spec: SweepSpec) -> str:
    """Why a local Ray can never start a trial of ``spec`` (its ``resources`` ask for more CPUs
    or GPUs than this machine has; the sweep itself would stop at
    ``ray_backend.check_resources``), "" when it can."""
    cpu, gpu = spec.resources.cpu, spec.resources.gpu
    cpus = os.cpu_count() or 1
    gpus = _local_gpus() if gpu > 0 else 0
    if cpu <= cpus and gpu <= gpus:
        return ""
    return (
        f"each trial asks for resources cpu={cpu:g}, gpu={gpu:g}, but this machine has {cpus} "
        f"CPUs and {gpus} GPUs: no trial can ever start here (lower resources in the spec, or "
        "sweep on a cluster that has them: --address)"
    )


def _local_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no usable CUDA: no GPU
        return 0


def _resolve_derived(figure: FigurePlan, runs, client) -> list[Trial]:
    """The figure's trials, the derived ones resolved from their sources' finished runs (as
    the sweep's second stage does); those whose source has none stay unresolved."""
    if not figure.derived_curves:
        return list(figure.trials)

    def run_of(config_hash: str) -> str | None:
        run = runs.get(config_hash)
        return run.info.run_id if run is not None else None

    return figure.resolve(run_of, client).trials


def _round_times(client, figure: str, profile: str) -> tuple[dict, int]:
    """Seconds per round of the figure's finished runs under ``profile``, by (panel, curve),
    by curve and overall (medians); and how many runs they come from."""
    if client is None:
        return {}, 0
    experiment = client.get_experiment_by_name(figure)
    if experiment is None:
        return {}, 0
    runs = client.search_runs(
        [experiment.experiment_id],
        filter_string=(
            f"tags.`fedsweep.profile` = '{profile}' and tags.`fedsweep.status` = 'finished'"
        ),
        max_results=5000,
    )
    samples: dict[tuple, list[float]] = {}
    count = 0
    for run in runs:
        rounds = run.data.params.get("train.rounds")
        start, end = run.info.start_time, run.info.end_time
        if not rounds or not start or not end or end <= start:
            continue
        per = (end - start) / 1000.0 / max(1, int(float(rounds)))
        tags = run.data.tags
        panel, curve = tags.get("fedsweep.panel"), tags.get("fedsweep.curve")
        for key in _estimate_keys(panel, curve):
            samples.setdefault(key, []).append(per)
        count += 1
    return {k: statistics.median(v) for k, v in samples.items()}, count


#: training images of the data sets fedsweep knows (``data.train_subset`` takes precedence)
TRAIN_SIZES = {"mnist": 60000, "fashion-mnist": 60000, "cifar10": 50000, "cifar100": 50000}
TRAIN_SIZES["mnist-5k"] = 5000


def _work(dataset: str | None, subset, epochs) -> float | None:
    """Training samples a round processes (all clients): the training set times ``E``."""
    try:
        n = int(float(subset)) if subset not in (None, "", "null", "None") else None
    except ValueError:
        n = None
    n = n or TRAIN_SIZES.get(str(dataset))
    try:
        e = float(epochs) if epochs not in (None, "", "null", "None") else 1.0
    except ValueError:
        e = 1.0
    return n * e if n else None


def _scaled_times(client, figure: str, profile: str) -> dict:
    """Seconds per training sample of the figure's finished runs under each *other* profile, by
    (panel, curve), curve and overall (medians), with the profiles they come from. A run's
    seconds per round are its last ``round_time`` where it logged one (a short run's duration
    is mostly loading its data and model, which a long run pays once), else its duration over
    its rounds."""
    if client is None:
        return {}
    experiment = client.get_experiment_by_name(figure)
    if experiment is None:
        return {}
    runs = client.search_runs(
        [experiment.experiment_id],
        filter_string=(
            f"tags.`fedsweep.profile` != '{profile}' and tags.`fedsweep.status` = 'finished'"
        ),
        max_results=5000,
    )
    samples: dict[tuple, list[float]] = {}
    sources: dict[tuple, set] = {}
    for run in runs:
        params, tags = run.data.params, run.data.tags
        rounds = params.get("train.rounds")
        start, end = run.info.start_time, run.info.end_time
        work = _work(
            params.get("data.dataset"),
            params.get("data.train_subset"),
            params.get("train.local_epochs"),
        )
        if not rounds or not work or not start or not end or end <= start:
            continue
        last = run.data.metrics.get("round_time")
        if last is not None and last > 0:
            per = last / work
        else:
            per = (end - start) / 1000.0 / max(1, int(float(rounds))) / work
        for key in _estimate_keys(tags.get("fedsweep.panel"), tags.get("fedsweep.curve")):
            samples.setdefault(key, []).append(per)
            sources.setdefault(key, set()).add(tags.get("fedsweep.profile", "?"))
    return {k: (statistics.median(v), sorted(sources[k])) for k, v in samples.items()}


def _scaled_estimate(scaled: dict, trial: Trial) -> tuple[float | None, str]:
    """``(seconds, note)`` from :func:`_scaled_times`, or ``(None, "")``."""
    cfg = trial.config
    work = _work(cfg.data.dataset, cfg.data.train_subset, cfg.train.local_epochs)
    if not work:
        return None, ""
    for key in _estimate_keys(trial.panel_id, trial.curve):
        if key in scaled:
            per, profiles = scaled[key]
            note = f"scaled from the {' and '.join(profiles)} profile's runs (rough)"
            return per * work * cfg.train.rounds, note
    return None, ""


def _estimate_keys(panel: str | None, curve: str | None) -> tuple[tuple, ...]:
    """Where a trial's seconds per round come from, the closest first: its panel and curve, its
    curve, the whole figure."""
    return ((panel, curve), (curve,), ())


def _estimate(per_round: dict, trial: Trial) -> float | None:
    for key in _estimate_keys(trial.panel_id, trial.curve):
        if key in per_round:
            return per_round[key] * trial.config.train.rounds
    return None


def summary_line(plan: SweepPlan) -> str:
    """``bherd-fig3a [quick]: 54 trials: 12 to run, 40 reused, 2 shared; ≈ 3 min 20 s ...``."""
    parts = [f"{plan.count(RUN)} to run", f"{plan.count(REUSE)} reused"]
    for status, word in ((SHARED, "shared"), (DERIVED, "derived"), (NO_DATA, "without data")):
        if plan.count(status):
            parts.append(f"{plan.count(status)} {word}")
    line = f"{plan.figure} [{plan.profile}]: {len(plan.trials)} trials: {', '.join(parts)}"
    if plan.to_run and plan.never_starts:
        return f"{line}; {plan.never_starts}"
    if plan.to_run:
        known = len(plan.to_run) - plan.unestimated
        if known:
            line += (
                f"; ≈ {duration(plan.wall_s)} of wall time ({duration(plan.trial_seconds)}"
                f" of trials, {plan.workers} at once; from {plan.measured_runs} measured runs)"
            )
        rough = sum(t.note.startswith("scaled from") for t in plan.to_run)
        if rough:
            line += f"; {rough} of them scaled from another profile's runs (rough)"
        if plan.unestimated:
            line += f"; {plan.unestimated} trials without a measured run to estimate from"
    return line
