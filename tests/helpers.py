"""Small data sets and configs the tests make themselves."""

from __future__ import annotations

from pathlib import Path

import torch

from fedsweep.components.step_policies.fedveca import TAU_RULES, register_tau_rule
from fedsweep.config.load import build_config
from fedsweep.data.datasets import TensorDataset


def tiny_dataset(
    n_train: int = 600, n_test: int = 200, side: int = 8, channels: int = 1, seed: int = 0
) -> TensorDataset:
    """Random images whose label is weakly encoded in the pixels, so models can learn a bit."""
    g = torch.Generator().manual_seed(seed)
    y_train = torch.randint(0, 10, (n_train,), generator=g)
    y_test = torch.randint(0, 10, (n_test,), generator=g)

    def images(y):
        x = torch.rand(len(y), channels, side, side, generator=g) * 0.5
        x[:, :, 0, :] += (y[:, None, None] % 2).float() * 0.5  # even/odd signal in row 0
        return x

    return TensorDataset(
        "tiny", images(y_train), y_train, images(y_test), y_test, 10, "synthetic (tests)"
    )


def tiny_config(unused: str = "keep", **sections):
    """A fast valid config; keyword arguments are dotted overrides, e.g. train__lr=0.1.
    ``unused="keep"``: sections the config's components do not read are kept (the engine tests
    build pairs such as FedWalk and its base from one set of keywords); ``"refuse"``: as
    ``fedsweep run`` and ``validate`` do."""
    tree = {
        "device": "cpu",
        "threads": 1,
        "data": {"dataset": "mnist", "partition": "case1", "num_clients": 3},
        "model": {"name": "svm"},
        "train": {"rounds": 3, "batch_size": 20, "lr": 0.05, "order": "fixed"},
        "tracking": {"enabled": False},
    }
    overrides = {k.replace("__", "."): v for k, v in sections.items()}
    return build_config(tree, overrides, unused=unused)


def small_spec(
    figure: str,
    *,
    title: str = "test sweep",
    alphas=(0.5, 1.0),
    seeds=(0,),
    rounds: int = 2,
    train_subset: int = 300,
    eval_: dict | None = None,
    base: dict | None = None,
    **top,
) -> dict:
    """A sweep spec tree for the tests: BHerd-FedAvg, SVM, mnist-5k (embedded), 3 clients,
    one Case 1 panel, one curve per α, every profile the same. ``base`` entries and the other
    keywords (top-level spec keys: ``max_failures``, ``panels``, ``curves``, ...) override."""
    spec = {
        "figure": figure,
        "title": title,
        "base": {
            "algorithm": "fedavg",
            "selector": "bherd",
            "data": {
                "dataset": "mnist-5k",
                "partition": "case1",
                "num_clients": 3,
                "train_subset": train_subset,
            },
            "model": {"name": "svm"},
            "train": {"rounds": rounds, "batch_size": 50, "lr": 0.001},
            "eval": {"train_metrics": False, **(eval_ or {})},
            **(base or {}),
        },
        "panels": {"data.partition": ["case1"]},
        "curves": {"key": "bherd.alpha", "values": list(alphas)},
        "seeds": list(seeds),
        "profiles": {"paper": {}, "quick": {}, "smoke": {}},
    }
    spec.update(top)
    return spec


def log_config(client, run_id: str, config) -> None:
    """A hand-logged run's ``config.yaml``, as fedsweep's run logger writes it: the figures and
    reports draw a run only when its logged config hashes to its tag (issue 62, item 8:
    ``fedsweep.tracking.provenance``)."""
    import yaml

    tree = config.model_dump(mode="json")
    client.log_text(run_id, yaml.safe_dump(tree, sort_keys=False), "config.yaml")


def write_yaml(path, tree: dict):
    """``tree`` as YAML at ``path`` (unicode kept); returns the path."""
    import yaml

    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    return path


