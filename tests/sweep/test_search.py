"""Hyperparameter search (``search:`` on a curve, :mod:`fedsweep.specs.search`): the spec's
checks, the search trials' expansion, and a real Ray Tune sweep on the embedded mnist-5k (2
rounds, 300 images) whose search trials are MLflow runs reused by config hash and whose best
configuration is rerun over the figure's seeds as the tuned curve."""

from __future__ import annotations

import json
import math

import pytest

from fedsweep.specs.figure import figure_plan
from fedsweep.specs.load import SpecError, load_spec
from fedsweep.specs.search import Done, EarlyStop, SearchSpec, random_points
from tests.helpers import small_spec, smoke_sweep, sweep_runs, write_yaml

LABEL = "FedAvg"
TUNED = "FedAvg (tuned)"


def search_tree(figure: str = "search-fig", **search) -> dict:
    """One FedAvg curve (SVM, 3 clients, 2 rounds) searching its learning rate and batch size,
    budget 4 (the smoke profile: 2), seeds 0 and 1."""
    tree = small_spec(figure, seeds=[0, 1], rounds=2, max_failures=0, checkpoint_every=2)
    tree["curves"] = [
        {
            "label": LABEL,
            "set": {"selector": "none"},
            "search": {
                "space": {
                    "train.lr": {"log": [0.001, 0.1]},
                    "train.batch_size": {"choice": [10, 50]},
                },
                "budget": 4,
                "metric": "test_acc",
                "mode": "max",
                "seed": 0,  # a figure seed: the tuned run at seed 0 is the selection run
                **search,
            },
        }
    ]
    tree["profiles"]["smoke"] = {"search_budget": 2}
    return tree


@pytest.fixture
def store(tmp_path):
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


BAD = [
    ({"algorithm": "optna"}, "key `curves.0.search.algorithm`: unknown algorithm 'optna' (did you "
     "mean 'optuna'?); allowed: random, optuna"),
    ({"mode": "maximum"}, "key `curves.0.search.mode`: unknown mode 'maximum' (did you mean "
     "'max'?); allowed: max, min"),
    ({"space": {"train.lr": {"logg": [0.1, 1]}}}, "key `curves.0.search.space.train.lr.logg`: "
     "unknown key; did you mean `log`? (allowed: log, linear, int, choice)"),
    ({"space": {"train.lr": {"log": [0, 1]}}}, "key `curves.0.search.space.train.lr`: log: got "
     "[0.0, 1.0] (allowed: [lo, hi] with 0 < lo < hi)"),
    ({"space": {"train.lr": {"log": [0.1, 1], "linear": [0.1, 1]}}}, "a range needs exactly one "
     "kind, got ['log', 'linear']"),
    ({"budget": 0}, "key `curves.0.search.budget`: Input should be greater than or equal to 1"),
    # issue 62: a budget of 10**9 grew past 3 GB; seed and the horizon change what a curve is
    ({"budget": 10**9}, "key `curves.0.search.budget`: got 1000000000 (allowed: 1 to 2000 search "
     "trials per panel cell)"),
    ({"space": {"seed": {"int": [0, 9]}}}, "key `curves.0.search.space`: a search cannot vary "
     "seed: it is the seed stream"),
    ({"space": {"train.rounds": {"int": [1, 10**6]}}}, "key `curves.0.search.space`: a search "
     "cannot vary train.rounds: it is the horizon the curves are compared over"),
    ({"metric": "test_accc"}, "curves['FedAvg'].search.metric: 'test_accc' is not one of the "
     "spec's metrics (did you mean 'test_acc'?); allowed: test_loss, test_acc"),
    ({"scheduler": {"kind": "hyperband", "grace_period": 1}}, "key "
     "`curves.0.search.scheduler.kind`: unknown scheduler 'hyperband'; allowed: asha"),
    ({"scheduler": {"kind": "asha"}}, "key `curves.0.search.scheduler.grace_period`: Field "
     "required"),
    ({"scheduler": {"grace_period": 1, "reduction_factor": 1}}, "key "
     "`curves.0.search.scheduler.reduction_factor`: Input should be greater than or equal to 2"),
    ({"scheduler": {"grace_period": 1, "brackets": 2}}, "key "
     "`curves.0.search.scheduler.brackets`: unknown key"),
    ({"space": {"train.lrr": {"log": [0.1, 1]}}}, "field `train.lrr`: unknown key (did you mean "
     "`train.lr`?)"),
    ({"space": {"train.batch_size": {"choice": [10, "x"]}}}, "(curve 'FedAvg': a value of its "
     "search)"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), BAD)
