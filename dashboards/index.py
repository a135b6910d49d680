"""``index.html``: every figure built, its runs and data, links, and the paper's claims checked.

Self-contained: inline CSS, no scripts, no CDN (links point at the files beside it). The index
*merges*: each figure's entry is kept as JSON beside its HTML (``<id>.json``, marked with
``"fedsweep_index_entry"``), and ``index.html`` is rebuilt from every entry in the folder, so
drawing one figure keeps the others already there.

Each figure links its files: the interactive HTML and images, the CSV of its curves
(``<stem>.csv``), and its runs as parallel coordinates (``<id>-parcoords.html``, with the
runs' table ``<id>-runs.csv``). A figure drawn from ``--set`` runs is its own entry
(``<id>--<key>-<value>``, marked with its overrides); the reproduction report beside the index
reads the figures as configured only.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from html import escape
from pathlib import Path
from typing import Any

from dashboards.export import reload_tag
from dashboards.model import FigureResult
from fedsweep.core import atomic

#: CSS class per verdict (an entry written before issue 34's verdicts reads as "na")
VERDICT_CLASS = {
    "n/a": "na",
    "supported": "yes",
    "contradicted": "no",
    "inconclusive": "inc",
    "not-testable": "na",
}
ENTRY_KEY = "fedsweep_index_entry"
FILE_KINDS = (
    ("html", "interactive HTML"),
    ("png", "PNG"),
    ("pdf", "PDF"),
    ("svg", "SVG"),
    ("csv", "CSV table"),
    ("tex", "LaTeX table"),
    ("data", "curves as CSV"),
    ("parcoords", "runs: parallel coordinates"),
    ("runs", "runs as CSV"),
)
#: the extra text files a builder may write beside its figure (``FigureResult.texts``)
TEXT_FORMATS = ("csv", "tex")
#: file-name endings of the per-figure pages beside ``<id>`` -> their kind in an entry
EXTRA_FILES = {"-parcoords.html": "parcoords", "-runs.csv": "runs"}

CSS = """
body{font-family:Arial,Helvetica,sans-serif;margin:2em auto;max-width:1200px;color:#222;
 padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em} .meta{color:#555;margin-bottom:1.5em}
section{border:1px solid #ddd;border-radius:6px;padding:1em 1.2em;margin:1.2em 0}
h2{font-size:1.2em;margin:0 0 .4em 0} h2 code{color:#555;font-weight:normal}
table{border-collapse:collapse;width:100%;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.35em .6em;text-align:left;vertical-align:top;
 font-size:.93em}
th{background:#f6f6f6}
.yes{background:#d9f2d9;color:#11621a;font-weight:bold}
.no{background:#f9d6d5;color:#9c1c14;font-weight:bold}
.na{background:#ececec;color:#666;font-weight:bold}
.inc{background:#fbefd0;color:#7a5300;font-weight:bold}
.badge{padding:.05em .45em;border-radius:4px;font-size:.85em}
.status{display:inline-block;padding:.1em .5em;border-radius:4px;font-size:.85em}
.complete{background:#d9f2d9}.partial{background:#fff1c2}.norun,.error{background:#f9d6d5}
.datanote{background:#fff1c2;padding:.15em .4em;border-radius:4px;font-weight:bold}
img{max-width:100%;border:1px solid #eee;margin-top:.5em}
.small{color:#666;font-size:.85em}
table.claims td:nth-child(1){width:20%} table.claims td:nth-child(2){width:5%}
table.claims td:nth-child(3){width:42%}
"""


def _portable(text: str) -> str:
    """``text`` without this machine's paths (the index and its entries get committed and
    shared): the working folder reads ``.``, the home folder ``~``."""
    from dashboards.report import _clean

    return _clean(text)


def _commit() -> str:
    """The commit of the checkout that drew the figures ("unknown" outside git)."""
    from dashboards.report import build_meta

    return build_meta("", Path(__file__).resolve().parent)["commit"]


def _row(name: str, value: str) -> str:
    return f"<tr><th>{escape(name)}</th><td>{value}</td></tr>"


def _safe(text: str) -> str:
    """``text`` as part of a file name: letters, digits and ``._+=-`` kept (runs of anything
    else: ``_``; ``--`` stays the separator of :func:`override_stem`'s parts)."""
    text = re.sub(r"[^A-Za-z0-9._+=-]+", "_", text)
    return re.sub(r"-{2,}", "-", text).strip("_.-") or "_"


def run_overrides(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The ``--set`` overrides that change which runs a figure draws: those of keys that enter
    the config hash (``data.download``, ``threads``, ``tracking.*``, … select the same runs)."""
    from fedsweep.config.hashing import HASH_EXCLUDED

    return {
        k: v
        for k, v in (overrides or {}).items()
        if not any(k == e or k.startswith(e + ".") for e in HASH_EXCLUDED)
    }


def override_stem(figure_id: str, overrides: dict[str, Any] | None) -> str:
    """The file stem (and index entry) of ``figure_id`` drawn from ``--set`` runs:
    ``bherd-fig4e--lr-0.1``, ``bherd-fig3a--server_scale-none`` (one ``--<key>-<value>`` per
    override, the key's last part unless two keys share it; file-name safe; as
    ``readings.reading_stem`` names a reading's figure); ``figure_id`` itself without
    overrides that change its runs (:func:`run_overrides`). A stem that would pass 120
    characters is cut and ends in a short hash of the overrides, so distinct overrides never
    share files."""
    overrides = run_overrides(overrides)
    if not overrides:
        return figure_id
    lasts = [k.rsplit(".", 1)[-1] for k in overrides]
    parts = []
    for key, value in overrides.items():
        name = key.rsplit(".", 1)[-1]
        name = name if lasts.count(name) == 1 else key
        text = "none" if value is None else str(value)
        parts.append(f"{_safe(name)}-{_safe(text)}")
    stem = "--".join([figure_id, *parts])
    if len(stem) > 120:
        digest = hashlib.sha1(json.dumps(overrides, sort_keys=True, default=str).encode())
        stem = f"{stem[:110].rstrip('-_.')}-{digest.hexdigest()[:8]}"
    return stem


def file_kind(r: FigureResult, name: str, stem: str | None = None) -> str:
    """The kind of a file of ``r`` (named ``stem``, default its id) in its entry: its suffix
    (html, png, …), "parcoords" and "runs" for the runs page and table (:data:`EXTRA_FILES`),
    "data" for a curves CSV (any CSV but a table figure's own ``<stem>.csv``)."""
    stem = stem or r.figure_id
    for ending, kind in EXTRA_FILES.items():
        if name == f"{stem}{ending}":
            return kind
    kind = Path(name).suffix.lstrip(".")
    if kind == "csv" and not ("csv" in r.texts and name == f"{stem}.csv"):
        return "data"
    return kind


def entry(
    r: FigureResult,
    out_dir: Path,
    tracking_uri: str = "",
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The index entry of one figure (plain JSON types; file names relative to ``out_dir``);
    ``overrides``: the ``--set`` overrides of its runs: an entry of its own, named
    :func:`override_stem` (``figure_id``; ``figure`` = the spec's id)."""
    stem = override_stem(r.figure_id, overrides)
    files: dict[str, list[str]] = {kind: [] for kind, _ in FILE_KINDS}
    for path in [*r.files, *r.kept]:
        kind = file_kind(r, Path(path).name, stem)
        if kind in files and Path(path).is_file():
            files[kind].append(Path(path).name)
    return {
        ENTRY_KEY: 1,
        "figure_id": stem,
        "figure": r.figure_id,
        "title": r.title,
        "profile": r.profile,
        "status": r.status,
        "runs": r.runs,
        "expected_runs": r.expected_runs,
        "missing": r.missing,
        "seed_count": r.seed_count,
        "seeds": list(r.seeds),
        "expected_seeds": len(r.expected_seeds),
        "profile_note": r.profile_note,
        "data_note": r.data_note,
        "notes": list(r.notes),
        "error": r.error,
        "band": r.band,
        "experiment_url": r.experiment_url,
        "experiment_hint": r.experiment_hint,
        "tracking_uri": _portable(tracking_uri),
        "built": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "files": files,
        "overrides": {k: _text(v) for k, v in run_overrides(overrides).items()},
        "claims": [
            {
                "claim": c.claim,
                "verdict": c.verdict,
                "shown": c.shown,
                "numbers": c.numbers,
                "criterion": c.criterion,
                "evidence": list(c.evidence),
                "regime": c.regime,
                "id": c.id,
                "words": c.words,
            }
            for c in r.claims
        ],
    }


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


def read_entries(out_dir: Path) -> list[dict[str, Any]]:
    """Every index entry in ``out_dir`` (``*.json`` files marked as entries), by figure id."""
    entries = []
    for path in sorted(Path(out_dir).glob("*.json")):
        if path.name.startswith(
            "."
        ):  # not an entry (e.g. a temporary file of fedsweep.core.atomic)
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get(ENTRY_KEY) and data.get("figure_id"):
            entries.append(data)
    return sorted(entries, key=lambda e: e["figure_id"])


def _figure_section(e: dict[str, Any]) -> str:
    status = e["status"]
    status_cls = {"no runs": "norun"}.get(status, status)
    seeds = f"{e['seed_count']} per curve" if e["runs"] else "0"
    if e["expected_seeds"]:
        seeds += f" (spec: {e['expected_seeds']})"
    runs = f"{e['runs']} of {e['expected_runs']}"
    runs += f" ({e['missing']} missing)" if e["missing"] else ""
    data_note = f'<span class="datanote">{escape(e["data_note"])}</span>' if e["data_note"] else "—"
    links = []
    for kind, label in FILE_KINDS:
        names = e["files"].get(kind, [])
        for name in names:
            text = label if len(names) == 1 else f"{label} ({_part(e['figure_id'], name)})"
            links.append(f'<a href="{escape(name)}">{escape(text)}</a>')
    rows = [
        _row("profile", escape(e["profile"])),
        _row("profile note", escape(e["profile_note"]) or "—"),
        _row("data", data_note),
        _row("seeds", escape(seeds)),
        _row("runs", escape(runs)),
        _row("bands", escape(BAND_TEXT.get(e.get("band", "std"), ""))),
        _row("files", " · ".join(links) or "none (no runs)"),
    ]
    if e.get("experiment_url"):
        url = escape(e["experiment_url"])
        name = escape(e.get("figure") or e["figure_id"])  # a --set entry: the figure's experiment
        hint = e.get("experiment_hint")  # no UI was known to serve the store: how to start it
        how = f" (start it with: <code>{escape(hint)}</code>)" if hint else ""
        rows.append(_row("MLflow", f'<a href="{url}">experiment {name}</a>{how}'))
    if e["error"]:
        rows.append(_row("error", f"<code>{escape(e['error'])}</code>"))
    if e["notes"]:
        rows.append(_row("notes", "<br>".join(escape(n) for n in e["notes"])))
    if e.get("overrides"):
        sets = " ".join(f"--set {k}={v}" for k, v in e["overrides"].items())
        rows.insert(0, _row("runs with", f"<code>{escape(sets)}</code>"))
    claims = ""
    if e["claims"]:
        from dashboards.report import headline_text

        body = "".join(
            f"<tr><td>{escape(c['claim'])}</td><td class='{VERDICT_CLASS.get(c['verdict'], 'na')}'>"
            f"{escape(c['shown'])}</td><td>{escape(headline_text(c.get('evidence', [])))}</td>"
            f"<td>{escape(c['numbers']).replace('; ', '<br>')}</td>"
            f"<td class='small'>{escape(c['criterion'])}</td></tr>"
            for c in e["claims"]
        )
        claims = (
            "<table class='claims'><tr><th>paper claim</th><th>verdict</th>"
            "<th>effect [95% CI], seeds</th><th>numbers</th>"
            f"<th>criterion</th></tr>{body}</table>"
        )
    imgs = "".join(
        f'<a href="{escape(name)}"><img src="{escape(name)}"></a>' for name in e["files"]["png"]
    )
    fid = escape(e["figure_id"])
    return (
        f"<section id='{fid}'><h2>{escape(e['title'])} <code>{fid}</code> "
        f"<span class='status {status_cls}'>{escape(status)}</span></h2>"
        f"<table>{''.join(rows)}</table>{claims}{imgs}</section>"
    )


BAND_TEXT = {"std": "mean ± 1 std over seeds", "sem": "mean ± 1 standard error", "none": "mean"}


def _part(figure_id: str, name: str) -> str:
    stem = Path(name).stem
    return stem[len(figure_id) + 1 :] if stem.startswith(figure_id + "-") else stem


def _badges(e: dict[str, Any]) -> str:
    """The claim verdicts as coloured badges (title = the claim)."""
    return (
        " ".join(
            f"<span class='badge {VERDICT_CLASS.get(c['verdict'], 'na')}' title='{escape(c['claim'])}'>"
            f"{escape(c['verdict'])}</span>"
            for c in e["claims"]
        )
        or "—"
    )


def write_entries(
    results: list[FigureResult],
    out_dir: Path,
    tracking_uri: str = "",
    overrides: dict[str, Any] | None = None,
) -> None:
    """Write (or replace) ``<id>.json`` for each of ``results``."""
    for r in results:
        path = Path(out_dir) / f"{override_stem(r.figure_id, overrides)}.json"
        data = entry(r, Path(out_dir), tracking_uri, overrides)
        atomic.write_text(path, json.dumps(data, indent=1, ensure_ascii=False))


def write_index(
    results: list[FigureResult],
    out_dir: str | Path,
    tracking_uri: str = "",
    *,
    overrides: dict[str, Any] | None = None,
    reload_s: int | None = None,
) -> Path:
    """Store the entries of ``results`` beside their HTML, then write ``out_dir/index.html``
    listing every figure whose entry is in the folder (the new ones and those drawn before);
    ``overrides``: the ``--set`` overrides ``results`` were drawn with (kept in their
    entries); ``reload_s``: the index reloads itself that often (``figures --watch``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_entries(results, out_dir, tracking_uri, overrides)
    entries = read_entries(out_dir)
    stamp = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    summary = "".join(
        f"<tr><td><a href='#{escape(e['figure_id'])}'>{escape(e['figure_id'])}</a></td>"
        f"<td>{escape(e['profile'])}</td><td>{escape(e['status'])}</td>"
        f"<td>{e['runs']}/{e['expected_runs']}</td>"
        f"<td>{escape(e['data_note']) or '—'}</td>"
        f"<td>{_badges(e)}</td><td class='small'>{escape(e['built'])}</td></tr>"
        for e in entries
    )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>fedsweep figures</title>"
        f"{reload_tag(reload_s)}"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<style>{CSS}</style></head><body><h1>fedsweep figures</h1>"
        "<div class='meta'><a href='reproduction.html'>Reproduction report</a>: every claim "
        "with its effect, 95% interval over seeds, verdict and the paper's words.</div>"
        f"<div class='meta'>updated {escape(stamp)} at commit <code>{escape(_commit())}</code> "
        f"from <code>{escape(_portable(tracking_uri))}</code>; "
        "not-testable = the runs cannot test the claim (a scaled regime, too few rounds, "
        "diverged runs)</div>"
        "<table><tr><th>figure</th><th>profile</th><th>status</th><th>runs</th><th>data</th>"
        f"<th>claims</th><th>built</th></tr>{summary}</table>"
        + "".join(_figure_section(e) for e in entries)
        + "</body></html>"
    )
    from dashboards.report import write_html_report

    write_html_report([e for e in entries if not e.get("overrides")], out_dir)
    return atomic.write_text(out_dir / "index.html", page)
