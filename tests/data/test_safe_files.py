"""Issue 48, item 1: a data folder never runs code. CIFAR's batches are checked against their
published MD5 before they are opened; every pickle of a user folder (CIFAR, Downsampled
ImageNet) is read with a restricted unpickler that admits dicts, lists, strings, numbers and
numpy arrays only; anything else is one line naming the file, exit 2, and the planted payload
never runs."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.data import datasets as D
from fedsweep.data import safe_files as S
from fedsweep.data.leash_sources import read_imagenet32_batch

ROOT = Path(__file__).resolve().parents[2]


class _Payload:
    """A pickle whose loading creates ``marker`` (what a planted data file would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _plant_cifar10(folder: Path, marker: Path) -> Path:
    batches = folder / "cifar-10-batches-py"
    batches.mkdir(parents=True)
    for name in D.CIFAR_MD5["cifar10"]:
        (batches / name).write_bytes(pickle.dumps({"data": _Payload(marker), "labels": []}))
    (batches / "batches.meta").write_bytes(pickle.dumps(_Payload(marker)))
    return batches


@pytest.fixture(autouse=True)
def _fresh_cache():
    D.clear_cache()
    yield
    D.clear_cache()


def test_a_planted_cifar_folder_is_refused_by_its_md5_and_never_runs(tmp_path, monkeypatch):
    """The issue's reproduction: ``fedsweep run configs/fedavg-svm.yaml --set
    data.dataset=cifar10 --set data.root=DIR`` with a ``__reduce__`` payload in every batch:
    exit 2, one line naming the first batch and its MD5, the marker never appears."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "store"))
    marker = tmp_path / "MARKER"
    batches = _plant_cifar10(tmp_path / "evil", marker)
    res = CliRunner().invoke(
        app,
        ["run", str(ROOT / "configs/fedavg-svm.yaml"), "--set", "data.dataset=cifar10",
         "--set", f"data.root={tmp_path / 'evil'}", "--quiet"],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit) and "Traceback" not in res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert f"data file {batches / 'data_batch_1'} is not CIFAR-10's data_batch_1" in lines[0]
    assert "published c99cafc152244af753f735de768cd75f" in lines[0]
    assert not marker.exists(), "a planted data file ran code"


def test_a_payload_with_the_published_md5_is_still_refused_by_the_unpickler(tmp_path, monkeypatch):
    """Even a file that passed the MD5 check (an MD5 collision, or a table changed) is read
    with the restricted unpickler: the payload's ``os.system`` is refused before it is looked
    up, the error names the file and the global, and the marker never appears."""
    marker = tmp_path / "MARKER"
    batches = _plant_cifar10(tmp_path, marker)
    monkeypatch.setitem(D.CIFAR_MD5, "cifar10", {p.name: S.md5_of(p) for p in batches.iterdir()})
    with pytest.raises(S.UnsafeDataFileError) as err:
        D.load_dataset("cifar10", root=tmp_path, download=False)
    assert str(err.value).startswith(f"data file {batches / 'data_batch_1'} asks to load ")
    assert "posix.system" in str(err.value) or "os.system" in str(err.value)
    assert not marker.exists()


def test_downsampled_imagenet_batches_are_read_with_the_restricted_unpickler(tmp_path):
    """FedWalk's leash batches (a user folder of pickles): a real batch reads as before, a
    planted one is refused with its file named, and never runs."""
    good = tmp_path / "train_data_batch_1"
    data = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
    good.write_bytes(pickle.dumps({"data": data, "labels": [1, 7], "mean": data.mean(0)}))
    x, y = read_imagenet32_batch(good)
    assert x.shape == (2, 3, 32, 32) and np.array_equal(x.reshape(2, -1), data)
    assert y.tolist() == [1, 7]
    marker = tmp_path / "MARKER"
    bad = tmp_path / "train_data_batch_2"
    bad.write_bytes(pickle.dumps({"data": _Payload(marker), "labels": [1]}))
    with pytest.raises(S.UnsafeDataFileError, match=f"data file {bad} asks to load "):
        read_imagenet32_batch(bad)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_what_the_formats_hold_is_read_at_every_protocol(tmp_path, protocol):
    """dicts, lists, tuples, str/bytes, ints, floats, None, booleans and numpy arrays (uint8,
    float32, int64; numpy scalars) come back equal, at the protocols Python 2 and 3 write."""
    value = {
        "data": np.arange(24, dtype=np.uint8).reshape(2, 12),
        "mean": np.linspace(0, 1, 5, dtype=np.float32),
        "labels": [3, 1, 4],
        b"batch_label": "training batch 1 of 5",
        "filenames": (b"a.png", "b.png"),
        "n": np.int64(7),
        "flags": [True, None, 1.5],
    }
    path = tmp_path / "batch"
    path.write_bytes(pickle.dumps(value, protocol=protocol))
    back = S.load_pickle(path)
    assert back.keys() == value.keys()
    for key, item in value.items():
        if isinstance(item, np.ndarray):
            assert back[key].dtype == item.dtype and np.array_equal(back[key], item)
        else:
            assert back[key] == item


def test_other_globals_are_refused_without_being_imported(tmp_path):
    """A class or function outside the allowed numpy/_codecs names is refused by name; the
    module it names is never imported (a made-up module would otherwise raise
    ModuleNotFoundError, not the refusal)."""
    path = tmp_path / "batch"
    path.write_bytes(
        b"cnot_a_module_of_this_machine\nanything\n)\x81."
    )  # GLOBAL, EMPTY_TUPLE, NEWOBJ
    with pytest.raises(S.UnsafeDataFileError, match="not_a_module_of_this_machine.anything"):
        S.load_pickle(path)


def test_check_md5(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    S.check_md5(path, "900150983cd24fb0d6963f7d28e17f72", "the alphabet")
    with pytest.raises(S.UnsafeDataFileError, match=r"is not the alphabet \(MD5 9001"):
        S.check_md5(path, "0" * 32, "the alphabet")
