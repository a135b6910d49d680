"""A sweep's view of the MLflow store: the finished runs of its trials by config hash (or legacy
hash), which runs a figure uses (``fedsweep.used_by.<figure>`` tags, the parent run's note),
and the parent run of (figure, profile): find, open, close, end."""

from __future__ import annotations

import contextlib
from pathlib import Path

from fedsweep.specs.data_check import DataPlan
from fedsweep.specs.load import SweepSpec, Trial
from fedsweep.tracking.direct import STOPPED_STATUS, load_runs
from fedsweep.tracking.provenance import verified_done_runs
from fedsweep.tracking.store import ui_path, ui_search_path


# ---------------------------------------------------------------- finished runs by hash
def finished_hashes(client, hashes: set[str]) -> set[str]:
    """Config hashes (among ``hashes``) that already have a finished or diverged run (a sweep
    trial or a single ``fedsweep run``: both carry the ``fedsweep.config_hash`` tag) whose
    logged config hashes to that tag (``tracking.provenance``: a forged tag is not reused)."""
    return set(verified_done_runs(client, hashes))


def finished_runs(client, hashes: set[str]) -> dict:
    """For each config hash (among ``hashes``) with a finished or diverged run, that run (the
    latest started, as the figures pick it)."""
    ids = verified_done_runs(client, hashes)
    runs = load_runs(client, (run_id for run_id, _ in ids.values()))
    return {h: runs[run_id] for h, (run_id, _) in ids.items() if run_id in runs}


def trial_runs(client, trials: list[Trial]) -> dict:
    """For each trial's config hash, its finished or diverged run: one tagged with that hash,
    else one tagged with the trial's legacy hash (``Trial.legacy_hash``: hashed, before
    2026-11-25, with base sections the trial does not use)."""
    runs = finished_runs(client, {h for t in trials for h in t.hashes})
    out = {}
    for t in trials:
        found = next((runs[h] for h in t.hashes if h in runs), None)
        if found is not None:
            out.setdefault(t.config_hash, found)
    return out


def _stopped_ids(client, trials: list[Trial], done: set[str]) -> dict[str, tuple[str, int]]:
    """For the hashes of ``trials``' search trials outside ``done``, the verified run their
    early-stopping scheduler stopped (``fedsweep.specs.search``): done for that search only."""
    hashes = {h for t in trials if t.search_of for h in t.hashes} - done
    return verified_done_runs(client, hashes, statuses=(STOPPED_STATUS,)) if hashes else {}


def stopped_search_runs(client, trials: list[Trial]) -> dict:
    """For each search trial of ``trials`` whose run its early-stopping scheduler stopped (and
    that has no full run), that run: done for its search (``fedsweep.specs.search``)."""
    ids = _stopped_ids(client, trials, set())
    runs = load_runs(client, (run_id for run_id, _ in ids.values()))
    return {h: runs[run_id] for h, (run_id, _) in ids.items() if run_id in runs}


def finished_trials(client, trials: list[Trial]) -> set[str]:
    """The config hashes of ``trials`` that have a finished or diverged run (under their hash
    or their legacy hash); a search trial's run that its scheduler stopped early counts too
    (for that search trial only: ``fedsweep.specs.search``)."""
    done = finished_hashes(client, {h for t in trials for h in t.hashes})
    stopped = set(_stopped_ids(client, trials, done))
    return {
        t.config_hash
        for t in trials
        if done.intersection(t.hashes) or (t.search_of and stopped.intersection(t.hashes))
    }


# ------------------------------------------------------------------- figure membership
#: tag on every run a figure uses (its own trials and runs reused from other sweeps); the
#: value is the profile(s) it is used under, comma-separated (e.g. ``smoke``)
USED_BY = "fedsweep.used_by."


def used_by_tag(figure: str) -> str:
    return f"{USED_BY}{figure}"


def membership_filter(figure: str, profile: str) -> str:
    """The MLflow search string that lists every run ``figure`` uses under ``profile``, reused
    ones included (UI search box over all experiments, or ``mlflow.search_runs``)."""
    return f"tags.`{used_by_tag(figure)}` LIKE '%{profile}%'"


def record_membership(client, trials: list[Trial], figure: str, profile: str) -> list[tuple]:
    """Tag every finished run that ``trials`` use with ``fedsweep.used_by.<figure>``;
    returns ``[(trial, run), ...]`` in trial order (one entry per config hash)."""
    key = used_by_tag(figure)
    runs = trial_runs(client, trials)
    used, seen = [], set()
    for t in trials:
        run = runs.get(t.config_hash)
        if run is None or t.config_hash in seen:
            continue
        seen.add(t.config_hash)
        used.append((t, run))
        profiles = {p for p in run.data.tags.get(key, "").split(",") if p}
        if profile not in profiles:
            client.set_tag(run.info.run_id, key, ",".join(sorted(profiles | {profile})))
    return used


def membership_note(
    spec: SweepSpec, profile: str, experiment_id: str, used: list[tuple], experiments: dict
) -> str:
    """The parent sweep run's description (markdown): how to list the figure's runs, and a link
    to every run it reuses from another experiment."""
    reused = [(t, r) for t, r in used if r.info.experiment_id != experiment_id]
    search = membership_filter(spec.figure, profile)
    exp_ids = {experiment_id, *(r.info.experiment_id for _, r in used)}
    lines = [
        f"**{spec.title}**, profile `{profile}`: {len(used)} runs, "
        f"{len(used) - len(reused)} in this experiment, {len(reused)} reused from other "
        "experiments (a finished run with the same config hash).",
        "",
        "Every run of this figure, reused ones included: "
        f"[open them]({ui_search_path(exp_ids, search)}), or select their experiments in the "
        "experiment list, *Compare*, and search",
        f"``{search}``",
    ]
    if reused:
        lines += ["", "Reused runs:", ""]
        for t, r in reused:
            exp = experiments.get(r.info.experiment_id, r.info.experiment_id)
            link = ui_path(r.info.experiment_id, r.info.run_id)
            lines.append(f"- {t.run_name}: [{r.info.run_name or r.info.run_id}]({link}) ({exp})")
    return "\n".join(lines)


