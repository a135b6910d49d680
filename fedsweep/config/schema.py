"""The run configuration. Every field is typed; unknown keys are errors.

Sections mirror the architecture: ``data`` (data set and partition), ``model``, ``train`` (the
local-SGD schedule of docs/algorithms.md §1), the base ``algorithm`` and the upload
``selector`` (two independent axes, checked for compatibility here), one section per method for
its hyper-parameters (``bherd``, ``grab``, ``fedprox``, ``fednova``, ``scaffold``), ``eval`` and
``tracking``. Every default keeps the behaviour of configs written before the field existed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fedsweep.algorithms.registry import ALGORITHMS, SELECTORS, valid_compositions

DATASETS = ("mnist", "mnist-5k", "fashion-mnist", "cifar10", "cifar100")
PARTITIONS = ("case1", "case2", "case3", "dirichlet", "shards", "iid")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


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