def test_bad_search_fails_at_load_naming_the_field(tmp_path, change, message):
    tree = search_tree()
    tree["curves"][0]["search"].update(change)
    with pytest.raises(SpecError) as err:
        load_spec(write_yaml(tmp_path / "bad.yaml", tree))
    assert message in str(err.value)


def test_bad_budget_of_a_profile_and_tuned_curve_without_search(tmp_path):
    tree = search_tree()
    tree["profiles"]["smoke"] = {"search_budget": 0}
    with pytest.raises(SpecError, match=r"profiles.smoke.search_budget`: Input should be greater"):
        load_spec(write_yaml(tmp_path / "bad.yaml", tree))
    tree["profiles"]["smoke"] = {"search_budget": 10**9}  # issue 62: bounded as search.budget
    with pytest.raises(SpecError, match=r"search_budget`: got 1000000000 \(allowed: 1 to 2000"):
        load_spec(write_yaml(tmp_path / "bad.yaml", tree))
    tree = search_tree()
    tree["curves"].append(
        {"label": "Other", "derive": {"from": LABEL, "set": {"train.momentum": "tuned"}}}
    )
    with pytest.raises(SpecError, match=r"train.momentum: not a key of 'FedAvg''s search space"):
        load_spec(write_yaml(tmp_path / "bad.yaml", tree))


def test_the_default_search_seed_is_no_figure_seed():
    spec = SearchSpec.model_validate({"space": {"train.lr": {"log": [0.001, 0.1]}}, "budget": 2})
    assert spec.seed == 1000  # the selection runs stay out of the seeds a figure reports


def test_search_expands_to_seeded_trials_and_a_tuned_curve(tmp_path):
    spec = load_spec(write_yaml(tmp_path / "s.yaml", search_tree()))
    assert [c.label for c in spec.curve_list()] == [LABEL, TUNED]
    tuned = spec.curve_list()[1]
    assert tuned.derive.from_ == LABEL and tuned.dash == "dash"
    plan = figure_plan(spec, "smoke")
    assert [(t.curve, t.seed, t.unresolved) for t in plan.trials] == [
        (LABEL, 0, False), (LABEL, 1, False), (TUNED, 0, True), (TUNED, 1, True),
    ]  # fmt: skip
    state = plan.search_state(None)
    assert [t.curve for t in state.trials] == ["FedAvg · search 1", "FedAvg · search 2"]
    assert state.pending == state.trials and state.open == [("data.partition=case1", LABEL)]
    points = [dict(t.search_point) for t in state.trials]
    assert all(t.seed == 0 and t.search_of == LABEL and t.derive is None for t in state.trials)
    for t, point in zip(state.trials, points, strict=True):
        assert (t.config.train.lr, t.config.train.batch_size) == (
            point["train.lr"],
            point["train.batch_size"],
        )
        assert 0.001 <= point["train.lr"] <= 0.1 and point["train.batch_size"] in (10, 50)
        assert point["train.lr"] == float(f"{point['train.lr']:.4g}")
    # seeded: the same points again; the paper budget (4) starts with smoke's 2
    again = figure_plan(load_spec(tmp_path / "s.yaml"), "smoke").search_state(None)
    assert [t.config_hash for t in again.trials] == [t.config_hash for t in state.trials]
    paper = figure_plan(spec, "paper").search_state(None)
    assert len(paper.trials) == 4
    assert [dict(t.search_point) for t in paper.trials[:2]] == points
    other = SearchSpec.model_validate({**spec.curve_list()[0].search.model_dump(), "seed": 1})
    assert random_points(other, 2) != points


