"""The run configuration. Every field is typed; unknown keys are errors.

Sections mirror the architecture: ``data`` (data set and partition), ``model``, ``train`` (the
local-SGD schedule of docs/algorithms.md §1), ``eval`` and ``tracking`` are general. Each slot of
the round names its component (``algorithm``, ``selector``, ``sampler``, ``server_optimizer``,
``step_policy``, ``lr_schedule``, ``hooks``), and each component's own section (``bherd``,
``poc``, ``fedopt``, ...) is the config class it registered with (``fedsweep.core.registry``):
``RunConfig`` is assembled from the registry, so a new component's section needs no edit here.
A slot may be written as a component block (``server_optimizer: {name: adam, lr: 0.01}``), the
same config as its sections. Every default keeps the behaviour of configs written before the
field existed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, create_model, field_validator, model_validator

from fedsweep.components.compose import DEFAULTS, SLOTS, composition_errors
from fedsweep.components.compose import data_errors as component_data_errors
from fedsweep.core import registry
from fedsweep.core.section import Section, numeric_bounds  # noqa: F401  (re-exported)
from fedsweep.data.catalog import (  # noqa: F401  (re-exported)
    CLASS_COUNTS,
    DATASETS,
    GRAYSCALE,
    PARTITIONS,
    TRAIN_SIZES,
)
from fedsweep.data.config import DataConfig


class ModelConfig(Section):
    name: Literal["svm", "cnn", "mlp", "cnn-mcmahan", "resnet18"] = "svm"
    svm_lambda: float = Field(0.1, ge=0)
    cnn_lrn: bool = True
    resnet_weights: Literal["imagenet"] | None = None
    resnet_weights_path: str | None = None


class TrainConfig(Section):
    rounds: int = Field(500, ge=1)
    local_epochs: float = Field(
        1.0, gt=0, description="E; fractional values take that share of an epoch."
    )
    batch_size: Annotated[int, Field(ge=1)] | Literal["full"] = Field(
        100, description="B; `full`: each client's whole local set (FedSGD with E = 1)."
    )
    lr: float = Field(1e-4, gt=0, description="eta, the client rate (lr_schedule's base value).")
    order: Literal["fixed", "rr", "iid"] = Field("fixed", description="Minibatch schedule (§1.3).")
    dtype: Literal["float32", "float64"] = "float32"


class EvalConfig(Section):
    every: int = Field(1, ge=1, description="Evaluate every k rounds (and always the last).")
    train_metrics: bool = Field(True, description="Also evaluate on the full training set.")
    batch_size: int = Field(5000, ge=1)
    test_subset: int | None = Field(
        None, ge=1, description="Evaluate on the first n test samples only (quick profiles)."
    )


class TrackingConfig(Section):
    enabled: bool = True
    uri: str | None = Field(
        None, description="MLflow URI; else $MLFLOW_TRACKING_URI, else ./mlruns."
    )
    experiment: str = "fedsweep"
    run_name: str | None = None
    log_records: bool = Field(True, description="Per-client per-round arrays (BHerd indices).")
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="Extra MLflow tags of the run; the fedsweep.* and mlflow.* namespaces are "
        "fedsweep's and MLflow's own (reuse keys, parent runs) and cannot be set here.",
    )
    blowup_factor: float | None = Field(
        1000.0,
        gt=1,
        description="Tag a finished run fedsweep.loss_blowup when its test loss rose above this "
        "factor x its first value (finite divergence); null: never. Not in the config hash.",
    )

    @field_validator("tags")
    @classmethod
    def _own_tags_only(cls, value: dict[str, str]) -> dict[str, str]:
        """A config's tags never set fedsweep's or MLflow's own: a ``fedsweep.config_hash`` set
        here made a sweep adopt the run as another config's trial (issue 48)."""
        for key in value:
            if key.strip().lower().startswith(RESERVED_TAG_PREFIXES):
                raise ValueError(
                    f"tag {key!r} is in a reserved namespace (fedsweep.*, mlflow.*: set by "
                    "fedsweep and MLflow themselves); allowed: any other name, e.g. "
                    f"'{key.split('.', 1)[-1]}'"
                )
        return value


#: tag namespaces a config cannot set: fedsweep's own (``fedsweep.config_hash`` is the reuse
#: key of every sweep) and MLflow's (``mlflow.parentRunId``, ``mlflow.runName``, ...)
RESERVED_TAG_PREFIXES = ("fedsweep.", "mlflow.")


#: keys renamed when the server step became its own component: (section, old key) -> the base
#: method it applied to and its key in ``server_sgd``. Configs written with the old keys still
#: load; ``fedsweep.config.hashing`` maps them back, so finished runs keep their hash.
RENAMED = {
    ("fednova", "gmf"): ("fednova", "momentum"),
    ("scaffold", "server_lr"): ("scaffold", "lr"),
}


