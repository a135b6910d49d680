"""FedWalk's leash data (fedsweep.data.leash): wnid lists, the three sources, the checks.

Every test makes its own data in tmp_path (tiny JPEGs, pickled Downsampled-ImageNet batches);
the stand-in uses the embedded mnist-5k digits. Nothing is downloaded."""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image
from pydantic import ValidationError

from fedsweep.data import leash as L
from fedsweep.data.datasets import DatasetNotFoundError
from fedsweep.data.images import IMAGENET_MEAN, IMAGENET_STD, preprocess_images
from fedsweep.data.leash import LeashConfig, leash_mapping, leash_problems, load_leash

WNID = re.compile(r"n\d{8}")
LH_TO_CIFAR10 = [6, 0, 8, 1, 9, 3, 7, 2, 5, 4]  # frog airplane ship automobile truck cat ...


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Decoded leash pixels go to tmp_path, never to the user's cache."""
    cache = tmp_path / "leash-cache"
    monkeypatch.setattr(L, "leash_cache_dir", lambda: cache)
    return cache


def data_config(dataset: str = "cifar10", root: Path | None = None, holdout: int = 0, **kw):
    """The fields of DataConfig that the leash reads (``holdout`` is a new DataConfig field)."""
    return SimpleNamespace(
        dataset=dataset, root=None if root is None else str(root), holdout=holdout, **kw
    )


def fl_images(n: int = 8, shape=(3, 32, 32), dataset: str = "cifar10", norm: str = "auto"):
    raw = torch.randint(0, 256, (n, *shape), generator=torch.Generator().manual_seed(n))
    return preprocess_images(raw.to(torch.uint8), dataset, norm)


def undo_imagenet_norm(x: torch.Tensor) -> torch.Tensor:
    """Back to 0..255 pixel values (3 channels)."""
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (x * std + mean) * 255.0


# ----------------------------------------------------------------------------- wnid lists


def test_wnid_lists() -> None:
    lists = {task: L.task_wnids(task) for task in L.TASKS}
    assert {t: len(w) for t, w in lists.items()} == {"LH": 20, "MH": 20, "HH": 20, "C100-LH": 40}
    assert lists["MH"][:10] == lists["LH"][:10]
    for wnids in lists.values():
        assert all(re.fullmatch(r"n\d{8}", w) for w in wnids)
        assert len(set(wnids)) == len(wnids)
    assert lists["HH"][-1] == "n06785654"  # the paper's malformed n0685654 (W9)
    assert lists["LH"][0] == "n01644900" and lists["C100-LH"][-1] == "n03785016"
    for name in L.TASK_FILES.values():
        path = Path(L.__file__).parent / "wnids" / name
        assert path.read_text().startswith("# ")  # the header line names the source


def test_mapping() -> None:
    assert leash_mapping("LH", "cifar10") == LH_TO_CIFAR10 * 2
    assert leash_mapping("LH", "cifar10", "imagenet") == LH_TO_CIFAR10 * 2
    assert leash_mapping("LH", "cifar10", "imagenet", L.task_wnids("LH")) == LH_TO_CIFAR10 * 2
    assert leash_mapping("LH", "cifar10", "imagenet", ["n01644900"]) is None  # custom list
    for task in ("MH", "HH"):
        assert leash_mapping(task, "cifar10") is None
        assert leash_mapping(task, "cifar10", "standin") is None
    assert leash_mapping("C100-LH", "cifar100") is None
    assert leash_mapping("LH", "cifar10", "standin") == list(range(10))
    assert leash_mapping("C100-LH", "cifar100", "standin") == list(range(100))
    assert leash_mapping("C100-LH", "cifar10", "standin") is None  # not a task of cifar10