@pytest.mark.slow
def test_random_search_sweep_reruns_the_best_over_the_seeds_and_reuses_all(
    ray_session, tmp_path, store
):
    spec = write_yaml(tmp_path / "search-fig.yaml", search_tree())
    lines: list[str] = []
    report = smoke_sweep(spec, store, tmp_path, echo=lines.append)
    # 2 FedAvg + 2 search trials in stage 0; the tuned curve at seed 0 is the best search
    # trial's run (same config), at seed 1 a new run
    assert (report.total, report.scheduled, report.finished, report.errored) == (6, 5, 5, 0)
    client, _, parents, children = sweep_runs(store, "search-fig")
    assert len(children) == 5 and len(parents) == 1
    assert all(r.data.tags["fedsweep.status"] == "finished" for r in children)
    search = [r for r in children if r.data.tags.get("fedsweep.search_of") == LABEL]
    assert len(search) == 2 and all(r.data.tags["fedsweep.seed"] == "0" for r in search)
    best = max(search, key=lambda r: r.data.metrics["test_acc"])
    point = json.loads(best.data.params["search_point"])
    tuned = [r for r in children if r.data.tags["fedsweep.curve"] == TUNED]
    assert len(tuned) == 1 and tuned[0].data.tags["fedsweep.seed"] == "1"
    assert tuned[0].data.tags["fedsweep.derived_from"] == best.info.run_id
    assert math.isclose(float(tuned[0].data.params["train.lr"]), point["train.lr"])
    assert tuned[0].data.params["train.batch_size"] == str(point["train.batch_size"])

    plan = figure_plan(load_spec(spec), "smoke", extra={"data.root": str(tmp_path)})
    resolved = plan.resolve(lambda h: None, client).trials
    seed0 = next(t for t in resolved if t.curve == TUNED and t.seed == 0)
    assert seed0.config_hash == best.data.tags["fedsweep.config_hash"]

    lines.clear()
    again = smoke_sweep(spec, store, tmp_path, echo=lines.append)
    assert (again.total, again.scheduled, again.skipped, again.errored) == (6, 0, 6, 0)
    assert len(sweep_runs(store, "search-fig")[3]) == 5
    assert lines == [
        "search-fig [smoke]: all 6 runnable trials already have a finished run; nothing to schedule"
    ]


@pytest.mark.slow
def test_optuna_search_sweeps_in_batches_and_its_tuned_curve_is_drawn(ray_session, tmp_path, store):
    """Ray Tune's OptunaSearch on the smoke profile (3 points asked 2 at a time: the second
    batch once the first batch's runs are in the store, in a stage of its own), then the tuned
    curve over the seeds, drawn in the figure beside the curve it tunes."""
    from dashboards.build import build_figures

    tree = search_tree(algorithm="optuna", parallel=2)
    tree["profiles"]["smoke"] = {"search_budget": 3}
    spec = write_yaml(tmp_path / "search-fig.yaml", tree)
    lines: list[str] = []
    report = smoke_sweep(spec, store, tmp_path, echo=lines.append)
    assert report.errored == 0 and report.total == 7, lines
    assert any("1 search trials" in line for line in lines), lines
    _, _, _, children = sweep_runs(store, "search-fig")
    search = [r for r in children if r.data.tags.get("fedsweep.search_of") == LABEL]
    assert len(search) == 3
    assert len({r.data.params["search_point"] for r in search}) == 3
    assert sum(r.data.tags["fedsweep.curve"] == TUNED for r in children) >= 1
    (result,) = build_figures(store, "smoke", tmp_path / "figs", ["search-fig"], tmp_path,
                              png=False)  # fmt: skip
    names = {t.name.split(" (")[0] + (" (tuned)" if "(tuned)" in t.name else "")
             for t in result.figure.data if t.name}  # fmt: skip
    assert {LABEL, TUNED} <= names, names
    again = smoke_sweep(spec, store, tmp_path, echo=lines.append)
    assert again.scheduled == 0 and again.errored == 0


