"""Read finished sweep runs back from MLflow into pandas.

Runs are found **by config hash**, never by figure tag: a trial whose config already ran under
another figure (fig4d reuses fig4abc's runs) is skipped by the sweep driver and never logged
under its own figure. One search over all experiments collects every done run
(``fedsweep.status`` finished or diverged); each trial of the figure's plan
(``fedsweep.specs.figure.figure_plan``) then picks
the latest run with its hash, falling back to the profile's ``data_fallback`` data set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fedsweep.judge.measures import metrics_read
from fedsweep.judge.runs import RunTable, aggregate
from fedsweep.specs.figure import FigurePlan, figure_plan
from fedsweep.specs.load import SweepSpec, Trial
from fedsweep.tracking.direct import DONE_STATUSES as DONE

#: set on a finished run whose loss grew past ``tracking.blowup_factor`` x its first value
#: (fedsweep/tracking/tracked_run.py): finite, but no evidence of convergence
BLOWUP_TAG = "fedsweep.loss_blowup"  # = fedsweep.tracking.tracked_run.BLOWUP_TAG


#: MLflow (3.17) tag filters have no IN; select runs with a hash, filter the status in Python
HASH_FILTER = "tags.`fedsweep.config_hash` IS NOT NULL"


LONG_COLUMNS = ["figure", "panel_id", "curve", "seed", "run_id", "round", "metric", "value"]


DATASET_NAMES = {
    "mnist": "MNIST",
    "fashion-mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
}


@dataclass(frozen=True)
class RunInfo:
    """One done MLflow run (the fields the dashboards need)."""

    run_id: str
    config_hash: str
    status: str
    start_time: int
    tags: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: the metric keys the run logged (``client/0/dist``, ``test_acc``, ...)
    metrics: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    #: where its artifacts lie (its ``config.yaml``: the provenance check reads it)
    artifact_uri: str = field(default="", compare=False, repr=False)


class RunIndex:
    """Every done run of a tracking store, keyed by config hash (latest run wins). Given a
    ``check`` (``fedsweep.tracking.provenance.DrawnRuns``: what :meth:`load` gives it), the run
    of a hash is its latest whose logged config hashes to the tag, as a sweep adopts one: a
    forged or corrupted one is skipped with one warning naming it."""

    def __init__(self, runs: Iterable[RunInfo] = (), check=None):
        self.by_hash: dict[str, RunInfo] = {}
        self.check = check
        ranked: dict[str, list[tuple[int, int, RunInfo]]] = {}
        for i, run in enumerate(runs):
            old = self.by_hash.get(run.config_hash)
            if old is None or run.start_time >= old.start_time:
                self.by_hash[run.config_hash] = run
            ranked.setdefault(run.config_hash, []).append((run.start_time, i, run))
        #: each hash's runs, the latest first (the one ``by_hash`` holds first)
        self.candidates = {h: [r for *_, r in sorted(rs, reverse=True)] for h, rs in ranked.items()}
        self._drawn: dict[str, RunInfo | None] = {}

    def save(self) -> None:
        """Keep the provenance verdicts of this build (``DrawnRuns.save``)."""
        if self.check is not None:
            self.check.save()

    @classmethod
    def load(cls, client) -> RunIndex:
        """One paged search over all experiments; keeps the finished/diverged runs, each
        checked before it is drawn (``fedsweep.tracking.provenance.DrawnRuns``)."""
        from fedsweep.tracking.provenance import DrawnRuns

        experiments = [e.experiment_id for e in client.search_experiments()]
        runs: list[RunInfo] = []
        token = None
        while experiments:
            page = client.search_runs(
                experiments, filter_string=HASH_FILTER, max_results=5000, page_token=token
            )
            for run in page:
                tags = run.data.tags
                h = tags.get("fedsweep.config_hash")
                if h and tags.get("fedsweep.status") in DONE:
                    info = RunInfo(
                        run.info.run_id,
                        h,
                        tags["fedsweep.status"],
                        run.info.start_time or 0,
                        tags,
                        frozenset(run.data.metrics),
                        run.info.artifact_uri or "",
                    )
                    runs.append(info)
            token = page.token
            if not token:
                break
        return cls(runs, DrawnRuns(client))

    @property
    def metric_keys(self) -> set[str]:
        """Every metric key logged by a run of the index."""
        return {key for run in self.by_hash.values() for key in run.metrics}

    def get(self, config_hash: str) -> RunInfo | None:
        if self.check is None:
            return self.by_hash.get(config_hash)
        if config_hash not in self._drawn:
            self._drawn[config_hash] = next(
                (
                    run
                    for run in self.candidates.get(config_hash, ())
                    if not self.check.problem(run.run_id, config_hash, run.artifact_uri)
                ),
                None,
            )
        return self._drawn[config_hash]

    def find(self, trial: Trial) -> RunInfo | None:
        """The trial's run: tagged with its config hash, else with its legacy hash (runs
        hashed before 2026-11-25 with base sections the trial does not use)."""
        return next((run for h in trial.hashes if (run := self.get(h))), None)

    def __len__(self) -> int:
        return len(self.by_hash)


@dataclass(frozen=True)
class TrialRun:
    """A trial of the figure and the run that carries its numbers."""

    trial: Trial
    run: RunInfo
    fallback: bool = False  # found under the profile's data_fallback data set


@dataclass
class Resolution:
    """Which trials of a figure have a done run, and on which data."""

    trials: list[Trial]
    found: list[TrialRun]
    missing: list[Trial]
    data_note: str = ""

    @property
    def seeds(self) -> list[int]:
        return sorted({tr.trial.seed for tr in self.found})


def resolve_derived(figure: FigurePlan, index: RunIndex, client) -> list[Trial]:
    """The trials of ``figure`` with every derived trial (a ``derive:`` curve) given its real
    config, computed from its source trial's done run as the sweep did
    (:meth:`FigurePlan.resolve`): until then its config hash is a placeholder that matches no
    run. Without a client, or a source without a run, the trial stays unresolved (counted as
    missing)."""
    trials = list(figure.trials)
    if client is None or not any(t.derive is not None for t in trials):
        return trials

    def run_of(config_hash: str) -> str | None:
        run = index.get(config_hash)
        return run.run_id if run is not None else None

    return figure.resolve(run_of, client).trials


def resolve_runs(
    spec: SweepSpec,
    profile: str,
    index: RunIndex,
    overrides: dict[str, Any] | None = None,
    client=None,
    *,
    plan: FigurePlan | None = None,
) -> Resolution:
    """Match each trial of the figure's plan (``plan``, else :func:`figure_plan` of ``spec``
    under ``profile`` with ``overrides``) to a done run by config hash.

    A trial without a run under the configured data set is looked up again with the profile's
    ``data_fallback`` data set; if any run is found that way, ``data_note`` says so. Derived
    trials are resolved from their sources' runs first (``client`` reads the sources'
    histories; without one they count as missing).
    """
    figure = plan if plan is not None else figure_plan(spec, profile, extra=overrides)
    primary = resolve_derived(figure, index, client)
    alt = None
    if figure.fallback is not None:  # the same trials on the profile's data_fallback data sets
        alt = resolve_derived(figure.fallback, index, client)
    found: list[TrialRun] = []
    missing: list[Trial] = []
    for i, trial in enumerate(primary):
        run = index.find(trial)
        if run is not None:
            found.append(TrialRun(trial, run))
            continue
        if alt is not None and alt[i].config_hash != trial.config_hash:
            run = index.find(alt[i])
            if run is not None:
                found.append(TrialRun(alt[i], run, fallback=True))
                continue
        missing.append(trial)
    return Resolution(primary, found, missing, _data_note(primary, found))


def _data_note(primary: list[Trial], found: list[TrialRun]) -> str:
    """E.g. "ran on mnist-5k (full MNIST unavailable)", per data set that fell back."""
    configured = {t.trial_id: t.config.data.dataset for t in primary}
    total = Counter(configured[tr.trial.trial_id] for tr in found)
    fell_back = Counter(
        (configured[tr.trial.trial_id], tr.trial.config.data.dataset) for tr in found if tr.fallback
    )
    parts = []
    for (name, used), n in sorted(fell_back.items()):
        full = f"full {DATASET_NAMES.get(name, name)} unavailable"
        runs = "" if n == total[name] else f"{n} of {total[name]} runs "
        parts.append(f"{runs}ran on {used} ({full})")
    return "; ".join(parts)


def metric_keys(keys: Iterable[str], num_clients: int) -> list[str]:
    """Expand per-client patterns: ``client/{i}/dist`` -> ``client/0/dist`` ... (0-based)."""
    out: list[str] = []
    for key in keys:
        if "{i}" in key:
            out.extend(key.format(i=i) for i in range(num_clients))
        else:
            out.append(key)
    return out


def load_metrics(client, found: Iterable[TrialRun], keys: Iterable[str]) -> pd.DataFrame:
    """Long table (figure, panel_id, curve, seed, run_id, round, metric, value) of the histories
    of ``keys`` (patterns with ``{i}`` expand per client). Values are kept raw (NaN/inf too)."""
    keys = list(keys)
    rows = []
    for tr in found:
        t = tr.trial
        for key in metric_keys(keys, t.config.data.num_clients):
            for m in client.get_metric_history(tr.run.run_id, key):
                rows.append(
                    (t.figure, t.panel_id, t.curve, t.seed, tr.run.run_id, m.step, key, m.value)
                )
    frame = pd.DataFrame(rows, columns=LONG_COLUMNS)
    return frame.sort_values(["panel_id", "curve", "seed", "metric", "round"], ignore_index=True)


def diverged_rounds(long: pd.DataFrame, found: Iterable[TrialRun]) -> dict[tuple[str, str], list]:
    """(panel_id, curve) -> [(seed, last logged round)] of the runs that diverged."""
    last = long.groupby("run_id")["round"].max().to_dict() if not long.empty else {}
    out: dict[tuple[str, str], list] = {}
    for tr in found:
        if tr.run.status == "diverged":
            key = (tr.trial.panel_id, tr.trial.curve)
            out.setdefault(key, []).append((tr.trial.seed, int(last.get(tr.run.run_id, 0))))
    return out


def loss_blowups(found: Iterable[TrialRun]) -> dict[tuple[str, str], list]:
    """(panel_id, curve) -> [(seed, tag text)] of the runs tagged ``fedsweep.loss_blowup``."""
    out: dict[tuple[str, str], list] = {}
    for tr in found:
        text = tr.run.tags.get(BLOWUP_TAG)
        if text:
            out.setdefault((tr.trial.panel_id, tr.trial.curve), []).append((tr.trial.seed, text))
    return out


def judged_keys(plan: FigurePlan) -> list[str]:
    """The metric keys the judge loads for ``plan``'s claims: the spec's ``metrics`` and those its
    claims' measures and guards declare (:func:`fedsweep.judge.measures.metrics_read`); never
    what a figure draws (``--metric``)."""
    import fedsweep.judge.papers  # noqa: F401 - the papers' measures declare their metrics

    return sorted({*plan.spec.metrics, *metrics_read(plan.spec.claims)})


def load_runs(plan: FigurePlan, client, index: RunIndex) -> tuple[RunTable, Resolution]:
    """``plan``'s finished runs from the store as the judge reads them (:func:`judged_keys`),
    and how its trials resolved to runs."""
    res = resolve_runs(plan.spec, plan.profile, index, dict(plan.extra), client, plan=plan)
    long = load_metrics(client, res.found, judged_keys(plan))
    counts = Counter((tr.trial.panel_id, tr.trial.curve) for tr in res.found)
    table = RunTable(
        long,
        aggregate(long),
        dict(counts),
        diverged_rounds(long, res.found),
        loss_blowups(res.found),
    )
    return table, res