def test_config_validation() -> None:
    cfg = LeashConfig()
    assert (cfg.source, cfg.task, cfg.root, cfg.wnids, cfg.per_class) == (
        "imagenet32",
        "LH",
        None,
        None,
        None,
    )
    assert all(f.description for f in LeashConfig.model_fields.values())
    for bad in (
        {"wnids": ["n0685654"]},
        {"wnids": ["n01644900", "n01644900"]},
        {"wnids": []},
        {"per_class": 0},
        {"task": "lh"},
        {"source": "ImageNet"},
        {"unknown": 1},
    ):
        with pytest.raises(ValidationError):
            LeashConfig(**bad)


# ----------------------------------------------------------------------------- imagenet


def write_imagenet(root: Path, classes: dict[str, list[int]]) -> None:
    """One folder per wnid; file i is a solid image of gray value ``values[i]`` (varied sizes,
    one of them grayscale, one .jpg), named so that sorted order is the list order."""
    for wnid, values in classes.items():
        folder = root / wnid
        folder.mkdir(parents=True)
        for i, value in enumerate(values):
            size = (40 + 13 * i, 70 - 9 * i)
            if i == 1:
                img = Image.new("L", size, value)
            else:
                img = Image.new("RGB", size, (value, value, value))
            suffix = ".jpg" if i == 2 else ".JPEG"
            img.save(folder / f"{wnid}_{i:02d}{suffix}", quality=95)
    (root / next(iter(classes)) / "notes.txt").write_text("not an image")


def test_imagenet_folder_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "imagenet" / "train"
    wnids = ["n01644900", "n04552348", "n03673027"]
    write_imagenet(root, {w: [30 + 60 * c, 40 + 60 * c, 50 + 60 * c] for c, w in enumerate(wnids)})
    data = data_config(root=tmp_path)  # default leash root: <data root>/imagenet/train
    leash = LeashConfig(source="imagenet", wnids=wnids)
    assert leash_problems(leash, data) == []

    fl_x = fl_images(4, norm="imagenet")
    out = load_leash(leash, data, fl_x, torch.zeros(4, dtype=torch.int64), None, "imagenet")
    assert out.x.shape == (9, 3, 32, 32) and out.x.dtype == torch.float32
    assert out.y.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2] and out.y.dtype == torch.int64
    assert (out.num_classes, out.classes, out.mapping) == (3, wnids, None)
    pixels = undo_imagenet_norm(out.x).mean(dim=(1, 2, 3))
    expected = torch.tensor([30.0 + 60 * c + 10 * i for c in range(3) for i in range(3)])
    assert torch.allclose(pixels, expected, atol=2.0)  # JPEG and BOX keep a solid colour
    assert "custom leash (3 wnids)" in out.description and "9 ImageNet-1k" in out.description

    # per_class takes the first files in name order; the second load comes from the cache
    def no_decode(*args):
        raise AssertionError("decoded again")

    capped = LeashConfig(source="imagenet", wnids=wnids, per_class=2)
    first = load_leash(capped, data, fl_x, torch.zeros(4), None, "auto")
    monkeypatch.setattr(L, "_decode_image", no_decode)
    again = load_leash(capped, data, fl_x, torch.zeros(4), None, "auto")
    assert first.y.tolist() == [0, 0, 1, 1, 2, 2]
    assert torch.equal(first.x, again.x) and torch.equal(first.y, again.y)
    assert "at most 2 per class" in first.description
    # "auto" on CIFAR is per-image standardisation, as for the FL images
    assert torch.allclose(first.x.mean(dim=(1, 2, 3)), torch.zeros(6), atol=1e-5)


