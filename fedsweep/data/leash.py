"""FedWalk's leash data: the public data set the server trains on (ALGORITHMS.md §6.4, W8-W10).

The leash task is a set of ImageNet-1k classes chosen for the FL task (lists in ``wnids/``):
``LH`` (closely related to CIFAR-10), ``MH`` (half related), ``HH`` (unrelated), ``C100-LH``
(related to CIFAR-100). Three sources (``LeashConfig.source``):

* ``imagenet``: an ImageNet-1k train folder in the ILSVRC layout ``<root>/<wnid>/*.JPEG``. Each
  image is decoded with PIL, converted to RGB and squashed (whole image, no crop, as Downsampled
  ImageNet does) to the FL image's ``H x W`` with ``BOX`` resampling (area averaging: every
  source pixel counts once, no aliasing) (W10). JPEGs are decoded at a reduced DCT scale first
  (``Image.draft``, never below ``H x W``), which makes decoding several times faster.
* ``imagenet32`` (the default): Downsampled ImageNet 32x32 (Chrabaszcz, Loshchilov & Hutter
  2017), the recommended source of §6.4. Format, checked against the authors' scripts
  (github.com/PatrykChrabaszcz/Imagenet32_Scripts, ``image2numpy_imagenet_train.py`` and
  ``utils.py``): ``train_data_batch_1`` .. ``train_data_batch_10`` are pickled dicts with
  ``data`` (uint8 ``[n, 3072]``: the R, G, B planes one after another, each row-major, i.e. CHW
  flattened), ``labels`` (a list of 1-based ints) and ``mean``; a label is the class index of
  the ILSVRC devkit file ``map_clsloc.txt`` (lines ``wnid index name``, e.g.
  ``n02119789 1 kit_fox``), whose order is *not* the sorted-wnid order. The ``_npz`` release
  (``train_data_batch_1.npz`` ..) holds the same arrays.
* ``standin``: an offline stand-in made of data fedsweep already has (held-out FL training rows,
  the embedded mnist-5k digits). Never the default, and every description says it is a
  stand-in, so a run asking for ImageNet never silently gets something else.

Decoded ImageNet pixels (uint8, already at ``H x W``) are cached per (folder, files, class list,
``per_class``, size) under the user cache dir, so they are decoded once; normalisation is
applied after the cache, with the run's own ``preprocess_images`` settings, so leash images
match the FL images exactly in layout and scale.
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
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
from pydantic import Field, field_validator

from fedsweep.config.section import Section
from fedsweep.data.datasets import (
    DatasetNotFoundError,
    _default_cache_dir,
    preprocess_images,
    resolve_data_root,
)

if TYPE_CHECKING:
    from fedsweep.config.schema import DataConfig

log = logging.getLogger(__name__)

SOURCES = ("imagenet", "imagenet32", "standin")
TASKS = ("LH", "MH", "HH", "C100-LH")
#: task -> its wnid list in ``fedsweep/data/wnids/``
TASK_FILES = {
    "LH": "cifar10_lh.txt",
    "MH": "cifar10_mh.txt",
    "HH": "cifar10_hh.txt",
    "C100-LH": "cifar100_lh.txt",
}
WNID_PATTERN = re.compile(r"^n\d{8}$")

#: the leash tasks each FL data set may use. The ImageNet lists were chosen for CIFAR-10 (LH,
#: MH, HH) and CIFAR-100 (C100-LH). The grayscale sets only have the stand-in: its LH is their
#: own held-out rows, and MH/HH add MNIST digits, which are unrelated only to Fashion-MNIST.
TASKS_BY_DATASET: dict[str, tuple[str, ...]] = {
    "cifar10": ("LH", "MH", "HH"),
    "cifar100": ("C100-LH",),
    "fashion-mnist": ("LH", "MH", "HH"),
    "mnist": ("LH",),
    "mnist-5k": ("LH",),
}
#: FL data sets the ImageNet sources serve (3-channel colour images with a task list)
IMAGENET_DATASETS = ("cifar10", "cifar100")
#: tasks whose stand-in is built from held-out FL training rows (``data.holdout``)
HOLDOUT_TASKS = ("LH", "MH", "C100-LH")

IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
IMAGENET32_BATCHES = tuple(f"train_data_batch_{i}" for i in range(1, 11))
IMAGENET32_MAP = "map_clsloc.txt"
#: sub-folders the Downsampled-ImageNet zips unpack into, also searched under ``leash.root``
IMAGENET32_SUBFOLDERS = ("Imagenet32_train", "Imagenet32_train_npz")

IMAGENET_LAYOUT = (
    "the ILSVRC-2012 train layout <root>/<wnid>/*.JPEG, one folder per class "
    "(e.g. <root>/n01644900/n01644900_10.JPEG), from ILSVRC2012_img_train.tar "
    "(https://image-net.org/download-images) with each class tar unpacked into its wnid folder"
)
IMAGENET32_LAYOUT = (
    "Downsampled ImageNet 32x32: <root>/train_data_batch_1 .. train_data_batch_10 (pickled, from "
    "Imagenet32_train.zip; or the .npz files of Imagenet32_train_npz.zip; "
    "https://image-net.org/download-images, needs an ImageNet account) and "
    "<root>/map_clsloc.txt (the label index of each wnid, from the ILSVRC devkit, "
    "devkit/data/map_clsloc.txt)"
)

CIFAR10_CLASSES = tuple("airplane automobile bird cat deer dog frog horse ship truck".split())
#: CIFAR-100 fine labels, ids 0..99 (alphabetical, as in the set's ``meta`` file)
CIFAR100_CLASSES = """
apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus butterfly
camel can castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile
cup dinosaur dolphin elephant flatfish forest fox girl hamster house kangaroo keyboard lamp
lawn_mower leopard lion lizard lobster man maple_tree motorcycle mountain mouse mushroom oak_tree
orange orchid otter palm_tree pear pickup_truck pine_tree plain plate poppy porcupine possum
rabbit raccoon ray road rocket rose sea seal shark shrew skunk skyscraper snail snake spider
squirrel streetcar sunflower sweet_pepper table tank telephone television tiger tractor train
trout tulip turtle wardrobe whale willow_tree wolf woman worm
""".split()
FASHION_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
DIGIT_CLASSES = tuple(f"digit {d}" for d in range(10))
FL_CLASSES: dict[str, Sequence[str]] = {
    "cifar10": CIFAR10_CLASSES,
    "cifar100": CIFAR100_CLASSES,
    "fashion-mnist": FASHION_CLASSES,
    "mnist": DIGIT_CLASSES,
    "mnist-5k": DIGIT_CLASSES,
}
DISPLAY_NAMES = {
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "fashion-mnist": "Fashion-MNIST",
    "mnist": "MNIST",
    "mnist-5k": "mnist-5k",
}

#: the CIFAR-10 class of each top-1 LH class, in list order (§6.4); the top-2 half repeats it
_LH_ORDER = (
    "frog",
    "airplane",
    "ship",
    "automobile",
    "truck",
    "cat",
    "horse",
    "bird",
    "dog",
    "deer",
)
LH_TO_CIFAR10: list[int] = [CIFAR10_CLASSES.index(name) for name in _LH_ORDER] * 2


# ----------------------------------------------------------------------------- config


class LeashConfig(Section):
    """Config section ``leash``: where FedWalk's leash images come from and which classes."""

    source: Literal["imagenet", "imagenet32", "standin"] = Field(
        "imagenet32",
        description="imagenet: ILSVRC train folder <root>/<wnid>/*.JPEG; imagenet32: Downsampled "
        "ImageNet 32x32 batches + map_clsloc.txt; standin: offline stand-in (held-out FL rows, "
        "mnist-5k digits), never ImageNet.",
    )
    root: str | None = Field(
        None,
        description="Folder of the source; null: <data root>/imagenet/train (imagenet) or "
        "<data root>/imagenet32 (imagenet32). Not used by standin.",
    )
    task: Literal["LH", "MH", "HH", "C100-LH"] = Field(
        "LH",
        description="Leash task (§6.4): LH/MH/HH for CIFAR-10 (related, half related, "
        "unrelated), C100-LH for CIFAR-100.",
    )
    wnids: list[str] | None = Field(
        None,
        description="A custom list of ImageNet wnids (imagenet sources); replaces the task's list "
        "(leash class i = wnids[i]).",
    )
    per_class: int | None = Field(
        None,
        ge=1,
        description="At most this many images per leash class: the first n in a fixed order "
        "(sorted file names, batch/row order, held-out row order).",
    )

    @field_validator("wnids")
    @classmethod
    def _valid_wnids(cls, value: list[str] | None) -> list[str] | None:
        """Non-empty, every id ``n`` + 8 digits, no repeats (a repeat would be two classes with
        the same images)."""
        if value is None:
            return value
        if not value:
            raise ValueError("empty list (allowed: null for the task's list, or 1 or more wnids)")
        bad = [w for w in value if not WNID_PATTERN.match(w)]
        if bad:
            raise ValueError(
                f"not ImageNet wnids: {', '.join(map(repr, bad))} "
                "(allowed: 'n' followed by 8 digits, e.g. 'n01644900')"
            )
        repeats = sorted({w for w in value if value.count(w) > 1})
        if repeats:
            raise ValueError(f"repeated wnids: {', '.join(repeats)} (allowed: each class once)")
        return value


