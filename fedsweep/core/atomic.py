"""Atomic output files: every file ``fedsweep figures`` / ``compare`` writes (HTML, PNG, PDF,
SVG, CSV, TeX, the index entries, ``index.html``, ``plotly.min.js``), and a sweep's state file,
is written to a temporary file in the same folder and renamed into place (``os.replace``,
atomic on POSIX and Windows).

A process killed mid-write (``kill -9``, a full disk, a failed export) therefore leaves the
previous good file untouched: a reader sees the old file or the complete new one, never a
truncated or 0-byte one. The temporary file is removed when the writer fails; one left by a
killed process (``.<name>.part-<pid>-<token>``) is removed by the next build in that folder
(:func:`remove_stale_parts`).
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: the marker of a temporary file: ``.<final name>.part-<pid>-<token>``
PART = ".part-"
PART_RE = re.compile(r"^\..+\.part-(\d+)-[0-9a-f]+$")


class OutputWriteError(OSError):
    """An output file could not be written (a full disk, a file-size limit, a permission); the
    previous file at that path, if any, is kept as it was."""


def part_path(path: str | Path) -> Path:
    """A fresh temporary name beside ``path`` (same folder, so the rename stays atomic)."""
    path = Path(path)
    return path.with_name(f".{path.name}{PART}{os.getpid()}-{secrets.token_hex(4)}")


def is_part(path: str | Path) -> bool:
    """Whether ``path`` is a temporary file of :func:`part_path`."""
    return bool(PART_RE.match(Path(path).name))


def _fsync(path: Path) -> None:
    """Flush ``path``'s data to disk before the rename (a crash then shows old or new data)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - a file system without fsync
        pass
    finally:
        os.close(fd)


def commit(part: Path, path: Path) -> None:
    """Rename the finished temporary file ``part`` onto ``path`` (atomic replace)."""
    _fsync(part)
    try:
        os.replace(part, path)
    except OSError as err:
        part.unlink(missing_ok=True)
        raise _write_error(path, err) from None


def _write_error(path: Path, err: OSError) -> OutputWriteError:
    why = err.strerror or str(err) or type(err).__name__
    return OutputWriteError(
        err.errno, f"cannot write {path}: {why} (the previous file, if any, is kept)", str(path)
    )


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write; when the block ends without an error
    the temporary file replaces ``path``; on any error (or an interrupt) it is removed and
    ``path`` stays as it was. An ``OSError`` becomes :class:`OutputWriteError` naming ``path``."""
    path = Path(path)
    part = part_path(path)
    try:
        yield part
        commit(part, path)
    except OutputWriteError:
        raise
    except OSError as err:
        raise _write_error(path, err) from None
    finally:
        part.unlink(missing_ok=True)


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """``path.write_text(text)``, atomically (see the module docstring)."""
    path = Path(path)
    with replacing(path) as part:
        part.write_text(text, encoding=encoding)
    return path


def write_bytes(path: str | Path, data: bytes) -> Path:
    """``path.write_bytes(data)``, atomically."""
    path = Path(path)
    with replacing(path) as part:
        part.write_bytes(data)
    return path


def write_with(path: str | Path, writer: Callable[[Path], object]) -> Path:
    """Let ``writer(tmp)`` write the file (e.g. ``frame.to_csv``), then rename it onto
    ``path``, atomically."""
    path = Path(path)
    with replacing(path) as part:
        writer(part)
    return path


def remove_stale_parts(folder: str | Path) -> list[Path]:
    """Remove the temporary files in ``folder`` left by processes that no longer run (killed
    mid-write); returns them. Those of a live process (a build running now) are left alone."""
    from fedsweep.core.processes import alive

    removed = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = PART_RE.match(entry.name)
        if not match:
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and alive(pid):
            continue
        try:
            entry.unlink()
            removed.append(entry)
        except OSError:
            pass
    return removed


#: what an output folder option accepts (:func:`folder_problem`)
FOLDER_ALLOWED = "allowed: a folder that exists or can be created, and can be written"


#: folders an output option never writes into, themselves or anything inside them (the
#: system's programs, libraries, configuration, devices, kernel views)
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
                "/sbin", "/sys", "/usr")  # fmt: skip
#: folders an output option never is, though their sub-folders may be (the root, the home
#: folder itself; ``/var``, ``/run``, ``/opt``, ``/srv`` hold other programs' files)
SYSTEM_FOLDERS = ("/", "/var", "/run", "/opt", "/srv")


def unsafe_folder_problem(path: str | Path, option: str) -> str | None:
    """Why ``path`` must not be an output folder although it could be written, in one line, or
    None: a name longer than the file system takes (one part over 255 bytes, the whole over
    4096: writing failed later with a traceback), or a folder that is, or resolves to (links
    followed), ``/``, the home folder itself, a folder of :data:`SYSTEM_FOLDERS` or anything in
    :data:`SYSTEM_TREES` (``--out`` a link to ``/`` wrote the reports there)."""
    text = os.fsencode(str(path))
    longest = max((len(part) for part in text.split(b"/")), default=0)
    if longest > 255 or len(text) > 4095:
        what = f"a name of {longest} bytes" if longest > 255 else f"{len(text)} bytes"
        return (
            f"{option} {str(path)[:60]}...: {what}, longer than file systems take (255 bytes a "
            f"name, 4095 a path; {FOLDER_ALLOWED})"
        )
    try:
        real = Path(path).expanduser().resolve()
    except (OSError, RuntimeError) as err:  # a link loop
        return f"{option} {path}: cannot be resolved ({getattr(err, 'strerror', None) or err})"
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError, OSError):  # no home folder known
        home = None
    system = str(real) in SYSTEM_FOLDERS or any(
        str(real) == tree or str(real).startswith(tree + "/") for tree in SYSTEM_TREES
    )
    if system or real == home:
        where = "the home folder" if real == home else "a system folder"
        via = "" if str(real) == os.path.abspath(path) else f" (it resolves to {real})"
        return (
            f"{option} {path}: {where}{via}; refusing to write outputs there (name a folder of "
            "its own, e.g. ./figures)"
        )
    return None


def folder_problem(path: str | Path, option: str) -> str | None:
    """Why ``path`` cannot be an output folder, in one line naming ``option`` (``--out``), or
    None. Nothing is created: the folder it is, or the nearest existing one it would be created
    in, is tried with a temporary folder removed at once, so a command can check its output
    before it reads a store or starts Ray and leave nothing behind when another check fails.
    Trying beats ``os.access``: root passes that everywhere, yet cannot write under ``/proc``,
    ``/sys`` or on a read-only mount."""
    unsafe = unsafe_folder_problem(path, option)
    if unsafe:
        return unsafe
    path = Path(path)
    if os.path.islink(path) and not os.path.exists(path):
        return f"{option} {path}: a link to nothing, not a folder ({FOLDER_ALLOWED})"
    base = path
    while not os.path.exists(base) and base != base.parent:  # os.path: False on EACCES too
        base = base.parent
    if not os.path.isdir(base):
        where = "is a file" if base == path else f"is inside the file {base}"
        return f"{option} {path}: {where}, not a folder ({FOLDER_ALLOWED})"
    try:
        probe = tempfile.mkdtemp(prefix=".fedsweep-probe-", dir=base)
    except OSError as err:
        return f"{option} {path}: cannot write in {base} ({err.strerror or err}; {FOLDER_ALLOWED})"
    os.rmdir(probe)
    return None
