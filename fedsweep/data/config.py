"""The ``data`` section of a run: the data set and its federated partition (docs/algorithms.md §9)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fedsweep.core.section import Section


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
    holdout: int = Field(
        0,
        ge=0,
        description="Hold the last n training samples out of the FL training set (taken before "
        "train_subset): the server's public data (FedWalk's leash stand-in); no client sees them.",
    )
    normalization: Literal["auto", "imagenet"] = "auto"
