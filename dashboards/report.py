"""One reproduction report per paper (issue 34): every figure and claim of a profile, what we
ran, the effect with its interval, the verdict and a link to the figure; as Markdown
(``docs/reproduction/<paper>.md``, ``<paper>-<profile>.md`` for a profile other than quick) and
as data (``claims-<profile>.json``).

Verdicts are the four of :mod:`dashboards.verdicts`; a claim without runs or without a
criterion ("n/a") is **not-testable**. An index entry written before these verdicts existed
("yes"/"no"/"n/t") reads as not-testable with that reason. The report carries the commit and
date it was built at and no absolute path.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dashboards.claims import normalize
from dashboards.model import ClaimCheck, FigureResult
from dashboards.verdicts import VERDICTS, claim_seeds_needed, interval_method

PAPERS = {
    "bherd": "BHerd (beneficial herd of local gradients)",
    "fedveca": "FedVeca (adaptive local steps)",
    "fedwalk": "FedWalk (server-side leash task)",
    "intro": "Introduction to federated learning (slides)",
}
#: verdict order from worst to best for the claim's headline panel
_RANK = {"contradicted": 0, "inconclusive": 1, "supported": 2, "not-testable": 3}


def paper_of(figure_id: str) -> str:
    """``bherd-fig3a`` -> ``bherd``; a figure of no shipped paper -> ``other``."""
    head = figure_id.split("-", 1)[0]
    return head if head in PAPERS else "other"


def verdict4(check: ClaimCheck) -> tuple[str, str]:
    """The four-way verdict of a check and why, when it is not its own."""
    if check.verdict in VERDICTS:
        return check.verdict, check.label
    if check.verdict == "n/a":
        return "not-testable", check.numbers or "no data"
    return "not-testable", f"an index entry from before the statistical verdicts ({check.verdict})"


def _clean(text: str) -> str:
    """No absolute path of this machine in a report: the working folder and the home folder
    become ``.`` and ``~``, any other absolute path its last two parts."""
    for root, short in ((str(Path.cwd()), "."), (os.path.expanduser("~"), "~")):
        if root not in ("", "/"):
            text = text.replace(root, short)
    return re.sub(r"(?<![\w.~])/(?:[\w.-]+/)+([\w.-]+/[\w.-]+)", r"…/\1", text)


def headline(evidence: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The evidence row a claim is summarised by: its least favourable panel (contradicted,
    then inconclusive, then supported); {} without evidence."""
    return min(evidence, key=lambda e: _RANK.get(e.get("verdict", ""), 1), default={})


def headline_text(evidence: Iterable[dict[str, Any]]) -> str:
    """``0.012 [−0.004, 0.028], 3 seeds`` of the headline panel ("–" without evidence)."""
    head = headline(evidence)
    if not head:
        return "–"
    row = {
        "effect": head.get("effect"),
        "ci_low": head.get("ci_low"),
        "ci_high": head.get("ci_high"),
    }
    return f"{_effect(row)}, {len(head.get('seeds', []))} seeds"


