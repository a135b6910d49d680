"""The reproduction report (dashboards/report.py, ``fedsweep report``): one object per claim
with the four verdicts, effect, interval, threshold, seeds and regime; Markdown per paper;
no absolute path of this machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

from dashboards.model import FigureResult
from dashboards.report import claim_rows, write_report
from fedsweep.judge.evidence import evidence_row
from fedsweep.judge.stats import Measure, interval
from fedsweep.judge.verdicts import ClaimVerdict

ROOT = Path(__file__).resolve().parents[2]
MEASURE = Measure("final accuracy B − A, per seed", 0.0, "greater")


def result(figure: str, checks: list[ClaimVerdict], note: str = "", runs: int = 6) -> FigureResult:
    return FigureResult(
        figure, "a title", "quick", go.Figure(), [0, 1, 2], [0, 1, 2], runs, 6, note, "", checks
    )


def statistical() -> ClaimVerdict:
    rows = (
        evidence_row("Case 1", interval([0.02, 0.03, 0.025], [0, 1, 2]), MEASURE),
        evidence_row("Case 2", interval([0.02, -0.01, 0.03], [0, 1, 2]), MEASURE),
    )
    return ClaimVerdict("B beats A", "inconclusive", "numbers", "", "", rows, "paper", "b-beats-a")


def test_one_object_per_claim_with_the_four_verdicts():
    checks = [
        statistical(),
        ClaimVerdict("old entry", "yes", "an index entry from before issue 34"),
        ClaimVerdict("too short", "not-testable", "…", label="not testable at this profile (T=3)"),
        ClaimVerdict("no runs", "n/a", "no runs"),
    ]
    rows = claim_rows([result("bherd-fig3a", checks)])
    assert [(r["claim"], r["verdict"]) for r in rows] == [
        ("B beats A", "inconclusive"),
        ("old entry", "not-testable"),
        ("too short", "not-testable"),
        ("no runs", "not-testable"),
    ]
    head = rows[0]  # the headline panel is the least favourable one (Case 2 straddles 0)
    assert head["ci_low"] < 0 < head["ci_high"] and head["threshold"] == 0.0
    assert (head["seeds"], head["regime"], len(head["panels"])) == (3, "paper", 2)
    assert [p["verdict"] for p in head["panels"]] == ["supported", "inconclusive"]
    assert "before the statistical verdicts (yes)" in rows[1]["why"]
    for row in rows:
        assert row["verdict"] in ("supported", "contradicted", "inconclusive", "not-testable")
        assert {
            "figure",
            "claim",
            "effect",
            "ci_low",
            "ci_high",
            "threshold",
            "seeds",
            "regime",
        } <= set(row)
        if row["verdict"] in ("supported", "contradicted") and row["ci_low"] is not None:
            assert not row["ci_low"] <= row["threshold"] <= row["ci_high"]


def test_reports_per_paper_without_absolute_paths(tmp_path):
    home_path = os.path.expanduser("~/data/leash")
    results = [
        result("bherd-fig3a", [statistical()], note=f"data from {Path.cwd()}/data"),
        result("fedwalk-fig2", [ClaimVerdict("leash helps", "contradicted", f"read {home_path}")]),
    ]
    meta = {"profile": "quick", "commit": "abc1234", "date": "2026-11-25"}
    files, rows = write_report(results, tmp_path / "reproduction", meta)
    assert sorted(p.name for p in files) == ["bherd.md", "claims-quick.json", "fedwalk.md"]
    text = (tmp_path / "reproduction" / "bherd.md").read_text()
    assert "commit `abc1234`" in text and "| B beats A | **inconclusive** |" in text
    assert "(../figures/quick/bherd-fig3a.png)" in text
    data = json.loads((tmp_path / "reproduction" / "claims-quick.json").read_text())
    assert data["commit"] == "abc1234" and len(data["claims"]) == 2
    for path in files:
        body = path.read_text()
        assert str(Path.cwd()) not in body and os.path.expanduser("~") + "/" not in body, path
    # another profile's reports sit beside the quick ones
    paper = {**meta, "profile": "paper"}
    results.append(result("bherd-fig3b", [statistical()], runs=0))
    files, _ = write_report(results, tmp_path / "reproduction", paper)
    assert sorted(p.name for p in files) == [
        "bherd-paper.md",
        "claims-paper.json",
        "fedwalk-paper.md",
    ]
    text_paper = (tmp_path / "reproduction" / "bherd-paper.md").read_text()
    assert "(../figures/paper/bherd-fig3a.png)" in text_paper
    # a figure without runs at the profile links no PNG (none was drawn)
    assert "- **Figure**: not drawn (no runs at this profile)" in text_paper
    assert "bherd-fig3b.png" not in text_paper
    assert (tmp_path / "reproduction" / "bherd.md").read_text() == text  # untouched


def test_the_command_refuses_a_store_that_does_not_exist(tmp_path):
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'none' / 'mlflow.db'}"}
    res = subprocess.run(
        [sys.executable, "-m", "fedsweep.cli.main", "report", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "r").exists()


def test_what_this_says_is_written_from_the_verdicts():
    from dashboards.report import what_this_says

    scaled = ClaimVerdict(
        "leash helps",
        "not-testable",
        "…",
        label="not testable at this profile: scaled regime (2NN instead of ResNet-18)",
        regime="scaled: 2NN instead of ResNet-18",
    )
    r = result("fedwalk-fig2", [statistical(), scaled])
    text = what_this_says(claim_rows([r]), r)
    assert "The data cannot decide “B beats A” (effect" in text and "straddles" in text
    assert "These runs cannot test “leash helps” (a scaled regime at this profile)" in text
    assert "says nothing for or against the paper" in text
    supported = ClaimVerdict(
        "B beats A",
        "supported",
        "",
        evidence=(evidence_row("", interval([0.02, 0.03, 0.025], [0, 1, 2]), MEASURE),),
    )
    r = result("bherd-fig3a", [supported])
    assert what_this_says(claim_rows([r]), r).startswith("The data support “B beats A” (effect")
    empty = result("bherd-fig3b", [])
    empty.runs = 0
    assert "No runs" in what_this_says([], empty)


def test_a_second_reading_that_would_change_the_verdict_is_said_in_plain_words():
    from dashboards.report import what_this_says

    numbers = (
        "Case 1: B=10 first by effect -0.004 [-0.005, -0.003] (95% CI, 10 seeds) → contradicted; "
        "speed reading (loss AUC; shown, not deciding): Case 1 B=10 first by effect 0.003 "
        "[0.002, 0.004] (95% CI, 10 seeds) → would be {}"
    )
    rows = (evidence_row("Case 1", interval([-0.004, -0.003, -0.005], [0, 1, 2]), MEASURE),)

    def says(would: str) -> str:
        check = ClaimVerdict("best B is 10", "contradicted", numbers.format(would), "", "", rows)
        r = result("bherd-fig3c", [check])
        return what_this_says(claim_rows([r]), r)

    assert (
        "The verdict on “best B is 10” depends on how it is read: under the speed reading "
        "shown beside it (not deciding) it would be supported in every panel."
    ) in says("supported")
    assert "depends on how it is read" not in says("contradicted")  # the same verdict


def test_html_report_beside_the_index(tmp_path):
    from dashboards.index import write_index

    r = result("bherd-fig3a", [statistical()])
    write_index([r], tmp_path, "sqlite:///x.db")
    page = (tmp_path / "reproduction.html").read_text()
    assert "<a href='bherd-fig3a.html'>bherd-fig3a</a>" in page
    assert "class='inc'>inconclusive</td>" in page and "What this says about the paper" in page
    assert "href='reproduction.html'" in (tmp_path / "index.html").read_text()
    assert str(Path.cwd()) not in page


@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_the_committed_claims_hold_the_rules(profile):
    """docs/reproduction/claims-<profile>.json (the regenerated store's `fedsweep report
    --json`): every figure of every shipped spec, one object per claim with the fields the
    report promises, the four verdicts only, and nothing decided while its interval contains
    its threshold."""
    from fedsweep.specs.load import load_spec, spec_paths

    data = json.loads((ROOT / "docs" / "reproduction" / f"claims-{profile}.json").read_text())
    assert data["profile"] == profile
    rows = data["claims"]
    specs = [load_spec(p) for p in spec_paths(ROOT / "sweeps")]
    with_claims = {s.figure for s in specs if s.claims}
    assert {r["figure"] for r in rows} == with_claims
    for spec in specs:  # every claim text of the spec appears
        assert {r["claim"] for r in rows if r["figure"] == spec.figure} == set(spec.claim_texts)
    keys = {"figure", "claim", "verdict", "effect", "ci_low", "ci_high", "threshold", "seeds"}
    for r in rows:
        assert keys | {"regime"} <= set(r), r["claim"]
        assert r["verdict"] in ("supported", "contradicted", "inconclusive", "not-testable")
        for p in r["panels"] if r["verdict"] in ("supported", "contradicted") else []:
            if p["verdict"] not in ("supported", "contradicted") or p["ci_low"] is None:
                continue
            t, lo, hi = p["threshold"], p["ci_low"], p["ci_high"]
            edges = (t, -t) if p["holds_when"].startswith("|effect|") else (t,)
            assert not any(lo <= e <= hi for e in edges), (r["figure"], p["panel"])
    assert data["commit"] and data["date"] and "/root/" not in json.dumps(data)
    # issue 51: every row says its margin, the seeds that would decide it, the paper's effect
    # and its degenerate parts; no quick row is the paper's regime; no decided row rests on a
    # zero-width interval of fewer than 3 seeds
    for r in rows:
        assert {"id", "margin", "seeds_needed", "paper_effect", "degenerate"} <= set(r), r["claim"]
        assert isinstance(r["degenerate"], list)
        assert r["paper_effect"] is None or r["paper_effect_source"], r["id"]
        if profile != "paper":
            assert not r["regime"].startswith("paper"), (r["id"], r["regime"])
        if r["verdict"] in ("supported", "contradicted"):
            assert r["seeds_needed"] is None, r["id"]
            assert not (r["ci_low"] == r["ci_high"] and r["seeds"] < 3), r["id"]
    # every claim of a spec with labelled readings carries its verdict under each of them
    readings = {s.figure: [r.label for r in s.readings] for s in specs if s.readings}
    assert readings  # bherd-fig3a, bherd-fig3b
    for r in rows:
        assert [u["reading"] for u in r["readings"]] == readings.get(r["figure"], []), r["id"]
        for u in r["readings"]:
            assert u["verdict"] is None or u["verdict"] in (
                "supported", "contradicted", "inconclusive", "not-testable"
            )  # fmt: skip
    # the paper's own effect is the claim's: every row of a claim that declares it carries
    # it, with or without runs at this profile
    declared = {(s.figure, c.id): c.paper_effect for s in specs for c in s.claims}
    for r in rows:
        paper = declared[r["figure"], r["id"]]
        assert r["paper_effect"] == (paper.value if paper else None), r["id"]
        assert r["paper_effect_source"] == (paper.source if paper else None), r["id"]
    assert any(r["paper_effect"] is not None for r in rows)
    if profile == "paper":  # issue 51: Fig. 4d on 3 seeds or more, Fig. 3b under both readings,
        # fig2b's Case 1 FedNova comparison (FedNova is FedAvg with equal local steps) named
        by_id = {(r["figure"], r["id"]): r for r in rows}
        assert by_id["bherd-fig4d", "case3-far-clients"]["seeds"] >= 3
        for r in rows:
            if r["figure"] == "bherd-fig3b":  # as configured (the row), and its one reading
                assert r["seeds"] >= 3 and r["readings"], r["id"]
                assert all(u["runs"] and u["verdict"] for u in r["readings"]), r["readings"]
        named = [d for r in rows if r["figure"] == "bherd-fig2b" for d in r["degenerate"]]
        assert any("Case 1" in d and "FedNova" in d for d in named), named


#: the source text of each paper's claims (../shared/papers beside the checkout)
PAPER_TEXTS = {
    "bherd": "bherd.txt",
    "fedveca": "fedveca.txt",
    "fedwalk": "fedwalk.txt",
    "intro": "intro_to_fl_slides.txt",
}


@pytest.mark.parametrize("paper", sorted(PAPER_TEXTS))
def test_the_papers_words_are_quoted_verbatim(paper):
    """Every ``text`` of a paper's declared claims (``sweeps/<paper>-*.yaml``), (between quote marks; "…", "[…]" or "[...]" mark a cut) stands
    in the paper's text, up to white space and a word hyphenated across a line break; at most
    320 characters per claim."""
    import re

    from fedsweep.specs.claims import Claim
    from fedsweep.specs.load import read_spec

    words = {}
    for path in sorted((ROOT / "sweeps").glob(f"{paper}-*.yaml")):
        for c in read_spec(path).claims:
            if isinstance(c, Claim):
                words[c.id] = f"“{c.text}”"
    assert words, paper
    source = ROOT.parent / "shared" / "papers" / PAPER_TEXTS[paper]
    if not source.is_file():
        pytest.skip(f"{source.name} is not beside the checkout (../shared/papers)")
    raw = source.read_text(encoding="utf-8")
    texts = [" ".join(t.split()) for t in (raw, re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", raw))]
    for claim, text in words.items():
        assert len(text) <= 320, claim
        quotes = re.findall(r"[“\"](.+?)[”\"]", text)
        assert quotes, claim
        for quote in quotes:
            for piece in re.split(r"\s*(?:\[…\]|\[\.\.\.\]|…)\s*", quote):
                piece = " ".join(piece.split())
                assert any(piece in t for t in texts), (claim, piece)


# ------------------------------------------------------------------- readings (issue 35)
def test_reading_table_sets_each_reading_beside_the_figure_as_configured():
    from dashboards.readings import reading_table
    from fedsweep.specs.model import Reading

    supported = ClaimVerdict(
        "B beats A",
        "supported",
        "n",
        "",
        "",
        (evidence_row("Case 1", interval([0.02, 0.03, 0.025], [0, 1, 2]), MEASURE),),
        "paper",
        "b-beats-a",
    )
    other = ClaimVerdict("other", "n/a", "no runs", id="other")
    base = result("bherd-fig3a", [statistical(), other])
    alt = result("bherd-fig3a", [supported, other])
    none = Reading(label="no 1/α", set={"bherd.server_scale": "none"}, note="a reading.")
    empty = Reading(label="never run", set={"bherd.round": "ceil"})
    text = reading_table(
        base, [(none, alt), (empty, None)], profile="paper", spec_file="sweeps/bherd-fig3a.yaml"
    )
    lines = text.splitlines()
    assert "| claim | as configured | no 1/α | never run | changes? |" in lines
    row = next(line for line in lines if line.startswith("| B beats A |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1].startswith("**inconclusive**") and cells[2].startswith("**supported**")
    assert cells[3] == "–" and cells[4] == "yes"
    other = next(line for line in lines if line.startswith("| other |"))
    assert other.rstrip().endswith("| no |")  # not-testable under both readings that ran
    assert "`fedsweep sweep --profile paper --set bherd.round=ceil sweeps/bherd-fig3a.yaml`" in text
    assert "**no 1/α** (6 of 6 runs;" in text and "a reading." in text
    assert (
        "figure: [bherd-fig3a--server_scale-none](../figures/paper/bherd-fig3a--server_scale-none.png)"
        in text
    )
    assert (
        "No reading that ran has every claim of bherd-fig3a supported. (as configured: 0 of 2 "
        "supported; no 1/α: 1 of 2 supported; never run: no runs.)" in text
    )
    # the claims JSON carries the same: per claim row, one entry per reading
    from dashboards.readings import READING_FIELDS, reading_rows
    from dashboards.report import claim_rows

    base.readings = reading_rows(base, [(none, alt), (empty, None)])
    rows = {r["claim"]: r for r in claim_rows([base])}
    assert rows["B beats A"]["verdict"] == "inconclusive"
    under_none, under_empty = rows["B beats A"]["readings"]
    assert (under_none["reading"], under_none["set"]) == ("no 1/α", {"bherd.server_scale": "none"})
    assert (under_none["verdict"], under_none["seeds"], under_none["runs"]) == ("supported", 3, 6)
    assert under_none["effect"] == pytest.approx(0.025) and under_none["ci_low"] > 0
    assert under_empty == {
        "reading": "never run",
        "set": {"bherd.round": "ceil"},
        "runs": 0,
        "expected_runs": None,
        **dict.fromkeys(READING_FIELDS),
    }
    assert [u["verdict"] for u in rows["other"]["readings"]] == [rows["other"]["verdict"], None]
    assert claim_rows([alt])[0]["readings"] == []  # a figure without readings


def test_a_reading_must_set_keys_the_figures_runs_read(tmp_path):
    from fedsweep.specs.load import SpecError, load_spec
    from tests.helpers import small_spec, write_yaml

    ok = small_spec("reads", readings=[{"label": "ceil", "set": {"bherd.round": "ceil"}}])
    assert load_spec(write_yaml(tmp_path / "ok.yaml", ok)).readings[0].label == "ceil"
    for bad, needle in [
        ({"label": "x", "set": {"fedveca.phi": 0.1}}, "readings[0] ('x')"),
        ({"label": "x", "set": {"bherd.round": "sideways"}}, "bherd.round"),
        ({"label": "x", "set": {}}, "set"),
    ]:
        tree = small_spec("reads", readings=[bad])
        with pytest.raises(SpecError) as err:
            load_spec(write_yaml(tmp_path / "bad.yaml", tree))
        assert needle in str(err.value)


def test_a_figure_without_claims_keeps_its_report_tables(tmp_path):
    """A diagnosis figure states no claim; the tables its builder adds are its point and stay in
    the report (they were dropped with the claim rows once)."""
    diag = result("bherd-diagnosis", [])
    diag.report_tables.append("### How far the BHerd update is from FedAvg's\n\n| η | α=0.1 |")
    meta = {"profile": "quick", "commit": "abc1234", "date": "2026-11-27"}
    write_report([diag], tmp_path, meta)
    text = (tmp_path / "bherd.md").read_text()
    assert "- No claims." in text
    assert "### How far the BHerd update is from FedAvg's\n\n| η | α=0.1 |" in text


# ------------------------------------------------------------------ issue 62, item 4
def _study(folder: Path, figure: str, title: str) -> Path:
    from tests.helpers import small_spec, write_yaml

    claim = {"id": "half-higher", "text": "α=0.5 ends higher", "kind": "higher",
             "measure": "final_acc", "curve": "alpha=0.5", "versus": "alpha=1.0", "margin": 0.0}  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    return write_yaml(folder / f"{figure}.yaml", small_spec(figure, title=title, claims=[claim]))


def test_an_own_study_is_reported_beside_it_and_leaves_the_committed_reports_alone(
    tmp_path, monkeypatch
):
    """``fedsweep report --figure my-study.yaml`` with the default ``--out`` in a copy of the
    repository: every committed file of docs/reproduction/ is unchanged (it replaced
    claims-quick.json with one study's rows and wrote other.md); the report lies beside the
    study, named and titled by the study, and links no figure that was not drawn; a second
    study reported into the same folder keeps the first."""
    from typer.testing import CliRunner

    from fedsweep.cli.main import app
    from fedsweep.tracking.connect import get_client

    work = tmp_path / "repo"
    shutil.copytree(ROOT / "docs" / "reproduction", work / "docs" / "reproduction")
    (work / "sweeps").mkdir()
    committed = {
        p.relative_to(work): p.read_bytes() for p in (work / "docs").rglob("*") if p.is_file()
    }
    one = _study(work / "studies", "my-study", "My α study")
    two = _study(work / "studies", "your-study", "Your α study")
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    get_client(store)  # an empty store: the claims are rows without runs
    monkeypatch.chdir(work)
    common = ["--profile", "quick", "--tracking-uri", store, "--sweeps-dir", "sweeps"]
    res = CliRunner().invoke(app, ["report", "--figure", str(one.relative_to(work)), *common])
    assert res.exit_code == 0, res.output
    after = {p.relative_to(work): p.read_bytes() for p in (work / "docs").rglob("*") if p.is_file()}
    assert after == committed
    assert sorted(p.name for p in (work / "studies").iterdir()) == [
        "claims-quick.json", "my-study.md", "my-study.yaml", "your-study.yaml",
    ]  # fmt: skip
    text = (work / "studies" / "my-study.md").read_text()
    assert text.startswith("# Reproduction report: My α study (`my-study`)\n")
    assert ".png" not in text

    res = CliRunner().invoke(app, ["report", "--figure", str(two), *common])
    assert res.exit_code == 0, res.output
    data = json.loads((work / "studies" / "claims-quick.json").read_text())
    assert [r["figure"] for r in data["claims"]] == ["my-study", "your-study"]
    assert (work / "studies" / "my-study.md").read_text() == text
    assert (work / "studies" / "your-study.md").is_file()
    assert {p.relative_to(work): p.read_bytes() for p in (work / "docs").rglob("*") if p.is_file()} == committed  # fmt: skip


def test_a_report_merges_claims_and_never_replaces_a_file_it_did_not_make(tmp_path):
    """A claims file holding other figures' rows keeps them (this report's figures' rows
    replaced in place); a report whose figures are all of the file's is written as before (the
    full report's output); a Markdown file of the same name that no report wrote, or a paper's
    report holding figures this one does not judge, is refused without ``force``."""
    from dashboards.report import ReportConflict

    out = tmp_path / "reproduction"
    meta = {"profile": "quick", "commit": "abc1234", "date": "2026-12-07"}
    full = [result("bherd-fig3a", [statistical()]), result("fedwalk-fig2", [statistical()])]
    write_report(full, out, meta)
    first = (out / "claims-quick.json").read_text()
    write_report(full, out, meta)  # the same figures again: the same bytes
    assert (out / "claims-quick.json").read_text() == first

    check = ClaimVerdict("B beats A", "supported", "new numbers", "", "", (), "paper")
    bherd = (out / "bherd.md").read_text()
    write_report([result("fedwalk-fig2", [check])], out, meta)  # one figure: merged in
    rows = json.loads((out / "claims-quick.json").read_text())["claims"]
    assert [(r["figure"], r["verdict"]) for r in rows] == [
        ("bherd-fig3a", "inconclusive"), ("fedwalk-fig2", "supported"),
    ]  # fmt: skip
    assert (out / "bherd.md").read_text() == bherd

    both = [result("bherd-fig3a", [check]), result("bherd-fig3b", [check])]
    write_report(both, out, meta)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(ReportConflict, match=r"bherd\.md: reports figure\(s\) bherd-fig3b too"):
        write_report([result("bherd-fig3a", [statistical()])], out, meta)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing written
    write_report([result("bherd-fig3a", [statistical()])], out, meta, force=True)
    assert "bherd-fig3b" not in (out / "bherd.md").read_text()

    (out / "notes.md").write_text("my own notes\n")  # a study whose id names a file of yours
    with pytest.raises(ReportConflict, match=r"notes\.md: not a report of `fedsweep report`"):
        write_report([result("notes", [check])], out, meta)
    assert (out / "notes.md").read_text() == "my own notes\n"
    (out / "claims-paper.json").write_text("{not json")
    with pytest.raises(ReportConflict, match="not a claims file"):
        write_report([result("fedwalk-fig2", [check])], out, {**meta, "profile": "paper"})