class _RunFields(Section):
    """The run config's own fields: one component name per slot (the defaults are the
    components registered with ``default=True``), the device, and the general sections."""

    name: str = "run"
    seed: int = Field(0, ge=0)
    algorithm: str = Field(DEFAULTS["algorithm"], description="The base method.")
    selector: str = Field(
        DEFAULTS["selector"], description="The upload selector (which gradients are sent)."
    )
    sampler: str = Field(
        DEFAULTS["sampler"], description="The client sampler (which clients train, §7)."
    )
    server_optimizer: str = Field(
        DEFAULTS["server_optimizer"], description="Applies the base method's direction."
    )
    step_policy: str = Field(
        DEFAULTS["step_policy"], description="Local steps per client and round."
    )
    lr_schedule: str = Field(
        DEFAULTS["lr_schedule"], description="The client learning rate per round."
    )
    hooks: list[str] = Field(default_factory=list, description="Post-aggregation hooks, in order.")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int | None = Field(None, ge=1, description="torch threads; default: all CPUs.")
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)

    @model_validator(mode="before")
    @classmethod
    def _component_blocks(cls, data: Any) -> Any:
        """A slot may be given as its component with its settings,
        ``server_optimizer: {name: adam, lr: 0.01}``, the same as ``server_optimizer: adam`` with
        ``fedopt: {lr: 0.01}``: each key goes to the component's section that has it (``hooks``:
        a list of such blocks or names). The stored config, its hash and its logged params keep
        the sections (``fedopt.lr``)."""
        return expand_blocks(data) if isinstance(data, dict) else data

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        """``fednova.gmf`` -> ``server_sgd.momentum`` and ``scaffold.server_lr`` ->
        ``server_sgd.lr`` for the base method they belonged to (with another base method they
        had no effect and are dropped)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        algorithm = data.get("algorithm", "fedavg")
        for (section, old), (owner, new) in RENAMED.items():
            block = data.get(section)
            if not isinstance(block, dict) or old not in block:
                continue
            block = dict(block)
            value = block.pop(old)
            data[section] = block
            if algorithm != owner:
                continue
            sgd = data.get("server_sgd")
            sgd = dict(sgd) if isinstance(sgd, dict) else {}
            if new in sgd and sgd[new] != value:
                raise ValueError(
                    f"field `{section}.{old}` (the old name of `server_sgd.{new}`): got "
                    f"{value!r}, but server_sgd.{new} is {sgd[new]!r}; give it once, as "
                    f"server_sgd.{new}"
                )
            sgd[new] = value
            data["server_sgd"] = sgd
        return data

    @field_validator(
        "algorithm", "selector", "sampler", "server_optimizer", "step_policy", "lr_schedule"
    )
    @classmethod
    def _registered(cls, value: str, info) -> str:
        """Each slot names an entry of its registry (``fedsweep.components.compose``)."""
        registry = SLOTS[info.field_name]
        if value not in registry:
            raise ValueError(f"unknown {info.field_name} {value!r}; allowed: {', '.join(registry)}")
        return value

    @field_validator("hooks")
    @classmethod
    def _registered_hooks(cls, value: list[str]) -> list[str]:
        allowed = ", ".join(SLOTS["hooks"]) or "none yet"
        for name in value:
            if name not in SLOTS["hooks"]:
                raise ValueError(f"unknown hook {name!r}; allowed: {allowed}")
        return value

    @model_validator(mode="after")
    def _valid_composition(self):
        problems = composition_errors(self)
        if problems:
            raise ValueError("\n  ".join(problems))
        return self


def expand_blocks(data: dict) -> dict:
    """``data`` (a raw config tree) with every component block moved into its sections:
    ``server_optimizer: {name: adam, lr: 0.01}`` -> ``server_optimizer: adam``,
    ``fedopt: {lr: 0.01}``. Raises ``ValueError`` naming the field."""
    data = dict(data)
    for slot in SLOTS:
        value = data.get(slot)
        blocks = value if slot == "hooks" and isinstance(value, list) else [value]
        if not any(isinstance(b, dict) for b in blocks):
            continue
        names = [_merge_block(data, slot, b) if isinstance(b, dict) else b for b in blocks]
        data[slot] = names if slot == "hooks" else names[0]
    return data


def slot_key(data: dict, slot: str, key: str) -> str:
    """``server_optimizer.lr`` -> ``fedopt.lr``: a setting of the component that ``data`` (an
    expanded raw tree) names in ``slot`` (its default when it names none) as its section's key.
    Raises ``ValueError`` naming the field."""
    name = data.get(slot) or DEFAULTS.get(slot)
    if slot == "hooks" or name not in SLOTS[slot]:
        raise ValueError(f"field `{slot}.{key}`: `{slot}` does not name one component here")
    return f"{_owner(slot, name, key)}.{key}"


def _owner(slot: str, name: str, key: str) -> str:
    """The section of component ``name`` (in ``slot``) that has setting ``key``; raises
    ``ValueError`` with the settings it has."""
    classes = registry.section_classes()
    sections = SLOTS[slot][name].sections
    owners = [s for s in sections if key in classes[s].model_fields]
    if len(owners) != 1:
        keys = sorted(k for s in sections for k in classes[s].model_fields)
        raise ValueError(
            f"field `{slot}.{key}`: {slot} {name!r} has no setting {key!r} "
            f"(allowed: {', '.join(keys) or 'none'})"
        )
    return owners[0]


def _merge_block(data: dict, slot: str, block: dict) -> str:
    """Move the settings of one ``{name: ..., key: value}`` block into its component's sections
    of ``data``; returns the component's name."""
    block = dict(block)
    name = block.pop("name", None) if slot == "hooks" else block.pop("name", DEFAULTS[slot])
    found = SLOTS[slot]
    if name not in found:
        raise ValueError(
            f"field `{slot}`: a component block needs `name` (allowed: {', '.join(found)}), "
            f"got {name!r}"
        )
    for key, value in block.items():
        owner = _owner(slot, name, key)
        section = dict(data.get(owner) or {})
        if key in section and section[key] != value:
            raise ValueError(
                f"field `{slot}.{key}`: got {value!r}, but {owner}.{key} is "
                f"{section[key]!r}; give it once"
            )
        section[key] = value
        data[owner] = section
    return name


