"""Crashes on purpose in a sweep's trials (tests of crash handling), injected through a test-only
``--plugin`` module: the trial asks each of its plugin modules for observers
(``fedsweep.sweep.trial.plugin_observers``), so the production payload carries no test field.

:func:`fault_plugins` writes a module of its own for one sweep (a Ray worker keeps the modules
it imported, so a name is never used twice) that names the faults, and returns the sweep's
``plugins``: this module (the observer) and that one (the faults)."""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

from fedsweep.engine.observers import Observer
from fedsweep.sweep.trial import checkpoint_name

ROOT = Path(__file__).resolve().parents[1]


class InjectedFailure(RuntimeError):
    """Raised on purpose by the fault-injection observer (tests of crash handling)."""


class Crash(Observer):
    """Crash at round ``at``: :class:`InjectedFailure`, or with ``kind="enospc"`` the
    ``OSError(ENOSPC)`` of a full file system writing the round's checkpoint."""

    def __init__(self, at: int, kind: str | None, label: str, state_dir: Path | None) -> None:
        self.at, self.kind, self.label, self.state_dir = at, kind, label, state_dir

    def on_round(self, t, metrics, result) -> None:
        if t != self.at:
            return
        if self.kind == "enospc":
            where = self.state_dir / checkpoint_name(t) if self.state_dir else None
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(where))
        raise InjectedFailure(f"injected failure at round {t} ({self.label})")


def observers_for(faults: dict):
    """The ``trial_observers`` of a fault module: ``faults`` is trial_id -> round, or -> (round,
    "enospc") for a full file system. A trial crashes at its round unless this attempt goes on
    from a checkpoint (so a retried or resumed trial gets past it)."""

    def trial_observers(trial_id: str, state_dir: Path | None, resumed: bool) -> list[Observer]:
        fault = faults.get(trial_id)
        if fault is None or resumed:
            return []
        at, kind = fault if isinstance(fault, (tuple, list)) else (fault, None)
        return [Crash(at, kind, trial_id, state_dir)]

    return trial_observers


def fault_plugins(folder: Path, faults: dict[str, int | tuple[int, str]]) -> list:
    """The ``plugins`` of a ``run_sweep`` whose trials crash as ``faults`` says (trial_id ->
    round, or -> (round, "enospc")); the fault module is written into ``folder``."""
    folder = Path(folder) / "faults"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"fedsweep_faults_{uuid.uuid4().hex}"
    (folder / f"{name}.py").write_text(
        "from tests.faults import observers_for\n\n"
        f"trial_observers = observers_for({dict(faults)!r})\n"
    )
    return [("tests.faults", str(ROOT)), (name, str(folder))]
