"""Observers act: an observer may add metrics to the round (the observers after it see them)
and stop the run; the divergence watch is one of them (docs/concepts/architecture.md)."""

from __future__ import annotations

import math

import torch

from fedsweep.engine.observers import Action, DivergenceWatch, Observer
from fedsweep.experiment import FLRun
from tests.helpers import tiny_config, tiny_dataset


class StopAt(Observer):
    def __init__(self, t: int) -> None:
        self.t = t

    def on_round(self, t, metrics, result):
        return Action(stop=t == self.t, metrics={"gap": metrics["test_loss"] - 1.0})


class Seen(Observer):
    def __init__(self) -> None:
        self.rounds, self.ended = [], None

    def on_round(self, t, metrics, result):
        self.rounds.append((t, metrics["gap"]))

    def on_end(self, result):
        self.ended = (result.status, result.rounds)


def test_an_observer_adds_metrics_and_stops_the_run_early():
    run = FLRun(tiny_config(train__rounds=5), dataset=tiny_dataset())
    seen = Seen()
    result = run.run(observers=[StopAt(2), seen])
    assert (result.status, result.rounds, run.round) == ("finished", 2, 2)
    assert [t for t, _ in seen.rounds] == [1, 2] and seen.ended == ("finished", 2)
    assert result.final["gap"] == seen.rounds[-1][1]  # added metrics reach the result
    assert math.isclose(result.final["gap"], result.final["test_loss"] - 1.0)


def test_the_divergence_watch_stops_a_non_finite_model_but_not_a_diagnostic():
    w = torch.ones(3)
    watch = DivergenceWatch(lambda: w, {"beta"})
    assert watch.on_round(1, {"test_loss": 1.0, "client/0/beta": math.nan}, None) is None
    action = watch.on_round(1, {"test_loss": math.inf}, None)
    assert (action.stop, action.status) == (True, "diverged")
    w[1] = math.nan
    assert watch.on_round(2, {"test_loss": 1.0}, None).status == "diverged"


def test_a_diverged_run_ends_before_the_later_observers_ask_to_stop():
    run = FLRun(tiny_config(train__rounds=4, train__lr=1e30), dataset=tiny_dataset())
    result = run.run(observers=[StopAt(3)])
    assert result.status == "diverged" and result.rounds < 3
