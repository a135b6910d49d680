"""Issue 48, item 4: a spec's title, profile note, claims and curve labels reach the Markdown
report as plain text, as they reach the figure pages: no ``<script>``, no link, no new block
made of them; comparisons such as "< 0.05" read as they did."""

from __future__ import annotations

import plotly.graph_objects as go

from dashboards.model import FigureResult
from dashboards.report import md, write_report
from fedsweep.judge.evidence import evidence_row
from fedsweep.judge.stats import Measure, interval
from fedsweep.judge.verdicts import ClaimVerdict

EVIL = "<script>alert(1)</script>"


def test_spec_words_are_plain_text_in_the_markdown_report(tmp_path):
    measure = Measure(f"final accuracy of {EVIL} − A, per seed", 0.0, "greater")
    rows = (evidence_row(f"panel {EVIL}", interval([0.02, 0.03, 0.025], [0, 1, 2]), measure),)
    check = ClaimVerdict(
        f"{EVIL} beats A\n# injected heading",
        "supported",
        f"label {EVIL}: p < 0.05; [link](javascript:alert(1))",
        "",
        "the paper says <img src=x onerror=alert(1)>",
        rows,
        "paper",
    )
    result = FigureResult(
        "bherd-fig3a", f"title {EVIL}", "quick", go.Figure(), [0, 1, 2], [0, 1, 2], 6, 6,
        f"note {EVIL}", "", [check],
    )  # fmt: skip
    meta = {"profile": "quick", "commit": "abc1234", "date": "2026-11-28"}
    write_report([result], tmp_path, meta)
    text = (tmp_path / "bherd.md").read_text()
    assert "<script" not in text and "<img" not in text and "](javascript" not in text
    assert "## bherd-fig3a: title &lt;script>alert(1)&lt;/script>" in text
    assert "note &lt;script>" in text
    assert "| &lt;script>alert(1)&lt;/script> beats A # injected heading | **supported** |" in text
    assert "\n# injected heading" not in text
    assert "p < 0.05" in text  # a comparison is not a tag
    assert "[link]\\(javascript:alert(1))" in text


def test_md_leaves_plain_words_as_they_are():
    for plain in ("α=0.3 is fastest", "rises < 0.0004 of the loss", "B ≥ A by 5%", "[0.3, 0.5]"):
        assert md(plain) == plain
    assert md("a\nb\x00c") == "a b c"