@dataclass(frozen=True)
class LeashData:
    """The leash set, loaded once; images laid out and normalised exactly like the FL images."""

    x: torch.Tensor  # float32 [n, C, H, W]
    y: torch.Tensor  # int64 [n], leash class ids 0..num_classes-1
    num_classes: int
    classes: list[str]  # wnid or readable name per leash class
    mapping: list[int] | None  # leash class -> FL class (the `mapped` head); None: no mapping
    description: str  # one line for figures and logs


# ----------------------------------------------------------------------------- class lists


def task_wnids(task: str) -> list[str]:
    """The packaged wnid list of ``task`` (``#`` lines are comments), in leash-class order."""
    if task not in TASK_FILES:
        raise ValueError(f"unknown leash task {task!r}; allowed: {', '.join(TASKS)}")
    text = (resources.files("fedsweep.data") / "wnids" / TASK_FILES[task]).read_text("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def leash_wnids(leash: LeashConfig) -> list[str]:
    """The leash classes of the ImageNet sources: ``leash.wnids``, else the task's list."""
    return list(leash.wnids) if leash.wnids is not None else task_wnids(leash.task)


def _fl_num_classes(fl_dataset: str) -> int:
    return len(FL_CLASSES[fl_dataset])


def leash_mapping(
    task: str,
    fl_dataset: str,
    source: str = "imagenet32",
    wnids: list[str] | None = None,
) -> list[int] | None:
    """Leash class -> FL class for FedWalk's ``mapped`` head, or None where none exists.

    ImageNet sources: only LH on CIFAR-10 maps (its two halves are the top-1 and top-2 classes
    of frog, airplane, ..., deer, §6.4), and only with the task's own list (a custom ``wnids``
    list has no known correspondence). Stand-in: LH and C100-LH are held-out FL rows with their
    FL labels, so the identity. ``source``/``wnids`` default to the config defaults.
    """
    if source == "standin":
        if task in ("LH", "C100-LH") and task in TASKS_BY_DATASET.get(fl_dataset, ()):
            return list(range(_fl_num_classes(fl_dataset)))
        return None
    custom = wnids is not None and list(wnids) != task_wnids(task)
    if task == "LH" and fl_dataset == "cifar10" and not custom:
        return list(LH_TO_CIFAR10)
    return None


# ----------------------------------------------------------------------------- checks


def source_root(leash: LeashConfig, data: DataConfig) -> Path:
    """The source folder: ``leash.root``, else the default under the run's data root."""
    if leash.root is not None and str(leash.root) != "":
        return Path(leash.root).expanduser().resolve()
    default = "imagenet/train" if leash.source == "imagenet" else "imagenet32"
    return resolve_data_root(data.root) / default


def _got_root(leash: LeashConfig, root: Path) -> str:
    return f"got {leash.root!r}" if leash.root else f"got null (default {str(root)!r})"


def _task_problems(leash: LeashConfig, data: DataConfig) -> list[str]:
    """Task, source and FL data set must fit together; the stand-in's inputs must exist."""
    out: list[str] = []
    dataset = data.dataset
    if leash.source != "standin" and dataset not in IMAGENET_DATASETS:
        out.append(
            f"  field `leash.source`: got {leash.source!r}: the ImageNet leash tasks are colour "
            f"images chosen for cifar10 and cifar100, but data.dataset is {dataset} "
            f"(allowed with {dataset}: standin)"
        )
        return out
    allowed = TASKS_BY_DATASET.get(dataset, ())
    if leash.task not in allowed:
        why = {
            "cifar10": "C100-LH is the CIFAR-100 task",
            "cifar100": "LH, MH and HH are the CIFAR-10 tasks",
        }.get(dataset, "MH and HH add MNIST digits, which are this run's own task")
        out.append(
            f"  field `leash.task`: got {leash.task!r}: not a leash task for data.dataset "
            f"{dataset}; {why} (allowed with {dataset}: {', '.join(allowed)})"
        )
    if leash.source == "standin":
        if leash.wnids is not None:
            out.append(
                f"  field `leash.wnids`: got a list of {len(leash.wnids)} wnids: the stand-in has "
                "no ImageNet images (allowed: null with leash.source standin; or leash.source "
                "imagenet32 or imagenet)"
            )
        holdout = getattr(data, "holdout", 0) or 0
        if leash.task in HOLDOUT_TASKS and leash.task in allowed and holdout < 1:
            out.append(
                f"  field `data.holdout`: got {holdout}: the {leash.task} stand-in is made of "
                "held-out FL training images, and none are held out (allowed: 1 or more; set "
                "data.holdout, e.g. 5000)"
            )
    return out


def _imagenet_problems(leash: LeashConfig, root: Path) -> list[str]:
    got = _got_root(leash, root)
    if not root.is_dir():
        return [
            f"  field `leash.root`: {got}: folder does not exist; expected {IMAGENET_LAYOUT} "
            "(allowed: a folder with that layout, or leash.source imagenet32 or standin)"
        ]
    wnids = leash_wnids(leash)
    what = "leash.wnids" if leash.wnids is not None else f"the {leash.task} classes"
    missing = [w for w in wnids if not (root / w).is_dir()]
    empty = [w for w in wnids if w not in missing and not _has_image(root / w)]
    out = []
    if missing:
        out.append(
            f"  field `leash.root`: {got}: {len(missing)} of {what} ({len(wnids)}) have no "
            f"folder there: {', '.join(missing)}; expected {IMAGENET_LAYOUT} (allowed: a folder "
            "with every class, or a leash.wnids list of classes it has)"
        )
    if empty:
        out.append(
            f"  field `leash.root`: {got}: these class folders hold no images "
            f"({', '.join(IMAGE_SUFFIXES)}): {', '.join(empty)} (allowed: folders with images)"
        )
    return out


def _imagenet32_problems(leash: LeashConfig, root: Path) -> list[str]:
    got = _got_root(leash, root)
    if not root.is_dir():
        return [
            f"  field `leash.root`: {got}: folder does not exist; expected {IMAGENET32_LAYOUT} "
            "(allowed: a folder with those files, or leash.source imagenet or standin)"
        ]
    _, _, missing = _imagenet32_batches(root)
    out = []
    if missing:
        out.append(
            f"  field `leash.root`: {got}: missing {', '.join(missing)} (or the same names with "
            f".npz); expected {IMAGENET32_LAYOUT}"
        )
    map_path = _imagenet32_map(root)
    if map_path is None:
        out.append(
            f"  field `leash.root`: {got}: no {IMAGENET32_MAP} in {root}; it gives the class "
            f"index of each wnid (lines 'wnid index name'); copy it from the ILSVRC devkit "
            f"(devkit/data/{IMAGENET32_MAP}) into {root}"
        )
        return out
    try:
        index = read_map_clsloc(map_path)
    except ValueError as err:
        return [*out, f"  field `leash.root`: {got}: {err}"]
    wnids = leash_wnids(leash)
    unknown = [w for w in wnids if w not in index]
    if unknown:
        where = (
            f"leash.wnids`: got a list of {len(wnids)}" if leash.wnids else f"leash.root`: {got}"
        )
        out.append(
            f"  field `{where}: {len(unknown)} wnids are not ImageNet-1k classes of {map_path}: "
            f"{', '.join(unknown)} (allowed: wnids listed there)"
        )
    return out


def leash_problems(leash: LeashConfig, data: DataConfig, files: bool = True) -> list[str]:
    """What keeps ``load_leash`` from working, one message line per problem (empty: fine).

    Cheap checks only: the task fits the FL data set, the stand-in has held-out rows, and (with
    ``files``) the ImageNet source folder has the files and classes needed (folder listings and
    the small ``map_clsloc.txt``; no image is decoded). A sweep spec's profiles are validated
    without ``files`` (a machine may lack the paper profile's ImageNet); the sweep checks the
    files of the profile it runs before anything starts."""
    out = _task_problems(leash, data)
    if out or leash.source == "standin" or not files:
        return out
    root = source_root(leash, data)
    if leash.source == "imagenet":
        return _imagenet_problems(leash, root)
    return _imagenet32_problems(leash, root)


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


def _cap(per_class: int | None) -> str:
    return "" if per_class is None else f"; at most {per_class:,} per class"


def leash_cache_dir() -> Path:
    """Where decoded ImageNet leash pixels are kept: ``<user cache>/fedsweep/leash``."""
    return _default_cache_dir().parent / "leash"


def _cached(
    kind: str, key: dict, build: Callable[[], tuple[torch.Tensor, torch.Tensor]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images and labels for ``key``: from the cache file, else ``build()`` and store.

    Written to a temporary name then renamed, so concurrent runs never read a partial file; an
    unreadable cache file is rebuilt, an unwritable cache folder only costs the next decode."""
    blob = json.dumps(key, sort_keys=True)
    path = leash_cache_dir() / f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}.pt"
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


def _has_image(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return any(_is_image(e.name) and e.is_file() for e in entries)


def _image_files(folder: Path) -> list[os.DirEntry]:
    """The images of one class folder, sorted by name (a fixed order for ``per_class``)."""
    with os.scandir(folder) as entries:
        files = [e for e in entries if _is_image(e.name) and e.is_file()]
    return sorted(files, key=lambda e: e.name)


def _decode_image(path: str, size: tuple[int, int]) -> np.ndarray:
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


def _load_imagenet(
    leash: LeashConfig, root: Path, size: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 ``[n, 3, H, W]`` and leash labels of the ImageNet folder (cached)."""
    wnids = leash_wnids(leash)
    files = [_image_files(root / w)[: leash.per_class] for w in wnids]
    # the file names and sizes identify the images without reading them
    listing = hashlib.sha256()
    for wnid, entries in zip(wnids, files, strict=True):
        for e in entries:
            listing.update(f"{wnid}/{e.name}:{e.stat().st_size}\n".encode())
    key = {
        "root": str(root),
        "wnids": wnids,
        "per_class": leash.per_class,
        "size": list(size),
        "files": listing.hexdigest(),
        "resample": "box+draft",
    }

    def build() -> tuple[torch.Tensor, torch.Tensor]:
        paths = [e.path for entries in files for e in entries]
        log.info("decoding %d leash images from %s (once; cached)", len(paths), root)
        workers = min(8, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:  # PIL decodes without the GIL
            pixels = list(pool.map(lambda p: _decode_image(p, size), paths))
        x = torch.from_numpy(np.stack(pixels)).permute(0, 3, 1, 2).contiguous()
        y = torch.repeat_interleave(torch.arange(len(wnids)), torch.tensor([len(f) for f in files]))
        return x, y

    return _cached("imagenet", key, build)


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


def _imagenet32_batches(root: Path) -> tuple[Path, list[Path], list[str]]:
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


def _imagenet32_map(root: Path) -> Path | None:
    folder, _, _ = _imagenet32_batches(root)
    for candidate in (root / IMAGENET32_MAP, folder / IMAGENET32_MAP):
        if candidate.is_file():
            return candidate
    return None


def read_imagenet32_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch file -> (uint8 ``[n, 3, s, s]``, int64 1-based labels ``[n]``).

    Pickles can run code when loaded: read only batch files from a source you trust (the same
    holds for torchvision's CIFAR loader)."""
    if path.suffix == ".npz":
        with np.load(path) as entry:
            data, labels = entry["data"], entry["labels"]
    else:
        with open(path, "rb") as f:
            entry = pickle.load(f, encoding="latin1")  # latin1: also reads Python 2 pickles
        data, labels = entry["data"], entry["labels"]
    data = np.asarray(data, dtype=np.uint8)
    values = data.reshape(data.shape[0], -1).shape[1]
    side = math.isqrt(values // 3)
    if 3 * side * side != values:
        raise ValueError(f"{path}: rows of {values} values are not 3 x s x s images")
    return data.reshape(-1, 3, side, side), np.asarray(labels, dtype=np.int64).reshape(-1)


def _load_imagenet32(
    leash: LeashConfig, root: Path, size: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 ``[n, 3, H, W]`` and leash labels from the Downsampled-ImageNet batches (cached)."""
    _, batches, _ = _imagenet32_batches(root)
    map_path = _imagenet32_map(root)
    assert map_path is not None  # leash_problems ran first
    index = read_map_clsloc(map_path)
    wnids = leash_wnids(leash)
    stats = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in batches]
    key = {
        "root": str(root),
        "batches": stats,
        "map": hashlib.sha256(map_path.read_bytes()).hexdigest(),
        "wnids": wnids,
        "per_class": leash.per_class,
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
            if leash.per_class is not None:  # first n per class over batch 1, 2, ... in row order
                ranks = _rank_within_class(leash_y[rows]) + counts[leash_y[rows]]
                rows = rows[ranks < leash.per_class]
            xs.append(data[rows])
            ys.append(leash_y[rows])
            counts += np.bincount(leash_y[rows], minlength=len(wnids))
            if leash.per_class is not None and (counts >= leash.per_class).all():
                break  # every class is full: the later batches cannot add anything
        x = _resize_uint8(torch.from_numpy(np.concatenate(xs)), size)
        return x.contiguous(), torch.from_numpy(np.concatenate(ys))

    return _cached("imagenet32", key, build)


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


def _load_standin(
    leash: LeashConfig,
    dataset: str,
    fl_x: torch.Tensor,
    holdout: tuple[torch.Tensor, torch.Tensor] | None,
    normalization: str,
) -> LeashData:
    """LH/C100-LH: held-out FL rows; HH: mnist-5k digits; MH: both, digits as classes k..k+9."""
    task, cap = leash.task, leash.per_class
    name = DISPLAY_NAMES[dataset]
    fl_names = list(FL_CLASSES[dataset])
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
            f"({k} classes{_cap(cap)})",
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
            f"10 classes, {how}{_cap(cap)})",
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
        f"{how}){_cap(cap)}",
    )


# ----------------------------------------------------------------------------- public loader


def load_leash(
    leash: LeashConfig,
    data: DataConfig,
    fl_train_x: torch.Tensor,
    fl_train_y: torch.Tensor,
    holdout: tuple[torch.Tensor, torch.Tensor] | None,
    normalization: str,
) -> LeashData:
    """The run's leash set, loaded once: images laid out like ``fl_train_x`` (same ``C, H, W``)
    and normalised like it (``preprocess_images(..., data.dataset, normalization)``), on
    ``fl_train_x``'s device.

    ``holdout`` is the held-out FL training rows ``(x, y)`` (preprocessed, raw labels) when
    ``data.holdout > 0``, which the stand-in's LH/MH/C100-LH are made of. ``fl_train_y`` is
    accepted for the engine's convenience and not used. Raises ``ValueError`` for a leash
    config that does not fit the run and ``DatasetNotFoundError`` for missing source files
    (the messages of ``leash_problems``).
    """
    del fl_train_y  # only the image shape of the FL set matters here
    config_problems = _task_problems(leash, data)
    if config_problems:
        raise ValueError("leash config does not fit the run:\n" + "\n".join(config_problems))
    missing = leash_problems(leash, data)
    if missing:
        raise DatasetNotFoundError("leash data not found:\n" + "\n".join(missing))
    if fl_train_x.ndim != 4:
        raise ValueError(f"fl_train_x must be [n, C, H, W], got {tuple(fl_train_x.shape)}")
    if leash.source == "standin":
        return _load_standin(leash, data.dataset, fl_train_x, holdout, normalization)

    channels, height, width = fl_train_x.shape[1:]
    if channels != 3:
        raise ValueError(f"ImageNet leash images have 3 channels, the FL images {channels}")
    root = source_root(leash, data)
    loader = _load_imagenet if leash.source == "imagenet" else _load_imagenet32
    raw, y = loader(leash, root, (height, width))
    wnids = leash_wnids(leash)
    empty = [
        w
        for w, n in zip(wnids, torch.bincount(y, minlength=len(wnids)).tolist(), strict=True)
        if n == 0
    ]
    if empty:
        raise DatasetNotFoundError(f"leash classes without images in {root}: {', '.join(empty)}")
    if leash.source == "imagenet":
        what = f"ImageNet-1k training images, box-resized to {height}x{width}"
    else:
        what = "Downsampled-ImageNet 32x32 training images"
        if (height, width) != (32, 32):
            what += f", resized to {height}x{width}"
    label = (
        f"custom leash ({len(wnids)} wnids)" if leash.wnids is not None else f"{leash.task} leash"
    )
    return LeashData(
        x=preprocess_images(raw, data.dataset, normalization).to(fl_train_x.device),
        y=y.to(device=fl_train_x.device, dtype=torch.int64),
        num_classes=len(wnids),
        classes=wnids,
        mapping=leash_mapping(leash.task, data.dataset, leash.source, leash.wnids),
        description=f"{label}: {len(y):,} {what} ({len(wnids)} classes{_cap(leash.per_class)}; "
        f"from {root})",
    )
