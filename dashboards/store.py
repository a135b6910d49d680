"""What the figures read from a store beyond the runs of their trials (those are found by config
hash in :mod:`fedsweep.judge.store`): a run's BHerd selection records, the data sets and panels
the latest sweep of a figure left out, and a data note without a machine's paths."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import numpy as np


def load_selected(client, run_id: str) -> dict[int, np.ndarray]:
    """BHerd's selection records of a run: client index (0-based) -> bool array [T, tau_i]."""
    pattern = re.compile(r"selected_client(\d+)\.npz$")
    out: dict[int, np.ndarray] = {}
    names = [a.path for a in client.list_artifacts(run_id, "records")]
    if not any(pattern.search(n) for n in names):
        return out
    # MLflow draws a progress bar on stderr per download (dozens in a report): none
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(client.download_artifacts(run_id, "records", tmp))
        for path in folder.glob("selected_client*.npz"):
            match = pattern.search(path.name)
            if match:
                with np.load(path, allow_pickle=False) as npz:
                    out[int(match.group(1))] = np.asarray(npz["data"]).astype(bool)
    return dict(sorted(out.items()))


def skipped_data_note(client, figure: str, profile: str) -> str:
    """What the latest sweep of ``figure`` under ``profile`` could not run for lack of data
    (its parent run's ``fedsweep.skipped_data`` tag), e.g. "cifar10 panels not run: ..."."""
    return portable_note(_parent_tag(client, figure, profile, "fedsweep.skipped_data"))


def panel_filter(client, figure: str, profile: str) -> dict[str, list[str]]:
    """The ``--panel`` filter of the latest sweep of ``figure`` under ``profile`` (its parent
    run's ``fedsweep.panel_filter`` tag) as axis -> values; {} when it ran every panel."""
    from fedsweep.specs.load import SpecError, parse_panel_filter

    text = _parent_tag(client, figure, profile, "fedsweep.panel_filter")
    try:
        return parse_panel_filter(text.split())
    except SpecError:  # not written by fedsweep: no filter
        return {}


def _parent_tag(client, figure: str, profile: str, key: str) -> str:
    """A tag of the latest sweep parent run of (figure, profile), "" when none."""
    if client is None:
        return ""
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return ""
    runs = client.search_runs(
        experiments,
        filter_string=(
            "tags.`fedsweep.kind` = 'sweep' and "
            f"tags.`fedsweep.figure` = '{figure}' and tags.`fedsweep.profile` = '{profile}'"
        ),
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return runs[0].data.tags.get(key, "") if runs else ""


def portable_note(note: str) -> str:
    """A skipped-data note without the path of the machine that swept (stores written before
    the note became path-free name the data folder: "not found in /home/x/data and ..." reads
    "not found in the data folder and ...")."""
    return re.sub(
        r"(not found in|without images in) /\S*?(?=[ :,;]|$)", r"\1 the data folder", note
    )
