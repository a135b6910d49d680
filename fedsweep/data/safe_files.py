"""Reading data files from a folder the user names, without ever running code from it.

A data folder is user input like a config: ``--data-dir`` / ``data.root`` may point anywhere, and
CIFAR's batches and Downsampled ImageNet's are *pickles*, which run code when ``pickle.load``
reads them (a ``__reduce__`` returning ``os.system``). Every loader of a user folder reads them
through :func:`load_pickle`, a restricted unpickler that admits only what the formats hold:
dicts, lists, tuples, str/bytes, numbers, booleans, None and numpy arrays (their dtype, their
reconstruction from raw bytes). Any other global (a function, a class) stops the read before it
is looked up, so nothing is imported or called; the error names the file and what it asked for.

A numpy dtype is data too, and a forged one is as dangerous as a function: a pickle may rebuild
``numpy.dtype`` with an object field and then set its flags to "holds no objects", so that the
array's raw bytes are read as object pointers (a crash on an address the file chose), or flag a
``uint8`` as holding objects so that numpy writes pointers past its buffer. numpy's own
``__setstate__`` is therefore never given a dtype's state: the unpickler records what the file
asks for and builds the dtype itself, from :data:`ALLOWED_DTYPES` only (plain booleans, integers
and floats, any byte order), with the state a plain dtype has (no fields, no sub-array, flags 0);
an array's shape and raw bytes are checked against that dtype before numpy sees them.

Where the files are published with checksums (CIFAR-10 and CIFAR-100, torchvision's table),
:func:`check_md5` compares each file before it is opened, so a file that is not the published
one is refused before a single byte of it is unpickled.

Both errors are :class:`UnsafeDataFileError`: bad input, exit code 2 on the command line
(``fedsweep.cli.common.clean_errors``), never a fallback to another reader.
"""

from __future__ import annotations

import hashlib
import io
import math
import pickle
from pathlib import Path
from typing import Any

#: the globals a data pickle may name: numpy's array, dtype and scalar reconstruction (numpy 1
#: and 2 spell the module differently) and ``_codecs.encode``, with which Python 3 writes bytes
#: at pickle protocols below 3. Nothing here imports a module or calls anything else.
ALLOWED_GLOBALS = frozenset(
    {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("_codecs", "encode"),
    }
)


