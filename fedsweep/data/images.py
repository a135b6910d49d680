"""Images as tensors: the ``TensorDataset`` every loader returns and the preprocessing of
docs/algorithms.md §8.5 (pixel/255, per-image standardisation, ImageNet statistics)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fedsweep.data.catalog import GRAYSCALE

NORMALIZATIONS = ("auto", "imagenet")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class TensorDataset:
    """A whole data set as tensors: preprocessed float32 images ``[n, C, H, W]``, int64 labels.

    Labels are the original class ids ``0..K-1`` (digits for MNIST, not even/odd).
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    source: str

    @property
    def input_shape(self) -> tuple[int, ...]:
        """``(C, H, W)`` of one image."""
        return tuple(self.x_train.shape[1:])


def check_normalization(normalization: str) -> None:
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"normalization {normalization!r} is not one of {', '.join(NORMALIZATIONS)}"
        )


def per_image_standardize(images: torch.Tensor, chunk: int = 8192) -> torch.Tensor:
    """Per-image standardisation [R: IBM ``cifar_10_extractor.py``], section 8.5.

    Each image's values (raw 0-255 pixels) minus their mean, divided by
    ``max(std, 1/sqrt(#values))`` with the population std (as TensorFlow's
    ``per_image_standardization``). float32 throughout (``torch.var_mean``, chunked in place);
    differs from the reference's float64 numpy by < 1e-6.
    """
    n = images.shape[0]
    out = images.reshape(n, -1).to(torch.float32, copy=True)
    floor = 1.0 / math.sqrt(out.shape[1])
    for start in range(0, n, chunk):
        block = out[start : start + chunk]
        var, mean = torch.var_mean(block, dim=1, correction=0, keepdim=True)
        block.sub_(mean).div_(var.sqrt_().clamp_min_(floor))
    return out.reshape(images.shape)


def preprocess_images(images: torch.Tensor, name: str, normalization: str = "auto") -> torch.Tensor:
    """uint8 images ``[n, H, W]`` or ``[n, C, H, W]`` -> float32 ``[n, C, H, W]`` (section 8.5).

    ``auto``: MNIST-like sets pixel/255 [R: ``mnist_extractor.py``]; CIFAR per-image
    standardisation [R] (CIFAR-100 the same, [I]). ``imagenet``: pixel/255, then ImageNet
    mean/std per channel [I]; one-channel data use the mean of the three values [I].
    """
    check_normalization(normalization)
    if images.ndim == 3:
        images = images.unsqueeze(1)
    if normalization == "imagenet":
        x = images.to(torch.float32, copy=True).div_(255.0)
        channels = x.shape[1]
        mean = torch.tensor(IMAGENET_MEAN, dtype=torch.float64)
        std = torch.tensor(IMAGENET_STD, dtype=torch.float64)
        if channels == 1:
            mean, std = mean.mean().reshape(1), std.mean().reshape(1)
        elif channels != 3:
            raise ValueError(f"imagenet normalisation needs 1 or 3 channels, got {channels}")
        shape = (1, channels, 1, 1)
        return x.sub_(mean.to(torch.float32).view(shape)).div_(std.to(torch.float32).view(shape))
    if name in GRAYSCALE:
        return images.to(torch.float32, copy=True).div_(255.0)
    return per_image_standardize(images)
