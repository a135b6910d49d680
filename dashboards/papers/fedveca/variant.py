"""R1 against our reconstruction's damped variant [U] (issue 35): how much FedVeca's verdicts
hang on our reconstruction of the lost τ rule.

The variant is ``fedveca.tau_damping: bounded`` (docs/algorithms.md §5.8;
``fedsweep.components.step_policies.fedveca``): R1 and its clamp, then the global step size
τ_k = Σ p_i τ_{k,i} may change per round by a factor 1 + c at most (c = ``tau_max_change``,
0.5), the clients' τ scaled by one common factor. Its runs differ from R1's in the config hash
only by that section, so they sit beside R1's in the same store: ``fedsweep sweep --set
fedveca.tau_damping=bounded sweeps/fedveca-figN.yaml`` makes them and ``fedsweep figures --set
…`` draws them (the figures and the verdicts' numbers then name the variant).

:func:`variant_section` is the Markdown block of the FedVeca reproduction report: per claim (and
regime) the verdict and effect [95% CI] under R1 and under the variant and whether the verdict
changed, and for Fig. 6 one line of numbers per rule (:func:`trend`): how much τ_k moves from
round to round, and how often ‖w_k − w_{k−1}‖ falls, over rounds 6–50 (the rounds its claims
read) and the seeds; then whether the variant matches the paper's Fig. 6 prose.
:func:`add_variant_section` builds the FedVeca figures again with the variant's override and
appends that block to the last FedVeca figure's ``report_tables``; without variant runs the block
says how to make them. ``fedsweep report`` calls it (as ``REPORT_SECTIONS["fedveca-variant"]``, collected
by ``dashboards.registry``), handing it a ``rebuild`` function: a paper module imports no
``dashboards.build`` or ``dashboards.report`` (they reach the registry, which imports the papers).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dashboards.model import FigureResult
from fedsweep.components.step_policies.fedveca import VARIANT_LABEL, rule_label
from fedsweep.judge.papers.fedveca import FIG6_ROUNDS, FIG6_WARMUP, TAU_STEADY
from fedsweep.judge.stats import VERDICTS
from fedsweep.judge.verdicts import ClaimVerdict

#: the ``--set`` override that selects the variant (sweeps, figures, the report)
VARIANT_SET: dict[str, Any] = {"fedveca.tau_damping": "bounded"}
#: the figures the comparison covers (the FedVeca builders' ids)
FIGURES = tuple(f"fedveca-fig{i}" for i in range(3, 9))
FIG6 = "fedveca-fig6"
TREND_METRICS = ("tau_k", "w_change")
#: Fig. 6's two claims (the paper's prose on the figure), by their ids in sweeps/fedveca-fig6.yaml
TAU_ID = "tau-k-steady"
W_ID = "w-change-shrinks"


def variant_command(profile: str, overrides: Mapping[str, Any] | None = None) -> str:
    """The command that makes the variant's runs of every FedVeca figure at ``profile``."""
    sets = " ".join(f"--set {k}={v}" for k, v in (overrides or VARIANT_SET).items())
    specs = " ".join(f"sweeps/{f}.yaml" for f in FIGURES)
    return f"fedsweep sweep --profile {profile} {sets} {specs}"


def variant_label(overrides: Mapping[str, Any] | None = None) -> str:
    """The variant's name in the report, e.g. "R1 + bounded τ_k change (c = 0.5): our
    reconstruction's damped variant [U]"."""
    o = dict(overrides or VARIANT_SET)
    return rule_label(
        "R1", str(o.get("fedveca.tau_damping", "bounded")), o.get("fedveca.tau_max_change", 0.5)
    )


# ------------------------------------------------------------------------ Fig. 6 in numbers
@dataclass(frozen=True)
class Trend:
    """Fig. 6's two histories of one τ rule, over rounds 6–50 and the seeds found.

    ``tau_change``: per seed the mean over those rounds of |τ_k − τ_{k−1}| / τ_k (the τ_k
    claim's measure, but the mean instead of the median), then the mean over seeds, with the
    smallest and largest seed's value; ``tau_low``/``tau_high``: the range of τ_k over those
    rounds and seeds; ``w_falls``: per seed the share of those rounds in which ‖w_k − w_{k−1}‖
    is below the previous round's, mean over seeds; ``w_ratio``: per seed the mean ‖w_k −
    w_{k−1}‖ over the last third of those rounds divided by the first third's, mean over seeds
    (< 1: it shrinks)."""

    seeds: int
    tau_change: float
    tau_change_low: float
    tau_change_high: float
    tau_low: float
    tau_high: float
    w_falls: float
    w_ratio: float