#: the dtypes a data array may have (numpy's type codes without byte order): CIFAR's and
#: Downsampled ImageNet's uint8 images, their labels and means. No structured, object, string,
#: datetime or sub-array dtype: data files are plain arrays.
ALLOWED_DTYPES = frozenset({"b1", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f2", "f4", "f8"})


class UnsafeDataFileError(Exception):
    """A data file that is not what its format holds: a pickle naming a global outside
    :data:`ALLOWED_GLOBALS`, or a published file whose MD5 differs. The message is one line
    naming the file. Not a ``ValueError``/``OSError``, so no reader's "unreadable file, try
    another way" handler swallows it."""


def _refuse_dtype(path: Path, what: str) -> UnsafeDataFileError:
    return UnsafeDataFileError(
        f"data file {path} holds an array of dtype {what}, which no data set file holds (only "
        f"plain {', '.join(sorted(ALLOWED_DTYPES))} arrays are read): refusing to read it; "
        "replace it with the data set's original file"
    )


class _DtypeRecipe:
    """What a pickle asks ``numpy.dtype`` to be: the constructor's arguments and (pickle's
    BUILD) the state numpy would set. Nothing of numpy runs until :meth:`build` has checked
    both against a plain dtype of :data:`ALLOWED_DTYPES`."""

    def __init__(self, path: Path, *args: Any) -> None:
        self.path, self.args, self.state, self._built = path, args, None, None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def build(self) -> Any:
        import numpy as np

        if self._built is not None:
            return self._built
        args, state = self.args, self.state
        code = args[0] if args else None
        if isinstance(code, bytes):
            code = code.decode("latin1")
        if (
            not isinstance(code, str)
            or code.lstrip("<>|=") not in ALLOWED_DTYPES
            or not all(isinstance(a, (bool, int)) for a in args[1:3])
            or len(args) > 3
        ):
            raise _refuse_dtype(self.path, repr(code if isinstance(code, str) else args)[:80])
        dtype = np.dtype(code.lstrip("<>|="))
        if state is not None:
            # (version, byte order, sub-array, names, fields, itemsize, alignment, flags[,
            # metadata]): a plain dtype has no sub-array, names or fields, and flags 0
            ok = isinstance(state, tuple) and len(state) in (8, 9) and state[0] in (3, 4)
            if ok:
                _, order, sub, names, fields, size, align, flags = state[:8]
                ok = (
                    order in ("<", ">", "|", "=")
                    and sub is None
                    and names is None
                    and fields is None
                    and size in (-1, dtype.itemsize)
                    and align in (-1, dtype.alignment)
                    and flags == dtype.flags
                    and (len(state) == 8 or state[8] is None)
                )
            if not ok:
                raise _refuse_dtype(
                    self.path,
                    f"{code} with the state {state!r}"[:160] + " (forged fields or flags)",
                )
            if order in ("<", ">"):
                dtype = dtype.newbyteorder(order)
        self._built = dtype
        return dtype


def _dtype_of(path: Path, value: Any) -> Any:
    """The checked dtype a reconstruction names: a recipe built here, or the short type codes
    numpy writes for an array's placeholder (``b'b'``)."""
    import numpy as np

    if isinstance(value, _DtypeRecipe):
        return value.build()
    if isinstance(value, (str, bytes)):
        code = value.decode("latin1") if isinstance(value, bytes) else value
        try:
            dtype = np.dtype(code) if len(code) <= 4 else None
        except Exception:  # noqa: BLE001 - numpy's words for a code it does not know vary
            dtype = None
        if dtype is not None and dtype.str[1:] in ALLOWED_DTYPES:
            return dtype
    raise _refuse_dtype(path, repr(value)[:80])


def _checked_array_class(path: Path) -> type:
    import numpy as np

    class _CheckedArray(np.ndarray):
        """The array a pickle reconstructs: its state (shape, dtype, raw bytes) is checked
        before numpy's ``__setstate__`` reads it; :func:`_plain` turns it into an ndarray."""

        def __setstate__(self, state: Any) -> None:
            if not isinstance(state, tuple) or len(state) not in (4, 5):
                raise UnsafeDataFileError(f"data file {path} holds an array of unknown layout")
            head = state[:1] if len(state) == 5 else ()
            shape, dtype, fortran, raw = state[-4:]
            dtype = _dtype_of(path, dtype)
            if not (
                isinstance(shape, tuple)
                and all(type(n) is int and n >= 0 for n in shape)
                and isinstance(fortran, (bool, int))
                and isinstance(raw, (bytes, bytearray, str))
                and len(raw) == math.prod(shape) * dtype.itemsize
            ):
                raise UnsafeDataFileError(
                    f"data file {path} holds an array whose bytes do not match its shape "
                    f"{shape!r:.60} and dtype {dtype}: refusing to read it"
                )
            super().__setstate__((*head, shape, dtype, fortran, raw))

    return _CheckedArray


class _DataUnpickler(pickle.Unpickler):
    def __init__(self, file, path: Path, encoding: str) -> None:
        super().__init__(file, encoding=encoding)
        self._path = path
        self._array = None

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED_GLOBALS:
            raise UnsafeDataFileError(
                f"data file {self._path} asks to load {module}.{name}, which no data set file "
                "holds (only dicts, lists, strings, numbers and numpy arrays are read): refusing "
                "to read it; replace it with the data set's original file"
            )
        real = super().find_class(module, name)
        path = self._path
        if name == "dtype":
            return lambda *args: _DtypeRecipe(path, *args)
        if name == "_reconstruct":
            import numpy as np

            if self._array is None:
                self._array = _checked_array_class(path)
            array = self._array

            def reconstruct(subtype: Any, shape: Any, dtype: Any) -> Any:
                if subtype is not np.ndarray:
                    raise UnsafeDataFileError(f"data file {path} rebuilds {subtype!r:.60}")
                return real(array, (0,), _dtype_of(path, dtype))

            return reconstruct
        if name == "scalar":

            def scalar(dtype: Any, *data: Any) -> Any:
                if not all(isinstance(d, (bytes, str)) for d in data):
                    raise UnsafeDataFileError(f"data file {path} holds a scalar of unknown layout")
                return real(_dtype_of(path, dtype), *data)

            return scalar
        if name == "_frombuffer":

            def frombuffer(buf: Any, dtype: Any, *rest: Any) -> Any:
                return real(buf, _dtype_of(path, dtype), *rest)

            return frombuffer
        return real

    def persistent_load(self, pid: Any) -> Any:  # pickle's default already refuses; say why
        raise UnsafeDataFileError(
            f"data file {self._path} holds a persistent reference, which no data set file does: "
            "refusing to read it"
        )


def load_pickle(path: str | Path, encoding: str = "latin1") -> Any:
    """``pickle.load`` of a data file, admitting only :data:`ALLOWED_GLOBALS`; ``latin1`` also
    reads the Python 2 pickles CIFAR and Downsampled ImageNet ship. Raises
    :class:`UnsafeDataFileError` for anything else, ``OSError`` / ``pickle.UnpicklingError`` /
    ``EOFError`` for an unreadable file."""
    path = Path(path)
    with open(path, "rb") as f:
        return loads_pickle(f.read(), path, encoding)


def loads_pickle(data: bytes, path: str | Path, encoding: str = "latin1") -> Any:
    """:func:`load_pickle` of bytes already read (``path`` names them in errors): the bytes
    whose MD5 was checked are the bytes unpickled, never a second read of the file."""
    path = Path(path)
    try:
        return _plain(_DataUnpickler(io.BytesIO(data), path, encoding).load(), {})
    except RecursionError:  # lists in lists a hundred thousand deep: built without recursion
        raise _not_data(path, "nests its values too deeply for a data set file") from None


def _plain(value: Any, seen: dict[int, tuple[Any, Any]]) -> Any:
    """``value`` with every checked array a plain ndarray and every dtype built (each shared
    object once: a pickle's memo may reference one list a million times)."""
    import numpy as np

    key = id(value)
    if key in seen:
        return seen[key][1]
    seen[key] = (value, value)  # the original kept alive: its id is never reused meanwhile
    out = value
    if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
        out = value.view(np.ndarray)
    elif isinstance(value, _DtypeRecipe):
        out = value.build()
    elif isinstance(value, dict):
        for k, v in value.items():
            value[k] = _plain(v, seen)
    elif isinstance(value, list):
        value[:] = [_plain(v, seen) for v in value]
    elif isinstance(value, tuple):
        out = tuple(_plain(v, seen) for v in value)
    seen[key] = (value, out)
    return out


def _not_data(path: Path, why: str) -> UnsafeDataFileError:
    return UnsafeDataFileError(
        f"data file {path} {why}: refusing to read it; replace it with the data set's original file"
    )


#: deflate expands at most about 1032 times: a member that declares more than this many bytes
#: per stored byte is not a real archive member (a 7 kB file declaring 6 GB of array)
_DEFLATE_RATIO = 1100


def load_npz(path: str | Path, keys: tuple[str, ...]) -> dict[str, Any]:
    """The arrays ``keys`` of an ``.npz`` file (a zip of ``.npy`` files), each a plain array of
    :data:`ALLOWED_DTYPES`. Before anything is allocated, each member's declared size is bounded
    by its stored size and its header's shape x dtype must equal the bytes it holds; a file that
    is not a zip, lacks a key, or holds object or structured arrays raises
    :class:`UnsafeDataFileError` naming the file (numpy's ``np.load`` allocates the header's
    shape first, then fails on a short file with a traceback)."""
    import zipfile

    import numpy as np

    path = Path(path)
    out: dict[str, Any] = {}
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as err:
        raise _not_data(path, f"is not an .npz archive ({err})") from None
    with archive:
        for key in keys:
            try:
                info = archive.getinfo(f"{key}.npy")
            except KeyError:
                raise _not_data(path, f"has no array {key!r}") from None
            if info.file_size > max(info.compress_size, 1) * _DEFLATE_RATIO + (1 << 16):
                raise _not_data(
                    path, f"declares {info.file_size} bytes for {key!r} in {info.compress_size}"
                )
            try:
                raw = archive.read(info)
                f = io.BytesIO(raw)
                version = np.lib.format.read_magic(f)
                read_header = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0
                )
                shape, fortran, dtype = read_header(f)
            except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError) as err:
                raise _not_data(path, f"holds no readable array {key!r} ({err})") from None
            if (
                dtype.names is not None
                or dtype.subdtype is not None
                or (dtype.str[1:] not in ALLOWED_DTYPES)
            ):
                raise _refuse_dtype(path, str(dtype))
            offset = f.tell()
            if math.prod(shape) * dtype.itemsize != len(raw) - offset:
                raise _not_data(
                    path,
                    f"declares {key!r} of shape {shape} ({dtype}) in {len(raw) - offset} bytes",
                )
            array = np.frombuffer(raw, dtype, offset=offset)
            out[key] = array.reshape(shape, order="F" if fortran else "C")
    return out


def md5_of(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def read_checked(path: str | Path, expected: str, what: str) -> bytes:
    """The bytes of ``path``, read once, after their MD5 is found to be ``expected``
    (:func:`check_md5`'s error otherwise): the caller unpickles these bytes, so a file swapped
    between the check and a second open is never read."""
    data = Path(path).read_bytes()
    _compare(path, hashlib.md5(data, usedforsecurity=False).hexdigest(), expected, what)
    return data


def check_md5(path: str | Path, expected: str, what: str) -> None:
    """Raise :class:`UnsafeDataFileError` unless ``path``'s MD5 is ``expected`` (the published
    sum of ``what``, e.g. "CIFAR-10's data_batch_1")."""
    _compare(path, md5_of(path), expected, what)


def _compare(path: str | Path, found: str, expected: str, what: str) -> None:
    if found != expected:
        raise UnsafeDataFileError(
            f"data file {path} is not {what} (MD5 {found}, published {expected}): refusing to "
            "read it; replace it with the original file, or remove the folder so that the data "
            "set is downloaded again"
        )
