"""Alternative readings of a paper beside the figure as configured (issue 35).

A spec's ``readings:`` (``fedsweep.specs.model.Reading``) are labelled config overrides:
plausible readings of the paper that our faithful default does not take (BHerd's Eq. 7 without
its ``1/α``, a damped FedVeca τ rule). Their runs are made with ``fedsweep sweep --set KEY=VALUE``
and sit in the store beside the figure's own (each config has its own hash). The reproduction
report sets each reading's verdicts beside the configured ones, claim by claim
(:func:`reading_table`), and says how to make the runs of a reading that has none; the claims
JSON carries the same in each claim's row (``readings``: :func:`reading_rows`).
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

from dashboards.model import FigureResult
from dashboards.report import _effect, cell, claim_rows

AS_CONFIGURED = "as configured"


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "–"
    return f"**{row['verdict']}** {_effect(row)}, {row['seeds']} seeds"


def reading_stem(figure: str, overrides: dict[str, Any]) -> str:
    """The file stem of a figure drawn under a reading, beside the figure's own in
    ``docs/figures/<profile>/``: ``bherd-fig3a--server_scale-none``."""
    parts = [f"{k.rsplit('.', 1)[-1]}-{v}" for k, v in overrides.items()]
    return "--".join([figure, *parts])


def set_text(overrides: dict[str, Any]) -> str:
    """``--set a=1 --set b=x``: the sweep options of a reading."""
    return " ".join(f"--set {k}={v}" for k, v in overrides.items())


def reading_table(
    base: FigureResult,
    readings: list[tuple[Any, FigureResult | None]],
    *,
    profile: str,
    spec_file: str,
) -> str:
    """Markdown: one row per claim of ``base``, one column per reading (its label) beside the
    figure as configured, each cell the verdict with its effect and interval; a reading's
    result without runs (None, or no runs) gets the command that makes them."""
    labels = [AS_CONFIGURED, *[r.label for r, _ in readings]]
    rows_of = [{row["id"]: row for row in claim_rows([base])}]
    for _, res in readings:
        rows_of.append({row["id"]: row for row in claim_rows([res])} if res and res.runs else {})
    lines = [
        f"### Readings of the paper: {base.figure_id}",
        "",
        "The same claims under each labelled reading of the paper (runs made with the `--set` "
        "options below, beside the figure's own); *as configured* is the figure above.",
        "",
        "| claim | " + " | ".join(labels) + " | changes? |",
        "|---|" + "---|" * (len(labels) + 1),
    ]
    for claim in base.claims:  # matched by the claim's id, shown by its words
        cells = [rows.get(claim.id) for rows in rows_of]
        known = [c["verdict"] for c in cells if c is not None]
        changes = "–" if len(known) < 2 else ("yes" if len(set(known)) > 1 else "no")
        lines.append(
            f"| {cell(claim.claim)} | " + " | ".join(_cell(c) for c in cells) + f" | {changes} |"
        )
    lines += ["", reproduces(base, readings, rows_of, labels), ""]
    for reading, res in readings:
        runs = f"{res.runs} of {res.expected_runs} runs" if res is not None else "no runs"
        how = f"`fedsweep sweep --profile {profile} {set_text(reading.set)} {spec_file}`"
        note = f" {reading.note}" if reading.note else ""
        stem = reading_stem(base.figure_id, reading.set)
        figure = f"; figure: [{stem}](../figures/{profile}/{stem}.png)" if res and res.runs else ""
        lines.append(f"- **{reading.label}** ({runs}; made by {how}{figure}).{note}")
    return "\n".join(lines)


#: what a reading's entry in a claim's JSON row copies from the claim's row under that reading
READING_FIELDS = ("verdict", "effect", "ci_low", "ci_high", "margin", "seeds", "seeds_needed",
                  "degenerate")  # fmt: skip


def reading_rows(
    base: FigureResult, readings: list[tuple[Any, FigureResult | None]]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per (claim id, regime) of ``base``: one entry per reading, in the spec's order, with the
    reading's ``label`` and ``set``, its runs, and the claim's verdict and numbers under it
    (:data:`READING_FIELDS`; None each where the reading has no runs). The JSON counterpart of
    :func:`reading_table`."""
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    keys = [(row["id"], row["regime"]) for row in claim_rows([base])]
    for reading, res in readings:
        ran = {(row["id"], row["regime"]): row for row in claim_rows([res])} if (
            res is not None and res.runs
        ) else {}  # fmt: skip
        for key in keys:
            row = ran.get(key, {})
            rows.setdefault(key, []).append(
                {
                    "reading": reading.label,
                    "set": dict(reading.set),
                    "runs": res.runs if res is not None else 0,
                    "expected_runs": res.expected_runs if res is not None else None,
                    **{f: row.get(f) for f in READING_FIELDS},
                }
            )
    return rows


def reproduces(base: FigureResult, readings, rows_of: list[dict], labels: list[str]) -> str:
    """One sentence: which reading (if any) has every claim of the figure supported, and how
    many each supports."""
    claims = [c.id for c in base.claims]
    counts = []
    full = []
    for label, rows in zip(labels, rows_of, strict=True):
        if not rows:
            counts.append(f"{label}: no runs")
            continue
        n = sum(rows.get(c, {}).get("verdict") == "supported" for c in claims)
        counts.append(f"{label}: {n} of {len(claims)} supported")
        if n == len(claims):
            full.append(label)
    if full:
        head = f"Every claim of {base.figure_id} is supported under: {', '.join(full)}."
    else:
        head = f"No reading that ran has every claim of {base.figure_id} supported."
    return f"**Which reading reproduces the figure.** {head} ({'; '.join(counts)}.)"


def _spec_with_readings(figure: str, sweeps_dir: str | Path) -> Path | None:
    """The spec file of ``figure`` in ``sweeps_dir`` when it declares ``readings:`` (read as
    YAML first: loading a spec expands every profile, which costs seconds per spec)."""
    from fedsweep.config.yamlio import YamlFileError, read_yaml
    from fedsweep.specs.load import spec_paths

    for path in spec_paths(sweeps_dir):
        try:
            tree = read_yaml(path, "spec")  # within the loader's bounds
        except (YamlFileError, RecursionError):
            continue
        if isinstance(tree, dict) and tree.get("figure") == figure:
            return Path(path) if tree.get("readings") else None
    return None


def add_reading_tables(
    results: list[FigureResult],
    tracking_uri: str,
    profile: str,
    sweeps_dir: str | Path = "sweeps",
) -> None:
    """For every result whose spec declares readings: build the figure once per reading (from
    the store only, into a temporary folder) and append :func:`reading_table` to the result's
    ``report_tables``."""
    from dashboards.build import FigureBuildWarning, build_figures
    from fedsweep.specs.load import load_spec

    for result in results:
        path = _spec_with_readings(result.figure_id, sweeps_dir)
        if path is None or not result.claims:
            continue
        spec = load_spec(path)
        alternatives = []
        for reading in spec.readings:
            with tempfile.TemporaryDirectory(prefix="fedsweep-reading-") as tmp:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FigureBuildWarning)
                    (alt,) = build_figures(
                        tracking_uri,
                        profile=profile,
                        out_dir=tmp,
                        figures=[result.figure_id],
                        sweeps_dir=sweeps_dir,
                        png=False,
                        overrides=dict(reading.set),
                    )
            alternatives.append((reading, alt))
        rel = f"sweeps/{Path(path).name}"
        result.readings = reading_rows(result, alternatives)
        result.report_tables.append(
            reading_table(result, alternatives, profile=profile, spec_file=rel)
        )
