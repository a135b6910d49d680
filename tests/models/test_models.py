"""Models of docs/algorithms.md §8: parameter counts, layer order, init, objectives, weight
loading."""

from __future__ import annotations

import math
import urllib.error

import pytest
import torch
from torch import nn
from torch.func import functional_call

from fedsweep.compat.torchvision_ops import import_torchvision
from fedsweep.models import MODELS, FLModel, build_model, count_parameters
from fedsweep.models.cnn import PaperCNN
from fedsweep.models.mcmahan import McMahanCNN, McMahanMLP
from fedsweep.models.resnet import IMAGENET_FILE, ResNet18
from fedsweep.models.svm import SquaredSVM


def _objective(model: FLModel, params: dict[str, torch.Tensor], x, y) -> torch.Tensor:
    """criterion + penalty, evaluated the way the engine does it."""
    loss = model.criterion(functional_call(model, params, (x,)), y)
    penalty = model.penalty(params)
    return loss if penalty is None else loss + penalty


# ---------------------------------------------------------------- parameter counts (§8.2, §8.3)


@pytest.mark.parametrize(
    ("name", "shape", "expected"),
    [
        ("svm", (1, 28, 28), 784),
        ("cnn", (1, 28, 28), 430_698),
        ("cnn", (3, 32, 32), 555_178),
        ("cnn-mcmahan", (1, 28, 28), 1_663_370),
        ("mlp", (1, 28, 28), 199_210),
    ],
)
def test_parameter_counts(name: str, shape: tuple[int, ...], expected: int) -> None:
    assert count_parameters(build_model(name, shape, 10)) == expected


def test_cnn_without_lrn_has_same_parameter_count() -> None:
    model = build_model("cnn", (1, 28, 28), 10, cnn_lrn=False)
    assert count_parameters(model) == 430_698
    assert not any(isinstance(m, nn.LocalResponseNorm) for m in model.modules())


# ---------------------------------------------------------------------------- PaperCNN (§8.2)


def test_paper_cnn_layer_order_and_lrn_settings() -> None:
    from fedsweep.models.cnn import BandedLRN

    model = PaperCNN(1, 28)
    kinds = [type(m) for m in model.features]
    assert kinds == [
        nn.Conv2d,
        nn.ReLU,
        nn.MaxPool2d,
        BandedLRN,
        nn.Conv2d,
        nn.ReLU,
        BandedLRN,  # LRN before the second pool (B16)
        nn.MaxPool2d,
    ]
    for m in model.features:
        if isinstance(m, nn.LocalResponseNorm):
            assert (m.size, m.alpha, m.beta, m.k) == (9, 0.001, 0.75, 1.0)
    assert model.features(torch.zeros(2, 1, 28, 28)).shape == (2, 32, 7, 7)
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert PaperCNN(3, 32)(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize("size", [9, 4, 1])
def test_banded_lrn_equals_torch_lrn(size: int) -> None:
    from fedsweep.models.cnn import BandedLRN

    x = torch.randn(3, 32, 7, 7, dtype=torch.float64, requires_grad=True) * 3
    ref, ours = nn.LocalResponseNorm(size, 0.001, 0.75, 1.0), BandedLRN(size, 0.001, 0.75, 1.0)
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-12, atol=1e-12)
    g_ref = torch.autograd.grad(ref(x).sum(), x)[0]
    g_ours = torch.autograd.grad(ours(x).sum(), x)[0]
    torch.testing.assert_close(g_ours, g_ref, rtol=1e-10, atol=1e-12)


def test_paper_cnn_init_statistics() -> None:
    torch.manual_seed(0)
    model = PaperCNN(3, 32)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            assert torch.all(p == 0.1), name
        else:
            assert p.abs().max() <= 0.2, name
    # std of N(0, 0.1^2) truncated at +-2 std is 0.1 * 0.8796
    assert abs(model.classifier.fc1.weight.std().item() - 0.08796) < 0.002


def test_cross_entropy_matches_manual_nll_and_is_stable() -> None:
    model = PaperCNN(1, 28)
    torch.manual_seed(1)
    logits = torch.randn(6, 10, dtype=torch.float64)
    target = torch.tensor([0, 3, 9, 2, 2, 7])
    manual = -torch.log_softmax(logits, dim=1)[torch.arange(6), target].mean()
    assert torch.allclose(model.criterion(logits, target), manual, rtol=0, atol=1e-12)

    huge = torch.zeros(2, 10)
    huge[0, 0], huge[0, 1], huge[1, 5] = 1e30, -1e30, 1e30
    loss = model.criterion(huge, torch.tensor([1, 5]))
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(1e30, rel=1e-6)  # (2e30 + 0) / 2


def test_correct_counts_argmax_hits() -> None:
    model = McMahanMLP()
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0], [0.0, 0.0, 5.0]])
    result = model.correct(logits, torch.tensor([1, 2, 2]))
    assert result.dim() == 0 and not result.is_floating_point()
    assert result.item() == 2


