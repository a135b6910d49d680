"""``build_model``: the single entry point from a model name to an ``FLModel``
(docs/algorithms.md §8)."""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from fedsweep.models.base import FLModel
from fedsweep.models.cnn import PaperCNN
from fedsweep.models.mcmahan import McMahanCNN, McMahanMLP
from fedsweep.models.resnet import ResNet18
from fedsweep.models.svm import SquaredSVM

__all__ = ["MODELS", "FLModel", "build_model", "count_parameters"]

MODELS = ("svm", "cnn", "mlp", "cnn-mcmahan", "resnet18")
#: models that return features (``FLModel.feature_dim``): a separate head can sit on them
FEATURE_MODEL_NAMES = ("mlp", "cnn-mcmahan", "resnet18")
OPTIONS = ("svm_lambda", "cnn_lrn", "resnet_weights", "resnet_weights_path")


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters (buffers such as BatchNorm statistics excluded)."""
    return sum(p.numel() for p in model.parameters())


def _option(options: dict[str, Any], key: str, default: Any) -> Any:
    """``options[key]``, with a missing key or an explicit None meaning the default."""
    value = options.get(key)
    return default if value is None else value


def _image_shape(name: str, input_shape: tuple[int, ...]) -> tuple[int, int]:
    """(channels, side) of a square [C, H, W] input."""
    if len(input_shape) != 3 or input_shape[1] != input_shape[2]:
        raise ValueError(f"model {name!r} needs a square [C, H, W] input_shape, got {input_shape}")
    return input_shape[0], input_shape[1]


def build_model(
    name: str, input_shape: tuple[int, ...], num_classes: int, **options: Any
) -> FLModel:
    """Build model ``name`` for per-sample ``input_shape`` (no batch dim) and ``num_classes``.

    Options (each ignored by models that do not use it; None means the default):
    ``svm_lambda`` (0.1, B21), ``cnn_lrn`` (True, B16), ``resnet_weights`` (None or
    "imagenet", §8.4), ``resnet_weights_path`` (None). ``input_shape`` is e.g. (1, 28, 28).
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {MODELS}")
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown model options {unknown}; expected some of {OPTIONS}")
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    if name == "svm":
        if num_classes < 2:
            raise ValueError(f"svm needs num_classes >= 2 (even/odd labels), got {num_classes}")
        return SquaredSVM(math.prod(input_shape), lam=_option(options, "svm_lambda", 0.1))
    if name == "mlp":
        return McMahanMLP(math.prod(input_shape), num_classes)
    if name == "cnn":
        channels, side = _image_shape(name, input_shape)
        return PaperCNN(channels, side, num_classes, lrn=_option(options, "cnn_lrn", True))
    if name == "cnn-mcmahan":
        channels, side = _image_shape(name, input_shape)
        return McMahanCNN(channels, side, num_classes)
    if len(input_shape) != 3 or input_shape[0] != 3:
        raise ValueError(f"resnet18 needs a [3, H, W] input_shape, got {input_shape}")
    return ResNet18(
        num_classes,
        weights=options.get("resnet_weights"),
        weights_path=options.get("resnet_weights_path"),
    )