def small_run(name: str, experiment: str, *, rounds: int = 3, **sections) -> dict:
    """A run config tree for CLI tests: BHerd-FedAvg, SVM, 300 mnist-5k images on 3 clients
    (Case 3), 1 thread, no record artifacts; ``sections`` replace whole top-level entries."""
    tree = {
        "name": name,
        "algorithm": "fedavg",
        "selector": "bherd",
        "device": "cpu",
        "threads": 1,
        "data": {
            "dataset": "mnist-5k",
            "partition": "case3",
            "num_clients": 3,
            "train_subset": 300,
        },
        "model": {"name": "svm"},
        "train": {"rounds": rounds, "batch_size": 25, "lr": 0.001},
        "tracking": {"experiment": experiment, "log_records": False},
    }
    tree.update(sections)
    return tree


def smoke_sweep(spec, store: str, tmp_path, echo=None, **kw):
    """``run_sweep`` of ``spec`` at the smoke profile into ``store``, quietly (``echo``, if
    given, collects the driver's lines), with Ray's folder under ``tmp_path``; keywords go to
    ``run_sweep``."""
    from fedsweep.sweep.runner import run_sweep

    return run_sweep(
        spec,
        "smoke",
        tracking_uri=store,
        storage_dir=tmp_path / "ray",
        verbose=0,
        echo=echo or (lambda *a: None),
        **kw,
    )