# ---------------------------------------------------------------- McMahan models (§8.3, W16)


def test_mcmahan_shapes() -> None:
    x = torch.zeros(2, 1, 28, 28)
    assert McMahanCNN()(x).shape == (2, 10)
    assert McMahanMLP()(x).shape == (2, 10)
    assert McMahanMLP(3072, 100)(torch.zeros(2, 3, 32, 32)).shape == (2, 100)
    assert McMahanCNN(3, 32, 10)(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


# ------------------------------------------------------------------ SquaredSVM (§8.1, B21, B22)


def test_svm_zero_init_and_loss_at_zero_is_half() -> None:
    model = SquaredSVM()
    assert model.linear.bias is None
    assert torch.all(model.linear.weight == 0)
    x = torch.rand(5, 1, 28, 28)
    y = torch.tensor([0, 1, 2, 7, 8])
    params = dict(model.named_parameters())
    assert _objective(model, params, x, y).item() == 0.5


def test_svm_autograd_gradient_equals_closed_form() -> None:
    gen = torch.Generator().manual_seed(3)
    model = SquaredSVM(784, lam=0.1).double()
    x = torch.rand(64, 1, 28, 28, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 10, (64,), generator=gen)
    w = 0.1 * torch.randn(1, 784, generator=gen, dtype=torch.float64)
    w.requires_grad_(True)
    (grad,) = torch.autograd.grad(_objective(model, {"linear.weight": w}, x, y), w)

    xf, wf = x.reshape(64, 784), w.detach().reshape(784)
    sign = torch.where(y % 2 == 0, 1.0, -1.0).double()
    margin = sign * (xf @ wf)
    active = margin < 1
    assert 0 < active.sum() < 64  # both hinge branches are exercised
    closed = 0.1 * wf - ((sign * (1 - margin))[active, None] * xf[active]).sum(0) / 64
    torch.testing.assert_close(grad.reshape(784), closed, rtol=1e-12, atol=1e-14)

    loss = 0.05 * wf.square().sum() + 0.5 * torch.clamp(1 - margin, min=0).square().mean()
    value = _objective(model, {"linear.weight": w.detach()}, x, y)
    torch.testing.assert_close(value, loss, rtol=1e-12, atol=0)


def test_svm_penalty_uses_only_the_given_params() -> None:
    model = SquaredSVM(4, lam=0.5)
    w = torch.tensor([[1.0, 2.0, 0.0, -2.0]])
    assert model.penalty({"linear.weight": w}).item() == pytest.approx(0.25 * 9.0)
    assert model.penalty(dict(model.named_parameters())).item() == 0.0


def test_svm_ties_are_errors_and_every_sample_counts() -> None:
    model = SquaredSVM()
    x = torch.rand(10, 1, 28, 28)
    y = torch.arange(10)
    assert model.correct(model(x), y).item() == 0  # w = 0: every score is a tie
    scores = torch.tensor([1.0, -1.0, -2.0, 0.5, 0.0, 0.0])
    digits = torch.tensor([4, 3, 6, 9, 2, 1])  # even, odd, even, odd, even, odd
    # hits: sample 0 (+1, even), sample 1 (-1, odd); sample 0 is counted (B22)
    result = model.correct(scores, digits)
    assert result.dim() == 0 and not result.is_floating_point()
    assert result.item() == 2


def test_svm_even_odd_mapping_and_input_shapes() -> None:
    model = SquaredSVM(3)
    scores = torch.tensor([0.0] * 10)
    # at score 0 each sample's loss is 0.5 regardless of sign; at score 1 only even digits are 0
    ones = torch.ones(10)
    per_digit = [model.criterion(ones[i : i + 1], torch.tensor([i])).item() for i in range(10)]
    assert per_digit == [0.0 if d % 2 == 0 else 2.0 for d in range(10)]
    assert model.criterion(scores, torch.arange(10)).item() == 0.5
    with torch.no_grad():
        model.linear.weight.copy_(torch.tensor([[1.0, 2.0, 3.0]]))
    flat = torch.tensor([[1.0, 1.0, 1.0]])
    assert model(flat).shape == (1,)
    assert model(flat.reshape(1, 1, 1, 3)).item() == 6.0


# ------------------------------------------------------------------------ ResNet-18 (§8.4, W10)


def _torchvision_state_dict() -> dict[str, torch.Tensor]:
    import_torchvision()
    from torchvision.models import resnet18

    torch.manual_seed(7)
    return resnet18(weights=None).state_dict()  # 1000-class fc, as in the ImageNet file


def test_resnet_random_init_shapes() -> None:
    model = build_model("resnet18", (3, 32, 32), 10)
    assert isinstance(model, ResNet18)
    model.eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert model(x).shape == (2, 10)
        assert model(x, features_only=True).shape == (2, 512)
    assert model.net.fc.weight.shape == (10, 512)
    assert any(name.endswith("running_mean") for name, _ in model.named_buffers())


def test_resnet_loads_local_weights_file_excluding_fc(tmp_path) -> None:
    state = _torchvision_state_dict()
    path = tmp_path / IMAGENET_FILE
    torch.save(state, path)
    model = ResNet18(10, weights="imagenet", weights_path=str(path))
    loaded = model.net.state_dict()
    for key, value in state.items():
        if not key.startswith("fc."):
            assert torch.equal(loaded[key], value), key
    assert loaded["fc.weight"].shape == (10, 512)

    # old checkpoints (like the real ImageNet file) may lack num_batches_tracked
    old = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    torch.save(old, path)
    ResNet18(10, weights="imagenet", weights_path=str(path))


def test_resnet_weights_file_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=IMAGENET_FILE):
        ResNet18(10, weights="imagenet", weights_path=str(tmp_path / "absent.pth"))
    state = _torchvision_state_dict()
    state["layer9.weight"] = torch.zeros(1)
    del state["conv1.weight"]
    path = tmp_path / "bad.pth"
    torch.save(state, path)
    with pytest.raises(ValueError, match=r"missing \['conv1.weight'\].*layer9.weight"):
        ResNet18(10, weights="imagenet", weights_path=str(path))
    with pytest.raises(ValueError, match="weights must be one of"):
        ResNet18(10, weights="imagenet21k")


