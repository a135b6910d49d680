"""Every finished run is found again by its config hash: the hash of every trial of every shipped
spec (every profile) and of every shipped config is pinned here (tests/fixtures/pinned_hashes.json),
so a refactoring that changes one fails. A change meant to change results regenerates the file and
says so in the changelog."""

from __future__ import annotations

import json
from pathlib import Path

from fedsweep.config.hashing import config_hash
from fedsweep.config.load import load_config
from fedsweep.specs.load import PROFILES, expand, load_spec, spec_paths

ROOT = Path(__file__).resolve().parents[2]
PINNED = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "pinned_hashes.json").read_text()
)


def _now() -> dict[str, str]:
    out = {}
    for path in spec_paths(ROOT / "sweeps"):
        spec = load_spec(path)
        for profile in PROFILES:
            if profile not in spec.profiles:
                continue
            for trial in expand(spec, profile):
                legacy = getattr(trial, "legacy_hash", None)
                out[trial.trial_id] = (
                    trial.config_hash if not legacy else f"{trial.config_hash} legacy {legacy}"
                )
    return out


def test_every_shipped_trial_keeps_its_hash():
    now = _now()
    pinned = PINNED["trials"]
    assert sorted(set(pinned) - set(now))[:5] == []  # no trial lost
    assert sorted(set(now) - set(pinned))[:5] == []  # none new (a new spec: add it on purpose)
    changed = [t for t in pinned if now[t] != pinned[t]]
    assert changed[:5] == [], f"{len(changed)} of {len(pinned)} trials changed their hash"
    assert len(pinned) == 4426


def test_every_shipped_config_keeps_its_hash():
    now = {p.name: config_hash(load_config(p)) for p in sorted((ROOT / "configs").glob("*.yaml"))}
    assert now == PINNED["configs"]
