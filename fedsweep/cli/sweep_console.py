"""The console of ``fedsweep sweep``: one progress display for all its sweeps, one summary line
per sweep, one table at the end; Ray's own output goes to a log file.

- :func:`ray_output_to` (from :mod:`fedsweep.sweep.ray_output`, re-exported here) sends
  everything the process writes to fd 1/2 (Ray Tune's tables, Ray's warnings, the worker output
  Ray forwards to the driver, MLflow's log lines) to a log file and hands the console a stream
  on the original stdout/stderr.
- :class:`SweepConsole` is the listener of :mod:`fedsweep.sweep.tune_events`: on a terminal it
  draws a live line, elsewhere (CI, pipes) it prints a plain status line when a quarter of a
  sweep's trials is done, or after a growing interval without one, so a long sweep stays within
  a few lines. Both fit the terminal's width (:meth:`SweepConsole.live_line`)::

    [2/3] bherd-fig3a ━━━━━━━━━━━━ 8/18 trials · 5 done · 1 running · 0 failed · 3 skipped ·
    0 shared · ETA 1 min 20 s · all sweeps 20/54 trials · ETA 6 min 10 s

  (one line on a wide terminal). As the width shrinks it sheds the bar, then the zero counts
  and the long durations (``1m20s``), then the other counts but the failed, then the sweep's
  own ETA; ``done/total`` (the trials over, of all trials) always shows.
- The counts are those of the sweep's summary line (:meth:`SweepReport.line
  <fedsweep.sweep.report.SweepReport.line>`): *done* trials ran to the end in this command,
  *skipped* ones had a finished run already, *shared* ones use an equal trial's run (or one
  another sweep finished meanwhile: the trial reports ``reused_run``), *not run* ones miss their
  data or their derived curve's source run.
- The ETA of a command of several sweeps covers them all: the plan of every spec
  (:mod:`fedsweep.sweep.plan`, made before the first sweep starts, :class:`PlannedSweep`) gives
  the total of trials and an estimate for each sweep from the store's measured runs; the
  current sweep's rest comes from its measured trial rate (before its first trial ends: from
  its plan), each later sweep's from its plan, its trials without an estimate at the seconds
  per trial measured in this command. Where some part is unknown the ETA is a lower bound
  (``ETA ≥ 3 min``).
- At the end: the sweeps' table (:meth:`SweepConsole.table`: it fits the width without
  cutting a figure id), then each figure's metrics table (:func:`summary_table` of a
  :class:`fedsweep.sweep.summary.FigureSummary`). Driver lines wrap at the width (a path or a
  duration is never split); a command to copy is printed whole.
"""

from __future__ import annotations

import re
import sys
import textwrap
import time
from dataclasses import dataclass
from typing import TextIO

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from fedsweep.sweep.ray_output import ray_output_to
from fedsweep.sweep.report import duration

__all__ = ["PlannedSweep", "SweepConsole", "ray_output_to", "short_duration"]

#: Tune's trial states (``ray.tune.experiment.trial.Trial``), without importing Ray here
TERMINATED, ERROR, RUNNING = "TERMINATED", "ERROR", "RUNNING"
#: the result key of a trial whose config another sweep finished meanwhile
#: (= ``fedsweep.sweep.trial.REUSED_KEY``; that module imports torch)
REUSED_KEY = "reused_run"
#: cells of the live line's bar
BAR_WIDTH = 12
SEP = " · "
NBSP = "\u00a0"
#: the spaces inside a duration (``1 h 02 min``, ``3 min 05 s``, ``42 s``)
_DURATION_SPACE = re.compile(r"(?<=\d) (?=(?:h|min|s)\b)|(?<=\bh) (?=\d)|(?<=\bmin) (?=\d)")


