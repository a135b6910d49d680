"""``fedsweep sweep --plan``: each spec's trials and what the sweep would do with them (run,
reuse a finished run, derive), with the estimated time, as lines or JSON; no Ray, no writes
(:mod:`fedsweep.sweep.plan`)."""

from __future__ import annotations

import typer


def print_plans(
    specs,
    profile,
    overrides,
    data_dir,
    tracking_uri,
    max_concurrent,
    as_json,
    panels=None,
    address=None,
    seeds=None,
):
    """``--plan``: each spec's trials and what the sweep would do with them (no Ray, no
    writes; ``fedsweep.sweep.plan``)."""
    import json

    from fedsweep.sweep.plan import RUN, plan_sweep, summary_line
    from fedsweep.sweep.report import duration

    plans = []
    for path in specs:
        plan = plan_sweep(
            path,
            profile,
            tracking_uri=tracking_uri,
            data_dir=data_dir,
            overrides=overrides,
            max_concurrent=max_concurrent,
            panels=panels or None,
            address=address,
            seeds=seeds,
        )
        plans.append(plan)
        if as_json:
            for row in plan.trials:
                typer.echo(json.dumps(row.as_json(), sort_keys=True))
            continue
        typer.echo(summary_line(plan))
        if plan.data_note:
            typer.echo(f"  note: {plan.data_note}")
        for row in plan.trials:
            if row.status == RUN:
                detail = f"≈ {duration(row.estimate_s)}" if row.estimate_s is not None else ""
                detail += f" ({row.note})" if row.note and detail else ""
            elif row.run_id is not None:
                detail = f"run {row.run_id}" + (
                    " (by its legacy hash)" if row.matched_by == "legacy hash" else ""
                )
            else:
                detail = row.note
            legacy = row.legacy_hash or "-"
            typer.echo(
                f"  {row.status:<8} {row.config_hash:<16} {legacy:<16} {row.trial_id}"
                + (f"  {detail}" if detail else "")
            )
    if not as_json and len(plans) > 1:
        to_run = sum(p.count(RUN) for p in plans)
        reused = sum(p.count("reuse") for p in plans)
        derived = sum(p.count("derived") for p in plans)
        wall = sum(p.wall_s for p in plans if not p.never_starts)
        stuck = sum(bool(p.never_starts) for p in plans)
        typer.echo(
            f"total: {sum(len(p.trials) for p in plans)} trials in {len(plans)} sweeps: "
            f"{to_run} to run, {reused} reused, {derived} derived; ≈ {duration(wall)} of "
            "wall time where measured (the sweeps run one after the other)"
            + (f"; {stuck} of the sweeps can never start here (see above)" if stuck else "")
        )
