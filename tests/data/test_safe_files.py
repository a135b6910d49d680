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


# ----------------------------------------------------------------------------- issue 62, item 10


def _forged_dtype(args: tuple, state: tuple):
    """A pickle stand-in for ``numpy.dtype(*args)`` followed by ``__setstate__(state)``."""

    class Forged:
        def __reduce__(self):
            return (np.dtype, args, state)

    return Forged()


def _forged_array(dtype, raw: bytes, shape=(1,)):
    from numpy._core.multiarray import _reconstruct

    class Forged:
        def __reduce__(self):
            return (_reconstruct, (np.ndarray, (0,), b"b"), (1, shape, dtype, False, raw))

    return Forged()


#: an object field whose flags say "no objects": numpy reads the raw bytes as a pointer
OBJECT_FIELD_NO_FLAGS = (("V8", False, True), (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0))  # fmt: skip


def _write_forged_batch(path: Path) -> None:
    data = _forged_array(_forged_dtype(*OBJECT_FIELD_NO_FLAGS), b"\x41" * 8)
    path.write_bytes(pickle.dumps({"data": data, "labels": [1]}, protocol=2))


@pytest.mark.parametrize(
    "args, state, raw",
    [
        (*OBJECT_FIELD_NO_FLAGS, b"\x41" * 8),
        # a uint8 given an object field by its state, flags 0
        (("u1", False, True), (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0), b"A" * 8),
        # a uint8 whose state claims 8 bytes an item (reads past the buffer)
        (("u1", False, True), (3, "|", None, None, None, 8, -1, 0), b"A" * 8),
        # flags numpy does not set for a plain uint8
        (("u1", False, True), (3, "|", None, None, None, -1, -1, 16), b"A"),
        (("O", False, True), (3, "|", None, None, None, -1, -1, 63), b"A" * 8),
        (("M8[s]", False, True), (4, "<", None, None, None, -1, -1, 0, {}), b"A" * 8),
    ],
    ids=[
        "object-field-flags-0",
        "uint8-with-object-field",
        "itemsize",
        "flags",
        "object",
        "datetime",
    ],  # fmt: skip
)
def test_a_forged_dtype_is_refused_before_numpy_reads_the_bytes(tmp_path, args, state, raw):
    """Issue 62 item 10: the restricted unpickler admitted ``numpy.dtype`` with any state, so a
    dtype with an object field and flags 0 read the array's bytes as a pointer (exit 139 when
    the batch was used). Only plain numeric dtypes are built, from their type code."""
    path = tmp_path / "train_data_batch_1"
    data = _forged_array(_forged_dtype(args, state), raw)
    path.write_bytes(pickle.dumps({"data": data, "labels": [1]}, protocol=2))
    with pytest.raises(S.UnsafeDataFileError, match=f"^data file {path} holds an array of dtype"):
        S.load_pickle(path)


def test_a_forged_dtype_in_a_scalar_or_alone_is_refused(tmp_path):
    from numpy._core.multiarray import scalar

    class Scalar:
        def __reduce__(self):
            return (scalar, (_forged_dtype(*OBJECT_FIELD_NO_FLAGS), b"\x41" * 8))

    for value in (Scalar(), _forged_dtype(*OBJECT_FIELD_NO_FLAGS)):
        path = tmp_path / "batch"
        path.write_bytes(pickle.dumps({"mean": value}, protocol=2))
        with pytest.raises(S.UnsafeDataFileError, match="holds an array of dtype 'V8'"):
            S.load_pickle(path)


def test_array_bytes_must_match_shape_and_dtype(tmp_path):
    path = tmp_path / "batch"
    data = _forged_array(_forged_dtype(("u1", False, True), (3, "|", None, None, None, -1, -1, 0)), b"AB", shape=(10**9,))  # fmt: skip
    path.write_bytes(pickle.dumps({"data": data}, protocol=2))
    with pytest.raises(S.UnsafeDataFileError, match="bytes do not match its shape"):
        S.load_pickle(path)