def test_optuna_search_asks_in_batches_and_is_replayed_from_the_store(tmp_path):
    tree = search_tree(algorithm="optuna", parallel=2)
    tree["profiles"]["smoke"] = {"search_budget": 3}
    plan = figure_plan(load_spec(write_yaml(tmp_path / "o.yaml", tree)), "smoke")
    results: dict[str, float] = {}  # config hash -> final test_acc: a store's finished runs

    def lookup(hashes):
        return {h: Done(f"run-{h[:8]}", {"test_acc": results[h]}) for h in hashes if h in results}

    first = plan.search_state(lookup)  # nothing ran: OptunaSearch's first batch of 2
    assert [t.curve for t in first.trials] == ["FedAvg · search 1", "FedAvg · search 2"]
    assert first.pending == first.trials and not first.best
    for acc, t in zip((0.5, 0.7), first.trials, strict=True):
        results[t.config_hash] = acc
    second = plan.search_state(lookup)  # replayed: the same first batch, then one more
    assert [t.config_hash for t in second.trials[:2]] == [t.config_hash for t in first.trials]
    assert len(second.trials) == 3 and second.pending == second.trials[2:]
    assert second.trials[2].curve == "FedAvg · search 3"
    results[second.trials[2].config_hash] = math.nan  # a diverged run never wins
    done = plan.search_state(lookup)
    assert not done.pending and not done.open
    best = done.best[("data.partition=case1", LABEL)]
    assert (best.run_id, best.value) == (f"run-{first.trials[1].config_hash[:8]}", 0.7)
    assert best.point == dict(first.trials[1].search_point)
    again = plan.search_state(lookup)
    assert [t.config_hash for t in again.trials] == [t.config_hash for t in done.trials]


def test_plan_lists_the_search_trials_and_the_tuned_curve(tmp_path, store):
    from fedsweep.sweep.plan import DERIVED, RUN, plan_sweep

    spec = write_yaml(tmp_path / "search-fig.yaml", search_tree())
    plan = plan_sweep(spec, "smoke", tracking_uri=store, check_data=False)
    rows = [(r.trial_id.split("|")[3], r.status) for r in plan.trials]
    assert rows == [
        (LABEL, RUN), (LABEL, RUN), ("FedAvg · search 1", RUN), ("FedAvg · search 2", RUN),
        (TUNED, DERIVED), (TUNED, DERIVED),
    ]  # fmt: skip
    assert plan.trials[2].note.startswith("search of FedAvg: train.batch_size=")
    assert plan.trials[4].note.startswith(
        "tuned: the best trial of FedAvg's search (random search (seed 0) over "
        "train.batch_size~choice[10, 50], train.lr~log[0.001, 0.1]; best final test_acc (max))"
    )


# ------------------------------------------------------------------ early stopping (ASHA)
def test_rungs_are_grace_times_powers_on_evaluated_rounds_before_the_last():
    asha = EarlyStop(grace_period=1, reduction_factor=3)
    assert asha.rungs(10) == [1, 3, 9]
    assert asha.rungs(9) == [1, 3]  # never the last round: the run ends there anyway
    assert asha.rungs(10, every=2) == [2, 4]  # the first evaluated round at or after each
    assert asha.rungs(30, every=5) == [5, 10]  # 1 and 3 both land on 5: one rung
    assert EarlyStop(grace_period=4, reduction_factor=2).rungs(4) == []


