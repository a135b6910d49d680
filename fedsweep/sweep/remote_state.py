"""Trial checkpoints on an object store (``fedsweep sweep --storage s3://bucket/prefix``).

A trial writes its checkpoints with file operations (a temporary folder renamed into place,
``fedsweep.sweep.trial``), which an object store has not. So with a remote storage each trial
works in a folder on its own node's disk and mirrors it (:class:`RemoteFolder`):

- at the start of every attempt, the local folder is emptied and filled from the remote one
  (:meth:`RemoteFolder.pull`), so a trial restarted on another node, or by ``--resume`` on
  another machine, goes on from the newest checkpoint the store holds;
- after every checkpoint, what changed is uploaded (:meth:`RemoteFolder.push`): the state and
  per-client files first, each checkpoint's ``meta.json`` last, so a checkpoint whose
  ``meta.json`` is remote is whole (``pull`` leaves out the others); files pruned locally are
  deleted remotely;
- when the run has ended the remote folder goes (:meth:`RemoteFolder.delete`).

Any URI pyarrow's ``FileSystem.from_uri`` opens works: ``s3://bucket/prefix`` (AWS credentials
from the usual variables or files), an S3-compatible server with
``?endpoint_override=HOST:PORT&scheme=http``, ``gs://``. The sweep's state file (what ``--resume``
continues) is kept there too, beside the trials' folders, so a sweep resumes from another
machine; Ray Tune's own folder and the driver's log stay on the driver's disk (neither is read
back).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from fedsweep.core.errors import first_line

#: the variables that carry an object store's credentials and region (AWS's; a trial on another
#: node gets the driver's through Ray's object store, as the tracking credentials)
STORAGE_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
               "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE")  # fmt: skip


def storage_env() -> dict[str, str]:
    """The driver's object-store variables that are set (:data:`STORAGE_ENV`)."""
    return {k: os.environ[k] for k in STORAGE_ENV if os.environ.get(k)}


#: the marker of a whole checkpoint (``fedsweep.sweep.trial.META_FILE``)
META = "meta.json"
CHECKPOINT_PREFIX = "checkpoint_"


def is_remote(storage: str | Path | None) -> bool:
    """Whether ``--storage`` names an object store rather than a folder."""
    text = "" if storage is None else str(storage)
    return "://" in text and not text.startswith("file://")


def join_uri(base: str, *parts: str) -> str:
    """``base`` with ``parts`` appended to its path, its query (``?endpoint_override=...``)
    kept at the end."""
    split = urlsplit(base)
    path = "/".join([split.path.rstrip("/"), *[p.strip("/") for p in parts]])
    return urlunsplit((split.scheme, split.netloc, path, split.query, split.fragment))


class RemoteStorageError(ValueError):
    """A ``--storage`` URI pyarrow cannot open (the message says why)."""


#: the remote storages that answered the probe in this process (a command sweeping several
#: specs to one storage probes it once)
_PROBED: set[str] = set()


def storage_problem(storage: str | Path | None) -> str | None:
    """Why a ``--storage`` cannot hold the trials' checkpoints (one line), or None: a folder
    (local, or on a cluster a shared mount such as NFS) that exists or can be created, and can
    be written (tried, nothing created: :func:`fedsweep.core.atomic.folder_problem`), or an
    object store URI that pyarrow opens (``s3://bucket/prefix``, an S3-compatible server with
    ``?endpoint_override=HOST:PORT&scheme=http``, ``gs://``), probed with one small object
    within :data:`PROBE_TIMEOUT_S` seconds. Imports neither torch nor Ray, so a command asks it
    before its heavy imports."""
    from fedsweep.core.atomic import folder_problem

    if not storage:
        return None
    if not is_remote(storage):
        problem = folder_problem(str(storage).removeprefix("file://"), "--storage")
        return f"{problem}; or an object store, e.g. s3://bucket/prefix" if problem else None
    if str(storage) in _PROBED:
        return None
    try:
        check_remote(str(storage))
    except RemoteStorageError as err:
        return str(err)
    _PROBED.add(str(storage))
    return None


def open_fs(uri: str):
    """``(filesystem, path)`` of ``uri`` (pyarrow); raises :class:`RemoteStorageError`."""
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(uri)
    except Exception as err:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ...
        first = first_line(err)
        raise RemoteStorageError(f"--storage {uri}: cannot open it ({first})") from None


#: seconds the probe of a ``--storage`` URI may take: pyarrow retries an endpoint that does
#: not answer for minutes (``gs://`` without a network hung past 120 s; an S3 endpoint that
#: accepts connections but never replies, 100 s)
PROBE_TIMEOUT_S = 15.0