def claim_rows(results: Iterable[FigureResult]) -> list[dict[str, Any]]:
    """One object per claim (and regime, where a figure mixes regimes): a declared claim's
    ``id`` (None for a legacy prose claim), its verdict, the headline panel's effect, 95%
    interval, ``margin`` (the threshold decided against) and seeds, and the rest."""
    rows = []
    for r in results:
        for c in r.claims:
            verdict, why = verdict4(c)
            panels = [dict(e) for e in c.evidence]
            head = headline(panels)
            regime = c.regime or "not declared"
            rows.append(
                {
                    "id": c.id or None,
                    "paper": paper_of(r.figure_id),
                    "figure": r.figure_id,
                    "claim": c.claim,
                    "paper_words": c.words or paper_words(c.claim),
                    "verdict": verdict,
                    "why": _clean(why),
                    "effect": head.get("effect"),
                    "ci_low": head.get("ci_low"),
                    "ci_high": head.get("ci_high"),
                    "threshold": head.get("threshold"),
                    "margin": head.get("threshold"),
                    "holds_when": head.get("holds_when"),
                    "measure": head.get("measure"),
                    "interval": interval_method() if panels else None,
                    "seeds": len(head.get("seeds", [])) if panels else len(r.seeds),
                    # the seeds that would decide an inconclusive claim at the spread observed
                    "seeds_needed": (
                        claim_seeds_needed(panels) if verdict == "inconclusive" else None
                    ),
                    "regime": regime,
                    "profile": r.profile,
                    "profile_note": _clean(r.profile_note),
                    "numbers": _clean(c.numbers),
                    "panels": panels,
                    "runs": r.runs,
                    "expected_runs": r.expected_runs,
                    # parts whose two sides are one computation: named, not counted
                    "degenerate": list(c.degenerate),
                    # the claim under each labelled reading of the paper (dashboards.readings)
                    "readings": r.readings.get((c.claim, regime), []),
                    **paper_effect_fields(c.paper, head.get("effect")),
                }
            )
    return rows


def paper_effect_fields(paper, ours: float | None) -> dict[str, Any]:
    """The paper's own effect beside ours (issue 51, item 8): ``paper_effect`` (None where the
    paper gives no number), ``paper_effect_source`` and ``paper_effect_text`` (None where none
    is recorded), and ``effect_ratio`` = ours / the paper's where both are numbers and the
    paper's is in our measure's units."""
    if paper is None:
        return {"paper_effect": None, "paper_effect_source": None, "paper_effect_text": None,
                "effect_ratio": None}  # fmt: skip
    ratio = None
    if paper.comparable and paper.value not in (None, 0) and ours is not None:
        ratio = ours / paper.value
    return {
        "paper_effect": paper.value,
        "paper_effect_source": paper.source,
        "paper_effect_text": paper.text,
        "effect_ratio": ratio,
    }


def paper_words(claim: str) -> str:
    """The paper's own words behind ``claim`` (each paper's ``claims.PAPER_WORDS``: a quotation
    with where it stands), "" when none is recorded."""
    from dashboards.registry import PAPER_WORDS

    return PAPER_WORDS.get(normalize(claim), "")


#: how each verdict reads in the plain-words paragraph of a figure
_SAYS = {
    "supported": "the data support",
    "contradicted": "the data contradict",
    "inconclusive": "the data cannot decide",
    "not-testable": "these runs cannot test",
}


def what_this_says(rows: list[dict[str, Any]], result: FigureResult) -> str:
    """A short paragraph in plain words, written from the verdicts of one figure's claims: what
    the data support, contradict, cannot decide, and what these runs cannot test and why."""
    if not result.runs:
        return "No runs of this figure at this profile: it says nothing about the paper yet."
    if not rows:
        return "The figure states no claim we check; it is drawn for comparison by eye."
    sentences = []
    for verdict, lead in _SAYS.items():
        mine = [r for r in rows if r["verdict"] == verdict]
        if not mine:
            continue
        items = []
        for r in mine:
            item = f"“{r['claim']}”"
            if verdict in ("supported", "contradicted") and r["effect"] is not None:
                item += f" (effect {_effect(r)}, {r['seeds']} seeds)"
            elif verdict == "inconclusive":
                item += f" ({_short_why(r)})"
            elif verdict == "not-testable":
                item += f" ({_short_why(r)})"
            items.append(item)
        sentences.append(f"{lead[0].upper()}{lead[1:]} {_join(items)}.")
    sentences += [said for r in rows if (said := _reading_sentence(r))]
    if any(r["verdict"] == "not-testable" and "scaled" in r["why"] for r in rows):
        sentences.append(
            "A claim not testable on a scaled regime says nothing for or against the paper: "
            "it needs the paper's settings."
        )
    if any(r["verdict"] == "contradicted" for r in rows) and any(
        "reconstruct" in r["regime"] for r in rows
    ):
        sentences.append(
            "Where the settings are our reconstruction, a contradiction speaks against that "
            "reconstruction as much as against the paper."
        )
    return " ".join(sentences)


