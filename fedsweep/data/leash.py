"""FedWalk's leash data: the public data set the server trains on (ALGORITHMS.md §6.4, W8-W10).

The leash task is a set of ImageNet-1k classes chosen for the FL task (lists in ``wnids/``):
``LH`` (closely related to CIFAR-10), ``MH`` (half related), ``HH`` (unrelated), ``C100-LH``
(related to CIFAR-100). Three sources (``LeashConfig.source``), read by
:mod:`fedsweep.data.leash_sources` (formats, resampling and the pixel cache are described there):

* ``imagenet``: an ImageNet-1k train folder in the ILSVRC layout ``<root>/<wnid>/*.JPEG``, each
  image squashed to the FL image's ``H x W`` with ``BOX`` resampling (W10).
* ``imagenet32`` (the default): Downsampled ImageNet 32x32 (Chrabaszcz, Loshchilov & Hutter
  2017), the recommended source of §6.4: ``train_data_batch_1`` .. ``train_data_batch_10`` and
  the ILSVRC devkit's ``map_clsloc.txt``.
* ``standin``: an offline stand-in made of data fedsweep already has (held-out FL training rows,
  the embedded mnist-5k digits). Never the default, and every description says it is a
  stand-in, so a run asking for ImageNet never silently gets something else.

This module holds the config section, the task lists, the leash -> FL class mapping, the checks
(:func:`leash_problems`) and the loader (:func:`load_leash`). Decoded ImageNet pixels are cached
once; normalisation is applied after the cache, with the run's own ``preprocess_images``
settings, so leash images match the FL images exactly in layout and scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from pydantic import Field, field_validator

from fedsweep.core.section import Section
from fedsweep.data.datasets import DatasetNotFoundError, preprocess_images, resolve_data_root
from fedsweep.data.leash_sources import (
    DIGIT_CLASSES,
    IMAGE_SUFFIXES,
    IMAGENET32_MAP,
    WNID_PATTERN,
    LeashData,
    cap_note,
    has_image,
    imagenet32_batches,
    imagenet32_map,
    leash_cache_dir,
    load_imagenet,
    load_imagenet32,
    load_standin,
    read_map_clsloc,
)
from fedsweep.data.leash_sources import decode_image as _decode_image

if TYPE_CHECKING:
    from fedsweep.data.config import DataConfig


SOURCES = ("imagenet", "imagenet32", "standin")
TASKS = ("LH", "MH", "HH", "C100-LH")
#: task -> its wnid list in ``fedsweep/data/wnids/``
TASK_FILES = {
    "LH": "cifar10_lh.txt",
    "MH": "cifar10_mh.txt",
    "HH": "cifar10_hh.txt",
    "C100-LH": "cifar100_lh.txt",
}

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
    empty = [w for w in wnids if w not in missing and not has_image(root / w)]
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
    _, _, missing = imagenet32_batches(root)
    out = []
    if missing:
        out.append(
            f"  field `leash.root`: {got}: missing {', '.join(missing)} (or the same names with "
            f".npz); expected {IMAGENET32_LAYOUT}"
        )
    map_path = imagenet32_map(root)
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
    dataset = data.dataset
    if leash.source == "standin":
        return load_standin(
            leash.task,
            leash.per_class,
            dataset,
            fl_train_x,
            holdout,
            normalization,
            FL_CLASSES[dataset],
            DISPLAY_NAMES[dataset],
        )

    channels, height, width = fl_train_x.shape[1:]
    if channels != 3:
        raise ValueError(f"ImageNet leash images have 3 channels, the FL images {channels}")
    root = source_root(leash, data)
    wnids = leash_wnids(leash)
    # the cache folder and the decoder are looked up here, in this module, at each call
    # (``fedsweep.data.leash.leash_cache_dir`` / ``_decode_image`` can be replaced, as tests do)
    cache = leash_cache_dir()
    if leash.source == "imagenet":
        raw, y = load_imagenet(
            wnids, leash.per_class, root, (height, width), cache, decode=_decode_image
        )
    else:
        raw, y = load_imagenet32(wnids, leash.per_class, root, (height, width), cache)
    empty = [
        w
        for w, n in zip(wnids, torch.bincount(y, minlength=len(wnids)).tolist(), strict=True)
        if n == 0
    ]
    if empty:
        raise DatasetNotFoundError(
            f"leash classes without images in {root}: {', '.join(empty)}",
            summary=f"leash classes without images in the leash folder: {', '.join(empty)}",
        )
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
        description=f"{label}: {len(y):,} {what} ({len(wnids)} classes"
        f"{cap_note(leash.per_class)}; from {root})",
    )