def _window(s: pd.Series) -> pd.Series:
    """Rounds 6–50 (measures.FIG6_WARMUP, measures.FIG6_ROUNDS)."""
    return s[(s.index > FIG6_WARMUP) & (s.index <= FIG6_ROUNDS)]


def _series(long: pd.DataFrame, run: str, metric: str) -> pd.Series:
    rows = long[(long["run_id"] == run) & (long["metric"] == metric)].sort_values("round")
    s = pd.Series(rows["value"].astype(float).to_numpy(), index=rows["round"].astype(int))
    return s[np.isfinite(s)]


def trend(long: pd.DataFrame | None) -> Trend | None:
    """:class:`Trend` of the runs in ``long`` (``store.load_metrics`` rows of ``tau_k`` and
    ``w_change``, one run per seed); None without a run that has both over rounds 6–50."""
    if long is None or long.empty:
        return None
    changes, taus, falls, ratios = [], [], [], []
    for run in sorted(set(long["run_id"])):
        tau = _series(long, run, "tau_k")
        w = _series(long, run, "w_change")
        tau = tau[tau.index <= FIG6_ROUNDS]
        w = w[w.index <= FIG6_ROUNDS]
        change = _window((tau.diff().abs() / tau).dropna())
        fell = _window(w.diff().dropna() < 0)
        w_win = _window(w)
        if change.empty or fell.empty or len(w_win) < 3:
            continue
        changes.append(float(change.mean()))
        taus += list(_window(tau))
        falls.append(float(fell.mean()))
        third = len(w_win) // 3
        first, last = w_win.iloc[:third].mean(), w_win.iloc[-third:].mean()
        ratios.append(float(last / first) if first > 0 else math.inf)
    if not changes:
        return None
    return Trend(
        len(changes),
        float(np.mean(changes)),
        min(changes),
        max(changes),
        float(min(taus)),
        float(max(taus)),
        float(np.mean(falls)),
        float(np.mean(ratios)),
    )


def histories(client, index, spec, profile: str, overrides: Mapping[str, Any]) -> pd.DataFrame:
    """``tau_k`` and ``w_change`` of the runs of ``spec`` (Fig. 6) found under ``overrides``."""
    from fedsweep.judge.store import load_metrics, resolve_runs

    found = resolve_runs(spec, profile, index, dict(overrides), client).found
    return load_metrics(client, found, TREND_METRICS)


# ------------------------------------------------------------------------------ the table
@dataclass(frozen=True)
class Row:
    """One claim (in one regime) under both rules; a side is None where its figure has no
    claim row (or no runs: ``r1_runs``/``variant_runs``)."""

    figure: str
    claim: str
    regime: str
    r1: dict[str, Any] | None
    variant: dict[str, Any] | None
    r1_runs: int
    variant_runs: int
    #: runs the figure expects under each rule (0: not known)
    r1_expected: int = 0
    variant_expected: int = 0
    #: the claim's id (how the two rules' rows are matched)
    id: str = ""

    @property
    def changed(self) -> bool | None:
        """Whether the verdict differs; None when a side has no runs or no row, or when neither
        rule can test the claim (both not-testable: nothing to compare)."""
        if self.r1 is None or self.variant is None or not self.r1_runs or not self.variant_runs:
            return None
        verdicts = {self.r1["verdict"], self.variant["verdict"]}
        if verdicts == {"not-testable"}:
            return None
        return len(verdicts) > 1


def _regime_kind(regime: str) -> str:
    """``reconstructed: the τ rule R1 and …`` -> ``reconstructed``."""
    return regime.split(":", 1)[0].strip() or "not declared"


#: the least favourable panel first, as the report's headline (dashboards/report.py)
_RANK = {"contradicted": 0, "inconclusive": 1, "supported": 2, "not-testable": 3}