#: ``fedsweep run`` of FedWalk on CIFAR-10 with a Downsampled-ImageNet leash at argv[1]: the
#: CIFAR-10 set (170 MB, not in the tests) is a tiny random one put in the loader's cache
_RUN_FEDWALK = """
import sys, torch
from fedsweep.data import datasets as D
from fedsweep.data.images import preprocess_images
g = torch.Generator().manual_seed(0)
x = lambda n: preprocess_images(torch.randint(0, 256, (n, 3, 32, 32), generator=g).to(torch.uint8), "cifar10", "auto")
root = sys.argv[2]
D._CACHE[("cifar10", str(D.resolve_data_root(root)), "cpu", "auto")] = D.TensorDataset(
    "cifar10", x(60), torch.arange(60) % 10, x(20), torch.arange(20) % 10, 10, "tests")
from fedsweep.cli.main import app
sys.argv = ["fedsweep", "run", sys.argv[1], "--quiet", "--set", f"data.root={root}",
    "--set", f"leash.root={sys.argv[3]}", *[a for kv in sys.argv[4:] for a in ("--set", kv)]]
app()
"""  # fmt: skip


def test_the_forged_dtype_batch_exits_2_in_one_line_naming_the_file(tmp_path):
    """The issue's probe: a FedWalk run whose leash.root holds a forged-dtype batch died with
    exit 139 (a segmentation fault on the address in the file). Now: exit 2, one line naming
    the batch, nothing else on stderr."""
    import subprocess
    import sys

    leash = tmp_path / "in32"
    leash.mkdir()
    for i in range(1, 11):
        _write_forged_batch(leash / f"train_data_batch_{i}")
    (leash / "map_clsloc.txt").write_text("n02119789 1 kit_fox\nn01644900 2 tailed_frog\n")
    sets = ["selector=none", "hooks=[fedwalk]", "sampler=uniform", "uniform.weighting=simple",
            "cohort.size=5", "model.name=mlp", "data.dataset=cifar10", "train.batch_size=4",
            "leash.source=imagenet32", "leash.wnids=[n02119789]", "train.rounds=1"]  # fmt: skip
    env = {**os.environ, "FEDSWEEP_STORE_DIR": str(tmp_path / "store"), "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        [sys.executable, "-c", _RUN_FEDWALK, str(ROOT / "configs/demo-mnist5k.yaml"),
         str(tmp_path / "cifar"), str(leash), *sets],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )  # fmt: skip
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    lines = (res.stdout + res.stderr).strip().splitlines()
    assert len(lines) == 1, res.stdout + res.stderr
    assert lines[0].startswith(f"data file {leash / 'train_data_batch_1'} holds an array of dtype")


def test_cifar_batches_are_unpickled_from_the_bytes_whose_md5_was_checked(tmp_path, monkeypatch):
    """Each batch is opened once: its bytes are checked, then those bytes are unpickled (a
    second open could read a file swapped after the check)."""
    import sys

    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for name in D.CIFAR_MD5["cifar10"]:
        n = 2 if name == "test_batch" else 1  # 5 training rows, 2 test rows
        data = np.full((n, 3072), 7, dtype=np.uint8)
        (folder / name).write_bytes(pickle.dumps({"data": data, "labels": [1] * n}))
    monkeypatch.setitem(D.CIFAR_MD5, "cifar10", {p.name: S.md5_of(p) for p in folder.iterdir()})
    monkeypatch.setitem(D.CIFAR_SIZE, "train", 5)
    monkeypatch.setitem(D.CIFAR_SIZE, "test", 2)
    opened: list[str] = []
    watching = [True]

    def hook(event, args):
        if watching[0] and event == "open" and str(args[0]).startswith(str(folder)):
            opened.append(Path(args[0]).name)

    sys.addaudithook(hook)  # cannot be removed: it stops watching at the end of the test
    try:
        out = D._read_cifar_files("cifar10", tmp_path)
    finally:
        watching[0] = False
    assert out is not None and out[0].shape == (5, 3, 32, 32)
    assert sorted(opened) == sorted(D.CIFAR_MD5["cifar10"]), opened