def test_imagenet_missing_classes_and_folder(tmp_path: Path) -> None:
    lh = L.task_wnids("LH")
    root = tmp_path / "train"
    write_imagenet(root, {w: [100] for w in lh[:3]})
    (root / lh[3]).mkdir()  # a class folder without images
    leash = LeashConfig(source="imagenet", root=str(root), task="LH")
    problems = leash_problems(leash, data_config())
    assert len(problems) == 2
    listed = problems[0].split("; expected")[0]  # (the layout text shows an example wnid)
    assert set(WNID.findall(listed)) == set(lh[4:])  # all the missing ones, only them
    assert "16 of the LH classes (20)" in problems[0] and "field `leash.root`" in problems[0]
    assert WNID.findall(problems[1]) == [lh[3]] and "no images" in problems[1]

    custom = LeashConfig(source="imagenet", root=str(root), wnids=lh[:3])
    assert leash_problems(custom, data_config()) == []

    gone = tmp_path / "nowhere"
    for leash in (
        LeashConfig(source="imagenet", root=str(gone)),
        LeashConfig(source="imagenet32", root=str(gone)),
    ):
        (message,) = leash_problems(leash, data_config())
        assert f"got {str(gone)!r}" in message and "folder does not exist" in message
        with pytest.raises(DatasetNotFoundError, match="nowhere"):
            load_leash(leash, data_config(), fl_images(), torch.zeros(8), None, "auto")
    (message,) = leash_problems(LeashConfig(source="imagenet"), data_config(root=gone))
    assert str(gone / "imagenet" / "train") in message and "<root>/<wnid>/*.JPEG" in message


# ----------------------------------------------------------------------------- imagenet32


MAP_LINES = [
    "n02119789 1 kit_fox",
    "n01644900 2 tailed_frog",
    "n02100735 3 English_setter",
    "n04552348 4 warplane",
    "n02110185 5 Siberian_husky",
]


def imagenet32_batch(batch: int, n: int = 6) -> dict:
    """``n`` rows with labels cycling 1..5; R plane = 10 x label, G = batch, B = row."""
    labels = [(batch + i) % 5 + 1 for i in range(n)]
    planes = np.zeros((n, 3, 32, 32), dtype=np.uint8)
    planes[:, 0] = np.array(labels).reshape(-1, 1, 1) * 10
    planes[:, 1] = batch
    planes[:, 2] = np.arange(n).reshape(-1, 1, 1)
    return {"data": planes.reshape(n, 3072), "labels": labels, "mean": planes.mean(0)}


def write_imagenet32(root: Path, npz_batches: tuple[int, ...] = ()) -> list[dict]:
    root.mkdir(parents=True)
    batches = [imagenet32_batch(b) for b in range(1, 11)]
    for b, entry in enumerate(batches, start=1):
        if b in npz_batches:
            np.savez(root / f"train_data_batch_{b}.npz", **entry)
        else:
            with open(root / f"train_data_batch_{b}", "wb") as f:
                pickle.dump(entry, f)
    return batches


def test_imagenet32_loads(tmp_path: Path) -> None:
    root = tmp_path / "imagenet32"
    batches = write_imagenet32(root, npz_batches=(3,))
    (root / "map_clsloc.txt").write_text("\n".join(MAP_LINES) + "\n")
    wnids = ["n04552348", "n01644900"]  # file labels 4 and 2
    leash = LeashConfig(source="imagenet32", wnids=wnids)
    data = data_config(root=tmp_path)  # default root <data root>/imagenet32
    assert leash_problems(leash, data) == []

    fl_x = fl_images(norm="imagenet")
    out = load_leash(leash, data, fl_x, torch.zeros(8), None, "imagenet")
    rows = [(b, i, lab) for b, e in enumerate(batches, 1) for i, lab in enumerate(e["labels"])]
    wanted = [(b, i, {4: 0, 2: 1}[lab]) for b, i, lab in rows if lab in (4, 2)]
    assert out.y.tolist() == [c for _, _, c in wanted]  # batch order, then row order
    assert out.x.shape == (len(wanted), 3, 32, 32) and out.num_classes == 2
    assert out.classes == wnids and out.mapping is None
    pixels = undo_imagenet_norm(out.x).round()
    assert pixels[:, 0, 5, 7].tolist() == [40.0 if c == 0 else 20.0 for _, _, c in wanted]
    assert pixels[:, 1, 0, 0].tolist() == [float(b) for b, _, _ in wanted]  # CHW planes
    assert pixels[:, 2, 31, 31].tolist() == [float(i) for _, i, _ in wanted]
    assert "Downsampled-ImageNet 32x32" in out.description

    capped = load_leash(leash.model_copy(update={"per_class": 1}), data, fl_x, None, None, "auto")
    assert capped.y.tolist() == [c for _, _, c in wanted[:2]]

    lh = LeashConfig(source="imagenet32", root=str(root), task="LH")
    (problem,) = leash_problems(lh, data_config())
    assert set(WNID.findall(problem.split("classes of")[1])) == set(L.task_wnids("LH")) - {
        "n04552348",
        "n01644900",
    }