def test_resnet_offline_download_error_says_where_to_put_the_file(monkeypatch) -> None:
    import_torchvision()
    import torchvision.models._api as tv_api

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(tv_api, "load_state_dict_from_url", offline)
    with pytest.raises(RuntimeError) as info:
        build_model("resnet18", (3, 32, 32), 10, resnet_weights="imagenet")
    message = str(info.value)
    assert IMAGENET_FILE in message
    assert str(torch.hub.get_dir()) in message and "checkpoints" in message
    assert "weights_path" in message


# --------------------------------------------------------------------------- registry and API


def test_registry_rejects_bad_names_and_options() -> None:
    with pytest.raises(ValueError) as info:
        build_model("vgg", (1, 28, 28), 10)
    assert "vgg" in str(info.value)
    assert all(name in str(info.value) for name in MODELS)
    with pytest.raises(ValueError, match="svm"):
        build_model("svm", (1, 28, 28), 1)
    with pytest.raises(ValueError, match="cnn_lrm"):
        build_model("cnn", (1, 28, 28), 10, cnn_lrm=False)
    with pytest.raises(ValueError, match=r"\[3, H, W\]"):
        build_model("resnet18", (1, 28, 28), 10)


def test_registry_passes_options() -> None:
    svm = build_model("svm", (1, 28, 28), 10, svm_lambda=0.3, cnn_lrn=None)
    assert isinstance(svm, SquaredSVM) and svm.lam == 0.3
    assert isinstance(build_model("cnn-mcmahan", (1, 28, 28), 10), McMahanCNN)


@pytest.mark.parametrize("name", [n for n in MODELS if n != "resnet18"])
def test_every_model_trains_through_functional_call(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(name, (1, 28, 28), 10)
    params = {k: v.detach().clone().requires_grad_(True) for k, v in model.named_parameters()}
    x, y = torch.rand(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    loss = _objective(model, params, x, y)
    grads = torch.autograd.grad(loss, list(params.values()))
    assert math.isfinite(loss.item())
    assert all(g.shape == p.shape for g, p in zip(grads, params.values(), strict=True))
    assert 0 <= model.correct(functional_call(model, params, (x,)), y).item() <= 4


def test_svm_closed_form_flat_gradient_equals_autograd() -> None:
    """The engine's fast path for the SVM must give autograd's gradient and loss."""
    from fedsweep.engine.functional import FunctionalModel

    g = torch.Generator().manual_seed(3)
    model = build_model("svm", (1, 28, 28), 10, svm_lambda=0.1).double()
    fm = FunctionalModel(model)
    x = torch.rand(64, 1, 28, 28, generator=g, dtype=torch.float64)
    y = torch.randint(0, 10, (64,), generator=g)
    for scale in (0.0, 0.01, 0.3):  # w = 0 (all margins active) to mixed margins
        w = torch.randn(784, generator=g, dtype=torch.float64) * scale
        grad, loss = model.flat_gradient(w, x, y)
        leaf = w.clone().requires_grad_(True)
        ref_loss = fm.objective(leaf, x, y)
        (ref_grad,) = torch.autograd.grad(ref_loss, leaf)
        torch.testing.assert_close(grad, ref_grad, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-12, atol=1e-14)
    assert fm.gradient(w, x, y)[0].shape == (784,)