def test_a_scheduler_that_could_never_stop_a_trial_is_refused_before_anything_runs(tmp_path):
    tree = search_tree(scheduler={"grace_period": 2})  # smoke: 2 rounds
    spec = load_spec(write_yaml(tmp_path / "s.yaml", tree))
    with pytest.raises(SpecError) as err:
        figure_plan(spec, "smoke")
    assert str(err.value) == (
        "s.yaml: curves['FedAvg'].search.scheduler.grace_period: 2 leaves no decision before "
        "the last round (2 rounds under profile 'smoke', evaluated every 1); allowed: 1 to 1"
    )
    tree["curves"][0]["search"]["scheduler"] = {"grace_period": 1}
    plan = figure_plan(load_spec(write_yaml(tmp_path / "s.yaml", tree)), "smoke")
    assert "; ASHA (grace 1 rounds, reduction factor 3) stops trials early" in (
        plan.curves[0].search.text
    )
    # every panel's horizon counts, not only the first panel's: 9 rounds fit grace 2, 2 do not
    tree["curves"][0]["search"]["scheduler"] = {"grace_period": 2}
    tree["panels"] = {"train.rounds": [9, 2]}
    with pytest.raises(SpecError) as err:
        figure_plan(load_spec(write_yaml(tmp_path / "s.yaml", tree)), "smoke")
    assert "grace_period: 2 leaves no decision before the last round (2 rounds" in str(err.value)


class _Trial:
    """What the scheduler reads of Ray Tune's ``Trial``: its id and config (a payload)."""

    def __init__(self, trial_id: str, group: str, rungs=(1, 3), config_hash: str = ""):
        self.trial_id = trial_id
        early = {"group": group, "metric": "test_loss", "mode": "min", "grace_period": 1,
                 "reduction_factor": 3, "max_t": 9, "rungs": list(rungs)}  # fmt: skip
        tags = {"fedsweep.config_hash": config_hash or f"h-{trial_id}"}
        self.config = {"trial": {"early_stop": early if group else None, "tags": tags}}


def test_the_scheduler_runs_one_asha_per_population_on_rung_reports_only():
    from ray.tune.schedulers import TrialScheduler

    from fedsweep.sweep.early_stop import EarlyStopByGroup, Stopped

    go, stop = TrialScheduler.CONTINUE, TrialScheduler.STOP
    sched = EarlyStopByGroup()
    a1, a2, a3 = (_Trial(f"a{i}", "cell | FedAvg") for i in (1, 2, 3))
    b1 = _Trial("b1", "cell | FedProx")
    plain = _Trial("plain", "")
    for t in (a1, a2, a3, b1, plain):
        sched.on_trial_add(None, t)

    def result(t, at, loss):
        return sched.on_trial_result(None, t, {"round": at, "test_loss": loss})

    assert result(a1, 1, 0.5) == go  # the first at a rung always goes on
    assert result(a2, 2, 9.0) == go  # not a rung: ASHA never sees it
    assert result(a2, 1, 0.9) == stop  # worse than the rung's top third
    assert result(b1, 1, 5.0) == go  # another population: not compared with FedAvg's
    assert result(plain, 1, 99.0) == go  # outside any search
    assert result(a3, 1, 0.1) == go
    assert result(a1, 9, 7.0) == go  # the last round: never stopped
    assert sched.stopped == {"a2": Stopped("h-a2", 1)}
    for t in (a1, a2, a3, b1, plain):
        sched.on_trial_complete(None, t, {})
    assert not sched._of


def _stopping_tree(seed: int) -> dict:
    """4 search trials of 9 rounds over a wide learning-rate range, ranked by test loss, ASHA
    from round 1 (rungs 1 and 3); one seed of the figure (the search runs at another)."""
    tree = search_tree(
        seed=seed, metric="test_loss", mode="min", space={"train.lr": {"log": [1e-7, 0.01]}},
        scheduler={"grace_period": 1, "reduction_factor": 3},
    )  # fmt: skip
    tree["base"]["train"]["rounds"] = 9
    tree["seeds"] = [0]
    tree["checkpoint_every"] = 9
    tree["profiles"]["smoke"] = {"search_budget": 4}
    return tree


