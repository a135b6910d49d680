"""The ``data`` section of a run: the data set and its federated partition (docs/algorithms.md §9)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from fedsweep.core.section import Section
from fedsweep.data.partitions import (
    MIN_POWERLAW_EXPONENT,
    POWERLAW_EXPONENT,
    QUANTITY_SKEW_PARTITIONS,
)


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
    quantity_skew: Literal["none", "powerlaw"] = Field(
        "none",
        description="Client sizes: the partition's own (none), or power-law sizes, each client "
        "at least 1 sample (powerlaw; with partition iid only) (§9.5).",
    )
    quantity_skew_exponent: float = Field(
        POWERLAW_EXPONENT,
        ge=MIN_POWERLAW_EXPONENT,
        description="Exponent a of the powerlaw sizes: the N quantiles of Pareto(a), "
        "P(x > s) = s^-a (rank-size n_(r) ~ (r - 1/2)^(-1/a); 1: Zipf's law); smaller a, more "
        f"skew, down to {MIN_POWERLAW_EXPONENT} (one client holds all but one sample per other "
        "client); read only with quantity_skew powerlaw (§9.5).",
    )
    train_subset: int | None = Field(
        None, ge=1, description="Use only the first n training samples (file order)."
    )
    holdout: int = Field(
        0,
        ge=0,
        description="Hold the last n training samples out of the FL training set (taken before "
        "train_subset): the server's public data (FedWalk's leash stand-in); no client sees them.",
    )
    normalization: Literal["auto", "imagenet"] = "auto"

    @field_validator("quantity_skew")
    @classmethod
    def _skew_composes(cls, value: str, info: ValidationInfo) -> str:
        """A quantity skew only where it can set the client sizes (``partition`` is validated
        before this field, so it is in ``info.data`` when it is valid)."""
        partition = info.data.get("partition")
        if value != "none" and partition is not None and partition not in QUANTITY_SKEW_PARTITIONS:
            raise ValueError(
                f"data.partition {partition!r} keeps its own client sizes (allowed: none with "
                f"{partition}; {value} only with data.partition "
                f"{' or '.join(QUANTITY_SKEW_PARTITIONS)})"
            )
        return value