#: a criterion's second reading of its claim, shown beside the verdict in its numbers and not
#: deciding: ``speed reading (loss AUC; shown, not deciding): Case 1 ... → would be supported``
_SHOWN_READING = re.compile(r"(\w+ reading) \([^)]*shown, not deciding\): (.*)$")


def _reading_sentence(row: dict[str, Any]) -> str:
    """A sentence saying that the verdict depends on how the claim is read, when a criterion
    shows a second reading (not deciding) whose panels would give another verdict than the
    claim's; "" otherwise."""
    m = _SHOWN_READING.search(row["numbers"] or "")
    if m is None or row["verdict"] not in ("supported", "contradicted"):
        return ""
    would = sorted(set(re.findall(r"→ would be ([a-z-]+)", m.group(2))))
    if not would or would == [row["verdict"]]:
        return ""
    how = f"{would[0]} in every panel" if len(would) == 1 else f"mixed ({', '.join(would)})"
    return (
        f"The verdict on “{row['claim']}” depends on how it is read: under the {m.group(1)} "
        f"shown beside it (not deciding) it would be {how}."
    )


def _short_why(row: dict[str, Any]) -> str:
    why = row["why"] or ""
    if row["verdict"] == "inconclusive" and not why:
        for phrase, reason in _REASONS:
            if phrase in row["numbers"]:
                return reason
        head = headline(row.get("panels") or [])
        against = head.get("against")
        if row["ci_low"] is not None and against is not None:
            m = row["threshold"]
            if against < row["ci_low"] and row["ci_high"] < m:
                return (
                    f"effect {_effect(row)} inside the practical tie (−{m:g}, {m:g}): ahead by "
                    "no margin that matters, behind by none either"
                )
            return f"effect {_effect(row)} straddles its margin ±{m:g}"
        if row["ci_low"] is not None:
            return f"effect {_effect(row)} straddles its threshold {row['threshold']:g}"
        return "no interval decides it"
    if why.startswith("not testable at this profile: scaled regime"):
        return "a scaled regime at this profile"
    return why.split("; ")[0]


#: a criterion's own reason for an inconclusive verdict (in its numbers) -> the plain words
_REASONS = (
    ("by construction", "the effect follows from the method's own scaling, by construction"),
    ("grid not converged", "the learning-rate grid is not converged: widen it"),
    ("shows nothing", "the compared factor never matters in this figure"),
    ("1 seed", "one seed: no interval"),
)


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def md(text: str) -> str:
    """A spec's or a run's words (titles, notes, claims, curve labels in the numbers) as plain
    text in the Markdown report: nothing in them becomes HTML (a ``<`` that would open a tag,
    ``<script>`` or an autolink, is written ``&lt;``), a link (``](`` is escaped) or a new
    block (line breaks become spaces). Comparisons such as "< 0.05" stay as they are."""
    text = " ".join(str(text).replace("\x00", " ").splitlines())
    return _TAG_START.sub("&lt;", text).replace("](", "]\\(")


