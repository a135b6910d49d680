"""The overhead of every sweep already in an MLflow store (:func:`sweep_overheads`: its wall time
against its runs' own round times), and what other schedules of the same trials would have
taken, replayed from their runs' durations (:func:`schedule_what_if`); ``python -m
fedsweep.bench --from-store URI`` prints both (:func:`print_store_overheads`).
"""

from __future__ import annotations

import heapq
import json
import os
import time


def sweep_overheads(tracking_uri: str, profile: str | None = None, cpus: int | None = None):
    """The overhead of every sweep in a store, from what its runs recorded: per sweep (parent
    run, optionally only ``profile``'s), its wall time (the parent run's start to end: from
    the scheduling of its trials, after Ray's start, to the figure's membership tags), the
    trials it ran (its child runs), the sum of their own round times (``round_time``), the
    ideal wall time (that sum spread over ``min(cpus // threads per trial, trials)`` workers;
    ``cpus`` defaults to this machine's) and the overhead ``wall / ideal - 1``; plus the
    seconds a trial spends outside its rounds (its run's duration minus its rounds). A sweep
    run again into the same parent (a resume, new curves) spans both calls: its row says so
    with ``resumed``; a sweep still running has ``running`` and its wall time so far. Rows in
    the order the sweeps started."""
    from mlflow import MlflowClient

    cpus = cpus or max(1, os.cpu_count() or 1)
    client = MlflowClient(tracking_uri=tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    runs = client.search_runs(experiments, max_results=50000)
    children: dict[str, list] = {}
    for r in runs:
        parent = r.data.tags.get("mlflow.parentRunId")
        if parent is not None:
            children.setdefault(parent, []).append(r)
    rows = []
    for p in runs:
        tags = p.data.tags
        if tags.get("fedsweep.kind") != "sweep" or (
            profile and tags.get("fedsweep.profile") != profile
        ):
            continue
        # the sweep's finished trials, in the order they started
        kids = sorted(
            (r for r in children.get(p.info.run_id, []) if r.info.end_time),
            key=lambda r: r.info.start_time,
        )
        outside = 0.0
        workers = threads_max = 0
        each = []  # every trial's own round time
        lasted = []  # every trial's run, opening to end (its rounds and what is around them)
        for r in kids:
            rounds = sum(m.value for m in client.get_metric_history(r.info.run_id, "round_time"))
            each.append(rounds)
            lasted.append((r.info.end_time - r.info.start_time) / 1000)
            outside += lasted[-1] - rounds
            threads = int(r.data.tags.get("fedsweep.threads", "1") or 1)
            threads_max = max(threads_max, threads)
            workers = max(workers, cpus // max(1, threads))
        own = sum(each)
        workers = max(1, min(workers, len(kids)))  # the trials that can run at once
        ideal = own / workers if kids else 0.0
        running = p.info.end_time is None
        end = time.time() * 1000 if running else p.info.end_time
        wall = (end - p.info.start_time) / 1000
        first = kids[0].info.start_time if kids else None  # the first trial's start
        rows.append(
            {
                "figure": tags.get("fedsweep.figure", p.info.run_name),
                "profile": tags.get("fedsweep.profile"),
                "trials": len(kids),
                "wall_s": wall,
                "runs_own_s": own,
                "runs_own_each_s": each,
                "runs_each_s": lasted,
                "workers": workers,
                "threads": threads_max or 1,  # a trial's threads (= its CPUs in a sweep)
                "ideal_wall_s": ideal,
                "overhead": wall / ideal - 1.0 if ideal > 0 else float("nan"),
                "s_per_trial_outside_rounds": outside / len(kids) if kids else float("nan"),
                "first_run_start": (first or 0) / 1000,
                # the sweep's fixed costs: Tune's start, new trial actors and their imports, the
                # first trial's data (before); the figure's membership tags, Tune's end (after)
                "s_before_first_trial": (
                    (first - p.info.start_time) / 1000 if kids else float("nan")
                ),
                "s_after_last_trial": (
                    (end - max(r.info.end_time for r in kids)) / 1000 if kids else float("nan")
                ),
                "start": p.info.start_time / 1000,
                "running": running,
                "resumed": bool(kids) and first < p.info.start_time,
            }
        )
    rows.sort(key=lambda r: r["start"])
    return rows


def list_schedule(durations: list[float], workers: int) -> float:
    """The makespan of jobs of these ``durations`` on ``workers`` identical workers, each job
    in turn going to the worker free first (what Tune does with a grid: trials in order, the
    next one on the first CPU that frees up), all starting at 0."""
    free = [0.0] * max(1, workers)
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def schedule_what_if(rows: list[dict]) -> dict:
    """What other schedules of the same trials would have taken, replayed from the runs' real
    durations (each trial's run, opening to end) with :func:`list_schedule` on each sweep's
    workers: the sweeps' trials in the order they ran (``in_order_s``: the sweeps' wall time
    less what lies outside the trials' runs: the starts, the gaps between trials, the ends);
    each sweep's longest trials first (``longest_first_s``); every sweep's trials as one
    experiment, in order (``one_experiment_s``: no sweep waits for another's last trials).
    ``outside_runs_s``: the sweeps' wall time outside the replayed runs (their starts before
    the first trial, the gaps between trials, the ends after the last)."""
    rows = [r for r in rows if r.get("trials")]
    wall = sum(r["wall_s"] for r in rows)
    in_order = sum(list_schedule(r["runs_each_s"], r["workers"]) for r in rows)
    longest = sum(list_schedule(sorted(r["runs_each_s"], reverse=True), r["workers"]) for r in rows)
    workers = min((r["workers"] for r in rows), default=1)
    together = list_schedule([d for r in rows for d in r["runs_each_s"]], workers)
    return {
        "sweeps": len(rows),
        "wall_s": wall,
        "in_order_s": in_order,
        "longest_first_s": longest,
        "one_experiment_s": together,
        "outside_runs_s": wall - in_order,
        "before_first_trials_s": sum(r["s_before_first_trial"] for r in rows),
    }


def print_store_overheads(uri: str, profile: str | None, as_json: bool) -> None:
    """The table of :func:`sweep_overheads` with a total row (the sum over the sweeps, and the
    span from the first sweep's start to the last one's end, which adds the driver's work
    between sweeps)."""
    rows = [r for r in sweep_overheads(uri, profile) if r["trials"]]
    print(
        f"# sweep overhead from the store {uri}: per sweep, its wall time against its runs' own "
        "round times spread over the CPUs"
    )
    print(
        "| sweep | trials | wall | runs' own rounds (spread) | overhead | s/trial outside rounds "
        "| s before the first trial | s after the last |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        note = " (resumed or re-run: spans two calls)" if r["resumed"] else ""
        note += " (still running: wall so far)" if r["running"] else ""
        print(
            f"| {r['figure']} [{r['profile']}]{note} | {r['trials']} | {r['wall_s']:.1f} s "
            f"| {r['runs_own_s']:.1f} s ({r['ideal_wall_s']:.1f} s) | {r['overhead'] * 100:.0f}% "
            f"| {r['s_per_trial_outside_rounds']:.2f} | {r['s_before_first_trial']:.1f} "
            f"| {r['s_after_last_trial']:.1f} |"
        )
    total = {
        "sweeps": len(rows),
        "trials": sum(r["trials"] for r in rows),
        "wall_s": sum(r["wall_s"] for r in rows),
        "ideal_wall_s": sum(r["ideal_wall_s"] for r in rows),
        "runs_own_s": sum(r["runs_own_s"] for r in rows),
        "span_s": max((r["start"] + r["wall_s"] for r in rows), default=0.0)
        - min((r["start"] for r in rows), default=0.0),
    }
    ideal = total["ideal_wall_s"]
    total["overhead"] = total["wall_s"] / ideal - 1.0 if ideal > 0 else float("nan")
    total["span_overhead"] = total["span_s"] / ideal - 1.0 if ideal > 0 else float("nan")
    print(
        f"| all {total['sweeps']} sweeps | {total['trials']} | {total['wall_s']:.1f} s "
        f"| {total['runs_own_s']:.1f} s ({ideal:.1f} s) | {total['overhead'] * 100:.0f}% | "
        f"| {sum(r['s_before_first_trial'] for r in rows):.1f} "
        f"| {sum(r['s_after_last_trial'] for r in rows):.1f} |"
    )
    print(
        f"# first sweep's start to last sweep's end: {total['span_s']:.1f} s "
        f"(overhead {total['span_overhead'] * 100:.0f}% with the driver's work between sweeps)"
    )
    what = schedule_what_if(rows)
    print(
        f"# the trials' runs replayed on each sweep's workers (list scheduling, their real "
        f"durations): in the order they ran {what['in_order_s']:.1f} s, each sweep's longest "
        f"first {what['longest_first_s']:.1f} s, all {what['sweeps']} sweeps as one experiment "
        f"{what['one_experiment_s']:.1f} s; outside the replayed runs "
        f"{what['outside_runs_s']:.1f} s ({what['before_first_trials_s']:.1f} s of it before "
        "the sweeps' first trials)"
    )
    if as_json:
        print(json.dumps({"sweeps": rows, "total": total, "what_if": what}, sort_keys=True))
