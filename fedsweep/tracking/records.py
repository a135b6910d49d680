"""A tracked run's per-round records (``FLRun.records``: BHerd's selected steps of every client,
the sampled cohort) on disk instead of in memory.

``FLRun`` keeps one small tensor per client and round until the run ends and logs them as
artifacts: about 1.2 KB of memory per client and round as Python objects (a 100-client BHerd
SVM run grew by 117 KB a round, 0.3 MB at a few hundred clients), and every checkpoint held
and rewrote all of them. A :class:`RecordSpool` takes them out of the run every few rounds
(:meth:`RecordSpool.drain`) and appends their bytes to one file per record, so a run's memory
no longer grows with its rounds; :meth:`RecordSpool.arrays` reads them back at the end, equal
to ``FLRun.record_arrays`` of a run that kept them. A checkpoint keeps :meth:`RecordSpool.state`
(rows per record) and :meth:`RecordSpool.restore` cuts the files back to it, so a restored or
retried trial logs each round's record once.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

#: rounds of records a run holds in memory before they go to the spool
DRAIN_EVERY = 16


class RecordSpool:
    """The records of one run in ``folder`` (created; ``reset`` empties it)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        #: name -> {"dtype": numpy dtype name, "shape": row shape, "rows": rows written}
        self.meta: dict[str, dict] = {}

    # -------------------------------------------------------------------- writing
    def drain(self, run) -> None:
        """Append the records ``run`` holds (``run.records``, ``run.record_rounds``) and take
        them out of it."""
        for name, values in run.records.items():
            if values:
                self._append(name, values, run.record_rounds.get(name, []))
        run.records = {}
        run.record_rounds = {}

    def _append(self, name: str, values: list, rounds: list[int]) -> None:
        rows = [v.detach().cpu().numpy() for v in values]
        info = self.meta.get(name)
        if info is None:
            info = {"dtype": rows[0].dtype.str, "shape": list(rows[0].shape), "rows": 0}
            self.meta[name] = info
        dtype = np.dtype(info["dtype"])
        data = b"".join(np.ascontiguousarray(r, dtype=dtype).tobytes() for r in rows)
        with open(self._data(name), "ab") as handle:
            handle.write(data)
        with open(self._rounds(name), "ab") as handle:
            handle.write(np.asarray(rounds, dtype=np.int64).tobytes())
        info["rows"] += len(rows)

    # -------------------------------------------------------------------- reading
    def arrays(self, total_rounds: int) -> dict[str, np.ndarray]:
        """Every record stacked over rounds (``FLRun.record_arrays``' layout: ``<name>`` of
        shape ``[rows, ...]``, and ``<name>_rounds`` when its rows are not rounds 1..T)."""
        out = {}
        for name, info in self.meta.items():
            dtype, shape, rows = np.dtype(info["dtype"]), info["shape"], info["rows"]
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            with open(self._data(name), "rb") as handle:
                data = handle.read(rows * size)
            out[name] = np.frombuffer(data, dtype=dtype).reshape(rows, *shape).copy()
            with open(self._rounds(name), "rb") as handle:
                rounds = np.frombuffer(handle.read(rows * 8), dtype=np.int64).copy()
            if not np.array_equal(rounds, np.arange(1, rows + 1)) or rows != total_rounds:
                out[f"{name}_rounds"] = rounds
        return out

    # ---------------------------------------------------------------- checkpoints
    def state(self) -> dict:
        """What a checkpoint keeps: every record's dtype, row shape and rows written."""
        return {name: dict(info, shape=list(info["shape"])) for name, info in self.meta.items()}

    def restore(self, state: dict | None) -> None:
        """Cut the files back to a checkpoint's :meth:`state` (``None``: empty): rows written
        after it (by the attempt that crashed or was killed) go."""
        state = state or {}
        known = {self._data(n).name for n in state} | {self._rounds(n).name for n in state}
        for path in self.folder.iterdir():
            if path.name not in known:
                path.unlink(missing_ok=True)
        self.meta = {}
        for name, info in state.items():
            dtype = np.dtype(info["dtype"])
            size = int(np.prod(info["shape"], dtype=np.int64)) * dtype.itemsize
            rows = int(info["rows"])
            for path, length in ((self._data(name), rows * size), (self._rounds(name), rows * 8)):
                if not path.is_file() or path.stat().st_size < length:
                    raise ValueError(f"record file {path} is shorter than its checkpoint says")
                os.truncate(path, length)
            self.meta[name] = {"dtype": dtype.str, "shape": list(info["shape"]), "rows": rows}

    def fits(self, state: dict | None) -> bool:
        """Whether the files hold at least the rows of a checkpoint's :meth:`state`."""
        for name, info in (state or {}).items():
            size = int(np.prod(info["shape"], dtype=np.int64)) * np.dtype(info["dtype"]).itemsize
            rows = int(info["rows"])
            for path, length in ((self._data(name), rows * size), (self._rounds(name), rows * 8)):
                if not path.is_file() or path.stat().st_size < length:
                    return False
        return True

    def reset(self) -> None:
        self.restore(None)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    # ------------------------------------------------------------------- files
    def _data(self, name: str) -> Path:
        return self.folder / f"{_safe(name)}.bin"

    def _rounds(self, name: str) -> Path:
        return self.folder / f"{_safe(name)}.rounds.bin"


def _safe(name: str) -> str:
    """A record name as a file name (they are ``selected_client12``, ``cohort``...)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "_"
