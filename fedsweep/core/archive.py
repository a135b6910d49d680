"""A study bundle's container (``fedsweep bundle`` writes it, ``fedsweep verify`` reads it):
one gzip-compressed tar of flat, named members and a ``manifest.json`` that lists each
member's SHA-256 and size.

A bundle comes from another lab: an untrusted file. :func:`read_archive` never extracts
anything to disk and never unpickles: it reads each member into memory, and refuses (with
:class:`BundleError`, naming the member) a compressed file past :data:`MAX_ARCHIVE_BYTES`, more
than :data:`MAX_MEMBERS` members, a member that is not a regular file (a link, a folder, a
device), a name that is not a plain file name (absolute, with ``..`` or a folder, odd
characters), a name given twice, a member past :data:`MAX_MEMBER_BYTES`, members past
:data:`MAX_TOTAL_BYTES` together, and then a member missing from the manifest, a member the
manifest lists but the archive lacks, or one whose bytes do not hash to the manifest's SHA-256
(*tampered*). Only the standard library: any layer may read a bundle.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
import time
from pathlib import Path
from typing import Any

from fedsweep.core import atomic

#: the manifest's ``format``; a reader refuses another
FORMAT = "fedsweep-bundle/1"
MANIFEST = "manifest.json"
#: bounds on a bundle read (an untrusted file): the compressed file, the member count, one
#: member and all members decompressed
MAX_ARCHIVE_BYTES = 256 * 2**20
MAX_MEMBERS = 64
MAX_MEMBER_BYTES = 256 * 2**20
MAX_TOTAL_BYTES = 512 * 2**20
#: a member's name: a plain file name (no folder, no ``..``, no leading dot)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$")


class BundleError(ValueError):
    """A bundle that cannot be read, or that was changed after it was written (``member``:
    the member at fault, or None for the file as a whole)."""

    def __init__(self, message: str, member: str | None = None):
        super().__init__(message)
        self.member = member


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def name_problem(name: str) -> str:
    """What is wrong with ``name`` as a member name, "" if nothing."""
    if not _NAME.match(name) or ".." in name:
        return (
            f"member {name!r}: not a plain file name (allowed: letters, digits, _ . + -, no "
            "folder, no '..', at most 128 characters)"
        )
    return ""


def write_archive(path: str | Path, members: dict[str, bytes], manifest: dict[str, Any]) -> Path:
    """Write ``members`` (name -> bytes) and ``manifest`` (with ``format`` and each member's
    ``sha256`` and ``size`` added under ``members``) as one ``.tar.gz`` at ``path``, atomically
    (:mod:`fedsweep.core.atomic`). Member times are the manifest's ``created`` (or 0)."""
    for name in members:
        problem = name_problem(name) or (name == MANIFEST and f"member {name!r}: reserved")
        if problem:
            raise ValueError(problem)
    manifest = {
        "format": FORMAT,
        **manifest,
        "members": {n: {"sha256": sha256(b), "size": len(b)} for n, b in sorted(members.items())},
    }
    entries = {MANIFEST: json.dumps(manifest, indent=1, sort_keys=True).encode(), **members}
    mtime = int(manifest.get("created_unix", 0))
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=mtime) as zipped:
        with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, data in entries.items():
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), mtime, 0o644
                tar.addfile(info, io.BytesIO(data))
    return atomic.write_bytes(path, buffer.getvalue())


def read_archive(path: str | Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and the members (name -> bytes) of the bundle at ``path``, every member
    checked against the manifest's SHA-256; :class:`BundleError` otherwise (the module
    docstring lists the checks)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as err:
        raise BundleError(f"bundle {path}: cannot read it ({err.strerror or err})") from None
    if not path.is_file():
        raise BundleError(f"bundle {path}: not a file")
    if size > MAX_ARCHIVE_BYTES:
        raise BundleError(f"bundle {path}: {size} bytes, more than {MAX_ARCHIVE_BYTES}")
    members: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for info in tar:
                if len(members) >= MAX_MEMBERS:
                    raise BundleError(f"bundle {path}: more than {MAX_MEMBERS} members")
                name = info.name
                problem = name_problem(name)
                if problem:
                    raise BundleError(f"bundle {path}: {problem}", name)
                if not info.isreg():
                    raise BundleError(
                        f"bundle {path}: member {name!r} is not a regular file (a link, a "
                        "folder or a device: refused)",
                        name,
                    )
                if name in members:
                    raise BundleError(f"bundle {path}: member {name!r} appears twice", name)
                if info.size > MAX_MEMBER_BYTES or total + info.size > MAX_TOTAL_BYTES:
                    raise BundleError(
                        f"bundle {path}: member {name!r} of {info.size} bytes passes the "
                        f"bounds ({MAX_MEMBER_BYTES} a member, {MAX_TOTAL_BYTES} in all)",
                        name,
                    )
                handle = tar.extractfile(info)
                data = handle.read(info.size + 1) if handle is not None else b""
                if len(data) != info.size:
                    raise BundleError(f"bundle {path}: member {name!r} is cut short", name)
                total += len(data)
                members[name] = data
    except BundleError:
        raise
    except (tarfile.TarError, OSError, EOFError, gzip.BadGzipFile) as err:
        raise BundleError(f"bundle {path}: not a fedsweep bundle (a .tar.gz): {err}") from None
    raw = members.pop(MANIFEST, None)
    if raw is None:
        raise BundleError(f"bundle {path}: no {MANIFEST}", MANIFEST)
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise BundleError(f"bundle {path}: {MANIFEST} is not JSON: {err}", MANIFEST) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise BundleError(
            f"bundle {path}: {MANIFEST}: format {got!r} (allowed: {FORMAT})", MANIFEST
        )
    listed = manifest.get("members")
    if not isinstance(listed, dict):
        raise BundleError(f"bundle {path}: {MANIFEST} lists no members", MANIFEST)
    for name in sorted(set(members) - set(listed)):
        raise BundleError(f"bundle {path}: tampered: member {name} is not in the manifest", name)
    for name, entry in sorted(listed.items()):
        if name not in members:
            raise BundleError(f"bundle {path}: member {name} (in the manifest) is missing", name)
        want = entry.get("sha256") if isinstance(entry, dict) else None
        got = sha256(members[name])
        if got != want:
            raise BundleError(
                f"bundle {path}: tampered: member {name} has SHA-256 {got[:16]}..., the "
                f"manifest says {str(want)[:16]}...",
                name,
            )
    return manifest, members


def now_fields() -> dict[str, Any]:
    """``created`` (UTC, ISO 8601) and ``created_unix`` of a manifest written now."""
    t = int(time.time())
    return {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)), "created_unix": t}