_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell (a claim such as "||w_k − w_{k−1}|| shrinks"
    would otherwise split the row), as plain text (:func:`md`)."""
    return md(text).replace("|", "\\|")


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def _effect(row: dict[str, Any]) -> str:
    if row["effect"] is None:
        return "–"
    if row["ci_low"] is None:
        return f"{_num(row['effect'])} (no interval)"
    return f"{_num(row['effect'])} [{_num(row['ci_low'])}, {_num(row['ci_high'])}]"


def markdown(paper: str, rows: list[dict[str, Any]], results: list[FigureResult], meta) -> str:
    """The report of one paper."""
    lines = [
        f"# Reproduction report: {PAPERS.get(paper, paper)}",
        "",
        f"Profile `{meta['profile']}`, built at commit `{meta['commit']}` on {meta['date']} "
        f"from one store. Verdicts: *supported* / *contradicted* when the {interval_method()} "
        "clears the claim's threshold, *inconclusive* when it straddles it (or a rule of the "
        "criterion keeps it from deciding, said in its numbers), *not-testable* when the runs "
        "cannot test the claim here "
        "(a scaled regime, too few rounds, diverged runs, no runs). "
        "Generated by `fedsweep report`; do not edit by hand.",
        "",
        "| verdict | claims |",
        "|---|---|",
    ]
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    lines += [f"| {v} | {n} |" for v, n in counts.items()]
    for r in results:
        mine = [row for row in rows if row["figure"] == r.figure_id]
        lines += [
            "",
            f"## {r.figure_id}: {md(r.title)}",
            "",
            f"- **Ran**: {r.runs} of {r.expected_runs} runs, seeds {r.seeds or 'none'}; "
            f"{md(_clean(r.profile_note)) or 'no profile note'}",
            f"- **Figure**: {_figure_links(r, meta['profile'])}",
        ]
        regimes = sorted({part for row in mine for part in row["regime"].split("; ")})
        if regimes:
            lines.append(f"- **Regime**: {md('; '.join(regimes))}")
        if mine:
            lines += _claim_lines(mine, r)
        else:
            lines += [
                "- No claims.",
                "",
                f"**What this says about the paper.** {md(what_this_says([], r))}",
            ]
        for extra in r.report_tables:
            lines += ["", extra]
    return "\n".join(lines) + "\n"


def _claim_lines(mine: list[dict[str, Any]], r: FigureResult) -> list[str]:
    """A figure's claims in its report section: the verdict table, what it says about the
    paper, and each claim's words and numbers."""
    lines = [
        "",
        "| claim | verdict | effect [95% CI] | holds when | seeds | regime |",
        "|---|---|---|---|---|---|",
    ]
    for row in mine:
        lines.append(
            f"| {cell(row['claim'])} | **{row['verdict']}** | {_effect(row)} | "
            f"{cell(row['holds_when'] or '–')} | {row['seeds']} | {cell(row['regime'])} |"
        )
    lines += ["", f"**What this says about the paper.** {md(what_this_says(mine, r))}", ""]
    for row in mine:
        why = f" ({md(row['why'])})" if row["why"] else ""
        lines.append(f"- *{md(row['claim'])}*{why}")
        if row["paper_words"]:
            lines.append(f"  - The paper: {md(row['paper_words'])}")
        beside = paper_beside_ours(row)
        if beside:
            lines.append(f"  - The paper's effect beside ours: {md(beside)}")
        if row.get("seeds_needed"):
            lines.append(
                f"  - About {row['seeds_needed']} seeds would decide it at the spread observed "
                "(`fedsweep sweep FIGURE --until-decided`)"
            )
        for part in row.get("degenerate") or ():
            lines.append(f"  - Degenerate, not counted: {md(part)}")
        lines.append(f"  - Numbers: {md(row['numbers'])}")
    return lines


def paper_beside_ours(row: dict[str, Any]) -> str:
    """``the paper: +0.0339 (Sec. 5.2, Table 2: ...); ours 0.0143, 0.42 of it`` ("" when the
    claim records nothing of the paper's)."""
    if not row.get("paper_effect_text"):
        return ""
    paper = row.get("paper_effect")
    head = f"{paper:+.3g}" if paper is not None else "no number"
    text = f"the paper: {head} ({row['paper_effect_source']}: {row['paper_effect_text']})"
    if row.get("effect") is not None:
        text += f"; ours {row['effect']:+.3g}"
        if row.get("effect_ratio") is not None:
            text += f", {row['effect_ratio']:.2g} of it"
    return text


