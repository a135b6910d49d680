"""What a profile's figures cost, measured from the runs in an MLflow store: per figure (its
experiment), the finished trials, their CPU hours (each run's duration times its threads), the
sum of their own round times, and the wall time during which at least one of its trials ran (the
union of its runs' intervals: interruptions between sessions do not count, a sweep sharing the
machine with other work makes it longer).

    python benchmarks/paper_cost.py STORE_URI [--profile paper] [--by PARAM ...] [--json]

Prints a Markdown table (the README's cost table takes its numbers from it) or, with
``--json``, one measurement for ``benchmarks/results/paper-profile-cost.json``. Reads the store
only. A run counts under the figure whose sweep ran it (a run another figure reuses by config
hash costs nothing there). ``--by PARAM`` splits a figure's row by the value of a config key
(e.g. ``--by bherd.server_scale``: the runs of a reading made with ``--set`` apart from the
figure's own).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by at least one of the ``(start, end)`` intervals."""
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def figure_costs(uri: str, profile: str, by: tuple[str, ...] = ()) -> list[dict]:
    """One row per figure (and value of the ``by`` params) with finished trials at
    ``profile``, in the order they first ran."""
    from mlflow import MlflowClient

    from fedsweep.config.load import build_config, flatten

    client = MlflowClient(tracking_uri=uri)
    defaults = {k: str(v) for k, v in flatten(build_config({}).model_dump(mode="json")).items()}
    rows = []
    for exp in client.search_experiments():
        runs = client.search_runs(
            [exp.experiment_id],
            filter_string=(
                f"tags.`fedsweep.profile` = '{profile}' and tags.`fedsweep.status` = 'finished'"
            ),
            max_results=50000,
        )
        groups: dict[str, list] = {}
        for r in runs:
            if "mlflow.parentRunId" in r.data.tags and r.info.end_time:
                # a key at its default value (or not logged: a run older than the key) is no label
                values = {k: r.data.params.get(k, defaults.get(k)) for k in by}
                label = ", ".join(f"{k}={v}" for k, v in values.items() if v != defaults.get(k))
                groups.setdefault(label, []).append(r)
        for label, trials in groups.items():
            rows.append(_row(client, f"{exp.name} ({label})" if label else exp.name, trials))
    rows.sort(key=lambda r: r["first"])
    return rows


#: a pause between two logged rounds longer than this is an interruption (a run killed at the
#: end of a session and resumed in the next), not work: it is left out of the CPU and wall time
PAUSE_S = 300.0


def active_segments(start: float, end: float, stamps: list[float]) -> list[tuple[float, float]]:
    """The parts of a run's ``[start, end]`` during which it worked: split at every pause of
    more than :data:`PAUSE_S` between consecutive round timestamps (``stamps``, seconds). A run
    resumed from a checkpoint keeps its first start time, so its end - start counts the hours it
    lay killed; its rounds' timestamps show where."""
    points = sorted(t for t in stamps if start <= t <= end)
    segments, seg_start, last = [], start, start
    for t in points:
        if t - last > PAUSE_S:
            segments.append((seg_start, last))
            seg_start = t
        last = t
    if end - last > PAUSE_S:  # a pause before the end (the run ended long after its last round)
        segments.append((seg_start, last))
    else:
        segments.append((seg_start, end))
    return [(a, b) for a, b in segments if b > a]


def _row(client, name: str, trials: list) -> dict:
    """The cost of one figure's (or reading's) finished trials: CPU and wall time count the
    runs' active segments only (:func:`active_segments`)."""
    spans, cpu_s, rounds_s, resumed = [], 0.0, 0.0, 0
    for r in trials:
        history = client.get_metric_history(r.info.run_id, "round_time")
        rounds_s += sum(m.value for m in history)
        segments = active_segments(
            r.info.start_time / 1000, r.info.end_time / 1000, [m.timestamp / 1000 for m in history]
        )
        threads = int(r.data.tags.get("fedsweep.threads", "1") or 1)
        cpu_s += sum(b - a for a, b in segments) * threads
        spans += segments
        resumed += len(segments) > 1 or "fedsweep.resumed_at_round" in r.data.tags
    commits = sorted({r.data.tags.get("fedsweep.git_commit", "")[:7] for r in trials} - {""})
    return {
        "figure": name,
        "trials": len(trials),
        "resumed": resumed,
        "cpu_h": cpu_s / 3600,
        "rounds_h": rounds_s / 3600,
        "busy_wall_h": busy_seconds(spans) / 3600,
        "first": dt.datetime.fromtimestamp(min(s for s, _ in spans), dt.UTC).isoformat(
            timespec="minutes"
        ),
        "last": dt.datetime.fromtimestamp(max(e for _, e in spans), dt.UTC).isoformat(
            timespec="minutes"
        ),
        "commits": commits,
    }


def markdown(rows: list[dict]) -> str:
    lines = [
        "| figure | trials | CPU hours | of which rounds | wall hours (busy) | ran |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['figure']} | {r['trials']} | {r['cpu_h']:.2f} | {r['rounds_h']:.2f} | "
            f"{r['busy_wall_h']:.2f} | {r['first'][:10]} to {r['last'][:10]} |"
        )
    total = {k: sum(r[k] for r in rows) for k in ("trials", "cpu_h", "rounds_h", "busy_wall_h")}
    lines.append(
        f"| total | {total['trials']} | {total['cpu_h']:.2f} | {total['rounds_h']:.2f} | "
        f"{total['busy_wall_h']:.2f} | |"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("uri", help="the MLflow tracking URI of the store")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--by", action="append", default=[], help="split rows by this param")
    parser.add_argument("--json", action="store_true", help="one measurement as JSON")
    args = parser.parse_args()
    rows = figure_costs(args.uri, args.profile, tuple(args.by))
    if args.json:
        print(json.dumps({"profile": args.profile, "rows": rows}, indent=1))
    else:
        print(markdown(rows))


if __name__ == "__main__":
    main()