def sweep_runs(store: str, figure: str):
    """``(client, experiment, parent runs, child runs)`` of a figure's experiment in ``store``."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name(figure)
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("fedsweep.kind") == "sweep"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return client, exp, parents, children


#: float64 arithmetic and fixed batch order: the exact invariant tests of docs/algorithms.md
F64 = dict(train__dtype="float64", train__order="fixed")
CASE3 = dict(data__partition="case3", data__num_clients=5, **F64)


def run_rounds(cfg, data, rounds=None):
    """An ``FLRun`` of ``cfg`` on ``data`` after ``rounds`` rounds (default: all of them)."""
    from fedsweep.experiment import FLRun

    run = FLRun(cfg, dataset=data)
    for _ in range(rounds or cfg.train.rounds):
        run.step()
    return run


def nan_tau_rule(A, g_norm2, phi):
    """A FedVeca ``tau_rule`` that returns NaN for every client (the non-finite guard's test:
    registered as ``fedveca.tau_rule: tests-nan``)."""
    return torch.full_like(A, float("nan"), dtype=torch.float64)


if "tests-nan" not in TAU_RULES:  # this module may be imported as helpers and tests.helpers
    register_tau_rule("tests-nan", nan_tau_rule)


def migrated_claim(figure: str, claim_id: str):
    """The declared claim ``claim_id`` of the shipped spec ``sweeps/<figure>.yaml`` as it was
    migrated from its legacy criterion, which decided from 2 seeds (the golden outputs of
    tests/figures/golden/ are that criterion's): issue 51 raised the default minimum to 3 seeds,
    so a claim not declaring ``min_seeds`` is judged here with the legacy 2; it also gave the
    rankings margins (:data:`LEGACY_MARGINS` restores the migrated ones) and widened intervals
    to the measure's resolution and named identical runs degenerate (``strict: false`` here)."""
    from fedsweep.specs.load import read_spec

    path = Path(__file__).resolve().parents[1] / "sweeps" / f"{figure}.yaml"
    (claim,) = [c for c in read_spec(path).claims if c.id == claim_id]
    if claim_id in LEGACY_MEASURES:
        claim = claim.model_copy(update={"measure": LEGACY_MEASURES[claim_id]})
    legacy = LEGACY_MARGINS.get(claim_id)
    if legacy is not None:
        claim = claim.model_copy(
            update={
                "margin": legacy[0],
                "and_": [
                    c.model_copy(update={"margin": m})
                    for c, m in zip(claim.and_, legacy[1:], strict=True)
                ],
            }
        )
    claim = claim.model_copy(  # intervals as the legacy computed them, no degenerate guard
        update={
            "strict": False,
            "degenerate_if": [],
            "and_": [c.model_copy(update={"degenerate_if": []}) for c in claim.and_],
        }
    )
    if "min_seeds" in claim.model_fields_set:
        return claim
    return claim.model_copy(update={"min_seeds": 2})


#: claim id -> the margins (its own comparison's, then those under ``and``) it was migrated
#: with: rankings decided at 0 until issue 51 gave each a margin that matters
LEGACY_MARGINS = {
    "alpha03-05-fastest": [0.0],
    "best-batch": [0.0, 0.0],
    "n1-centralized-fastest": [0.01, 0.0],
    "n5-best": [0.0],
    "phi-smooth-slow-fast-noisy": [0.0, 0.0, 0.0, 0.0],
    "tau-falls-hh": [0.0, 0.0],
    "gain-largest-at-dir01": [0.0],
    "e2-oscillates": [0.0],
}
#: claim id -> the measure it was migrated with (issue 51 judges oscillation by its size)
LEGACY_MEASURES = {"e2-oscillates": "loss_rises"}


def stand_in_for_paper(tree: dict, profile: str = "smoke") -> dict:
    """A spec tree whose ``paper`` profile runs what ``profile`` runs (its regime declaration
    kept): hand-made runs of ``profile`` then stand for the paper's, so the regime rule
    (fedsweep/specs/regimes.py: a profile that changes the data or the horizon is scaled or
    truncated) finds no change and the claims are judged on them."""
    import copy

    if "profiles" not in tree:  # an ``extends:`` spec: its parent's copy carries the stand-in
        return tree
    paper = tree["profiles"]["paper"]
    stand_in = copy.deepcopy(tree["profiles"][profile])
    stand_in.pop("regime", None)
    stand_in.pop("panel_regime", None)
    for key in ("regime", "panel_regime"):
        if key in paper:
            stand_in[key] = paper[key]
    tree["profiles"]["paper"] = stand_in
    return tree


def own_example() -> str:
    """The complete study spec of docs/how-to/own-claims.md: its yaml block right after the
    line ``<!-- own-claims-example -->``."""
    import re

    doc = Path(__file__).resolve().parents[1] / "docs" / "how-to" / "own-claims.md"
    found = re.search(r"<!-- own-claims-example -->\s*```yaml\n(.*?)```", doc.read_text(), re.S)
    assert found, f"{doc}: no yaml block after <!-- own-claims-example -->"
    return found.group(1)


def spec_base(spec, profile: str | None = None) -> dict:
    """The config tree of ``spec``'s first panel: its ``base`` under that panel's overrides
    (for claim data made by hand; the judge reads each curve's config from the plan)."""
    import copy

    from fedsweep.config.load import set_dotted

    tree = copy.deepcopy(spec.base)
    for key, value in spec.panel_cells(profile)[0].overrides.items():
        set_dotted(tree, key, value)
    return tree


def typed_config(curve, base: dict | None = None):
    """``curve``'s typed config on the config tree ``base`` (the sections its components do not
    read dropped), for claim data made by hand."""
    from fedsweep.config.hashing import drop_unused

    return drop_unused(
        build_config(dict(base or {}), curve.set, source=f"curve {curve.label!r}", files=False,
                     unused="keep")
    )  # fmt: skip


def typed_configs(curves, base: dict | None = None) -> dict:
    """Curve label -> :func:`typed_config` (``ClaimData.configs`` of data made by hand)."""
    return {c.label: typed_config(c, base) for c in curves}


def log_trial_runs(uri: str, spec, values, profile: str = "smoke") -> None:
    """Log one finished run per trial of ``spec`` at ``profile`` with ``values(trial) ->
    {metric: [value per round]}``, tagged as the sweep driver tags them (no training)."""
    from mlflow.entities import Metric

    from fedsweep.specs.load import expand
    from fedsweep.tracking.connect import get_client
    from fedsweep.tracking.store import ensure_experiment

    client = get_client(uri)
    exp = ensure_experiment(client, spec.figure, uri)
    for trial in expand(spec, profile):
        tags = {
            "fedsweep.config_hash": trial.config_hash,
            "fedsweep.figure": spec.figure,
            "fedsweep.status": "finished",
        }
        run = client.create_run(exp, tags=tags).info.run_id
        log_config(client, run, trial.config)
        metrics = [
            Metric(key, float(v), 0, t)
            for key, ys in values(trial).items()
            for t, v in enumerate(ys, start=1)
        ]
        client.log_batch(run, metrics=metrics)
        client.set_terminated(run)
