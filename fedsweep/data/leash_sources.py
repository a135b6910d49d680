"""The readers of FedWalk's leash images (``fedsweep.data.leash``): an ImageNet folder, the
Downsampled-ImageNet batches, the offline stand-in, and the cache of decoded pixels.

* ImageNet folder (``<root>/<wnid>/*.JPEG``, :func:`load_imagenet`): each image is decoded with
  PIL, converted to RGB and squashed (whole image, no crop, as Downsampled ImageNet does) to the
  FL image's ``H x W`` with ``BOX`` resampling (area averaging: every source pixel counts once,
  no aliasing) (W10). JPEGs are decoded at a reduced DCT scale first (``Image.draft``, never
  below ``H x W``), which makes decoding several times faster.
* Downsampled ImageNet 32x32 (:func:`load_imagenet32`). Format, checked against the authors'
  scripts (github.com/PatrykChrabaszcz/Imagenet32_Scripts, ``image2numpy_imagenet_train.py``
  and ``utils.py``): ``train_data_batch_1`` .. ``train_data_batch_10`` are pickled dicts with
  ``data`` (uint8 ``[n, 3072]``: the R, G, B planes one after another, each row-major, i.e. CHW
  flattened), ``labels`` (a list of 1-based ints) and ``mean``; a label is the class index of
  the ILSVRC devkit file ``map_clsloc.txt`` (lines ``wnid index name``, e.g.
  ``n02119789 1 kit_fox``), whose order is *not* the sorted-wnid order. The ``_npz`` release
  (``train_data_batch_1.npz`` ..) holds the same arrays.
* The stand-in (:func:`load_standin`): held-out FL training rows and the embedded mnist-5k
  digits.

Decoded ImageNet pixels (uint8, already at ``H x W``) are cached per (folder, files, class list,
``per_class``, size) in ``cache_dir`` (:func:`leash_cache_dir` by default), so they are decoded
once. Nothing here reads the leash config: the callers pass the classes, the cap and the folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import pickle
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedsweep.data.datasets import DatasetNotFoundError, _default_cache_dir, preprocess_images
from fedsweep.data.safe_files import UnsafeDataFileError, load_npz, load_pickle

log = logging.getLogger(__name__)

WNID_PATTERN = re.compile(r"^n\d{8}$")
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
IMAGENET32_BATCHES = tuple(f"train_data_batch_{i}" for i in range(1, 11))
IMAGENET32_MAP = "map_clsloc.txt"
#: sub-folders the Downsampled-ImageNet zips unpack into, also searched under ``leash.root``
IMAGENET32_SUBFOLDERS = ("Imagenet32_train", "Imagenet32_train_npz")
#: the stand-in's digit classes (and those of the digit FL data sets)
DIGIT_CLASSES = tuple(f"digit {d}" for d in range(10))


@dataclass(frozen=True)
class LeashData:
    """The leash set, loaded once; images laid out and normalised exactly like the FL images."""

    x: torch.Tensor  # float32 [n, C, H, W]
    y: torch.Tensor  # int64 [n], leash class ids 0..num_classes-1
    num_classes: int
    classes: list[str]  # wnid or readable name per leash class
    mapping: list[int] | None  # leash class -> FL class (the `mapped` head); None: no mapping
    description: str  # one line for figures and logs


# ----------------------------------------------------------------------------- shared helpers


def _rank_within_class(labels: np.ndarray) -> np.ndarray:
    """For each row, how many earlier rows have its label (0 for a class's first row)."""
    n = labels.size
    order = np.argsort(labels, kind="stable")
    ordered = labels[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - group_start
    return rank


def first_per_class(labels: np.ndarray, cap: int | None) -> np.ndarray:
    """Ascending row indices of the first ``cap`` rows of each class (all rows for None)."""
    labels = np.asarray(labels)
    if cap is None:
        return np.arange(labels.size)
    return np.flatnonzero(_rank_within_class(labels) < cap)


def balanced_prefix(labels: np.ndarray, k: int) -> np.ndarray:
    """Ascending indices of ``k`` rows taken class by class in turn (each class's rows in row
    order), so the classes stay as balanced as their counts allow."""
    labels = np.asarray(labels)
    order = np.lexsort((np.arange(labels.size), _rank_within_class(labels)))
    return np.sort(order[:k])


def _resize_uint8(images: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """uint8 ``[n, C, h, w]`` -> uint8 ``[n, C, H, W]``: bilinear, antialiased when shrinking."""
    if tuple(images.shape[-2:]) == tuple(size):
        return images
    out = torch.nn.functional.interpolate(
        images.to(torch.float32), size=size, mode="bilinear", align_corners=False, antialias=True
    )
    return out.round_().clamp_(0, 255).to(torch.uint8)


def cap_note(per_class: int | None) -> str:
    return "" if per_class is None else f"; at most {per_class:,} per class"


def leash_cache_dir() -> Path:
    """Where decoded ImageNet leash pixels are kept: ``<user cache>/fedsweep/leash``."""
    return _default_cache_dir().parent / "leash"


def _cached(
    kind: str,
    key: dict,
    build: Callable[[], tuple[torch.Tensor, torch.Tensor]],
    cache_dir: Path,
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images and labels for ``key``: from the cache file in ``cache_dir``, else
    ``build()`` and store.

    Written to a temporary name then renamed, so concurrent runs never read a partial file; an
    unreadable cache file is rebuilt, an unwritable cache folder only costs the next decode."""
    blob = json.dumps(key, sort_keys=True)
    path = cache_dir / f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}.pt"
    if path.is_file():
        try:
            saved = torch.load(path, map_location="cpu", weights_only=True)
            if saved.get("key") == blob:
                return saved["x"], saved["y"]
        except Exception as err:  # truncated or foreign file: decode again
            log.warning("ignoring unreadable leash cache %s (%s)", path, err)
    x, y = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        torch.save({"x": x, "y": y, "key": blob}, tmp)
        os.replace(tmp, path)
    except OSError as err:
        log.warning("could not write leash cache %s (%s)", path, err)
    return x, y


# ----------------------------------------------------------------------------- imagenet


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


def has_image(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return any(_is_image(e.name) and e.is_file() for e in entries)


def _image_files(folder: Path) -> list[os.DirEntry]:
    """The images of one class folder, sorted by name (a fixed order for ``per_class``)."""
    with os.scandir(folder) as entries:
        files = [e for e in entries if _is_image(e.name) and e.is_file()]
    return sorted(files, key=lambda e: e.name)


def decode_image(path: str, size: tuple[int, int]) -> np.ndarray:
    """One image file -> uint8 ``[H, W, 3]``: RGB, whole image box-resized to ``size``."""
    from PIL import Image

    height, width = size
    try:
        with Image.open(path) as img:
            img.draft("RGB", (width, height))  # JPEG: decode at 1/2..1/8 scale, >= (W, H)
            rgb = img.convert("RGB").resize((width, height), Image.Resampling.BOX)
            return np.asarray(rgb, dtype=np.uint8)
    except OSError as err:
        raise DatasetNotFoundError(f"cannot decode leash image {path}: {err}") from err


def load_imagenet(
    wnids: list[str],
    per_class: int | None,
    root: Path,
    size: tuple[int, int],
    cache_dir: Path,
    decode: Callable[[str, tuple[int, int]], np.ndarray] = decode_image,
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 ``[n, 3, H, W]`` and leash labels (class i = ``wnids[i]``) of the ImageNet folder
    ``root``, at most ``per_class`` files a class (the first by name), each file through
    ``decode``; cached in ``cache_dir``."""
    files = [_image_files(root / w)[:per_class] for w in wnids]
    # the file names and sizes identify the images without reading them
    listing = hashlib.sha256()
    for wnid, entries in zip(wnids, files, strict=True):
        for e in entries:
            listing.update(f"{wnid}/{e.name}:{e.stat().st_size}\n".encode())
    key = {
        "root": str(root),
        "wnids": wnids,
        "per_class": per_class,
        "size": list(size),
        "files": listing.hexdigest(),
        "resample": "box+draft",
    }

    def build() -> tuple[torch.Tensor, torch.Tensor]:
        paths = [e.path for entries in files for e in entries]
        log.info("decoding %d leash images from %s (once; cached)", len(paths), root)
        workers = min(8, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:  # PIL decodes without the GIL
            pixels = list(pool.map(lambda p: decode(p, size), paths))
        x = torch.from_numpy(np.stack(pixels)).permute(0, 3, 1, 2).contiguous()
        y = torch.repeat_interleave(torch.arange(len(wnids)), torch.tensor([len(f) for f in files]))
        return x, y

    return _cached("imagenet", key, build, cache_dir)


# ----------------------------------------------------------------------------- imagenet32


def read_map_clsloc(path: Path) -> dict[str, int]:
    """``map_clsloc.txt`` (``wnid index name`` per line) -> ``{wnid: 1-based index}``."""
    index: dict[str, int] = {}
    for number, line in enumerate(Path(path).read_text("utf-8").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2 or not WNID_PATTERN.match(parts[0]) or not parts[1].isdigit():
            raise ValueError(
                f"{path} line {number} is {line!r}; expected 'wnid index name' "
                "(e.g. 'n02119789 1 kit_fox')"
            )
        index[parts[0]] = int(parts[1])
    return index


def imagenet32_batches(root: Path) -> tuple[Path, list[Path], list[str]]:
    """(folder, batch files found in batch order, names missing). The folder is ``root``, or
    the sub-folder an ``Imagenet32_train*.zip`` unpacks into when only that has batch 1."""
    folder = root
    if _batch_path(root, IMAGENET32_BATCHES[0]) is None:
        for sub in IMAGENET32_SUBFOLDERS:
            if _batch_path(root / sub, IMAGENET32_BATCHES[0]) is not None:
                folder = root / sub
                break
    found, missing = [], []
    for name in IMAGENET32_BATCHES:
        path = _batch_path(folder, name)
        if path is None:
            missing.append(name)
        else:
            found.append(path)
    return folder, found, missing


def _batch_path(folder: Path, name: str) -> Path | None:
    for candidate in (folder / name, folder / f"{name}.npz"):
        if candidate.is_file():
            return candidate
    return None


def imagenet32_map(root: Path) -> Path | None:
    folder, _, _ = imagenet32_batches(root)
    for candidate in (root / IMAGENET32_MAP, folder / IMAGENET32_MAP):
        if candidate.is_file():
            return candidate
    return None


def read_imagenet32_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch file -> (uint8 ``[n, 3, s, s]``, int64 1-based labels ``[n]``).

    The folder is user input and the batches are pickles: they are read with the restricted
    unpickler (:func:`fedsweep.data.safe_files.load_pickle`: dicts, lists, strings, numbers,
    numpy arrays; anything else raises ``UnsafeDataFileError``, nothing runs), ``.npz`` files
    with :func:`~fedsweep.data.safe_files.load_npz` (plain arrays, sizes checked before they
    are allocated). The entry's shapes are checked before anything is converted: ``data`` a
    2-D array of ``n`` rows of 3 x s x s values, ``labels`` ``n`` integers (a pickle's memo can
    make a tiny file's labels a list of a million references to one long list, which
    ``np.asarray`` would expand); anything else raises ``UnsafeDataFileError`` naming the
    file."""
    if path.suffix == ".npz":
        entry = load_npz(path, ("data", "labels"))
    else:
        try:
            entry = load_pickle(path)  # latin1: also reads Python 2 pickles
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
                IndexError, KeyError, MemoryError) as err:  # fmt: skip
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            raise UnsafeDataFileError(
                f"data file {path} is not a readable Downsampled-ImageNet batch "
                f"({type(err).__name__}: {reason}): refusing to read it"
            ) from None
    if not isinstance(entry, dict) or "data" not in entry or "labels" not in entry:
        raise UnsafeDataFileError(
            f"data file {path} is not a Downsampled-ImageNet batch (a dict with 'data' and "
            "'labels'): refusing to read it"
        )
    data, labels = entry["data"], entry["labels"]
    if isinstance(labels, np.ndarray) and labels.ndim == 1 and labels.dtype.kind in "iu":
        count = labels.size
    elif isinstance(labels, list) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in labels
    ):
        count = len(labels)
    else:
        count = -1
    if not isinstance(data, np.ndarray) or data.ndim != 2 or count != len(data):
        shape = data.shape if isinstance(data, np.ndarray) else type(data).__name__
        raise UnsafeDataFileError(
            f"data file {path} is not a Downsampled-ImageNet batch ('data' {shape}, 'labels' "
            f"{'not a list of integers' if count < 0 else count}; expected n rows of 3 x s x s "
            "uint8 values and n integer labels): refusing to read it"
        )
    values = data.shape[1]
    side = math.isqrt(values // 3)
    if 3 * side * side != values:
        raise UnsafeDataFileError(
            f"data file {path}: rows of {values} values are not 3 x s x s images"
        )
    data = np.asarray(data, dtype=np.uint8)
    return data.reshape(-1, 3, side, side), np.asarray(labels, dtype=np.int64).reshape(-1)


def load_imagenet32(
    wnids: list[str],
    per_class: int | None,
    root: Path,
    size: tuple[int, int],
    cache_dir: Path,
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 ``[n, 3, H, W]`` and leash labels (class i = ``wnids[i]``) from the
    Downsampled-ImageNet batches in ``root``, at most ``per_class`` rows a class (the first in
    batch and row order); cached in ``cache_dir``."""
    _, batches, _ = imagenet32_batches(root)
    map_path = imagenet32_map(root)
    assert map_path is not None  # leash_problems ran first
    index = read_map_clsloc(map_path)
    stats = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in batches]
    key = {
        "root": str(root),
        "batches": stats,
        "map": hashlib.sha256(map_path.read_bytes()).hexdigest(),
        "wnids": wnids,
        "per_class": per_class,
        "size": list(size),
    }

    def build() -> tuple[torch.Tensor, torch.Tensor]:
        # file label (1-based map index) -> leash class, -1 for classes not in the leash
        lookup = np.full(max(index.values()) + 1, -1, dtype=np.int64)
        lookup[[index[w] for w in wnids]] = np.arange(len(wnids))
        counts = np.zeros(len(wnids), dtype=np.int64)
        xs, ys = [], []
        for path in batches:
            log.info("reading leash images from %s", path)
            data, labels = read_imagenet32_batch(path)
            if labels.size and (labels.min() < 1 or labels.max() >= lookup.size):
                raise ValueError(
                    f"{path}: labels {labels.min()}..{labels.max()} outside the 1..{lookup.size - 1} "
                    f"of {map_path}"
                )
            leash_y = lookup[labels]
            rows = np.flatnonzero(leash_y >= 0)
            if per_class is not None:  # first n per class over batch 1, 2, ... in row order
                ranks = _rank_within_class(leash_y[rows]) + counts[leash_y[rows]]
                rows = rows[ranks < per_class]
            xs.append(data[rows])
            ys.append(leash_y[rows])
            counts += np.bincount(leash_y[rows], minlength=len(wnids))
            if per_class is not None and (counts >= per_class).all():
                break  # every class is full: the later batches cannot add anything
        x = _resize_uint8(torch.from_numpy(np.concatenate(xs)), size)
        return x.contiguous(), torch.from_numpy(np.concatenate(ys))

    return _cached("imagenet32", key, build, cache_dir)


# ----------------------------------------------------------------------------- stand-in


def _digits(
    size: tuple[int, int], channels: int, per_class: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The mnist-5k training digits as raw uint8 ``[n, channels, H, W]`` (bilinear resize,
    gray replicated to every channel) and their labels, in the split's fixed order."""
    from fedsweep.data.mnist5k import load_mnist5k_arrays

    images, labels = load_mnist5k_arrays()[:2]
    keep = first_per_class(labels, per_class)
    x = _resize_uint8(torch.from_numpy(images[keep]).unsqueeze(1), size)
    return x.expand(-1, channels, -1, -1).contiguous(), torch.from_numpy(labels[keep])


def _held_out(
    holdout: tuple[torch.Tensor, torch.Tensor] | None,
    task: str,
    per_class: int | None,
    fl_x: torch.Tensor,
    num_classes: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    if holdout is None:
        raise ValueError(
            f"the {task} stand-in is made of held-out FL training images, but none were given "
            "(set data.holdout, e.g. 5000)"
        )
    x, y = holdout
    if x.ndim != 4 or tuple(x.shape[1:]) != tuple(fl_x.shape[1:]) or y.shape != (x.shape[0],):
        raise ValueError(
            f"held-out rows have images {tuple(x.shape)} and labels {tuple(y.shape)}; expected "
            f"[n, {', '.join(map(str, fl_x.shape[1:]))}] and [n] like the FL training set"
        )
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise ValueError(f"held-out labels must be 0..{num_classes - 1} (raw FL labels)")
    keep = torch.from_numpy(first_per_class(y.cpu().numpy(), per_class)).to(x.device)
    if keep.numel() == 0:
        raise ValueError("data.holdout gave no held-out rows")
    return x[keep].to(torch.float32), y[keep].to(torch.int64)


def load_standin(
    task: str,
    cap: int | None,
    dataset: str,
    fl_x: torch.Tensor,
    holdout: tuple[torch.Tensor, torch.Tensor] | None,
    normalization: str,
    fl_classes: Sequence[str],
    name: str,
) -> LeashData:
    """The stand-in for ``task``, at most ``cap`` images a class: LH/C100-LH: held-out FL rows;
    HH: mnist-5k digits; MH: both, digits as classes k..k+9. ``fl_classes``: the FL data set's
    class names; ``name``: its name in the descriptions."""
    fl_names = list(fl_classes)
    k = len(fl_names)
    channels, height, width = fl_x.shape[1:]
    how = f"resized 28x28 -> {height}x{width}" if (height, width) != (28, 28) else "28x28"
    if channels > 1:
        how += f", gray copied to {channels} channels"

    def digits(limit: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        raw, labels = _digits((height, width), channels, cap)
        if limit is not None and limit < labels.numel():
            keep = torch.from_numpy(balanced_prefix(labels.numpy(), limit))
            raw, labels = raw[keep], labels[keep]
        # the FL images' own normalisation ("auto" on CIFAR is per image, so mixing is fine)
        x = preprocess_images(raw, dataset, normalization)
        return x.to(fl_x.device), labels.to(fl_x.device)

    if task in ("LH", "C100-LH"):
        x, y = _held_out(holdout, task, cap, fl_x, k)
        return LeashData(
            x=x.contiguous(),
            y=y,
            num_classes=k,
            classes=fl_names,
            mapping=list(range(k)),
            description=f"stand-in for {task}: {len(y):,} held-out {name} training images "
            f"({k} classes{cap_note(cap)})",
        )
    if task == "HH":
        x, y = digits(None)
        return LeashData(
            x=x.contiguous(),
            y=y,
            num_classes=10,
            classes=list(DIGIT_CLASSES),
            mapping=None,
            description=f"stand-in for HH: {len(y):,} MNIST digits (mnist-5k train split, "
            f"10 classes, {how}{cap_note(cap)})",
        )
    hx, hy = _held_out(holdout, task, cap, fl_x, k)
    dx, dy = digits(len(hy))  # balance: no more digits than held-out images
    return LeashData(
        x=torch.cat([hx, dx]).contiguous(),
        y=torch.cat([hy, dy + k]),
        num_classes=k + 10,
        classes=fl_names + list(DIGIT_CLASSES),
        mapping=None,
        description=f"stand-in for MH: {len(hy):,} held-out {name} training images (classes "
        f"0-{k - 1}) + {len(dy):,} MNIST digits (mnist-5k train split, classes {k}-{k + 9}, "
        f"{how}){cap_note(cap)}",
    )