def find_parent_run(client, experiment_id: str, figure: str, profile: str) -> str | None:
    """The parent run of an earlier sweep of (figure, profile) in the figure's experiment."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=(
            "tags.`fedsweep.kind` = 'sweep' and "
            f"tags.`fedsweep.figure` = '{figure}' and tags.`fedsweep.profile` = '{profile}'"
        ),
        order_by=["attributes.start_time ASC"],
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


# ------------------------------------------------------------------------ parent run
def experiment_description(spec: SweepSpec) -> str:
    """A figure's experiment description: the spec's title, and how to list all its runs."""
    return (
        f"{spec.title}\n\nEvery run this figure uses, reused ones included: search "
        f"``tags.`{used_by_tag(spec.figure)}` IS NOT NULL`` over all experiments "
        "(each sweep's parent run lists them for its profile)."
    )


def parent_tags(
    spec: SweepSpec, spec_path: Path, profile: str, plan: DataPlan, panels: str = ""
) -> dict:
    """The parent run's tags; ``fedsweep.panel_filter`` is the latest sweep's ``--panel``
    filter ("" = every panel), which the figures read to draw the other panels as not run."""
    return {
        "fedsweep.kind": "sweep",
        "fedsweep.figure": spec.figure,
        "fedsweep.profile": profile,
        "fedsweep.specs": str(spec_path),
        "fedsweep.profile_note": spec.profiles[profile].note,
        "fedsweep.data_note": plan.note,
        "fedsweep.skipped_data": plan.skip_note,
        "fedsweep.panel_filter": panels,
        "fedsweep.status": "running",
    }


def open_parent_run(
    client, experiment_id: str, spec: SweepSpec, profile: str, state: dict | None, tags: dict
) -> str:
    """The parent run of (figure, profile): an interrupted sweep's (its state file, when the
    run still exists in this store's experiment), else the one an earlier sweep created in the
    figure's experiment, else a new one. Re-running a sweep (e.g. after adding a curve)
    attaches the new children to the same parent."""
    parent_run_id = state.get("parent_run_id") if state else None
    if parent_run_id is not None:  # an interrupted sweep: keep its parent run (no duplicates)
        try:
            info = client.get_run(parent_run_id).info
            # a run deleted since (the UI's delete: still readable, no longer writable)
            if info.experiment_id != experiment_id or info.lifecycle_stage != "active":
                parent_run_id = None
        except Exception:  # purged, or never in this store
            parent_run_id = None
    if parent_run_id is None:
        parent_run_id = find_parent_run(client, experiment_id, spec.figure, profile)
    if parent_run_id is None:
        name = f"sweep {spec.figure} [{profile}]"
        return client.create_run(experiment_id, run_name=name, tags=tags).info.run_id
    for key, value in tags.items():  # the notes of this sweep (data, profile) replace the old
        client.set_tag(parent_run_id, key, value)
    return parent_run_id


def close_parent_run(
    client,
    parent_run_id: str,
    experiment_id: str,
    spec: SweepSpec,
    profile: str,
    trials: list[Trial],
    errored: int,
) -> None:
    """Record which runs the figure uses (tags + the parent's description), set its status."""
    used = record_membership(client, trials, spec.figure, profile)
    names = {e.experiment_id: e.name for e in client.search_experiments()}
    note = membership_note(spec, profile, experiment_id, used, names)
    client.set_tag(parent_run_id, "mlflow.note.content", note)
    client.set_tag(parent_run_id, "fedsweep.status", "partial" if errored else "finished")
    client.set_terminated(parent_run_id, "FAILED" if errored else "FINISHED")


def end_parent_run(client, parent_run_id: str, status: str) -> None:
    """Mark the parent run (and its children still RUNNING) ``killed`` or ``failed``: no run
    of an ended sweep stays RUNNING. Best effort: a store that fails here does not hide the
    error that ended the sweep."""
    mlflow_status = "KILLED" if status == "killed" else "FAILED"
    with contextlib.suppress(Exception):
        end_running_children(client, parent_run_id, status)
    with contextlib.suppress(Exception):
        client.set_tag(parent_run_id, "fedsweep.status", status)
        client.set_terminated(parent_run_id, mlflow_status)


def store_folder(tracking_uri: str) -> Path | None:
    """The folder of a sqlite store (None for other stores)."""
    if tracking_uri.startswith("sqlite:///"):
        return Path(tracking_uri[len("sqlite:///") :]).parent
    return None


def end_running_children(client, parent_run_id: str, status: str) -> int:
    """End every child run of ``parent_run_id`` that is still RUNNING as ``status`` (``killed``:
    KILLED, else FAILED); returns how many."""
    mlflow_status = "KILLED" if status == "killed" else "FAILED"
    children = client.search_runs(
        [client.get_run(parent_run_id).info.experiment_id],
        filter_string=(
            f"tags.`mlflow.parentRunId` = '{parent_run_id}' and attributes.status = 'RUNNING'"
        ),
        max_results=5000,
    )
    for child in children:
        client.set_tag(child.info.run_id, "fedsweep.status", status)
        client.set_terminated(child.info.run_id, mlflow_status)
    return len(children)
