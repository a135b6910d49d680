"""One reproduction report per paper (issue 34): every figure and claim of a profile, what we
ran, the effect with its interval, the verdict and a link to the figure; as Markdown
(``docs/reproduction/<paper>.md``) and as data (``claims-<profile>.json``).

Verdicts are the four of :mod:`dashboards.verdicts`. A claim whose criterion is not yet
statistical (it still compares seed means: "yes"/"no") has no interval and so cannot decide: it
is reported **inconclusive** with that reason and its seed-mean outcome in the numbers; "n/t"
and "n/a" (no runs, no criterion) are **not-testable**. The report carries the commit and date
it was built at and no absolute path.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dashboards.model import ClaimCheck, FigureResult
from dashboards.verdicts import INTERVAL_METHOD, VERDICTS

PAPERS = {
    "bherd": "BHerd (beneficial herd of local gradients)",
    "fedveca": "FedVeca (adaptive local steps)",
    "fedwalk": "FedWalk (server-side leash task)",
    "intro": "Introduction to federated learning (slides)",
}
#: verdict order from worst to best for the claim's headline panel
_RANK = {"contradicted": 0, "inconclusive": 1, "supported": 2, "not-testable": 3}
SEED_MEAN_NOTE = "seed-mean criterion (no interval over seeds yet), so it cannot decide"


def paper_of(figure_id: str) -> str:
    """``bherd-fig3a`` -> ``bherd``; a figure of no shipped paper -> ``other``."""
    head = figure_id.split("-", 1)[0]
    return head if head in PAPERS else "other"


def verdict4(check: ClaimCheck) -> tuple[str, str]:
    """The four-way verdict of a check and why, when it is not its own."""
    if check.verdict in VERDICTS:
        return check.verdict, check.label
    if check.verdict in ("yes", "no"):
        return "inconclusive", f"{SEED_MEAN_NOTE} (seed means: {check.verdict})"
    if check.verdict == "n/t":
        return "not-testable", check.label or "not testable at this profile"
    return "not-testable", check.numbers or "no data"


def _clean(text: str) -> str:
    """No absolute path of this machine in a report: the working folder and the home folder
    become ``.`` and ``~``, any other absolute path its last two parts."""
    for root, short in ((str(Path.cwd()), "."), (os.path.expanduser("~"), "~")):
        if root not in ("", "/"):
            text = text.replace(root, short)
    return re.sub(r"(?<![\w.~])/(?:[\w.-]+/)+([\w.-]+/[\w.-]+)", r"…/\1", text)


def claim_rows(results: Iterable[FigureResult]) -> list[dict[str, Any]]:
    """One object per claim (and regime, where a figure mixes regimes)."""
    rows = []
    for r in results:
        for c in r.claims:
            verdict, why = verdict4(c)
            panels = [dict(e) for e in c.evidence]
            head = min(panels, key=lambda e: _RANK.get(e.get("verdict", ""), 1), default={})
            rows.append(
                {
                    "paper": paper_of(r.figure_id),
                    "figure": r.figure_id,
                    "claim": c.claim,
                    "verdict": verdict,
                    "why": _clean(why),
                    "effect": head.get("effect"),
                    "ci_low": head.get("ci_low"),
                    "ci_high": head.get("ci_high"),
                    "threshold": head.get("threshold"),
                    "holds_when": head.get("holds_when"),
                    "measure": head.get("measure"),
                    "interval": INTERVAL_METHOD if panels else None,
                    "seeds": len(head.get("seeds", [])) if panels else len(r.seeds),
                    "regime": c.regime or "not declared",
                    "profile": r.profile,
                    "profile_note": _clean(r.profile_note),
                    "numbers": _clean(c.numbers),
                    "panels": panels,
                    "runs": r.runs,
                    "expected_runs": r.expected_runs,
                }
            )
    return rows


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
        f"from one store. Verdicts: *supported* / *contradicted* when the {INTERVAL_METHOD} "
        "clears the claim's threshold, *inconclusive* when it straddles it (or the criterion "
        "has no interval yet), *not-testable* when the runs cannot test the claim here "
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
            f"## {r.figure_id}: {r.title}",
            "",
            f"- **Ran**: {r.runs} of {r.expected_runs} runs, seeds {r.seeds or 'none'}; "
            f"{_clean(r.profile_note) or 'no profile note'}",
            f"- **Figure**: [{r.figure_id}](../figures/{meta['profile']}/{r.figure_id}.html)",
        ]
        regimes = sorted({row["regime"] for row in mine})
        if regimes:
            lines.append(f"- **Regime**: {'; '.join(regimes)}")
        if not mine:
            lines.append("- No claims.")
            continue
        lines += [
            "",
            "| claim | verdict | effect [95% CI] | holds when | seeds | regime |",
            "|---|---|---|---|---|---|",
        ]
        for row in mine:
            lines.append(
                f"| {row['claim']} | **{row['verdict']}** | {_effect(row)} | "
                f"{row['holds_when'] or '–'} | {row['seeds']} | {row['regime']} |"
            )
        lines.append("")
        for row in mine:
            why = f" ({row['why']})" if row["why"] else ""
            lines.append(f"- *{row['claim']}*{why}: {row['numbers']}")
    return "\n".join(lines) + "\n"


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
    (atomically); returns the files and the claim rows."""
    from fedsweep.core.atomic import write_text

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = claim_rows(results)
    files = []
    by_paper: dict[str, list[FigureResult]] = {}
    for r in results:
        by_paper.setdefault(paper_of(r.figure_id), []).append(r)
    for paper, figs in sorted(by_paper.items()):
        mine = [row for row in rows if row["paper"] == paper]
        path = out_dir / f"{paper}.md"
        write_text(path, markdown(paper, mine, figs, meta))
        files.append(path)
    data = {**meta, "interval": INTERVAL_METHOD, "claims": rows}
    path = out_dir / f"claims-{meta['profile']}.json"
    write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    files.append(path)
    return files, rows
