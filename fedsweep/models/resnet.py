"""torchvision ResNet-18 with a new ``fc`` head (docs/algorithms.md §8.4; Section 10, W3, W10).

The network is unmodified (7x7 stride-2 stem and max-pool kept) and is fed 32x32 images by
default (W10); ImageNet mean/std normalisation is the data module's job (§8.5). BatchNorm
buffers are part of the model state.

Head (W3): ``fc`` is the FL head. FedWalk's separate leash head is *not* part of this module, so
it can never be sent to clients or averaged; the server owns an ``nn.Linear(FEATURE_DIM, C_s)``
and feeds it ``model(x, features_only=True)`` (this also works through
``torch.func.functional_call(model, params, (x,), {"features_only": True})``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import torch
from torch import nn

from fedsweep.compat.torchvision_ops import import_torchvision
from fedsweep.models.cnn import SoftmaxClassifier

FEATURE_DIM = 512
IMAGENET_FILE = "resnet18-f37072fd.pth"  # the file torchvision's IMAGENET1K_V1 expects
WEIGHT_CHOICES = (None, "imagenet")


def _hub_checkpoint_dir() -> str:
    """The folder torchvision downloads pretrained weights into."""
    return os.path.join(torch.hub.get_dir(), "checkpoints")


def _where_to_put_weights() -> str:
    """The one-sentence fix for missing ImageNet weights."""
    return (
        f"put the torchvision ResNet-18 IMAGENET1K_V1 state dict '{IMAGENET_FILE}' "
        f"(https://download.pytorch.org/models/{IMAGENET_FILE}) into "
        f"'{_hub_checkpoint_dir()}{os.sep}', or set model.resnet_weights_path "
        f"(resnet_weights_path) to a local copy of it"
    )


def _download_imagenet_state_dict() -> dict[str, torch.Tensor]:
    """Load ``ResNet18_Weights.IMAGENET1K_V1`` from the torch hub cache, downloading if needed."""
    import_torchvision()
    from torchvision.models import ResNet18_Weights

    try:
        return ResNet18_Weights.IMAGENET1K_V1.get_state_dict(progress=False, check_hash=True)
    except Exception as exc:  # offline (URLError), bad hash, proxy errors, ...
        raise RuntimeError(
            f"could not download the ImageNet ResNet-18 weights ({type(exc).__name__}: {exc}); "
            f"to run offline, {_where_to_put_weights()}"
        ) from exc


def _read_state_dict_file(path: str) -> Mapping[str, torch.Tensor]:
    """Read a local state-dict file, with clear errors for a missing or malformed file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"ResNet-18 weights file '{path}' does not exist; expected a torchvision ResNet-18 "
            f"state dict such as '{IMAGENET_FILE}'. Alternatively {_where_to_put_weights()}"
        )
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, Mapping) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise ValueError(f"'{path}' is not a state dict (a mapping of names to tensors)")
    return state


def imagenet_weights_problem(weights_path: str | None) -> str | None:
    """Why the ImageNet ResNet-18 weights cannot be had (None: they can): the local file is
    missing, or it is not in the torch hub cache and downloading it fails. Downloads into the
    cache when needed, so a sweep driver fetches the file once before its trials start."""
    if weights_path is not None:
        if os.path.isfile(weights_path):
            return None
        return (
            f"ResNet-18 weights file '{weights_path}' (model.resnet_weights_path) does not exist; "
            f"{_where_to_put_weights()}"
        )
    if os.path.isfile(os.path.join(_hub_checkpoint_dir(), IMAGENET_FILE)):
        return None
    try:
        _download_imagenet_state_dict()
    except RuntimeError as err:
        return str(err)
    return None


def load_backbone_state(net: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Strictly load every non-``fc`` entry of ``state`` into ``net``; ``fc`` stays as it is.

    Missing ``num_batches_tracked`` buffers are allowed (old checkpoints lack them; BatchNorm
    fills them in). Any other missing, unexpected or mis-shaped key raises ``ValueError``.
    """
    backbone = {k: v for k, v in state.items() if not k.startswith("fc.")}
    expected = {k: v for k, v in net.state_dict().items() if not k.startswith("fc.")}
    missing = [k for k in expected if k not in backbone and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in backbone if k not in expected]
    mis_shaped = [
        f"{k}: {tuple(backbone[k].shape)} != {tuple(expected[k].shape)}"
        for k in backbone
        if k in expected and backbone[k].shape != expected[k].shape
    ]
    if missing or unexpected or mis_shaped:
        raise ValueError(
            f"the weights in {source} do not match torchvision's ResNet-18 (fc excluded): "
            f"missing {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}, "
            f"wrong shape {mis_shaped[:5]}{' ...' if len(mis_shaped) > 5 else ''}"
        )
    result = net.load_state_dict(backbone, strict=False)
    leftover = [k for k in result.missing_keys if not k.startswith("fc.")]
    if leftover or result.unexpected_keys:  # cannot happen after the checks above
        raise ValueError(f"incomplete load from {source}: {leftover + result.unexpected_keys}")


class ResNet18(SoftmaxClassifier):
    """torchvision ``resnet18`` with ``fc = Linear(512, num_classes)`` (§8.4).

    ``weights=None``: random init (torchvision's). ``weights="imagenet"``: ImageNet-1k
    ``IMAGENET1K_V1`` backbone from ``weights_path`` if given, otherwise from the torch hub
    cache (downloaded if possible); the new ``fc`` keeps its default random init.
    """

    def __init__(
        self, num_classes: int, weights: str | None = None, weights_path: str | None = None
    ) -> None:
        super().__init__()
        if weights not in WEIGHT_CHOICES:
            raise ValueError(f"weights must be one of {WEIGHT_CHOICES}, got {weights!r}")
        if weights_path is not None and weights != "imagenet":
            raise ValueError("weights_path is only used with weights='imagenet'")
        import_torchvision()
        from torchvision.models import resnet18

        self.net = resnet18(weights=None, num_classes=num_classes)  # fc = Linear(512, C)
        self.feature_dim = FEATURE_DIM
        self.weights = weights
        self.weights_path = weights_path
        if weights == "imagenet":
            if weights_path is not None:
                state, source = _read_state_dict_file(weights_path), f"'{weights_path}'"
            else:
                state, source = _download_imagenet_state_dict(), f"'{IMAGENET_FILE}'"
            load_backbone_state(self.net, state, source)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The pooled 512-d backbone output (input of ``fc``)."""
        n = self.net
        x = n.maxpool(n.relu(n.bn1(n.conv1(x))))
        x = n.layer4(n.layer3(n.layer2(n.layer1(x))))
        return torch.flatten(n.avgpool(x), 1)

    def forward(self, x: torch.Tensor, features_only: bool = False) -> torch.Tensor:
        """Logits [n, num_classes], or the [n, 512] features if ``features_only`` (W3)."""
        h = self.features(x)
        return h if features_only else self.net.fc(h)