@pytest.mark.slow
def test_asha_stops_search_trials_at_their_rungs_and_the_best_ran_in_full(
    ray_session, tmp_path, store
):
    """A real Ray Tune fit with ASHA over a random search (one trial at a time, so the
    decisions are the plan's order): the trials it stops end FINISHED as stopped early at a
    rung with exactly that many rounds logged, the others run all 9 rounds, the tuned curve
    comes from the best full run, and a rerun runs nothing."""
    from fedsweep.specs.search import STOPPED, STOPPED_AT

    spec = write_yaml(tmp_path / "search-fig.yaml", _stopping_tree(seed=10))
    lines: list[str] = []
    report = smoke_sweep(spec, store, tmp_path, echo=lines.append)
    assert report.errored == 0 and report.interrupted == 0, (report, lines)
    client, _, parents, children = sweep_runs(store, "search-fig")
    assert all(r.info.status == "FINISHED" for r in [*parents, *children])
    search = [r for r in children if r.data.tags.get("fedsweep.search_of") == LABEL]
    assert len(search) == 4
    stopped = [r for r in search if r.data.tags["fedsweep.status"] == STOPPED]
    full = [r for r in search if r.data.tags["fedsweep.status"] == "finished"]
    assert len(stopped) + len(full) == 4 and stopped and full, [r.data.tags for r in search]
    assert report.stopped == len(stopped)
    assert report.line().endswith(f"of 6 trials ({len(stopped)} stopped early by ASHA)")
    for run in stopped:
        at = int(run.data.tags[STOPPED_AT])
        assert at in (1, 3)
        history = client.get_metric_history(run.info.run_id, "test_loss")
        assert sorted(m.step for m in history) == list(range(1, at + 1))
    for run in full:
        assert len(client.get_metric_history(run.info.run_id, "test_loss")) == 9
    # the first trial at each rung goes on: the plan's first search trial ran in full
    first = min(search, key=lambda r: int(r.data.tags["fedsweep.curve"].rsplit(" ", 1)[1]))
    assert first.data.tags["fedsweep.status"] == "finished"
    best = min(full, key=lambda r: r.data.metrics["test_loss"])
    (tuned,) = [r for r in children if r.data.tags["fedsweep.curve"] == TUNED]
    assert tuned.data.tags["fedsweep.derived_from"] == best.info.run_id
    assert tuned.data.tags["fedsweep.status"] == "finished"

    lines.clear()
    again = smoke_sweep(spec, store, tmp_path, echo=lines.append)
    assert again.scheduled == 0 and again.errored == 0, lines
    assert len(sweep_runs(store, "search-fig")[3]) == len(children)
    # --plan agrees: the stopped trials are reused (done for the search), with their round
    from fedsweep.sweep.plan import REUSE, plan_sweep

    plan = plan_sweep(spec, "smoke", tracking_uri=store, check_data=False)
    notes = {r.run_id: r.note for r in plan.trials if r.status == REUSE}
    assert all(r.status == REUSE for r in plan.trials), [
        (r.trial_id, r.status) for r in plan.trials
    ]
    for run in stopped:
        note = notes[run.info.run_id]
        assert note.startswith("search of FedAvg: train.lr=") and note.endswith(
            f"; stopped early by ASHA at round {run.data.tags[STOPPED_AT]}"
        ), note


def test_the_how_to_search_example_plans_at_every_profile(tmp_path):
    """docs/how-to/own-studies.md's search example (ASHA included), as written: it loads, and
    its scheduler has a rung before the last round at every profile."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs/how-to/own-studies.md").read_text()
    block = doc.split("## A tuned η per method: search", 1)[1].split("```yaml\n", 1)[1]
    path = tmp_path / "my-fig3a-tuned.yaml"
    path.write_text(block.split("```", 1)[0])
    spec = load_spec(path)
    (curve,) = [c for c in spec.curve_list() if c.search is not None]
    assert curve.search.scheduler == EarlyStop(grace_period=2, reduction_factor=3)
    for profile in ("smoke", "quick", "paper"):
        plan = figure_plan(spec, profile)
        rounds = {t.config.train.rounds for t in plan.trials if t.curve == curve.label}
        assert all(curve.search.scheduler.rungs(r) for r in rounds), (profile, rounds)
