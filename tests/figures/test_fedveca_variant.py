"""R1 against our reconstruction's damped variant [U] (issue 35,
dashboards/papers/fedveca/variant.py): the comparison of verdicts on hand-made FigureResults,
Fig. 6's numbers on hand-made histories, the variant's labels on the figures, and the whole path
through ``fedsweep report`` on a real MLflow store of hand-logged runs (no training, no Ray)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from typer.testing import CliRunner

from dashboards.model import FigureResult
from dashboards.papers.fedveca import figures as fedveca
from dashboards.papers.fedveca import variant as V
from fedsweep.cli.main import app
from fedsweep.judge.papers.fedveca import tau_rule
from fedsweep.judge.verdicts import ClaimVerdict
from fedsweep.specs.load import expand, load_spec
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.store import ensure_experiment
from tests.helpers import log_config, tiny_config

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = ROOT / "sweeps"
TAU = "the global step size tau_k shows no large fluctuation"
W = "the model change ||w_k - w_{k-1}|| becomes smaller as the rounds increase"
PREMISE = "the premise stays above its lower bound after the first few rounds"
#: each claim's id in the specs (the rows are matched by it, never by the words)
IDS = {TAU: V.TAU_ID, W: V.W_ID, PREMISE: "premise-holds"}
RECON = "reconstructed: the τ rule R1 and η … are our reconstruction"


def check(claim, verdict, effect=None, lo=None, hi=None, regime=RECON) -> ClaimVerdict:
    evidence = ()
    if effect is not None:
        evidence = ({"verdict": verdict, "effect": effect, "ci_low": lo, "ci_high": hi},)
    return ClaimVerdict(
        claim, verdict, "numbers", evidence=evidence, regime=regime, id=IDS.get(claim, "fig3-first")
    )


def result(fid: str, runs: int, *checks: ClaimVerdict) -> FigureResult:
    return FigureResult(fid, fid, "quick", None, [0, 1], [0, 1], runs, 10, claims=list(checks))


R1 = [
    result("fedveca-fig4", 10, check(PREMISE, "inconclusive", 0.13, -0.04, 0.31)),
    result(
        "fedveca-fig6",
        10,
        check(TAU, "contradicted", 0.643, 0.4885, 0.7981),
        check(W, "contradicted", 0.0314, 0.0055, 0.0572),
    ),
]


def variant_results(tau="supported", w="supported", runs=10) -> list[FigureResult]:
    return [
        result("fedveca-fig4", runs, check(PREMISE, "inconclusive", 0.1, -0.1, 0.3)),
        result(
            "fedveca-fig6",
            runs,
            check(TAU, tau, 0.12, 0.08, 0.16),
            check(W, w, -0.02, -0.03, -0.01),
        ),
    ]


# ------------------------------------------------------------------------------ the table
def test_compare_matches_claims_and_says_which_verdicts_changed():
    rows = V.compare(R1, variant_results())
    assert [(r.figure, r.claim) for r in rows] == [
        ("fedveca-fig4", PREMISE),
        ("fedveca-fig6", TAU),
        ("fedveca-fig6", W),
    ]
    assert [r.changed for r in rows] == [False, True, True]
    assert rows[1].r1["effect"] == 0.643 and rows[1].variant["verdict"] == "supported"
    assert all(r.regime == "reconstructed" for r in rows)
    # a variant figure without runs: nothing to compare
    rows = V.compare(R1, variant_results(runs=0))
    assert [r.changed for r in rows] == [None, None, None]
    # the same claim in two regimes (fig3: SVM reconstructed, CNN scaled) stays two rows
    fig3 = "FedVeca reaches the centralized loss and accuracy first"
    a = [
        result(
            "fedveca-fig3",
            8,
            check(fig3, "inconclusive"),
            check(fig3, "n/a", regime="scaled: K=10"),
        )
    ]
    b = [
        result(
            "fedveca-fig3",
            8,
            check(fig3, "supported", 3.0, 1.0, 5.0),
            check(fig3, "n/a", regime="scaled: x"),
        )
    ]
    rows = V.compare(a, b)
    # ... and not-testable under both rules is nothing to compare
    assert [(r.regime, r.changed) for r in rows] == [("reconstructed", True), ("scaled", None)]
    assert rows[1].r1["verdict"] == "not-testable"  # "n/a" reads as the report's not-testable
    # a figure that lacks runs says so beside its verdict
    b[0].runs = 6
    line = V.comparison_table(V.compare(a, b)).splitlines()[2]
    assert "| **supported** (6 of 10 runs) | 3 [1, 5] | **yes** |" in line


def test_the_markdown_table_and_summary():
    text = V.variant_section(R1, variant_results(), {}, "quick")
    assert "### τ rule R1 against our reconstruction's damped variant [U]" in text
    assert "R1 + bounded τ_k change (c = 0.5): our reconstruction's damped variant [U]" in text
    row = next(line for line in text.splitlines() if "becomes smaller" in line)
    # the claim's ‖…‖ pipes are escaped, or the row would split into more cells
    assert "\\|\\|w_k - w_{k-1}\\|\\|" in row and row.count(" | ") == 7  # 8 cells
    tau_row = next(line for line in text.splitlines() if "no large fluctuation" in line)
    assert "**contradicted** | 0.643 [0.4885, 0.7981] | **supported** | 0.12 [0.08, 0.16]" in (
        tau_row
    )
    assert tau_row.endswith("| **yes** |")
    assert "2 of 3 verdicts judged under both rules differ: fedveca-fig6" in text
    premise = next(line for line in text.splitlines() if "premise" in line)
    assert premise.endswith("| no |")


def test_without_variant_runs_the_section_gives_the_command():
    text = V.variant_section(R1, variant_results(runs=0), {}, "paper")
    assert "No runs of the variant at profile `paper`" in text
    assert (
        "`fedsweep sweep --profile paper --set fedveca.tau_damping=bounded "
        "sweeps/fedveca-fig3.yaml sweeps/fedveca-fig4.yaml" in text
    )
    assert "sweeps/fedveca-fig8.yaml`" in text and "| figure |" not in text


def test_the_fig6_prose_sentence():
    rows = V.compare(R1, variant_results())
    assert V.prose_sentence(rows, 0.5).startswith(
        "**The damped variant matches the paper's Fig. 6 prose**: τ_k without large "
        "fluctuation (effect 0.12 [0.08, 0.16]) and ‖w_k − w_{k−1}‖ decreasing"
    )
    assert "not forced by the bound" in V.prose_sentence(rows, 0.5)
    assert "largely true by construction" in V.prose_sentence(rows, 0.1)
    rows = V.compare(R1, variant_results(w="contradicted"))
    sentence = V.prose_sentence(rows, 0.5)
    assert sentence.startswith("**The damped variant does not match the paper's Fig. 6 prose**")
    assert "‖w_k − w_{k−1}‖ decreasing: contradicted" in sentence
    assert "No Fig. 6 runs" in V.prose_sentence(V.compare(R1, variant_results(runs=0)), 0.5)


# --------------------------------------------------------------------- Fig. 6 in numbers
def long_of(runs: dict[int, dict[str, list[float]]]) -> pd.DataFrame:
    """Long rows (seed, run_id, round, metric, value); ``tau_k`` from round 1, ``w_change`` from
    round 2 (as logged)."""
    rows = []
    for seed, metrics in runs.items():
        for metric, ys in metrics.items():
            start = 2 if metric == "w_change" else 1
            rows += [(seed, f"run{seed}", t, metric, v) for t, v in enumerate(ys, start=start)]
    return pd.DataFrame(rows, columns=["seed", "run_id", "round", "metric", "value"])


def alternating(small: float, large: float, n: int = 100) -> list[float]:
    return [small if t % 2 else large for t in range(1, n + 1)]


def test_trend_of_a_jumping_and_a_steady_tau_k():
    jumping = long_of(
        {
            s: {"tau_k": alternating(5, 85), "w_change": [0.01 * 1.05**t for t in range(99)]}
            for s in range(3)
        }
    )
    t = V.trend(jumping)
    # rounds 6–50: |Δτ|/τ alternates 80/5 = 16 and 80/85; w rises every round
    assert t.seeds == 3 and t.tau_change == pytest.approx((16 * 22 + 80 / 85 * 23) / 45)
    assert (t.tau_low, t.tau_high) == (5, 85)
    assert t.w_falls == 0 and t.w_ratio > 1
    steady = {"tau_k": [10.0] * 100, "w_change": [0.1 * 0.9**t for t in range(99)]}
    late = {"tau_k": [10.0] * 50 + alternating(1, 100, 50), "w_change": steady["w_change"]}
    for runs in (steady, late):  # what happens after round 50 is not read
        t = V.trend(long_of({0: runs, 1: runs}))
        # ‖Δw‖ over rounds 36–50 against rounds 6–20: 0.9^30
        assert t.tau_change == 0 and t.w_falls == 1 and t.w_ratio == pytest.approx(0.9**30)
    assert V.trend(None) is None and V.trend(long_of({0: {"tau_k": [1.0] * 4}})) is None
    table = V.trend_table({"R1": V.trend(jumping), "variant": None})
    assert "| R1 | 3 | 8.3 (8.3–8.3) | 5–85 | 0% |" in table
    assert "| variant | 0 | no runs |" in table


# ------------------------------------------------------------------------------ the labels
def test_the_figures_name_the_variant_when_its_runs_are_drawn():
    r1 = SimpleNamespace(overrides={})
    damped = SimpleNamespace(overrides={"fedveca.tau_damping": "bounded"})
    tight = SimpleNamespace(
        overrides={"fedveca.tau_damping": "bounded", "fedveca.tau_max_change": 0.2}
    )
    assert fedveca.rule_note(r1) == fedveca.R1_NOTE
    note = fedveca.rule_note(damped)
    assert "our reconstruction's damped variant [U]" in note and "c = 0.5" in note
    assert "c = 0.2" in fedveca.rule_note(tight)

    # every verdict's numbers name the rule the FedVeca runs followed (the judge's label)
    def config(**fedveca):
        return tiny_config(step_policy="fedveca", fedveca=fedveca)

    assert tau_rule([tiny_config(), config()]) == "τ rule R1 (our reconstruction)"
    assert tau_rule([tiny_config()]) is None  # no FedVeca run: nothing to name
    assert (
        tau_rule([config(tau_damping="bounded")])
        == "τ rule R1 + bounded τ_k change (c = 0.5): our reconstruction's damped variant [U]"
    )


# -------------------------------------------------------------- the report (a real store)
T = 60  # rounds of every hand-made run (Fig. 6's claims read rounds 6–50)


def histories(seed: int, damped: bool) -> dict[str, list[float]]:
    """R1: τ_k jumps between 5 and 85 and ‖Δw‖ grows; the variant: τ_k steady near 10 and
    ‖Δw‖ shrinking (the per-seed factor keeps the seeds apart, as real seeds are)."""
    f = 1 + 0.01 * seed
    if damped:
        tau_k = [10 * f + (0.5 if t % 2 else 0) for t in range(T)]
        w = [0.1 * f * 0.95**t for t in range(T - 1)]
    else:
        tau_k = [(5 if t % 2 else 85) * f for t in range(T)]
        w = [0.01 * f * 1.05**t for t in range(T - 1)]
    out = {"tau_k": tau_k, "w_change": w, "tau_total": [5 * v for v in tau_k]}
    for i in range(5):
        out[f"client/{i}/tau"] = tau_k
    return out


def log_fig6(uri: str, seeds: list[int], damped: bool) -> None:
    """One finished run per seed of Fig. 6 at the quick profile (R1, or the variant's hash)."""
    from mlflow.entities import Metric

    client = get_client(uri)
    exp = ensure_experiment(client, V.FIG6, uri)
    extra = dict(V.VARIANT_SET) if damped else {}
    for trial in expand(load_spec(SWEEPS / f"{V.FIG6}.yaml"), "quick", extra=extra):
        if trial.seed not in seeds:
            continue
        tags = {
            "fedsweep.config_hash": trial.config_hash,
            "fedsweep.figure": trial.figure,
            "fedsweep.status": "finished",
        }
        run = client.create_run(exp, tags=tags).info.run_id
        log_config(client, run, trial.config)
        metrics = [
            Metric(key, float(v), 0, t)
            for key, ys in histories(trial.seed, damped).items()
            for t, v in enumerate(ys, start=2 if key == "w_change" else 1)
        ]
        client.log_batch(run, metrics=metrics)


def report(uri: str, out: Path) -> str:
    args = ["report", "--profile", "quick", "--tracking-uri", uri, "--figure", V.FIG6]
    res = CliRunner().invoke(app, [*args, "--out", str(out), "--sweeps-dir", str(SWEEPS)])
    assert res.exit_code == 0, res.output
    return (out / "fedveca.md").read_text()


@pytest.mark.slow
def test_fedsweep_report_sets_the_variant_beside_r1(tmp_path, monkeypatch):
    import dashboards.readings

    # the specs' readings (another block of the report) load every spec: not this test's subject
    monkeypatch.setattr(dashboards.readings, "add_reading_tables", lambda *a, **k: None)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log_fig6(uri, [0, 1, 2], damped=False)
    text = report(uri, tmp_path / "r1-only")
    assert "No runs of the variant at profile `quick`" in text
    assert "--set fedveca.tau_damping=bounded sweeps/fedveca-fig3.yaml" in text

    log_fig6(uri, [0, 1, 2], damped=True)
    text = report(uri, tmp_path / "both")
    tau = next(line for line in text.splitlines() if line.startswith("| fedveca-fig6 | the global"))
    assert "| reconstructed | **contradicted** (3 of 10 runs) |" in tau
    assert "| **supported** (3 of 10 runs) |" in tau
    assert tau.endswith("| **yes** |")
    w = next(line for line in text.splitlines() if line.startswith("| fedveca-fig6 | the model"))
    assert w.count("**contradicted**") == 1 and w.endswith("| **yes** |")
    assert "2 of 2 verdicts judged under both rules differ" in text
    assert "| R1 (our reconstruction) | 3 |" in text  # Fig. 6's numbers, per rule
    assert "**The damped variant matches the paper's Fig. 6 prose**" in text
    # the figure's own verdicts stay R1's (the report's table above the block)
    own = next(line for line in text.splitlines() if line.startswith("| the global step size"))
    assert "**contradicted**" in own


def test_contradictions_of_r1_are_counted_apart_from_the_paper():
    """Issue 51, item 7: a contradiction the damped variant does not repeat speaks against R1
    (our reconstruction), one under both rules against the paper; supports likewise."""

    def row(claim: str, r1: str, variant: str) -> V.Row:
        return V.Row("fedveca-fig8", claim, "reconstructed", {"verdict": r1},
                     {"verdict": variant}, 10, 10)  # fmt: skip

    rows = [
        row("more clients do not converge faster", "contradicted", "supported"),
        row("N=50 beats the baselines", "contradicted", "contradicted"),
        row("in Case 1 all three overlap", "supported", "supported"),
        row("larger phi is smooth", "supported", "inconclusive"),
        row("premise", "inconclusive", "inconclusive"),
    ]
    text = V.attribution(rows)
    assert text.startswith("**R1 apart from the paper** (5 verdicts judged under both rules): ")
    assert (
        "1 contradiction(s) under R1 speak against R1, our reconstruction, not the paper (the "
        "variant does not repeat them: fedveca-fig8 “more clients do not converge faster”); 1 "
        "speak against the paper as far as our two rules reach (contradicted under both: "
        "fedveca-fig8 “N=50 beats the baselines”); 1 support(s) hang on R1 (fedveca-fig8 "
        "“larger phi is smooth”), 1 hold under both"
    ) in text
    assert V.attribution([row("x", "supported", "supported")][:0]) == ""