def _figure_links(r: FigureResult, profile: str) -> str:
    """Links to the figure's PNGs in ``docs/figures/<profile>/`` (what the repository keeps;
    ``fedsweep figures`` also writes the interactive HTML beside them)."""
    stems = [stem for stem, _ in r.stems()]
    if not r.runs or not stems:
        return "not drawn (no runs at this profile)"
    return " · ".join(f"[{stem}](../figures/{profile}/{stem}.png)" for stem in stems)


def report_name(paper: str, profile: str) -> str:
    """``bherd.md`` for the quick profile (the reports the docs link), ``bherd-paper.md`` for
    another profile, so the reports of several profiles live side by side."""
    return f"{paper}.md" if profile == "quick" else f"{paper}-{profile}.md"


def build_meta(profile: str, repo: Path | None = None) -> dict[str, str]:
    """The profile, the commit of ``repo`` (the checkout the sweeps came from) and the date."""
    import subprocess

    commit = "unknown"
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=repo or Path.cwd(),
            timeout=10,
        )
        if out.returncode == 0:
            commit = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return {"profile": profile, "commit": commit, "date": dt.date.today().isoformat()}


def write_report(
    results: list[FigureResult], out_dir: Path, meta: dict[str, str]
) -> tuple[list[Path], list[dict[str, Any]]]:
    """Write ``<paper>.md`` per paper and ``claims-<profile>.json`` into ``out_dir``
    (atomically); returns the files and the claim rows. A paper's report ends with the verdict
    maps of ``out_dir/robustness/`` for its figures at the profile (``fedsweep robustness``)."""
    from fedsweep.core.atomic import write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = claim_rows(results)
    files = []
    by_paper: dict[str, list[FigureResult]] = {}
    for r in results:
        by_paper.setdefault(paper_of(r.figure_id), []).append(r)
    for paper, figs in sorted(by_paper.items()):
        mine = [row for row in rows if row["paper"] == paper]
        path = out_dir / report_name(paper, meta["profile"])
        from dashboards.verdict_map import report_section  # the maps of out_dir/robustness/

        robust = report_section(out_dir, meta["profile"], [r.figure_id for r in figs])
        write_text(path, markdown(paper, mine, figs, meta) + robust)
        files.append(path)
    data = {**meta, "interval": interval_method(), "claims": rows}
    path = out_dir / f"claims-{meta['profile']}.json"
    write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    files.append(path)
    return files, rows


# ------------------------------------------------------------------------------ HTML page
def result_of_entry(e: dict[str, Any]) -> FigureResult:
    """A figure's index entry (``dashboards.index.entry``) as the :class:`FigureResult` the
    report reads (no figure object: the report links to the figure's file)."""
    checks = [
        ClaimCheck(
            c["claim"],
            c["verdict"],
            c.get("numbers", ""),
            c.get("criterion", ""),
            "" if c.get("shown") == c["verdict"] else c.get("shown", ""),
            tuple(c.get("evidence", ())),
            c.get("regime", ""),
            c.get("id", ""),
            c.get("words", ""),
        )
        for c in e.get("claims", [])
    ]
    seeds = [int(x) for x in e.get("seeds") or []]
    return FigureResult(
        e["figure_id"],
        e.get("title", ""),
        e.get("profile", ""),
        None,
        seeds,
        seeds,
        e.get("runs", 0),
        e.get("expected_runs", 0),
        e.get("profile_note", ""),
        e.get("data_note", ""),
        checks,
    )


_CLASS = {"supported": "yes", "contradicted": "no", "inconclusive": "inc", "not-testable": "na"}
_CSS = """body{font-family:sans-serif;margin:2em;max-width:1400px}
table{border-collapse:collapse;margin:.5em 0;width:100%}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
.yes{background:#d9f2d9;color:#11621a;font-weight:bold}
.no{background:#f8d7d7;color:#8a1414;font-weight:bold}
.inc{background:#fff3cd;color:#7a5a00;font-weight:bold}
.na{background:#eee;color:#555;font-weight:bold}
.words{color:#444;font-style:italic}.small{color:#666;font-size:.85em}
summary{cursor:pointer;color:#1f5fbf}"""


