"""Ray Tune's trial events, forwarded from the driver's tuning loop to the sweep console.

:class:`TrialEvents` is a ``ray.tune.Callback`` without state that forwards to whatever listener
is active (:func:`listening`). (Tune pickles its run config, callbacks included, into its
experiment folder; fedsweep never reads that back: ``--resume`` starts a new experiment.)

A listener has the method ``trial_event(event, trials, trial)``: ``event`` is ``start``,
``complete``, ``error`` (failed for good), ``recover`` (failed, retried) or ``step`` (one turn
of Tune's loop, ``trial`` is ``None``); ``trials`` is Tune's list of every trial of the sweep.
It may also have ``trial_note(trial, text)``: a warning a trial reported (its result's
``fedsweep_note``, e.g. a checkpoint that did not load and was set aside).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from ray.tune import Callback

_log = logging.getLogger(__name__)
_listener = None


@contextmanager
def listening(listener) -> Iterator[None]:
    """Forward the events of every :class:`TrialEvents` to ``listener`` (``None``: to nobody)."""
    global _listener
    previous, _listener = _listener, listener
    try:
        yield
    finally:
        _listener = previous


#: the result key of a trial's warning (``fedsweep.sweep.trial.NOTE_KEY``)
NOTE_KEY = "fedsweep_note"


def _emit(event: str, trials, trial) -> None:
    if _listener is None:
        return
    try:
        _listener.trial_event(event, trials, trial)
    except Exception:  # a display must never stop a sweep; the traceback goes to the log
        _log.exception("sweep console failed on a %s event", event)


class TrialEvents(Callback):
    """Forwards Tune's trial events to the active listener (see the module docstring)."""

    def on_trial_start(self, iteration, trials, trial, **info):
        _emit("start", trials, trial)

    def on_trial_complete(self, iteration, trials, trial, **info):
        _emit("complete", trials, trial)

    def on_trial_error(self, iteration, trials, trial, **info):
        _emit("error", trials, trial)

    def on_trial_recover(self, iteration, trials, trial, **info):
        _emit("recover", trials, trial)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        text = result.get(NOTE_KEY) if isinstance(result, dict) else None
        note = getattr(_listener, "trial_note", None)
        if text and note is not None:
            try:
                note(trial, str(text))
            except Exception:  # a display must never stop a sweep
                _log.exception("sweep console failed on a trial's note")

    def on_step_end(self, iteration, trials, **info):
        _emit("step", trials, None)
