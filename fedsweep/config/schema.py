"""The run configuration. Every field is typed; unknown keys are errors.

Sections mirror the architecture: ``data`` (data set and partition), ``model``, ``train`` (the
local-SGD schedule of docs/algorithms.md §1), the base ``algorithm`` and the upload
``selector`` (two independent axes, checked for compatibility here), one section per method for
its hyper-parameters (``bherd``, ``grab``, ``fedprox``, ``fednova``, ``scaffold``), ``eval`` and
``tracking``. Every default keeps the behaviour of configs written before the field existed.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from fedsweep.algorithms.registry import ALGORITHMS, SELECTORS, valid_compositions

DATASETS = ("mnist", "mnist-5k", "fashion-mnist", "cifar10", "cifar100")
PARTITIONS = ("case1", "case2", "case3", "dirichlet", "shards", "iid")


def _numeric_kind(annotation: Any) -> str | None:
    """ "an integer" / "a number" for an ``int`` / ``float`` field (``X | None`` included)."""
    options = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    if int in options:
        return "an integer"
    if float in options:
        return "a number"
    return None


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


class Section(BaseModel):
    # allow_inf_nan=False: `.inf`, `1e400` (overflows to inf) and `.nan` are refused everywhere
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """``true``/``false`` are not numbers: pydantic would read ``rounds: true`` as 1."""
        if isinstance(value, bool) and info.field_name is not None:
            field = cls.model_fields[info.field_name]
            kind = _numeric_kind(field.annotation)
            if kind is not None:
                raise ValueError(
                    f"a boolean is not {kind} (allowed: {kind}{numeric_bounds(field)})"
                )
        return value


def numeric_bounds(field) -> str:
    """`` >= 1``, `` > 0 and <= 1``: the numeric constraints of a field, for messages."""
    parts = []
    for meta in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(meta, attr, None)
            if bound is not None:
                parts.append(f"{sign} {bound}")
    return " " + " and ".join(parts) if parts else ""


class DataConfig(Section):
    dataset: Literal["mnist", "mnist-5k", "fashion-mnist", "cifar10", "cifar100"] = "mnist"
    root: str | None = Field(
        None, description="Data folder (torchvision layout); else $FEDSWEEP_DATA_DIR, else cache."
    )
    download: bool = True
    partition: Literal["case1", "case2", "case3", "dirichlet", "shards", "iid"] = "case1"
    num_clients: int = Field(5, ge=1)
    case1_mode: Literal["roundrobin", "shuffled"] = "roundrobin"
    dirichlet_alpha: float = Field(0.5, gt=0)
    shards_per_client: int = Field(2, ge=1)
    train_subset: int | None = Field(
        None, ge=1, description="Use only the first n training samples (file order)."
    )
    normalization: Literal["auto", "imagenet"] = "auto"


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
    batch_size: int = Field(100, ge=1)
    lr: float = Field(1e-4, gt=0)
    order: Literal["fixed", "rr", "iid"] = Field("fixed", description="Minibatch schedule (§1.3).")
    dtype: Literal["float32", "float64"] = "float32"


class BHerdConfig(Section):
    alpha: float = Field(0.5, gt=0, le=1)
    round: Literal["half_up", "ceil", "floor"] = "half_up"
    scale: Literal["E_over_alpha", "one_over_alpha"] = "E_over_alpha"
    scaffold_ci: Literal["selected", "full"] = Field(
        "selected",
        description="BHerd-SCAFFOLD c_i from the uploaded herd or the full trajectory (§3.8).",
    )


class GraBConfig(Section):
    variant: Literal["bherd_alg4", "grab_stale_mean"] = Field(
        "bherd_alg4", description="Literal BHerd Alg. 4, or GraB's stale-mean balancer (B13)."
    )


class FedProxConfig(Section):
    mu: float = Field(0.01, ge=0, description="Proximal weight (§2.3; default W18).")


class FedNovaConfig(Section):
    momentum: float = Field(0.0, ge=0, lt=1, description="Local momentum rho (§2.4).")
    mu: float = Field(0.0, ge=0, description="Local proximal term (§2.4).")
    taueff: Literal["a", "steps"] = Field(
        "a", description="tau_eff = sum q_i a_i or q_i tau_i (N1)."
    )
    gmf: float = Field(0.0, ge=0, lt=1, description="Server momentum (§2.4).")

    @model_validator(mode="after")
    def _one_local_solver(self) -> FedNovaConfig:
        if self.momentum != 0 and self.mu != 0:
            raise ValueError(
                "fednova.momentum and fednova.mu cannot both be non-zero: §2.4 defines a_i for "
                "momentum SGD or proximal SGD, not both"
            )
        return self


class ScaffoldConfig(Section):
    weights: Literal["data", "uniform"] = Field(
        "data", description="q_i of both server sums: p_i renormalised, or 1/|S_t| (C1)."
    )
    server_lr: float = Field(1.0, gt=0, description="eta_g (§2.5).")


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
    tags: dict[str, str] = Field(default_factory=dict)
    blowup_factor: float | None = Field(
        1000.0,
        gt=1,
        description="Tag a finished run fedsweep.loss_blowup when its test loss rose above this "
        "factor x its first value (finite divergence); null: never. Not in the config hash.",
    )


class RunConfig(Section):
    name: str = "run"
    seed: int = Field(0, ge=0)
    algorithm: str = "fedavg"
    selector: str = "none"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int | None = Field(None, ge=1, description="torch threads; default: all CPUs.")
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    bherd: BHerdConfig = Field(default_factory=BHerdConfig)
    grab: GraBConfig = Field(default_factory=GraBConfig)
    fedprox: FedProxConfig = Field(default_factory=FedProxConfig)
    fednova: FedNovaConfig = Field(default_factory=FedNovaConfig)
    scaffold: ScaffoldConfig = Field(default_factory=ScaffoldConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)

    @field_validator("algorithm", "selector")
    @classmethod
    def _registered(cls, value: str, info) -> str:
        """``algorithm`` / ``selector`` must name an entry of its registry."""
        registry = ALGORITHMS if info.field_name == "algorithm" else SELECTORS
        if value not in registry:
            raise ValueError(f"unknown {info.field_name} {value!r}; allowed: {', '.join(registry)}")
        return value

    @model_validator(mode="after")
    def _valid_composition(self) -> RunConfig:
        selector = SELECTORS[self.selector]
        if self.selector != "none" and self.algorithm not in selector.bases:
            combos = "; ".join(valid_compositions())
            raise ValueError(
                f"selector {self.selector!r} cannot be composed with algorithm "
                f"{self.algorithm!r}; valid combinations: {combos}"
            )
        selector.check_config(self)
        return self


# ----------------------------------------------------------------------------- feasibility
#: training-set sizes known without loading the data (``data.train_subset`` takes a prefix)
TRAIN_SIZES = {
    "mnist": 60000,
    "mnist-5k": 4000,
    "fashion-mnist": 60000,
    "cifar10": 50000,
    "cifar100": 50000,
}
#: training samples per class (0, 1, ...) of the full training sets
CLASS_COUNTS = {
    "mnist": (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949),
    "mnist-5k": (400,) * 10,
    "fashion-mnist": (6000,) * 10,
    "cifar10": (5000,) * 10,
    "cifar100": (500,) * 100,
}
#: data sets of one-channel (grayscale) images
GRAYSCALE = ("mnist", "mnist-5k", "fashion-mnist")
#: models that take any number of input channels
ANY_CHANNELS = ("svm", "cnn", "mlp", "cnn-mcmahan")


def max_clients(data: DataConfig) -> tuple[int, str]:
    """The most clients the partition can give at least one training sample each, and why
    (``fedsweep.data.partitions``: every scheme needs ``N <= |D|``; ``shards`` cuts ``s N``
    shards of ``floor(|D| / (s N))`` samples; ``case2`` with ``N > L`` deals class ``t`` over
    the clients ``t, t + L, ...``, so it needs ``N <= L c_t + t`` for every class count ``c_t``).
    """
    total = TRAIN_SIZES[data.dataset]
    name = data.dataset
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


def feasibility_errors(config: RunConfig) -> list[str]:
    """Checks across fields that need no data: the partition gives every client a sample, the
    model takes the data set's channels. One message line per problem (empty: fine)."""
    out = []
    data = config.data
    limit, why = max_clients(data)
    if data.num_clients > limit:
        out.append(
            f"  field `data.num_clients`: got {data.num_clients}: {why} "
            f"(allowed: 1..{limit} for data.partition {data.partition})"
        )
    if config.model.name not in ANY_CHANNELS and data.dataset in GRAYSCALE:
        out.append(
            f"  field `model.name`: got {config.model.name!r}: ResNet-18 needs 3-channel images, "
            f"but {data.dataset} has 1 channel (allowed with {data.dataset}: "
            f"{', '.join(ANY_CHANNELS)}; or data.dataset cifar10, cifar100)"
        )
    return out