def test_npz_batches_with_objects_or_not_a_zip_are_refused_naming_the_file(tmp_path):
    """``.npz`` batches: object arrays, a file that is not a zip, a missing key, and a header
    declaring far more than the file holds (numpy allocated the declared shape, 6 GB for a
    7.7 kB file, then failed with a traceback) are one UnsafeDataFileError naming the file."""
    import io
    import time
    import zipfile

    good = tmp_path / "good.npz"
    np.savez(good, data=np.zeros((2, 3072), np.uint8), labels=np.array([1, 2]))
    x, y = read_imagenet32_batch(good)
    assert x.shape == (2, 3, 32, 32) and y.tolist() == [1, 2]

    objects = tmp_path / "objects.npz"
    np.savez(objects, data=np.array([None, 1], dtype=object), labels=np.array([1, 2]))
    not_zip = tmp_path / "not-zip.npz"
    not_zip.write_bytes(b"hello, not an archive")
    no_labels = tmp_path / "no-labels.npz"
    np.savez(no_labels, data=np.zeros((2, 3072), np.uint8))
    huge = tmp_path / "huge.npz"
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "|u1", "fortran_order": False, "shape": (2_000_000, 3072)}
    )
    with zipfile.ZipFile(huge, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("data.npy", header.getvalue() + bytes(4096))
        z.writestr("labels.npy", header.getvalue())
    for path, why in [
        (objects, "holds an array of dtype object"),
        (not_zip, "is not an .npz archive"),
        (no_labels, "has no array 'labels'"),
        (huge, "declares 'data' of shape (2000000, 3072)"),
    ]:
        start = time.monotonic()
        with pytest.raises(S.UnsafeDataFileError) as err:
            read_imagenet32_batch(path)
        assert str(err.value).startswith(f"data file {path} {why}"), str(err.value)
        assert "\n" not in str(err.value) and time.monotonic() - start < 2


def test_a_pickled_batch_of_the_wrong_shape_is_refused_before_it_is_expanded(tmp_path):
    """A pickle's memo makes labels a list of 100 references to one list of 100 lists: the old
    reader expanded them with ``np.asarray`` (a million labels from a few hundred bytes; more
    levels exhaust memory). The shapes are checked first."""
    inner = [[1] * 100] * 100
    path = tmp_path / "train_data_batch_1"
    data = np.zeros((2, 3072), np.uint8)
    path.write_bytes(pickle.dumps({"data": data, "labels": [inner] * 100}))
    assert path.stat().st_size < 7000
    with pytest.raises(S.UnsafeDataFileError, match="'labels' not a list of integers"):
        read_imagenet32_batch(path)


def test_values_nested_too_deeply_are_refused_naming_the_file(tmp_path):
    """Pickle builds nested lists without recursion (EMPTY_LIST ... APPEND): a hundred thousand
    levels in 200 kB; reading them back recursed until a RecursionError traceback."""
    depth = 100_000
    path = tmp_path / "train_data_batch_1"
    path.write_bytes(b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".")
    with pytest.raises(S.UnsafeDataFileError, match=f"^data file {path} nests its values too"):
        S.load_pickle(path)


@pytest.mark.parametrize("raw", [b"not a pickle at all", b"\x80\x02", b"\x80\x02]q\x00."])
def test_an_unreadable_leash_batch_is_one_line_naming_the_file(tmp_path, raw):
    """A truncated or foreign file among the batches was a pickle traceback (exit 1)."""
    path = tmp_path / "train_data_batch_1"
    path.write_bytes(raw)
    with pytest.raises(S.UnsafeDataFileError, match=f"^data file {path} is not a"):
        read_imagenet32_batch(path)