def short_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``: :func:`~fedsweep.sweep.report.duration` in fewer cells."""
    return duration(seconds, short=True)


@dataclass(frozen=True)
class PlannedSweep:
    """What the plan says of one sweep of the command (:func:`fedsweep.sweep.plan.plan_sweep`):
    its trials, those it would run, the estimated wall time of those with an estimate, and how
    many have none."""

    total: int
    to_run: int
    wall_s: float
    unestimated: int

    @classmethod
    def of(cls, plan, earlier: set[str] | None = None) -> PlannedSweep:
        """From a :class:`~fedsweep.sweep.plan.SweepPlan`. ``earlier``: the config hashes an
        earlier sweep of the command runs (this one reuses their runs); this plan's are added
        to it."""
        earlier = set() if earlier is None else earlier
        to_run = [t for t in plan.to_run if t.config_hash not in earlier]
        earlier.update(t.config_hash for t in plan.to_run)
        seconds = sum(t.estimate_s or 0.0 for t in to_run)
        longest = max((t.estimate_s or 0.0 for t in to_run), default=0.0)
        wall = max(seconds / max(1, plan.workers), longest)  # as SweepPlan.wall_s
        unestimated = sum(t.estimate_s is None for t in to_run)
        return cls(len(plan.trials), len(to_run), wall, unestimated)


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
    ``plan``: one :class:`PlannedSweep` (or None where the plan failed) per sweep, for the
    command's totals and ETA. ``width``: the console's width (default: the terminal's, else
    ``$COLUMNS``, else 80).
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
        plan: list[PlannedSweep | None] | None = None,
        width: int | None = None,
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
        self.plan = list(plan) if plan is not None else None
        self.console = Console(file=out, highlight=False, soft_wrap=True, width=width)
        self.err = Console(file=err or sys.stderr, highlight=False, soft_wrap=True, width=width)
        self.rows: list[_Row] = []
        self.start = self.clock()
        self._notes: set[str] = set()
        self._live = None
        # what the ended sweeps of the command measured (the command's seconds per trial)
        self._ended_s = 0.0
        self._ended_trials = 0
        self._reset(0, "")

    def _reset(self, index: int, figure: str) -> None:
        self.index, self.figure = index, figure
        self.total = self.scheduled = self.skipped = self.shared = self.not_run = 0
        self.began = False
        self.counts = {"done": 0, "running": 0, "failed": 0}
        self.reused = 0  # trials that found their run finished by another sweep: shared
        self._ended_before: set[str] = set()  # trials already over when the fit began (resume)
        self._first_event = True
        # a sweep with derived curves runs two fits (stages): what the earlier ones ended with
        self._fits = 0
        self._earlier = {"done": 0, "failed": 0, "resumed": 0, "reused": 0}
        self._fit_start = self.clock()
        self._first_start: float | None = None  # the rate (ETA) leaves out Ray's start-up
        self._last_line = 0.0
        self._gap = self.interval
        self._quarter = 0
        self._seen_failed: set[str] = set()

    @property
    def width(self) -> int:
        return self.console.width

    # ----------------------------------------------------------------- lines
    def print(self, text: str = "", *, style: str | None = None, wrap: bool = True) -> None:
        """A line on the console, word-wrapped at its width (continuation lines indented; a
        word longer than the width, e.g. a path, is kept whole); ``wrap=False`` for a command
        to copy. The tee gets it unwrapped."""
        for line in self._wrapped(text) if wrap else [text]:
            self.console.print(line, style=style, markup=False)
        if self.tee is not None:
            self.tee.write(text + "\n")

    def _wrapped(self, text: str) -> list[str]:
        if cell_len(text) <= self.width:
            return [text]
        indent = " " * min(len(text) - len(text.lstrip(" ")) + 2, self.width // 4)
        glued = _DURATION_SPACE.sub(NBSP, text)  # "1 min 05 s" stays on one line
        lines = textwrap.wrap(
            glued,
            self.width,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        return [line.replace(NBSP, " ") for line in lines] or [text]

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
        for line in self._wrapped(text):
            self.err.print(line, style="red", markup=False)
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
        the elapsed time and the ETA's rate), the new fit's trial list adds to them. The
        report's ``shared`` then holds the first stage's reused trials: they are not counted
        twice."""
        if self._fits:
            self._earlier = {
                "done": self.counts["done"],
                "failed": self.counts["failed"],
                "resumed": self._earlier["resumed"] + len(self._ended_before),
                "reused": self.reused,
            }
            self._ended_before, self._first_event = set(), True
        else:
            self._fit_start = self.clock()
        self._fits += 1
        self.began = True
        self.total = report.total
        self.skipped = report.skipped
        self.shared = report.shared - self._earlier["reused"]
        self.not_run = report.unavailable + report.no_source
        self.scheduled = report.scheduled
        self._last_line = self.clock()
        self._gap = self.interval
        if self.live and self._live is None:
            from rich.live import Live

            self._live = Live(
                console=self.console,
                transient=True,
                auto_refresh=True,
                refresh_per_second=4,
                redirect_stdout=False,  # Ray writes there: it goes to the log, not the screen
                redirect_stderr=False,
                get_renderable=lambda: self.live_line(self.width),
            )
            self._live.start()
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
        objects = {t.trial_id: t for t in trials}
        if trial is not None:
            objects[trial.trial_id] = trial
        reused = sum(states[i] == TERMINATED and _reused(t) for i, t in objects.items())
        values = list(states.values())
        self.reused = self._earlier["reused"] + reused
        self.counts = {
            "done": self._earlier["done"] + values.count(TERMINATED) - reused,
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

    # ----------------------------------------------------------------- counts and ETA
    @property
    def over(self) -> int:
        """The sweep's trials that are over: done, failed, skipped, shared or not run."""
        c = self.counts
        return c["done"] + c["failed"] + self.reused + self.skipped + self.shared + self.not_run

    def _fit_over(self) -> int:
        """Trials this command ran to their end in the current sweep (the rate's count)."""
        c = self.counts
        return c["done"] + c["failed"] - len(self._ended_before) - self._earlier["resumed"]

    def _fit_seconds(self) -> float:
        since = self._first_start if self._first_start is not None else self._fit_start
        return self.clock() - since

    def _rate(self) -> float | None:
        """Wall seconds per trial measured in this command (the ended sweeps and this one)."""
        n, seconds = self._ended_trials, self._ended_s
        if self._fit_over() > 0:
            n, seconds = n + self._fit_over(), seconds + self._fit_seconds()
        return seconds / n if n > 0 else None

    def _planned(self, index: int) -> PlannedSweep | None:
        if self.plan is None or not 1 <= index <= len(self.plan):
            return None
        return self.plan[index - 1]

    def eta_s(self) -> float | None:
        """Seconds left in the current sweep; None when there is nothing to tell it from."""
        c = self.counts
        left = self.scheduled - c["done"] - c["failed"] - self.reused
        if left <= 0:
            return 0.0
        now_over = self._fit_over()
        if now_over > 0:
            return self._fit_seconds() / now_over * left
        planned = self._planned(self.index)
        if planned is not None and planned.to_run and not planned.unestimated:
            rest = planned.wall_s * left / planned.to_run - self._fit_seconds()
            return rest if rest > 0 else None
        rate = self._rate()
        return rate * left if rate is not None else None

    def command_eta_s(self) -> tuple[float | None, bool]:
        """``(seconds, exact)`` left in the whole command: the current sweep's rest and every
        later sweep's estimate; ``exact`` is False when a part is unknown (the seconds are then
        a lower bound, None when nothing is known)."""
        seconds, exact, first = 0.0, True, len(self.rows) + 1
        if self.began:
            now = self.eta_s()
            exact, seconds, first = now is not None, now or 0.0, self.index + 1
        rate = self._rate()
        for index in range(first, self.n_sweeps + 1):
            planned = self._planned(index)
            if planned is None:
                exact = False
                continue
            if planned.to_run > planned.unestimated:
                seconds += planned.wall_s
            if planned.unestimated:
                if rate is None:
                    exact = False
                else:
                    seconds += planned.unestimated * rate
        if not exact and seconds <= 0:
            return None, False
        return seconds, exact

    def command_counts(self) -> tuple[int, int | None]:
        """``(over, total)`` trials of the whole command (total None when a plan is missing)."""
        over = sum(r.total for r in self.rows)
        total: int | None = over
        for index in range(len(self.rows) + 1, self.n_sweeps + 1):
            if index == self.index and self.began:
                over += self.over
                total += self.total
                continue
            planned = self._planned(index)
            if planned is None:
                total = None
                break
            total += planned.total
        return over, total

    # ----------------------------------------------------------------- the line
    def _variants(self, elapsed: bool = False) -> list[str]:
        """The status, from the fullest to the shortest: full words, then without zero counts
        and with short durations, then without the counts but failed, then without the sweep's
        own ETA (several sweeps), then ``done/total`` alone."""
        c = self.counts
        shared = self.shared + self.reused
        eta = self.eta_s()
        full_eta = f"ETA {duration(eta)}" if eta is not None else "ETA ?"
        short_eta = f"ETA {short_duration(eta)}" if eta is not None else "ETA ?"
        count = f"{self.over}/{self.total}"
        failed = [f"{c['failed']} failed"] if c["failed"] else []
        all_full = all_short = ""
        if self.n_sweeps > 1:
            over, total = self.command_counts()
            seconds, exact = self.command_eta_s()
            mark = "" if exact else "≥ "
            cmd_total = "?" if total is None else str(total)
            long_eta = f"{mark}{duration(seconds)}" if seconds is not None else "?"
            brief_eta = f"{mark}{short_duration(seconds)}" if seconds is not None else "?"
            all_full = f"{SEP}all sweeps {over}/{cmd_total} trials{SEP}ETA {long_eta}"
            all_short = f"{SEP}all {over}/{cmd_total} ETA {brief_eta}"
        full = [
            f"{count} trials",
            f"{c['done']} done",
            f"{c['running']} running",
            f"{c['failed']} failed",
            f"{self.skipped} skipped",
            f"{shared} shared",
        ]
        if self.not_run:
            full.append(f"{self.not_run} not run")
        if elapsed:
            full.append(duration(self.clock() - self._fit_start))
        compact = [count, f"{c['done']} done"]
        if c["running"]:
            compact.append(f"{c['running']} running")
        compact.append(f"{c['failed']} failed")
        compact += [f"{n} {w}" for n, w in ((self.skipped, "skipped"), (shared, "shared")) if n]
        if self.not_run:
            compact.append(f"{self.not_run} not run")
        few = [count] + ([f"{c['running']} running"] if c["running"] else []) + failed
        return [
            SEP.join([*full, full_eta]) + all_full,
            SEP.join([*compact, short_eta]) + all_short,
            SEP.join([*few, short_eta]) + all_short,
            SEP.join([count, *failed, short_eta]) + all_short,
            SEP.join([count, *failed]) + all_short if self.n_sweeps > 1 else count,
            count,
        ]

    def status(self, width: int | None = None) -> str:
        """The plain status: ``8/18 trials · 5 done · 1 running · 0 failed · 3 skipped ·
        0 shared · 1 min 05 s · ETA 37 s`` (and the command's part with several sweeps); with
        ``width``, the fullest form that fits it."""
        variants = self._variants(elapsed=True)
        if width is None:
            return variants[0]
        return next((v for v in variants if cell_len(v) <= width), variants[-1])

    def live_line(self, width: int) -> Text:
        """The live line, at most ``width`` cells: the sweep's ``[i/n] figure``, a bar and the
        fullest status that fits (see :meth:`_variants`); a figure id too long for the width is
        cut with ``…``, and the line cropped as the very last resort."""
        head = self._head()
        variants = self._variants()
        bar = self._bar()
        if cell_len(head) + 1 + BAR_WIDTH + 1 + cell_len(variants[0]) <= width:
            return Text.assemble(head, " ", bar, " ", variants[0], no_wrap=True)
        for status in variants:
            if cell_len(head) + 1 + cell_len(status) <= width:
                return Text.assemble(head, " ", status, no_wrap=True)
        status = variants[-1]
        short = self._head(figure=False)
        room = width - cell_len(short) - 2 - cell_len(status)
        if room >= 2:
            short = f"{short} {_cut(self.figure, room)}"
        line = Text(f"{short} {status}", no_wrap=True, overflow="crop")
        line.truncate(width)
        return line

    def _bar(self) -> Text:
        total = max(1, self.total)
        filled = min(BAR_WIDTH, round(BAR_WIDTH * self.over / total))
        style = "bar.finished" if filled == BAR_WIDTH else "bar.complete"
        return Text.assemble(("━" * filled, style), ("━" * (BAR_WIDTH - filled), "bar.back"))

    def _show(self, force: bool) -> None:
        if self._live is not None:
            self._live.refresh()
            return
        if not self.scheduled:
            return
        now = self.clock()
        over = self.counts["done"] + self.counts["failed"] + self.reused
        quarter = 4 * over // self.scheduled
        if force and 0 < quarter < 4 and quarter > self._quarter:
            self._quarter = quarter
        elif now - self._last_line < self._gap or over >= self.scheduled:
            return
        else:  # no quarter for a while: a status line, then wait twice as long for the next
            self._gap = min(2 * self._gap, 32 * self.interval)
        self._last_line = now
        head = f"  {self._head()}: "
        self.print(head + self.status(self.width - cell_len(head)), wrap=False)

    def stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def end_sweep(self, report, wall: float) -> None:
        """The sweep's summary line and its row of the final table."""
        self.stop_live()
        if self._fit_over() > 0:  # the command's seconds per trial, for the later sweeps' ETA
            self._ended_trials += self._fit_over()
            self._ended_s += self._fit_seconds()
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
        self.began = False
        self.print(
            f"{self._head(figure=False)} {report.line(wall)}", style="red" if row.failed else None
        )

    # ----------------------------------------------------------------- the end
    def table(self, width: int | None = None) -> Table:
        """The sweeps' table: figure, trials, run, skipped, shared, failed (no data, no source
        where any), wall time, and a total row. It fits ``width`` (default: the console's)
        without cutting a figure id: the headers of two words go on two lines and the times
        are written short (``1h02m``) where the full table does not fit."""
        width = width or self.width
        table = self._table(compact=False)
        wide = self.console.options.update(width=10_000, max_width=10_000)
        if Measurement.get(self.console, wide, table).maximum > width:
            table = self._table(compact=True)
        return table

    def _table(self, compact: bool) -> Table:
        no_data = any(r.unavailable for r in self.rows)
        no_source = any(r.no_source for r in self.rows)
        wall = self.clock() - self.start
        when = short_duration if compact else duration
        table = Table(
            title=Text(
                f"fedsweep sweep --profile {self.profile}: {len(self.rows)} of "
                f"{self.n_sweeps} sweeps in {duration(wall)}"
            ),
            box=box.SIMPLE,
            show_edge=False,
            show_footer=True,
            title_justify="left",
            pad_edge=False,
            collapse_padding=compact,
        )
        sums = {
            k: sum(getattr(r, k) for r in self.rows)
            for k in ("total", "run", "skipped", "shared", "failed", "unavailable", "no_source")
        }
        columns = [
            ("trials", "total"),
            ("run", "run"),
            ("skipped", "skipped"),
            ("shared", "shared"),
            ("failed", "failed"),
        ]
        if no_data:
            columns.append(("no data", "unavailable"))
        if no_source:
            columns.append(("no source", "no_source"))
        longest = max((cell_len(r.figure) for r in self.rows), default=6)
        table.add_column("figure", footer="total", no_wrap=True, min_width=min(longest, 40))
        for name, key in columns:
            cells = [str(getattr(r, key)) for r in self.rows] + [str(sums[key])]
            table.add_column(
                name.replace(" ", "\n") if compact else name,
                footer=str(sums[key]),
                justify="right",
                no_wrap=True,
                min_width=max(map(len, cells)),
            )
        total_wall = when(sum(r.wall for r in self.rows))
        table.add_column(
            "wall\ntime" if compact else "wall time",
            footer=total_wall,
            justify="right",
            no_wrap=True,
        )
        for r in self.rows:
            cells = [str(getattr(r, key)) for _, key in columns]
            table.add_row(r.figure, *cells, when(r.wall), style="red" if r.failed else None)
        return table

    def print_table(self) -> None:
        self.stop_live()
        if self.rows:
            self.print_renderable(self.table())

    def print_summary(self, summary) -> None:
        """The metrics table of one figure (a :class:`~fedsweep.sweep.summary.FigureSummary`),
        or one line saying it has no run yet."""
        self.stop_live()
        head = f"{summary.figure} [{summary.profile}]"
        if not summary.rows:
            self.print(f"{head}: no finished run in the store yet")
            return
        self.print_renderable(summary_table(summary))
        diverged = sum(r.diverged for r in summary.rows)
        if diverged:
            self.print(f"  {diverged} diverged run(s): their NaN values are left out of the means")

    def print_renderable(self, renderable, *, blank: bool = True) -> None:
        """A rich renderable (a table) on the console at its width, in the tee at 100
        columns."""
        if blank:
            self.console.print()
        self.console.print(renderable, soft_wrap=False)
        if self.tee is not None:
            Console(file=self.tee, width=100, highlight=False).print(renderable)


def _reused(trial) -> bool:
    """Whether a Tune trial ended by reusing a run another sweep finished meanwhile."""
    result = getattr(trial, "last_result", None)
    return bool(isinstance(result, dict) and result.get(REUSED_KEY))


def _cut(text: str, cells: int) -> str:
    """``text`` in at most ``cells`` cells, cut with ``…``."""
    if cell_len(text) <= cells:
        return text
    out = Text(text)
    out.truncate(cells, overflow="ellipsis")
    return out.plain


def summary_table(summary) -> Table:
    """The metrics table of a :class:`~fedsweep.sweep.summary.FigureSummary`: one row per
    curve (under a row naming its panel where the figure has several), the number of seeds,
    then each metric's mean ± std over seeds. Curve names wrap rather than being cut."""
    from fedsweep.sweep.summary import value_text

    title = (
        f"{summary.figure} [{summary.profile}]: {summary.found} of {summary.trials} trials "
        "have a run; mean ± std over seeds"
    )
    table = Table(
        title=Text(title),
        min_width=cell_len(title),  # at most the console's width: the title wraps no sooner
        title_justify="left",
        box=box.SIMPLE,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    panels = list(dict.fromkeys(r.panel for r in summary.rows))
    several = len(panels) > 1 or panels != [""]
    table.add_column("panel / curve" if several else "curve", overflow="fold")
    table.add_column("seeds", justify="right", no_wrap=True)
    for title_, _, _ in summary.columns:
        table.add_column(title_, justify="right", no_wrap=False, min_width=6)
    for panel in panels:
        rows = [r for r in summary.rows if r.panel == panel]
        if several:
            label = Text(panel or "(no panel)", style="bold")
            table.add_row(label, *[""] * (1 + len(summary.columns)))
        for row in rows:
            cells = [value_text(row.stats.get(f"{how}_{key}")) for _, key, how in summary.columns]
            name = Padding(row.curve, (0, 0, 0, 2)) if several else row.curve
            table.add_row(name, str(row.seeds), *cells)
    return table