#: The run config: the run's own fields, then every registered component's section (each
#: defined once, next to its component, with its defaults), then evaluation and tracking.
RunConfig = create_model(
    "RunConfig",
    __base__=_RunFields,
    __module__=__name__,
    **{
        section: (config_cls, Field(default_factory=config_cls))
        for section, config_cls in registry.section_classes().items()
    },
    eval=(EvalConfig, Field(default_factory=EvalConfig)),
    tracking=(TrackingConfig, Field(default_factory=TrackingConfig)),
)
RunConfig.__doc__ = "A run: one component per slot, their sections, and the general sections."


# ----------------------------------------------------------------------------- feasibility
#: models that take any number of input channels
ANY_CHANNELS = ("svm", "cnn", "mlp", "cnn-mcmahan")


def max_clients(data: DataConfig) -> tuple[int, str]:
    """The most clients the partition can give at least one training sample each, and why
    (``fedsweep.data.partitions``: every scheme needs ``N <= |D|``; ``shards`` cuts ``s N``
    shards of ``floor(|D| / (s N))`` samples; ``case2`` with ``N > L`` deals class ``t`` over
    the clients ``t, t + L, ...``, so it needs ``N <= L c_t + t`` for every class count ``c_t``).
    """
    total = TRAIN_SIZES[data.dataset] - data.holdout
    name = data.dataset if not data.holdout else f"{data.dataset} (less data.holdout)"
    if data.train_subset is not None and data.train_subset < total:
        total, name = data.train_subset, f"{data.dataset} (data.train_subset)"
    limit, why = total, f"{name} has {total} training samples and every client needs at least one"
    if data.partition == "shards":
        s = data.shards_per_client
        limit = total // s
        why = (
            f"shards cuts num_clients x data.shards_per_client ({s}) shards of at least one "
            f"sample from the {total} training samples of {name}"
        )
    elif data.partition == "case2" and data.train_subset is None:
        counts = CLASS_COUNTS[data.dataset]
        n_labels = len(counts)
        by_class = min(n_labels * c + t for t, c in enumerate(counts))
        if by_class < limit:
            t = min(range(n_labels), key=lambda k: n_labels * counts[k] + k)
            limit = by_class
            why = (
                f"case2 deals class {t}'s {counts[t]} samples of {name} over every "
                f"{n_labels}th client, and each needs at least one"
            )
    return limit, why


def feasibility_errors(config: RunConfig, files: bool = True) -> list[str]:
    """Checks across fields that need no data: the partition gives every client a sample, the
    model takes the data set's channels, and each chosen component's ``data_errors`` (FedVeca's
    τ_max, the leash data of FedWalk's hooks; ``files``: a folder may be looked at). One message
    line per problem (empty: fine)."""
    out = []
    data = config.data
    total = TRAIN_SIZES[data.dataset]
    if data.holdout >= total:
        out.append(
            f"  field `data.holdout`: got {data.holdout}: {data.dataset} has {total} training "
            f"samples and the clients need some (allowed: 0..{total - 1})"
        )
        return out
    limit, why = max_clients(data)
    if data.num_clients > limit:
        out.append(
            f"  field `data.num_clients`: got {data.num_clients}: {why} "
            f"(allowed: 1..{limit} for data.partition {data.partition})"
        )
    # each component's own checks against the data (FedVeca's τ_max, the leash folder)
    out += component_data_errors(config, files=files)
    if config.model.name not in ANY_CHANNELS and data.dataset in GRAYSCALE:
        out.append(
            f"  field `model.name`: got {config.model.name!r}: ResNet-18 needs 3-channel images, "
            f"but {data.dataset} has 1 channel (allowed with {data.dataset}: "
            f"{', '.join(ANY_CHANNELS)}; or data.dataset cifar10, cifar100)"
        )
    return out
