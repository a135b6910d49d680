"""Run names: what a person reads in MLflow's run list and chart legends.

- A sweep trial is named from its spec's labels: ``seed n · curve · panel label(s)``, e.g.
  ``seed 1 · α=0.3 · Case 2`` or ``seed 0 · BHerd-FedAvg · CNN, MNIST · Case 2``. The seed and
  the curve (what the figure varies) come first: the MLflow UI cuts long names at the column's
  width, and the panel label is the part a figure's runs share most.
- ``fedsweep run CONFIG`` takes ``--name``; without it, a run with no ``--set`` that changes its
  numbers keeps the config file's ``name``; otherwise the name says what the run is and what
  differs from the file: method, model, data set, partition, then every other override in a
  short form, e.g. ``bherd-fedavg svm mnist case2 α=0.3`` for ``--set bherd.alpha=0.3 --set
  data.partition=case2`` on ``configs/bherd-default.yaml``.
"""

from __future__ import annotations

from typing import Any

from fedsweep.components.compose import DEFAULTS, method_label
from fedsweep.config.hashing import HASH_EXCLUDED
from fedsweep.config.schema import RunConfig

#: short labels of well-known keys (the papers' symbols)
SHORT = {
    "bherd.alpha": "α",
    "train.local_epochs": "E",
    "train.batch_size": "B",
    "train.lr": "η",
    "train.rounds": "T",
    "data.num_clients": "N",
    "data.dirichlet_alpha": "Dir",
    "fedprox.mu": "μ",
    "server_sgd.lr": "η_s",
    "server_sgd.momentum": "β_s",
    "fedopt.lr": "η_s",
    "fedopt.tau": "τ",
    "cohort.size": "m",
    "cohort.fraction": "C",
    "poc.d": "d",
    "fednova.momentum": "ρ",
    "model.svm_lambda": "λ",
    "seed": "seed",
}
#: keys shown by the descriptive part of the name (method, model, data set, partition)
DESCRIBED = (
    "algorithm",
    "selector",
    "sampler",
    "server_optimizer",
    "model.name",
    "data.dataset",
    "data.partition",
)
SEP = " · "


def method_name(config: RunConfig) -> str:
    """The method's display name, as its components give it (``compose.method_label``):
    ``bherd-fedavg``, ``fedavg``, ``fedveca``, ``scaffold-fedwalk``."""
    return method_label(config)


def describe(config: RunConfig) -> str:
    """``bherd-fedavg svm mnist case2``: method, model, data set, partition; a sampler or server
    optimizer other than the default follows the method (``fedavg server=adam sampler=poc``)."""
    parts = [method_name(config)]
    if config.server_optimizer != DEFAULTS["server_optimizer"]:
        parts.append(f"server={config.server_optimizer}")
    if config.sampler != DEFAULTS["sampler"]:
        parts.append(f"sampler={config.sampler}")
    return " ".join([*parts, config.model.name, config.data.dataset, config.data.partition])


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(format_value(v) for v in value)
    return str(value)


def short_override(key: str, value: Any) -> str:
    """``α=0.3`` for ``bherd.alpha``, ``E=2`` for ``train.local_epochs``; ``key=value`` else."""
    return f"{SHORT.get(key, key)}={format_value(value)}"


def _hashed(key: str) -> bool:
    """Whether ``key`` can change a run's numbers (keys excluded from the config hash cannot)."""
    return not any(key == ex or key.startswith(ex + ".") for ex in HASH_EXCLUDED)


def _lookup(tree: dict, key: str, default: Any) -> Any:
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def run_name(config: RunConfig, overrides: dict[str, Any] | None = None) -> str:
    """The name of a ``fedsweep run`` without ``--name`` (see the module docstring).

    ``overrides`` are the ``--set`` values (dotted keys); values are shown as validated.
    """
    changed = [k for k in (overrides or {}) if _hashed(k)]
    if not changed and config.name != RunConfig.model_fields["name"].default:
        return config.name
    tree = config.model_dump(mode="json")
    extra = [
        short_override(key, _lookup(tree, key, overrides[key]))
        for key in changed
        if key not in DESCRIBED
    ]
    return " ".join([describe(config), *extra])


def trial_line_name(curve: str, panel_label: str, profile: str) -> str:
    """The figure line a trial draws, as the MLflow UI's groups and chart legends name it
    (the tag ``fedsweep.line``): ``α=0.3 · Case 2 · quick profile``; the curve first (legends
    cut long names at their end), the panel (absent for a spec without panels), the profile
    (a figure's profiles are different runs of the same curve)."""
    return SEP.join(part for part in (curve, panel_label, f"{profile} profile") if part)


def trial_run_name(curve: str, panel_label: str, seed: int) -> str:
    """``seed 1 · α=0.3 · Case 2``; ``seed 1 · α=0.3`` for a spec without panels."""
    return SEP.join(part for part in (f"seed {seed}", curve, panel_label) if part)