def check_remote(uri: str, timeout: float | None = None) -> None:
    """Probe ``uri`` (:func:`probe_remote`) within ``timeout`` seconds (default
    :data:`PROBE_TIMEOUT_S`), whatever its scheme: a storage that cannot hold checkpoints, or
    does not answer, fails before Ray starts.

    The probe runs in a child process, killed when the time is up: a thread would be left
    waiting in pyarrow, and pyarrow's S3 clean-up at exit waits for it (the command then hung
    on its way out). The URI goes through the child's stdin, never its command line (it may
    hold a password); the child inherits the environment (the object store's credentials)."""
    import subprocess

    from fedsweep.core.processes import probe_in_child

    timeout = PROBE_TIMEOUT_S if timeout is None else timeout
    try:
        why = probe_in_child("fedsweep.sweep.remote_state", uri, timeout)
    except subprocess.TimeoutExpired:  # run() has killed it
        raise RemoteStorageError(
            f"--storage {uri}: did not answer within {timeout:g} s (no network, a wrong "
            "endpoint or a firewall?); check the URI and that this machine reaches it"
        ) from None
    if why is None:
        return
    raise RemoteStorageError(why if why.startswith("--storage ") else f"--storage {uri}: {why}")


def probe_remote(uri: str) -> None:
    """Open ``uri`` and write, read and delete one small object under it; raises
    :class:`RemoteStorageError` (:func:`check_remote` runs this in a child process)."""
    fs, path = open_fs(uri)
    probe = f"{path.rstrip('/')}/.fedsweep-probe-{os.getpid()}"
    try:
        with fs.open_output_stream(probe) as out:
            out.write(b"ok")
        with fs.open_input_stream(probe) as src:
            ok = src.read() == b"ok"
        fs.delete_file(probe)
    except Exception as err:  # noqa: BLE001
        first = first_line(err)
        raise RemoteStorageError(f"--storage {uri}: cannot write there ({first})") from None
    if not ok:
        raise RemoteStorageError(f"--storage {uri}: an object written there reads back wrong")


class RemoteFolder:
    """The remote mirror of one local folder (a trial's checkpoints)."""

    def __init__(self, uri: str):
        self.uri = uri
        self.fs, self.path = open_fs(uri)
        #: relative path -> (size, mtime_ns) of what this process uploaded
        self._pushed: dict[str, tuple[int, int]] = {}

    def _remote_files(self) -> dict[str, int]:
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(self.path)
        if info.type == pafs.FileType.NotFound:
            return {}
        selector = pafs.FileSelector(self.path, recursive=True, allow_not_found=True)
        root = self.path.rstrip("/") + "/"
        return {
            i.path[len(root) :]: i.size
            for i in self.fs.get_file_info(selector)
            if i.type == pafs.FileType.File and i.path.startswith(root)
        }

    def pull(self, local: str | Path) -> int:
        """Empty ``local`` and fill it with the remote files, leaving out the checkpoints
        without their ``meta.json`` (an upload cut short); returns the files copied."""
        local = Path(local)
        shutil.rmtree(local, ignore_errors=True)
        local.mkdir(parents=True, exist_ok=True)
        files = self._remote_files()
        whole = {rel.split("/")[0] for rel in files if rel.count("/") == 1 and rel.endswith(META)}
        copied = 0
        for rel in sorted(files):
            top = rel.split("/")[0]
            if top.startswith(CHECKPOINT_PREFIX) and top not in whole:
                continue
            target = local / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with self.fs.open_input_stream(f"{self.path.rstrip('/')}/{rel}") as src:
                target.write_bytes(src.read())
            stat = target.stat()
            self._pushed[rel] = (stat.st_size, stat.st_mtime_ns)
            copied += 1
        return copied

    def push(self, local: str | Path) -> None:
        """Upload what changed in ``local`` since the last push (``meta.json`` files last),
        then delete the remote files ``local`` no longer has."""
        local = Path(local)
        now: dict[str, tuple[int, int]] = {}
        for path in local.rglob("*"):
            if path.is_file() and not path.name.startswith("."):  # .tmp-* folders' files too
                if any(part.startswith(".") for part in path.relative_to(local).parts):
                    continue
                stat = path.stat()
                now[path.relative_to(local).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        changed = [rel for rel, sig in now.items() if self._pushed.get(rel) != sig]
        changed.sort(key=lambda rel: (rel.endswith(META), rel))  # markers last
        root = self.path.rstrip("/")
        for rel in changed:
            with self.fs.open_output_stream(f"{root}/{rel}") as out:
                out.write((local / rel).read_bytes())
            self._pushed[rel] = now[rel]
        for rel in sorted(set(self._remote_files()) - set(now)):
            self.fs.delete_file(f"{root}/{rel}")
            self._pushed.pop(rel, None)

    def read_text(self, name: str) -> str | None:
        """The text of the object ``name`` in this folder, None when there is none."""
        import pyarrow.fs as pafs

        path = f"{self.path.rstrip('/')}/{name}"
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        with self.fs.open_input_stream(path) as src:
            return src.read().decode()

    def write_text(self, name: str, text: str) -> None:
        """Write the object ``name`` (an object store replaces it whole: no half-written
        state is ever read)."""
        with self.fs.open_output_stream(f"{self.path.rstrip('/')}/{name}") as out:
            out.write(text.encode())

    def delete(self) -> None:
        """Remove the remote folder (nothing when it does not exist)."""
        import pyarrow.fs as pafs

        if self.fs.get_file_info(self.path).type != pafs.FileType.NotFound:
            self.fs.delete_dir(self.path)


if __name__ == "__main__":  # check_remote's child: the URI on stdin, one line on failure
    import sys

    try:
        probe_remote(sys.stdin.read())
    except RemoteStorageError as err:
        print(err)
        sys.exit(1)
