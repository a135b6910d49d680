"""McMahan et al.'s FedAvg-paper models: the 2NN (MLP) and the CNN (docs/algorithms.md §8.3; W16).

Both keep PyTorch's default layer initialisation: the sources specify none [I].
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from fedsweep.models.cnn import SoftmaxClassifier


class McMahanMLP(SoftmaxClassifier):
    """2NN: flatten -> FC 200 + ReLU -> FC 200 + ReLU -> FC num_classes (§8.3 [P]).

    fedsweep's ``mlp``; also the small/CPU stand-in for ResNet-18 in FedWalk runs (W16).
    """

    def __init__(self, in_features: int = 784, num_classes: int = 10, hidden: int = 200) -> None:
        super().__init__()
        self.feature_dim = hidden
        self.net = nn.Sequential(
            OrderedDict(
                [
                    ("flatten", nn.Flatten()),
                    ("fc1", nn.Linear(in_features, hidden)),
                    ("relu1", nn.ReLU()),
                    ("fc2", nn.Linear(hidden, hidden)),
                    ("relu2", nn.ReLU()),
                    ("fc3", nn.Linear(hidden, num_classes)),
                ]
            )
        )

    def forward(self, x: torch.Tensor, features_only: bool = False) -> torch.Tensor:
        """Logits [n, num_classes]; any input [n, ...] with prod(...) == in_features. With
        ``features_only``: the [n, hidden] input of the last layer."""
        return self.net[:-1](x) if features_only else self.net(x)


class McMahanCNN(SoftmaxClassifier):
    """conv5x5 32 'same' -> pool -> conv5x5 64 'same' -> pool -> FC 512 + ReLU -> FC (§8.3 [P]).

    Each convolution is followed by a ReLU: the slides list no activation there, the FedAvg
    paper's standard implementations use one [I]. 1,663,370 parameters on 1x28x28.
    """

    def __init__(self, in_channels: int = 1, image_size: int = 28, num_classes: int = 10) -> None:
        super().__init__()
        if image_size < 4:
            raise ValueError(f"image_size must be >= 4, got {image_size}")
        side = image_size // 2 // 2
        self.feature_dim = 512
        self.net = nn.Sequential(
            OrderedDict(
                [
                    ("conv1", nn.Conv2d(in_channels, 32, kernel_size=5, padding=2)),
                    ("relu1", nn.ReLU()),
                    ("pool1", nn.MaxPool2d(2, 2)),
                    ("conv2", nn.Conv2d(32, 64, kernel_size=5, padding=2)),
                    ("relu2", nn.ReLU()),
                    ("pool2", nn.MaxPool2d(2, 2)),
                    ("flatten", nn.Flatten()),
                    ("fc1", nn.Linear(64 * side * side, 512)),
                    ("relu3", nn.ReLU()),
                    ("fc2", nn.Linear(512, num_classes)),
                ]
            )
        )

    def forward(self, x: torch.Tensor, features_only: bool = False) -> torch.Tensor:
        """Logits [n, num_classes] for images [n, C, H, W]; with ``features_only`` the [n, 512]
        input of the last layer."""
        return self.net[:-1](x) if features_only else self.net(x)