def test_imagenet32_subfolder_and_missing_files(tmp_path: Path) -> None:
    root = tmp_path / "down"
    write_imagenet32(root / "Imagenet32_train_npz", npz_batches=tuple(range(1, 11)))
    leash = LeashConfig(source="imagenet32", root=str(root), wnids=["n01644900"])
    (problem,) = leash_problems(leash, data_config())
    assert "map_clsloc.txt" in problem and str(root) in problem and "devkit" in problem

    (root / "map_clsloc.txt").write_text("\n".join(MAP_LINES))
    assert leash_problems(leash, data_config()) == []
    out = load_leash(leash, data_config(), fl_images(), None, None, "auto")
    assert out.num_classes == 1 and len(out.y) == 12  # label 2 in 12 of the 60 rows

    for b in (4, 7):
        (root / "Imagenet32_train_npz" / f"train_data_batch_{b}.npz").unlink()
    (problem,) = leash_problems(leash, data_config())
    assert "train_data_batch_4, train_data_batch_7" in problem


# ----------------------------------------------------------------------------- stand-in


def holdout_rows(n: int = 40, dataset: str = "cifar10", shape=(3, 32, 32), classes: int = 10):
    return fl_images(n, shape, dataset), torch.arange(n) % classes


def test_standin_lh() -> None:
    holdout = holdout_rows()
    leash = LeashConfig(source="standin", task="LH")
    data = data_config(holdout=40)
    assert leash_problems(leash, data) == []
    out = load_leash(leash, data, fl_images(), None, holdout, "auto")
    assert torch.equal(out.x, holdout[0]) and torch.equal(out.y, holdout[1])
    assert out.num_classes == 10 and out.mapping == list(range(10))
    assert out.classes[0] == "airplane" and out.classes[9] == "truck"
    assert out.description == ("stand-in for LH: 40 held-out CIFAR-10 training images (10 classes)")
    capped = load_leash(
        leash.model_copy(update={"per_class": 2}), data, fl_images(), None, holdout, "auto"
    )
    assert capped.y.tolist() == list(range(10)) * 2  # the first two rows of each class
    assert "at most 2 per class" in capped.description


def test_standin_c100() -> None:
    holdout = holdout_rows(150, "cifar100", classes=100)
    leash = LeashConfig(source="standin", task="C100-LH")
    out = load_leash(
        leash, data_config("cifar100", holdout=150), fl_images(), None, holdout, "auto"
    )
    assert out.num_classes == 100 and out.mapping == list(range(100)) and len(out.y) == 150
    assert out.classes[0] == "apple" and out.classes[99] == "worm"
    assert "stand-in for C100-LH: 150 held-out CIFAR-100" in out.description


