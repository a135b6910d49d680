"""What ``fedsweep run`` shows while it works: a status line during start-up, then a bar.

Start-up (reading the config, which imports torch; loading the data; partitioning and building
the model; opening the MLflow run) takes seconds, so a spinner names the current stage
(:meth:`RunProgress.stage`, fed by the ``on_stage`` callback of ``run_tracked``). The first
round replaces it by the round bar: round t/T, the training loss and the test accuracy (each
labelled), elapsed time and ETA. Inside a round the bar moves with the local steps done (every
client's, told by the engine's ``LocalTrainer.on_steps``), and a round that takes more than
:data:`LONG_ROUND_S` shows them (``steps 51,200/400,000``): a FedVeca round at a large τ_max is
not mistaken for a hang. :attr:`RunProgress.wall` is the wall time since the command started,
:attr:`RunProgress.training` the part spent in the round loop.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column


def round_stats(metrics: dict[str, float], short: bool = False) -> str:
    """``"train loss 0.2377 · test acc 0.8520"`` (test loss when there is no train loss);
    ``short``: ``"loss 0.2377 · acc 0.8520"``."""
    parts = []
    if "train_loss" in metrics:
        parts.append(f"{'' if short else 'train '}loss {metrics['train_loss']:.4f}")
    elif "test_loss" in metrics:
        parts.append(f"{'' if short else 'test '}loss {metrics['test_loss']:.4f}")
    if "test_acc" in metrics:
        parts.append(f"{'' if short else 'test '}acc {metrics['test_acc']:.4f}")
    return " · ".join(parts)


def fit_stats(metrics: dict[str, float], steps: str, room: int) -> str:
    """The bar's text in at most ``room`` cells: the local steps of a long round (``steps``,
    "" when not shown) and the round's metrics, in full words, then short ones, then the test
    accuracy alone, then the steps alone; "" when nothing fits."""
    full, short = round_stats(metrics), round_stats(metrics, short=True)
    acc = f"acc {metrics['test_acc']:.4f}" if "test_acc" in metrics else ""
    stats = [s for s in (full, short, acc) if s] or [""]
    candidates = [f"{steps} · {s}" if steps and s else steps or s for s in stats]
    if steps:
        candidates.append(steps)
    return next((c for c in candidates if len(c) <= room), "")


#: a round running longer than this shows its local steps on the bar
LONG_ROUND_S = 2.0
#: at most one step update of the bar per this many seconds
STEP_UPDATE_S = 0.25


class RunProgress:
    def __init__(
        self,
        rounds: int | None = None,
        enabled: bool = True,
        start: float | None = None,
        console: Console | None = None,
    ):
        self.rounds = rounds
        self.enabled = enabled
        self.start = time.perf_counter() if start is None else start
        self.train_start: float | None = None
        self.wall = 0.0
        self.training = 0.0
        self.console = console or Console()
        self._status = None
        width = self.console.width
        # the bar gives way first on a narrow terminal, then the text (fit_stats)
        self._bar_width = 40 if width >= 120 else 20 if width >= 90 else 10
        whole = Column(no_wrap=True)
        self._progress = Progress(
            TextColumn("[bold]round", table_column=whole),
            MofNCompleteColumn(table_column=Column(no_wrap=True)),
            BarColumn(bar_width=self._bar_width),
            TextColumn("{task.fields[stats]}", table_column=Column(no_wrap=True)),
            TimeElapsedColumn(table_column=Column(no_wrap=True)),
            TextColumn("ETA", table_column=Column(no_wrap=True)),
            TimeRemainingColumn(table_column=Column(no_wrap=True)),
            console=self.console,
            disable=not enabled,
        )
        self._metrics: dict[str, float] = {}
        self._diverged = False
        self._total = rounds or 0
        self._task = None
        self._bar_started = False
        self._done_rounds = 0
        self._stats = ""
        self._round_start = self._last_steps = 0.0

    def __enter__(self):
        if self.enabled:
            self._status = self.console.status("starting", spinner="dots")
            self._status.start()
        return self

    def stage(self, text: str) -> None:
        """Name what start-up is doing now (a transient spinner line)."""
        if self._status is not None:
            self._status.update(f"{text} …")

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __exit__(self, *exc):
        now = time.perf_counter()
        self.wall = now - self.start
        if self.train_start is not None:
            self.training = now - self.train_start
        self._stop_status()
        if self._bar_started:
            return self._progress.__exit__(*exc)
        return False

    def on_start(self, run, run_id):
        self._stop_status()
        self.train_start = time.perf_counter()
        if run_id and self.enabled:
            self.console.print(f"MLflow run {run_id}")
        self._progress.__enter__()
        self._bar_started = True
        total = self.rounds or run.config.train.rounds
        self._total = total
        self._task = self._progress.add_task("run", total=total, stats="")
        self._progress.update(self._task, completed=run.round)
        self._done_rounds = run.round
        self._round_start = self._last_steps = time.perf_counter()
        trainer = getattr(run, "trainer", None)
        if trainer is not None and self.enabled:
            trainer.on_steps = self.on_steps

    def on_steps(self, done: int, total: int) -> None:
        """Inside a round: ``done`` of its ``total`` local steps (every client's) are done."""
        now = time.perf_counter()
        if self._task is None or total <= 0 or now - self._last_steps < STEP_UPDATE_S:
            return
        self._last_steps = now
        steps = f"steps {done:,}/{total:,}" if now - self._round_start > LONG_ROUND_S else ""
        self._progress.update(
            self._task,
            completed=self._done_rounds + min(done / total, 1.0),
            stats=self._text(steps),
        )

    def on_round(self, t, metrics, result):
        self._metrics, self._done_rounds = dict(metrics), t
        self._diverged = result.status == "diverged"
        self._stats = self._text("")
        self._round_start = time.perf_counter()
        self._progress.update(self._task, completed=t, stats=self._stats)

    def _text(self, steps: str) -> str:
        """The bar's text (:func:`fit_stats`) in the room the console's width leaves it."""
        # "round", "t/T", the bar, the elapsed time, "ETA", the time left and 6 gaps
        fixed = 5 + 2 * len(str(self._total)) + 1 + self._bar_width + 7 + 3 + 7 + 6
        room = self.console.width - fixed - (len(" diverged") if self._diverged else 0)
        text = fit_stats(self._metrics, steps, room)
        return text + (" [red]diverged[/red]" if self._diverged else "")
