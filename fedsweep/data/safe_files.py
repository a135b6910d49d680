"""Reading data files from a folder the user names, without ever running code from it.

A data folder is user input like a config: ``--data-dir`` / ``data.root`` may point anywhere, and
CIFAR's batches and Downsampled ImageNet's are *pickles*, which run code when ``pickle.load``
reads them (a ``__reduce__`` returning ``os.system``). Every loader of a user folder reads them
through :func:`load_pickle`, a restricted unpickler that admits only what the formats hold:
dicts, lists, tuples, str/bytes, numbers, booleans, None and numpy arrays (their dtype, their
reconstruction from raw bytes). Any other global (a function, a class) stops the read before it
is looked up, so nothing is imported or called; the error names the file and what it asked for.

Where the files are published with checksums (CIFAR-10 and CIFAR-100, torchvision's table),
:func:`check_md5` compares each file before it is opened, so a file that is not the published
one is refused before a single byte of it is unpickled.

Both errors are :class:`UnsafeDataFileError`: bad input, exit code 2 on the command line
(``fedsweep.cli.common.clean_errors``), never a fallback to another reader.
"""

from __future__ import annotations

import hashlib
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


class UnsafeDataFileError(Exception):
    """A data file that is not what its format holds: a pickle naming a global outside
    :data:`ALLOWED_GLOBALS`, or a published file whose MD5 differs. The message is one line
    naming the file. Not a ``ValueError``/``OSError``, so no reader's "unreadable file, try
    another way" handler swallows it."""


class _DataUnpickler(pickle.Unpickler):
    def __init__(self, file, path: Path, encoding: str) -> None:
        super().__init__(file, encoding=encoding)
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED_GLOBALS:
            raise UnsafeDataFileError(
                f"data file {self._path} asks to load {module}.{name}, which no data set file "
                "holds (only dicts, lists, strings, numbers and numpy arrays are read): refusing "
                "to read it; replace it with the data set's original file"
            )
        return super().find_class(module, name)

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
        return _DataUnpickler(f, path, encoding).load()


def md5_of(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def check_md5(path: str | Path, expected: str, what: str) -> None:
    """Raise :class:`UnsafeDataFileError` unless ``path``'s MD5 is ``expected`` (the published
    sum of ``what``, e.g. "CIFAR-10's data_batch_1")."""
    found = md5_of(path)
    if found != expected:
        raise UnsafeDataFileError(
            f"data file {path} is not {what} (MD5 {found}, published {expected}): refusing to "
            "read it; replace it with the original file, or remove the folder so that the data "
            "set is downloaded again"
        )