def claim_row(figure: str, check: ClaimVerdict) -> dict[str, Any]:
    """The report's reading of one check (``dashboards.report.claim_rows``: the four-way
    verdict, the headline panel's effect and interval), as far as the table needs it."""
    verdict = check.verdict if check.verdict in VERDICTS else "not-testable"
    head = min(check.evidence, key=lambda e: _RANK.get(e.get("verdict", ""), 1), default={})
    return {
        "figure": figure,
        "id": check.id,
        "claim": check.claim,
        "verdict": verdict,
        "regime": check.regime or "not declared",
        "effect": head.get("effect"),
        "ci_low": head.get("ci_low"),
        "ci_high": head.get("ci_high"),
    }


def compare(r1: Sequence[FigureResult], variant: Sequence[FigureResult]) -> list[Row]:
    """The claims of the FedVeca figures of ``r1`` (built as they are) and ``variant`` (built
    with the variant's override), matched by (figure, claim id, regime kind), in R1's order."""
    runs_r1 = {r.figure_id: (r.runs, r.expected_runs) for r in r1}
    runs_var = {r.figure_id: (r.runs, r.expected_runs) for r in variant}

    def keyed(results: Sequence[FigureResult]) -> dict[tuple[str, str, str], dict[str, Any]]:
        rows = [
            claim_row(r.figure_id, c) for r in results if r.figure_id in FIGURES for c in r.claims
        ]
        return {(row["figure"], row["id"], _regime_kind(row["regime"])): row for row in rows}

    a, b = keyed(r1), keyed(variant)
    keys = list(a) + [k for k in b if k not in a]
    rows = []
    for key in keys:
        f, claim_id, regime = key
        (n1, e1), (n2, e2) = runs_r1.get(f, (0, 0)), runs_var.get(f, (0, 0))
        claim = (a.get(key) or b[key])["claim"]
        rows.append(Row(f, claim, regime, a.get(key), b.get(key), n1, n2, e1, e2, id=claim_id))
    return rows


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.4g}"


def effect_text(row: dict[str, Any] | None) -> str:
    """``0.643 [0.4885, 0.7981]`` (the report's form); "–" without an effect."""
    if row is None or row.get("effect") is None:
        return "–"
    if row.get("ci_low") is None:
        return f"{_num(row['effect'])} (no interval)"
    return f"{_num(row['effect'])} [{_num(row['ci_low'])}, {_num(row['ci_high'])}]"


def _verdict(row: dict[str, Any] | None, runs: int, expected: int = 0) -> str:
    """``**supported**``, with ``(8 of 10 runs)`` when the figure lacks runs; "no runs"."""
    if not runs:
        return "no runs"
    partial = f" ({runs} of {expected} runs)" if expected > runs else ""
    return "–" if row is None else f"**{row['verdict']}**{partial}"


def _cell(text: str) -> str:
    """Text for a Markdown table cell (a ``|`` in a claim, as in ‖w_k − w_{k−1}‖, escaped)."""
    return text.replace("|", "\\|")


