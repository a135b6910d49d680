"""What one sweep did (:class:`SweepReport`, the driver's summary line) and how long it took
(:func:`duration`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SweepReport:
    figure: str
    profile: str
    total: int
    skipped: int = 0
    scheduled: int = 0
    finished: int = 0
    errored: int = 0
    parent_run_id: str | None = None
    data_note: str = ""
    data_fallback: str | None = None
    #: trials left out because their data set is missing (``skip_missing_data``)
    unavailable: int = 0
    #: trials not scheduled because another trial of the sweep has the same config
    shared: int = 0
    #: trials stopped unfinished (Ctrl-C / SIGTERM during the sweep; ``--resume`` continues)
    interrupted: int = 0
    #: derived trials not run because their source trial has no finished run (it failed)
    no_source: int = 0
    #: trial attempts Ray restarted (a crash, a lost node): each went on from its checkpoint
    restarts: int = 0
    #: search trials an early-stopping scheduler stopped (counted as run: their runs ended)
    stopped: int = 0
    errors: list[str] = field(default_factory=list)

    def line(self, wall: float | None = None) -> str:
        """One summary line: ``fig [profile]: 16 run, 2 skipped, 0 shared, 0 failed of 18
        trials in 1 min 05 s`` (skipped: a finished run exists; shared: an equal trial's run)."""
        text = (
            f"{self.figure} [{self.profile}]: {self.finished} run, {self.skipped} skipped, "
            f"{self.shared} shared, {self.errored} failed"
        )
        if self.unavailable:
            text += f", {self.unavailable} not run (data missing)"
        if self.no_source:
            text += f", {self.no_source} not run (source run missing)"
        text += f" of {self.total} trials"
        if self.stopped:
            text += f" ({self.stopped} stopped early by ASHA)"
        if self.restarts:
            text += f" ({self.restarts} restart{'s' if self.restarts > 1 else ''})"
        if wall is not None:
            text += f" in {duration(wall)}"
        return text + (f" [ran on {self.data_fallback}]" if self.data_fallback else "")


def duration(seconds: float, *, short: bool = False) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``; ``short``: ``42s``, ``3m05s``, ``1h02m``."""
    s = round(max(0.0, seconds))
    sep, m = ("", "m") if short else (" ", "min")
    if s < 60:
        return f"{s}{sep}s"
    if s < 3600:
        return f"{s // 60}{sep}{m}{sep}{s % 60:02d}{sep}s"
    return f"{s // 3600}{sep}h{sep}{s % 3600 // 60:02d}{sep}{m}"
