"""The BHerd/FedVeca CNN for MNIST and CIFAR-10 (docs/algorithms.md §8.2; Section 10, B16, V11).

Also holds ``SoftmaxClassifier``, the cross-entropy objective shared by every multi-class model.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

from fedsweep.models.base import FLModel


class SoftmaxClassifier(FLModel):
    """Multi-class model whose ``forward`` returns logits [n, num_classes]."""

    def criterion(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy; stable log-softmax, no NaN at saturation (§8.2 [I])."""
        return F.cross_entropy(output, target)

    def correct(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Count of argmax predictions equal to the target (0-dim int64)."""
        return (output.argmax(dim=1) == target).sum()


class BandedLRN(nn.LocalResponseNorm):
    """``nn.LocalResponseNorm`` with the channel-window sum done as a banded 1x1 convolution.

    Same formula as torch: ``x / (k + alpha/size * Σ_{c' in window(c)} x_{c'}^2)^beta``, window
    ``[c − size//2, c + (size−1)//2]`` truncated at the edges (torch zero-pads). torch computes the
    window with ``avg_pool3d``, which took 42% of a CNN step on 2 CPU cores (forward + backward);
    one 1x1 convolution with a constant 0/1 band matrix does the same sum far faster.
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__(size, alpha, beta, k)
        self._bands: dict[tuple, torch.Tensor] = {}

    def _band(self, channels: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        key = (channels, dtype, device)
        band = self._bands.get(key)
        if band is None:
            c = torch.arange(channels)
            offset = c[None, :] - c[:, None]  # [out, in]: in − out
            inside = (offset >= -(self.size // 2)) & (offset <= (self.size - 1) // 2)
            band = inside.to(dtype).view(channels, channels, 1, 1).to(device)
            self._bands[key] = band
        return band

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            return super().forward(x)
        window = F.conv2d(x.square(), self._band(x.shape[1], x.dtype, x.device))
        return x / (window * (self.alpha / self.size) + self.k).pow(self.beta)


def _paper_cnn_lrn() -> nn.LocalResponseNorm:
    """TF ``lrn(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75)``; torch divides alpha by size."""
    return BandedLRN(size=9, alpha=0.001, beta=0.75, k=1.0)  # §8.2 [R + I]


class PaperCNN(SoftmaxClassifier):
    """conv1 -> ReLU -> pool -> LRN -> conv2 -> ReLU -> LRN -> pool -> FC 256 + ReLU -> FC.

    ``lrn=False`` drops both LRN layers (ablation; the default ``True`` follows the reference,
    B16). Parameter counts: 430,698 on 1x28x28, 555,178 on 3x32x32 (§8.2).
    """

    def __init__(
        self, in_channels: int, image_size: int, num_classes: int = 10, lrn: bool = True
    ) -> None:
        super().__init__()
        if image_size < 4:
            raise ValueError(f"image_size must be >= 4, got {image_size}")
        self.lrn = lrn
        layers: list[tuple[str, nn.Module]] = [
            ("conv1", nn.Conv2d(in_channels, 32, kernel_size=5, stride=1, padding=2)),
            ("relu1", nn.ReLU()),
            ("pool1", nn.MaxPool2d(kernel_size=2, stride=2)),
            ("lrn1", _paper_cnn_lrn()),
            ("conv2", nn.Conv2d(32, 32, kernel_size=5, stride=1, padding=2)),
            ("relu2", nn.ReLU()),
            ("lrn2", _paper_cnn_lrn()),  # LRN before the second pool [R]
            ("pool2", nn.MaxPool2d(kernel_size=2, stride=2)),
        ]
        if not lrn:
            layers = [(name, layer) for name, layer in layers if not name.startswith("lrn")]
        self.features = nn.Sequential(OrderedDict(layers))
        side = image_size // 2 // 2
        self.classifier = nn.Sequential(
            OrderedDict(
                [
                    ("flatten", nn.Flatten()),
                    ("fc1", nn.Linear(32 * side * side, 256)),
                    ("relu3", nn.ReLU()),
                    ("fc2", nn.Linear(256, num_classes)),
                ]
            )
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weights ~ truncated normal(std 0.1, cut at +-0.2); all biases 0.1 (§8.2 [R])."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d | nn.Linear):
                nn.init.trunc_normal_(module.weight, mean=0.0, std=0.1, a=-0.2, b=0.2)
                nn.init.constant_(module.bias, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits [n, num_classes] for images [n, C, H, W]."""
        return self.classifier(self.features(x))
