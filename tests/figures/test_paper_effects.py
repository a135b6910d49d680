"""The paper's numbers beside ours (issue 51, item 8): every declared claim of the shipped specs
records what the paper itself reports (a number in our measure's units, or the words and where
they stand), and a report row carries it with ours / the paper's where that ratio means
something."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboards.report import paper_beside_ours, paper_effect_fields
from fedsweep.specs.claims import Claim, PaperEffect
from fedsweep.specs.load import read_spec, spec_paths

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"


def test_every_declared_claim_records_the_paper_s_effect():
    seen = 0
    for path in spec_paths(SWEEPS):
        for claim in read_spec(path).claims:
            if isinstance(claim, Claim):
                seen += 1
                assert claim.paper_effect is not None, (path.name, claim.id)
                assert claim.paper_effect.source and claim.paper_effect.text, claim.id
    assert seen >= 22  # BHerd's 14 and FedWalk's 8 at least


def test_fedwalk_table2_carries_its_3_39_points():
    (claim,) = [c for c in read_spec(SWEEPS / "fedwalk-table2.yaml").claims
                if c.id == "fedwalk-beats-baselines"]  # fmt: skip
    assert claim.paper_effect.value == pytest.approx(0.0339)
    assert claim.paper_effect.source == "Sec. 5.2, Table 2" and claim.paper_effect.comparable


def test_a_row_puts_ours_beside_the_paper_s():
    paper = PaperEffect(value=0.0339, text="+3.39 points", source="Table 2")
    row = {"effect": 0.0144, **paper_effect_fields(paper, 0.0144)}
    assert row["paper_effect"] == 0.0339 and row["paper_effect_source"] == "Table 2"
    assert row["effect_ratio"] == pytest.approx(0.0144 / 0.0339)
    assert (
        paper_beside_ours(row)
        == "the paper: +0.0339 (Table 2: +3.39 points); ours +0.0144, 0.42 of it"
    )
    words = PaperEffect(text="qualitative: 'small'", source="Slides §2.1")
    row = {"effect": 0.02, **paper_effect_fields(words, 0.02)}
    assert row["paper_effect"] is None and row["effect_ratio"] is None
    assert row["paper_effect_source"] == "Slides §2.1"
    other = PaperEffect(value=0.05, text="ResNet-18", source="Table 2", comparable=False)
    assert paper_effect_fields(other, 0.01)["effect_ratio"] is None  # not our units: no ratio
    assert paper_effect_fields(None, 0.01) == {"paper_effect": None, "paper_effect_source": None,
                                                "paper_effect_text": None, "effect_ratio": None}  # fmt: skip
    assert paper_beside_ours({"paper_effect_text": None}) == ""