def comparison_table(rows: Sequence[Row]) -> str:
    """The Markdown table: figure, claim, regime, each rule's verdict and effect, changed?"""
    lines = [
        "| figure | claim | regime | R1 | R1 effect [95% CI] | variant | variant effect "
        "[95% CI] | changed? |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        changed = {True: "**yes**", False: "no", None: "–"}[row.changed]
        lines.append(
            f"| {row.figure} | {_cell(row.claim)} | {row.regime} | "
            f"{_verdict(row.r1, row.r1_runs, row.r1_expected)} | {effect_text(row.r1)} | "
            f"{_verdict(row.variant, row.variant_runs, row.variant_expected)} | "
            f"{effect_text(row.variant)} | {changed} |"
        )
    return "\n".join(lines)


def trend_table(trends: Mapping[str, Trend | None]) -> str:
    """One line per rule of Fig. 6's numbers (:class:`Trend`); "no runs" where a rule has none."""
    lines = [
        f"| τ rule | seeds | mean \\|Δτ_k\\|/τ_k, rounds {FIG6_WARMUP + 1}–{FIG6_ROUNDS} "
        "(seed range) | τ_k range | rounds with ‖w_k − w_{k−1}‖ falling | ‖w_k − w_{k−1}‖, "
        "last third / first third |",
        "|---|---|---|---|---|---|",
    ]
    for name, t in trends.items():
        if t is None:
            lines.append(f"| {name} | 0 | no runs | – | – | – |")
            continue
        lines.append(
            f"| {name} | {t.seeds} | {t.tau_change:.3g} ({t.tau_change_low:.3g}–"
            f"{t.tau_change_high:.3g}) | {t.tau_low:.3g}–{t.tau_high:.3g} | "
            f"{t.w_falls:.0%} | {t.w_ratio:.3g} |"
        )
    return "\n".join(lines)


def prose_sentence(rows: Sequence[Row], change: float) -> str:
    """Whether the variant matches the paper's Fig. 6 prose (τ_k without large fluctuation,
    ‖w_k − w_{k−1}‖ decreasing): both of Fig. 6's claims supported under the variant."""
    fig6 = {row.id: row for row in rows if row.figure == FIG6}
    parts = {TAU_ID: "τ_k without large fluctuation", W_ID: "‖w_k − w_{k−1}‖ decreasing"}
    got = {}
    for claim, words in parts.items():
        row = fig6.get(claim)
        if row is None or row.variant is None or not row.variant_runs:
            return "No Fig. 6 runs of the variant: whether it matches the paper's prose is open."
        got[words] = (row.variant["verdict"], effect_text(row.variant))
    caveat = (
        f" Its bound (c = {change:g}) allows |Δτ_k|/τ_k up to {change:g} per round, "
        f"{'below' if change < TAU_STEADY else 'above'} the claim's threshold {TAU_STEADY:g}"
        + (
            ": the τ_k verdict is then largely true by construction."
            if change < TAU_STEADY
            else ", so the τ_k verdict is not forced by the bound."
        )
    )
    if all(verdict == "supported" for verdict, _ in got.values()):
        said = " and ".join(f"{w} (effect {e})" for w, (_, e) in got.items())
        return f"**The damped variant matches the paper's Fig. 6 prose**: {said}.{caveat}"
    said = "; ".join(f"{w}: {v} (effect {e})" for w, (v, e) in got.items())
    return f"**The damped variant does not match the paper's Fig. 6 prose**: {said}.{caveat}"


def attribution(rows: Sequence[Row]) -> str:
    """Which verdicts speak against our τ rule R1 and which against the paper (issue 51, item
    7): a contradiction under R1 that the damped variant does not repeat hangs on R1, our
    reconstruction; one under both rules speaks against the paper as far as our two rules
    reach; likewise a support under R1 alone is R1's, under both the paper's. "" without a
    claim judged under both."""
    both = [
        r
        for r in rows
        if r.r1 is not None and r.variant is not None and r.r1_runs and r.variant_runs
    ]
    if not both:
        return ""

    def names(group: list[Row]) -> str:
        return "; ".join(f"{r.figure} “{r.claim}”" for r in group) or "none"

    def verdict(row: dict[str, Any]) -> str:
        return row["verdict"]

    against_r1 = [r for r in both if verdict(r.r1) == "contradicted" != verdict(r.variant)]
    against_paper = [r for r in both if verdict(r.r1) == verdict(r.variant) == "contradicted"]
    for_r1 = [r for r in both if verdict(r.r1) == "supported" != verdict(r.variant)]
    for_paper = [r for r in both if verdict(r.r1) == verdict(r.variant) == "supported"]
    return (
        f"**R1 apart from the paper** ({len(both)} verdicts judged under both rules): "
        f"{len(against_r1)} contradiction(s) under R1 speak against R1, our reconstruction, not "
        f"the paper (the variant does not repeat them: {names(against_r1)}); "
        f"{len(against_paper)} speak against the paper as far as our two rules reach "
        f"(contradicted under both: {names(against_paper)}); {len(for_r1)} support(s) hang on "
        f"R1 ({names(for_r1)}), {len(for_paper)} hold under both ({names(for_paper)})."
    )


def variant_section(
    r1: Sequence[FigureResult],
    variant: Sequence[FigureResult],
    trends: Mapping[str, Trend | None],
    profile: str,
    overrides: Mapping[str, Any] | None = None,
) -> str:
    """The report block: what the variant is, the comparison table, Fig. 6 in numbers and the
    prose sentence; without variant runs, the command that makes them."""
    overrides = dict(overrides or VARIANT_SET)
    label = variant_label(overrides)
    change = float(overrides.get("fedveca.tau_max_change", 0.5))
    head = [
        f"### τ rule R1 against {VARIANT_LABEL} (every FedVeca figure above)",
        "",
        f"Both rules are ours: the paper's τ equations are lost. The variant, *{label}* "
        f"(`{' '.join(f'{k}={v}' for k, v in overrides.items())}`, docs/algorithms.md §5.8), "
        "keeps R1 and bounds the change of the global step size τ_k per round to a factor "
        f"1 + {change:g} (at least one local step either way), scaling the clients' τ by one "
        "common factor. Same claims, criteria and thresholds; its runs differ from R1's only "
        "in the τ rule (and the baselines derived from them).",
        "",
    ]
    if not any(r.runs for r in variant):
        return "\n".join(
            head
            + [
                f"No runs of the variant at profile `{profile}` in this store. Make them with "
                f"`{variant_command(profile, overrides)}` (the same `--tracking-uri`; "
                "`--panel setting=svm-mnist` for fedveca-fig3 and fig4 limits them to the SVM "
                "panel), then run `fedsweep report` again."
            ]
        )
    rows = compare(r1, variant)
    judged = [row for row in rows if row.changed is not None]
    changed = [row for row in judged if row.changed]
    which = "; ".join(f"{r.figure} “{r.claim}” ({r.regime})" for r in changed)
    summary = f"{len(changed)} of {len(judged)} verdicts judged under both rules differ"
    summary += f": {which}." if changed else "."
    lines = [*head, comparison_table(rows), "", summary, ""]
    split = attribution(rows)
    if split:
        lines += [split, ""]
    if trends:
        lines += [
            "Fig. 6 in numbers (one run per seed; the τ_k claim reads the median of the same "
            "per-round change, the model-change claim the slope of its logarithm):",
            "",
            trend_table(trends),
            "",
            prose_sentence(rows, change),
        ]
    missing = [r.figure_id for r in variant if not r.runs]
    if missing:
        lines += [
            "",
            f"No variant runs for {', '.join(missing)}: `{variant_command(profile, overrides)}`.",
        ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ the report
#: ``rebuild(figure ids, overrides) -> [FigureResult]``: the report's build of those figures
#: from the same store and profile under ``--set`` overrides (files into a scratch folder)
Rebuild = Callable[[list[str], dict[str, Any]], list[FigureResult]]


def add_variant_section(
    results: Sequence[FigureResult],
    rebuild: Rebuild,
    tracking_uri: str,
    profile: str,
    sweeps_dir: str | Path,
    overrides: Mapping[str, Any] | None = None,
) -> str | None:
    """Build the FedVeca figures of ``results`` again from the variant's runs (``rebuild`` with
    ``overrides``, default :data:`VARIANT_SET`), and append :func:`variant_section` to the last
    FedVeca figure's ``report_tables``; Fig. 6's numbers are read from the store
    (``tracking_uri``, the spec in ``sweeps_dir``). Returns the block; None when ``results``
    has no FedVeca figure."""
    from fedsweep.judge.store import RunIndex
    from fedsweep.specs.load import load_spec
    from fedsweep.specs.names import figure_file
    from fedsweep.tracking.connect import get_client

    veca = [r for r in results if r.figure_id in FIGURES]
    if not veca:
        return None
    overrides = dict(overrides or VARIANT_SET)
    ids = [r.figure_id for r in veca]
    variant = rebuild(ids, overrides)
    trends: dict[str, Trend | None] = {}
    if FIG6 in ids and any(r.runs for r in variant):
        client = get_client(tracking_uri, create=False)
        index = RunIndex.load(client)
        spec = load_spec(figure_file(FIG6, sweeps_dir) or Path(sweeps_dir) / f"{FIG6}.yaml")
        trends["R1 (our reconstruction)"] = trend(histories(client, index, spec, profile, {}))
        trends[variant_label(overrides)] = trend(histories(client, index, spec, profile, overrides))
    text = variant_section(veca, variant, trends, profile, overrides)
    veca[-1].report_tables.append(text)
    return text
