"""Claim robustness (issue 35): a figure's claims judged again along one more config axis.

``fedsweep robustness FIGURE --axis train.lr=1e-5,1e-4,1e-3`` runs the figure's sweep once per
axis value (the value as a ``--set`` override; runs it already has are reused by config hash),
then :func:`build_map` builds the figure from the store once per value (``build_figures`` with
the value as an override, no images, into a temporary folder) and sets its claims' rows
(:func:`dashboards.report.claim_rows`: one per claim, per regime where the figure judges its
regimes apart) side by side: a :class:`~dashboards.verdict_map.VerdictMap`, written by
:func:`~dashboards.verdict_map.write_map`. :func:`configured_columns` finds the value the
profile runs as configured (the ★ column): the one whose trials have the figure's own config
hashes. :func:`update_report` refreshes the "Claim robustness" section of the reproduction
report a map belongs to, when that report exists beside the maps' folder.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import warnings
from pathlib import Path
from typing import Any

from dashboards.report import _clean, claim_rows, headline, report_key, report_name
from dashboards.verdict_map import (
    ROBUSTNESS_DIR,
    AxisValue,
    Cell,
    Column,
    MapRow,
    VerdictMap,
    load_maps,
    report_section,
)
from fedsweep.specs.figure import figure_plan
from fedsweep.specs.load import SpecError, SweepSpec


def configured_columns(
    spec: SweepSpec,
    profile: str,
    key: str,
    values: list[AxisValue],
    panels: dict[str, list[str]] | None = None,
) -> list[bool]:
    """Per value, whether it is the one the profile runs as configured: the trials with it
    set have the config hashes of the trials without it (of the ``panels`` run). A value that
    is not valid for the schema, or a key no trial reads, raises a one-line ``SpecError``
    naming ``--axis KEY=VALUE``."""
    own = figure_plan(spec, profile, panels=panels).config_hashes
    out = []
    for v in values:
        try:
            plan = figure_plan(spec, profile, extra={key: v.value}, panels=panels)
        except SpecError as err:
            raise SpecError(f"--axis {key}={v.text}: {_one_line(str(err), key)}") from None
        out.append(plan.config_hashes == own)
    return out


def _one_line(message: str, key: str) -> str:
    """A spec error about an override in one line, without the spec's file name (the
    ``invalid config (<file>):`` header, a ``<file>: --set <key>:`` prefix)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        lines = lines[1:]
    text = "; ".join(lines)
    marker = f"--set {key}: "
    return text.split(marker, 1)[1] if marker in text else text


# ------------------------------------------------------------------------------ the map
def build_map(
    tracking_uri: str,
    spec_path: str | Path,
    profile: str,
    key: str,
    values: list[AxisValue],
    *,
    panels: dict[str, list[str]] | None = None,
    command: str = "",
    configured: list[bool] | None = None,
) -> VerdictMap:
    """The verdict map of the spec at ``spec_path`` under ``profile`` along ``key``: the figure
    built from the store once per value (the value as an override, as the sweep ran it), its
    claims' rows (:func:`dashboards.report.claim_rows`) side by side. ``configured``: the
    columns' :func:`configured_columns`, when known. Reads the store only; a store that does
    not exist raises ``StoreMissingError``."""
    from dashboards.build import FigureBuildWarning, build_figures
    from fedsweep.specs.load import load_spec, panel_filter_text

    spec = load_spec(spec_path)
    if configured is None:
        configured = configured_columns(spec, profile, key, values, panels)
    columns: list[Column] = []
    by_row: dict[tuple[str, str], list[Cell | None]] = {}
    words: dict[tuple[str, str], str] = {}  # (claim id, regime) -> its words
    for i, value in enumerate(values):
        with tempfile.TemporaryDirectory(prefix="fedsweep-robustness-") as tmp:
            with warnings.catch_warnings():  # a failed figure says so in its column
                warnings.simplefilter("ignore", FigureBuildWarning)
                (result,) = build_figures(
                    tracking_uri,
                    profile=profile,
                    out_dir=tmp,
                    spec_files=[spec_path],
                    png=False,
                    overrides={key: value.value},
                    require_store=True,
                )
        columns.append(
            Column(
                value,
                configured[i],
                result.runs,
                result.expected_runs,
                list(result.seeds),
                result.status,
                _clean(result.error) if result.error else None,
            )
        )
        for row in claim_rows([result]):  # a claim is found again by its id, in its regime
            found = (row["id"], row["regime"])
            words[found] = row["claim"]
            cells = by_row.setdefault(found, [None] * len(values))
            cells[i] = _cell(row)
    rows = [MapRow(words[k], k[1], cells) for k, cells in by_row.items()]
    return VerdictMap(
        spec.figure,
        spec.title,
        profile,
        key,
        columns,
        rows,
        command,
        panel_filter_text(panels),
        dt.date.today().isoformat(),
    )


def _cell(row: dict[str, Any]) -> Cell:
    """A claim row of :func:`dashboards.report.claim_rows` as a map cell."""
    panels = row["panels"]
    head = headline(panels)
    return Cell(
        row["verdict"],
        row["effect"],
        row["ci_low"],
        row["ci_high"],
        row["seeds"],
        head.get("panel", "") if len(panels) > 1 else "",
        row["why"],
        row["numbers"],
        panels,
    )


# ------------------------------------------------------------------------------ the report
#: where a report's robustness section starts (``verdict_map.report_section``'s heading)
SECTION_MARK = "\n\n## Claim robustness\n"


def update_report(maps_dir: str | Path, vmap: VerdictMap) -> Path | None:
    """When ``maps_dir`` is a reports folder's ``robustness/`` and the report of ``vmap``'s
    paper at its profile exists there (``<paper>.md``, ``<paper>-<profile>.md``), replace that
    report's "Claim robustness" section (its last) by the one the maps of ``maps_dir`` make now,
    as ``fedsweep report`` would write it; the rest of the report is kept byte for byte.
    Returns the report written, None when there is none to update."""
    from fedsweep.core.atomic import write_text

    maps_dir = Path(maps_dir)
    if maps_dir.name != ROBUSTNESS_DIR:
        return None
    paper = report_key(vmap.figure)
    path = maps_dir.parent / report_name(paper, vmap.profile)
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    # the report's own text ends in one newline; the section starts with an empty line
    head = text.split(SECTION_MARK, 1)[0] + "\n" if SECTION_MARK in text else text
    figures = sorted({m.figure for m in load_maps(maps_dir) if report_key(m.figure) == paper})
    return write_text(path, head + report_section(maps_dir.parent, vmap.profile, figures))
