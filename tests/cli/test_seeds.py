"""``--seeds`` (issue 51, item 9): more seeds of the same configs for sweep, figures and report.
The seeds a profile has keep their trials' hashes (their runs are reused); a bad value stops in
one line with exit 2 before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.specs.load import expand, load_spec
from fedsweep.specs.seeds import SeedsError, parse_seeds, seeds_text

ROOT = Path(__file__).resolve().parents[2]
FIG4E = ROOT / "sweeps" / "bherd-fig4e.yaml"


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("3", [0, 1, 2]), ("0-4", [0, 1, 2, 3, 4]), ("5,1,3-4", [1, 3, 4, 5]), ("7,", [7])],
)
def test_seed_forms(text, seeds):
    assert parse_seeds(text) == seeds
    assert parse_seeds(seeds_text(seeds) + ("," if len(seeds) == 1 else "")) == seeds


@pytest.mark.parametrize(
    ("text", "words"),
    [("0", "a count from 1"), ("x", "bad part 'x'"), ("4-2", "runs backwards"),
     ("0-5000", "more than 1000 seeds"), (",", "no seed")],
)  # fmt: skip
def test_bad_seeds_name_the_part_and_the_forms(text, words):
    with pytest.raises(SeedsError) as err:
        parse_seeds(text)
    assert words in str(err.value) and "allowed: a count N" in str(err.value)


def test_more_seeds_keep_the_hashes_of_the_seeds_the_profile_has():
    spec = load_spec(FIG4E)
    before = {t.trial_id: t.config_hash for t in expand(spec, "quick")}
    more = spec.with_seeds("quick", [0, 1, 2, 3, 4, 5])
    after = {t.trial_id: t.config_hash for t in expand(more, "quick")}
    assert {k: after[k] for k in before} == before
    assert {t.seed for t in expand(more, "quick")} == {0, 1, 2, 3, 4, 5}
    assert len(after) == 6 * len({(t.panel, t.curve) for t in expand(spec, "quick")})
    assert spec.profiles["quick"].seeds != [0, 1, 2, 3, 4, 5]  # the spec itself unchanged
    with pytest.raises(ValueError):
        spec.with_seeds("quick", [1, 1])


def test_sweep_plan_with_seeds_reuses_what_it_has(tmp_path, monkeypatch):
    """``sweep --plan --seeds``: the trials of every seed named, nothing run (the plan opens no
    Ray); a bad value: exit 2, one line, for sweep, figures and report alike."""
    monkeypatch.chdir(ROOT)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    res = CliRunner().invoke(
        app, ["sweep", "bherd-fig4e", "--profile", "smoke", "--seeds", "0-2", "--plan", "--json",
              "--tracking-uri", uri],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    assert len(rows) == 18 and {r["trial_id"].rsplit("=", 1)[1] for r in rows} == {"0", "1", "2"}
    for command in (["sweep", "bherd-fig4e", "--plan"], ["figures"], ["report"]):
        res = CliRunner().invoke(app, [*command, "--seeds", "2-1", "--tracking-uri", uri])
        assert res.exit_code == 2, (command, res.output)
        assert "Traceback" not in res.output
        assert "--seeds: got '2-1': '2-1' runs backwards" in res.output, (command, res.output)


@pytest.mark.parametrize("text", ["²", "1²", "٣", "0-²", "３"])
def test_unicode_digits_are_refused_in_one_line(tmp_path, monkeypatch, text):
    """Issue 62 item 10: ``--seeds ²`` passed ``str.isdigit`` and crashed ``int()`` with a
    traceback (exit 1); other scripts' digits (``٣``, ``３``) were taken by ``int``. Only ASCII
    digits are seeds: exit 2, one line."""
    with pytest.raises(SeedsError, match="not ASCII digits"):
        parse_seeds(text)
    monkeypatch.chdir(ROOT)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    for command in (["sweep", "bherd-fig4e", "--plan"], ["report"]):
        res = CliRunner().invoke(app, [*command, "--seeds", text, "--tracking-uri", uri])
        assert res.exit_code == 2 and isinstance(res.exception, SystemExit), (text, res.output)
        assert res.output.strip().splitlines() == [
            f"--seeds: got {text!r}: not ASCII digits (allowed: a count N (seeds 0..N-1), a "
            "range A-B, or a list such as 0,1,5 or 0-4,7)"
        ], res.output
