"""The console of ``fedsweep sweep``: one progress display for all its sweeps, one summary line
per sweep, one table at the end; Ray's own output goes to a log file.

- :func:`ray_output_to` (from :mod:`fedsweep.sweep.ray_output`, re-exported here) sends
  everything the process writes to fd 1/2 (Ray Tune's tables, Ray's warnings, the worker output
  Ray forwards to the driver, MLflow's log lines) to a log file and hands the console a stream
  on the original stdout/stderr.
- :class:`SweepConsole` is the listener of :mod:`fedsweep.sweep.tune_events`: on a terminal it
  draws a live line (sweep i of n, trials done / running / failed / skipped / total, ETA);
  elsewhere (CI, pipes) it prints a plain status line when a quarter of a sweep's trials is
  done, or after a growing interval without one, so a long sweep stays within a few lines.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO

from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Column, Table

from fedsweep.sweep.ray_output import ray_output_to
from fedsweep.sweep.report import duration

__all__ = ["SweepConsole", "ray_output_to"]

#: Tune's trial states (``ray.tune.experiment.trial.Trial``), without importing Ray here
TERMINATED, ERROR, RUNNING = "TERMINATED", "ERROR", "RUNNING"


# ------------------------------------------------------------------------------ the console
@dataclass
class _Row:
    figure: str
    total: int
    run: int
    skipped: int
    shared: int
    failed: int
    unavailable: int
    wall: float
    no_source: int = 0


class SweepConsole:
    """Progress, per-sweep summaries and the final table of one ``fedsweep sweep`` command.

    ``live``: draw a live line (default: when ``out`` is a terminal); otherwise plain lines:
    one per quarter of a sweep's trials, and when no quarter came for ``interval`` seconds,
    then 2, 4, ... times that (at most 32 times), so a sweep of hours prints a few lines.
    """

    def __init__(
        self,
        n_sweeps: int,
        profile: str,
        out: TextIO | None = None,
        err: TextIO | None = None,
        *,
        live: bool | None = None,
        interval: float = 60.0,
        tee: TextIO | None = None,
        clock=time.monotonic,
    ):
        self.n_sweeps = n_sweeps
        self.profile = profile
        out = out or sys.stdout
        if live is None:
            live = bool(getattr(out, "isatty", lambda: False)())
        self.live = live
        self.interval = interval
        self.tee = tee  # also gets every console line (the log file, to read them in context)
        self.clock = clock
        self.console = Console(file=out, highlight=False, soft_wrap=True)
        self.err = Console(file=err or sys.stderr, highlight=False, soft_wrap=True)
        self.rows: list[_Row] = []
        self.start = self.clock()
        self._notes: set[str] = set()
        self._progress: Progress | None = None
        self._task = None
        self._reset(0, "")

    def _reset(self, index: int, figure: str) -> None:
        self.index, self.figure = index, figure
        self.total = self.not_run = self.scheduled = 0
        self.counts = {"done": 0, "running": 0, "failed": 0}
        self._ended_before: set[str] = set()  # trials already over when the fit began (resume)
        self._first_event = True
        # a sweep with derived curves runs two fits (stages): what the earlier ones ended with
        self._fits = 0
        self._earlier = {"done": 0, "failed": 0, "resumed": 0}
        self._fit_start = self.clock()
        self._first_start: float | None = None  # the rate (ETA) leaves out Ray's start-up
        self._last_line = 0.0
        self._gap = self.interval
        self._quarter = 0
        self._seen_failed: set[str] = set()

    # ----------------------------------------------------------------- lines
    def print(self, text: str = "", *, style: str | None = None) -> None:
        target = self._progress.console if self._progress is not None else self.console
        target.print(text, style=style, markup=False)
        if self.tee is not None:
            self.tee.write(text + "\n")

    def echo(self, text: str) -> None:
        """A line from the driver (``run_sweep(echo=...)``), after the sweep's ``[i/n]``; a
        repeated ``note:`` is shown once."""
        if text.startswith("note: "):
            if text in self._notes:
                return
            self._notes.add(text)
            self.print(text)
        else:
            self.print(f"{self._head(figure=False)} {text}")

    def error(self, text: str) -> None:
        self.stop_live()
        self.err.print(text, style="red", markup=False)
        if self.tee is not None:
            self.tee.write(text + "\n")

    # ----------------------------------------------------------------- one sweep
    def begin_sweep(self, index: int, figure: str) -> None:
        """Sweep ``index`` (from 1) of ``n_sweeps`` starts; its counts come with :meth:`begin`."""
        self._reset(index, figure)

    def begin(self, report) -> None:
        """The trials are known (a :class:`~fedsweep.sweep.report.SweepReport` before the fit).

        Called once per fit: a sweep with derived curves calls it again before its second
        stage, with the report so far; the first stage's trials stay counted (and its time in
        the elapsed time and the ETA's rate), the new fit's trial list adds to them."""
        if self._fits:
            self._earlier = {
                "done": self.counts["done"],
                "failed": self.counts["failed"],
                "resumed": self._earlier["resumed"] + len(self._ended_before),
            }
            self._ended_before, self._first_event = set(), True
        else:
            self._fit_start = self.clock()
        self._fits += 1
        self.total = report.total
        self.not_run = report.skipped + report.shared + report.unavailable + report.no_source
        self.scheduled = report.scheduled
        self._last_line = self.clock()
        self._gap = self.interval
        if self.live and self._progress is None:
            head = self._head()
            self._progress = Progress(
                TextColumn("{task.description}", table_column=Column(min_width=len(head))),
                BarColumn(bar_width=12),
                TextColumn(
                    "{task.fields[status]}",
                    table_column=Column(no_wrap=True, overflow="ellipsis"),
                ),
                console=self.console,
                transient=True,
                redirect_stdout=False,  # Ray writes there: it goes to the log, not the screen
                redirect_stderr=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(head, total=max(1, self.total), status="")
        self._show(force=False)

    def trial_event(self, event: str, trials, trial) -> None:
        """Listener of :mod:`fedsweep.sweep.tune_events` (Tune's driver loop)."""
        states = {t.trial_id: t.status for t in trials}
        if self._first_event:
            self._first_event = False
            self._ended_before = {i for i, s in states.items() if s in (TERMINATED, ERROR)}
        if event == "start" and self._first_start is None:
            self._first_start = self.clock()
        if trial is not None:  # Tune calls back before it sets the new state
            new = {"start": RUNNING, "complete": TERMINATED, "error": ERROR}.get(event)
            if new is not None:
                states[trial.trial_id] = new
        values = list(states.values())
        self.counts = {
            "done": self._earlier["done"] + values.count(TERMINATED),
            "running": values.count(RUNNING),
            "failed": self._earlier["failed"] + values.count(ERROR),
        }
        if event == "error" and trial is not None and trial.trial_id not in self._seen_failed:
            self._seen_failed.add(trial.trial_id)
            self.print(f"  trial failed: {trial}", style="red")
        self._show(force=event in ("complete", "error"))

    def _head(self, figure: bool = True) -> str:
        head = f"[{self.index}/{self.n_sweeps}]"
        return f"{head} {self.figure}" if figure else head

    def _eta(self) -> str:
        over = self.counts["done"] + self.counts["failed"]
        now_over = over - len(self._ended_before) - self._earlier["resumed"]
        left = self.scheduled - over
        if left <= 0:
            return "ETA 0 s"
        if now_over <= 0:
            return "ETA ?"
        since = self._first_start if self._first_start is not None else self._fit_start
        return f"ETA {duration((self.clock() - since) / now_over * left)}"

    def status(self, live: bool = False) -> str:
        """``2 done · 1 running · 0 failed · 3 skipped / 6 trials · 18 s · ETA 37 s``; the live
        line puts the ETA first (a narrow terminal cuts the end) and leaves the time to rich."""
        c = self.counts
        counts = (
            f"{c['done']} done · {c['running']} running · {c['failed']} failed · "
            f"{self.not_run} skipped / {self.total} trials"
        )
        if live:
            return f"{self._eta()} · {counts}"
        return f"{counts} · {duration(self.clock() - self._fit_start)} · {self._eta()}"

    def _show(self, force: bool) -> None:
        if self._progress is not None:
            over = self.counts["done"] + self.counts["failed"] + self.not_run
            self._progress.update(self._task, completed=over, status=self.status(live=True))
            return
        if not self.scheduled:
            return
        now = self.clock()
        over = self.counts["done"] + self.counts["failed"]
        quarter = 4 * over // self.scheduled
        if force and 0 < quarter < 4 and quarter > self._quarter:
            self._quarter = quarter
        elif now - self._last_line < self._gap or over >= self.scheduled:
            return
        else:  # no quarter for a while: a status line, then wait twice as long for the next
            self._gap = min(2 * self._gap, 32 * self.interval)
        self._last_line = now
        self.print(f"  {self._head()}: {self.status()}")

    def stop_live(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def end_sweep(self, report, wall: float) -> None:
        """The sweep's summary line and its row of the final table."""
        self.stop_live()
        row = _Row(
            report.figure,
            report.total,
            report.finished,
            report.skipped,
            report.shared,
            report.errored,
            report.unavailable,
            wall,
            report.no_source,
        )
        self.rows.append(row)
        self.print(
            f"{self._head(figure=False)} {report.line(wall)}", style="red" if row.failed else None
        )

    # ----------------------------------------------------------------- the end
    def table(self) -> Table:
        no_data = any(r.unavailable for r in self.rows)
        no_source = any(r.no_source for r in self.rows)
        wall = self.clock() - self.start
        table = Table(
            title=f"fedsweep sweep --profile {self.profile}: {len(self.rows)} of "
            f"{self.n_sweeps} sweeps in {duration(wall)}",
            box=box.SIMPLE,
            show_edge=False,
            show_footer=True,
            title_justify="left",
            pad_edge=False,
        )
        sums = [sum(getattr(r, k) for r in self.rows) for k in ("total", "run", "skipped")]
        more = [sum(getattr(r, k) for r in self.rows) for k in ("shared", "failed", "unavailable")]
        columns = [
            ("figure", "total", "left"),
            ("trials", str(sums[0]), "right"),
            ("run", str(sums[1]), "right"),
            ("skipped", str(sums[2]), "right"),
            ("shared", str(more[0]), "right"),
            ("failed", str(more[1]), "right"),
        ]
        if no_data:
            columns.append(("no data", str(more[2]), "right"))
        if no_source:
            columns.append(("no source", str(sum(r.no_source for r in self.rows)), "right"))
        columns.append(("wall time", duration(sum(r.wall for r in self.rows)), "right"))
        for name, footer, justify in columns:
            table.add_column(name, footer=footer, justify=justify)
        for r in self.rows:
            cells = [r.figure, r.total, r.run, r.skipped, r.shared, r.failed]
            if no_data:
                cells.append(r.unavailable)
            if no_source:
                cells.append(r.no_source)
            table.add_row(*map(str, cells), duration(r.wall), style="red" if r.failed else None)
        return table

    def print_table(self) -> None:
        self.stop_live()
        if self.rows:
            table = self.table()
            self.console.print()
            self.console.print(table)
            if self.tee is not None:
                Console(file=self.tee, width=100, highlight=False).print(table)