def test_standin_mh_and_hh() -> None:
    holdout = holdout_rows(40)
    mh = load_leash(
        LeashConfig(source="standin", task="MH"),
        data_config(holdout=40),
        fl_images(),
        None,
        holdout,
        "auto",
    )
    assert mh.x.shape == (80, 3, 32, 32) and mh.num_classes == 20 and mh.mapping is None
    assert torch.equal(mh.x[:40], holdout[0]) and torch.equal(mh.y[:40], holdout[1])
    assert torch.bincount(mh.y[40:] - 10).tolist() == [4] * 10  # balanced, as many as held out
    digits = mh.x[40:]
    assert torch.equal(digits[:, 0], digits[:, 2])  # gray copied to every channel
    assert torch.allclose(digits.mean(dim=(1, 2, 3)), torch.zeros(40), atol=1e-5)  # per image
    assert mh.classes[10:] == [f"digit {d}" for d in range(10)]
    assert "stand-in for MH: 40 held-out CIFAR-10" in mh.description
    assert "40 MNIST digits" in mh.description and "classes 10-19" in mh.description

    hh = load_leash(
        LeashConfig(source="standin", task="HH"), data_config(), fl_images(), None, None, "imagenet"
    )
    assert hh.x.shape == (4000, 3, 32, 32) and hh.num_classes == 10 and hh.mapping is None
    assert torch.bincount(hh.y).tolist() == [400] * 10
    pixels = undo_imagenet_norm(hh.x)
    assert pixels.min() > -0.01 and pixels.max() < 255.01 and pixels.max() > 250
    assert hh.description.startswith("stand-in for HH: 4,000 MNIST digits")
    assert "resized 28x28 -> 32x32" in hh.description

    capped = load_leash(
        LeashConfig(source="standin", task="HH", per_class=3),
        data_config(),
        fl_images(),
        None,
        None,
        "auto",
    )
    assert torch.bincount(capped.y).tolist() == [3] * 10


def test_standin_grayscale_fl_set() -> None:
    fl_x = fl_images(8, (1, 28, 28), "fashion-mnist")
    holdout = holdout_rows(20, "fashion-mnist", (1, 28, 28))
    out = load_leash(
        LeashConfig(source="standin", task="MH"),
        data_config("fashion-mnist", holdout=20),
        fl_x,
        None,
        holdout,
        "auto",
    )
    assert out.x.shape == (40, 1, 28, 28) and out.x[20:].min() >= 0 and out.x[20:].max() <= 1


# ----------------------------------------------------------------------------- checks


def test_problems() -> None:
    def problems(dataset="cifar10", holdout=0, **leash):
        return leash_problems(LeashConfig(**leash), data_config(dataset, holdout=holdout))

    (msg,) = problems(source="standin", task="C100-LH", holdout=10)
    assert (
        "field `leash.task`: got 'C100-LH'" in msg and "(allowed with cifar10: LH, MH, HH)" in msg
    )
    (msg,) = problems("cifar100", source="standin", task="LH", holdout=10)
    assert "(allowed with cifar100: C100-LH)" in msg
    (msg,) = problems("cifar100", source="imagenet", root="/does/not/matter", task="HH")
    assert "field `leash.task`" in msg  # config problems first, no folder check

    for task in ("LH", "MH"):
        (msg,) = problems(source="standin", task=task)
        assert "field `data.holdout`: got 0" in msg and "set data.holdout, e.g. 5000" in msg
    assert problems(source="standin", task="HH") == []
    (msg,) = problems("cifar100", source="standin", task="C100-LH")
    assert "data.holdout" in msg

    (msg,) = problems("mnist-5k", source="imagenet32")
    assert "field `leash.source`" in msg and "allowed with mnist-5k: standin" in msg
    (msg,) = problems("mnist", source="standin", task="HH")
    assert "(allowed with mnist: LH)" in msg
    (msg,) = problems(source="standin", task="HH", wnids=["n01644900"])
    assert "field `leash.wnids`" in msg

    with pytest.raises(ValueError, match="data.holdout"):
        load_leash(LeashConfig(source="standin"), data_config(), fl_images(), None, None, "auto")


def test_problems_with_the_run_config() -> None:
    """The run's real DataConfig (with or without the new ``holdout`` field) is accepted."""
    from fedsweep.config.schema import DataConfig

    (msg,) = leash_problems(LeashConfig(source="standin"), DataConfig(dataset="cifar10"))
    assert "data.holdout" in msg