def html_page(results: list[FigureResult], meta: dict[str, str]) -> str:
    """The reproduction report as one HTML page beside the figures' index (links to the
    figures' files in the same folder)."""
    from html import escape

    rows = claim_rows(results)
    counts = " · ".join(f"{v}: {sum(r['verdict'] == v for r in rows)}" for v in VERDICTS)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>fedsweep reproduction report ({escape(meta['profile'])})</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Reproduction report, profile <code>{escape(meta['profile'])}</code></h1>",
        f"<p class='small'>Built at commit <code>{escape(meta['commit'])}</code> on "
        f"{escape(meta['date'])}. {escape(interval_method())}; <b>supported</b> / "
        "<b>contradicted</b> when it clears the claim's threshold, <b>inconclusive</b> when it "
        "straddles it, <b>not-testable</b> when these runs cannot test the claim (scaled "
        f"regime, too few rounds, diverged runs, no runs). {escape(counts)}. "
        "<a href='index.html'>All figures</a></p>",
    ]
    by_paper: dict[str, list[FigureResult]] = {}
    for r in results:
        by_paper.setdefault(paper_of(r.figure_id), []).append(r)
    for paper, figs in sorted(by_paper.items()):
        parts.append(f"<h2>{escape(PAPERS.get(paper, paper))}</h2>")
        for r in figs:
            mine = [row for row in rows if row["figure"] == r.figure_id]
            fid = escape(r.figure_id)
            parts.append(
                f"<h3 id='{fid}'><a href='{fid}.html'>{fid}</a>: {escape(r.title)}</h3>"
                f"<p class='small'>{r.runs} of {r.expected_runs} runs · "
                f"{escape(_clean(r.profile_note))}</p>"
                f"<p><b>What this says about the paper.</b> {escape(what_this_says(mine, r))}</p>"
            )
            if not mine:
                continue
            body = "".join(
                f"<tr><td>{escape(row['claim'])}"
                + (
                    f"<div class='words'>The paper: {escape(row['paper_words'])}</div>"
                    if row["paper_words"]
                    else ""
                )
                + f"</td><td class='{_CLASS[row['verdict']]}'>{escape(row['verdict'])}</td>"
                f"<td>{escape(_effect(row))}</td><td>{escape(row['holds_when'] or '–')}</td>"
                f"<td>{row['seeds']}</td><td class='small'>{escape(row['regime'])}</td>"
                f"<td class='small'>{escape(row['why'])}<details><summary>numbers</summary>"
                f"{escape(row['numbers']).replace('; ', '<br>')}</details></td></tr>"
                for row in mine
            )
            parts.append(
                "<table><tr><th>claim</th><th>verdict</th><th>effect [95% CI]</th>"
                "<th>holds when</th><th>seeds</th><th>regime</th><th>why / numbers</th></tr>"
                f"{body}</table>"
            )
    parts.append("</body></html>")
    return "".join(parts)


def write_html_report(entries: list[dict[str, Any]], out_dir: Path) -> Path | None:
    """``reproduction.html`` beside the figures' index, from the index entries in ``out_dir``
    (one profile: the most common among the entries); None without entries."""
    from fedsweep.core.atomic import write_text

    if not entries:
        return None
    profiles = [e.get("profile", "") for e in entries]
    profile = max(set(profiles), key=profiles.count)
    results = [result_of_entry(e) for e in entries if e.get("profile", "") == profile]
    meta = build_meta(profile, Path(__file__).resolve().parent)
    return write_text(Path(out_dir) / "reproduction.html", html_page(results, meta))
