"""Issue 32, the config side: a config never runs code (τ rules are registered, items 1 and 14),
sections a config does not use neither run nor split the hash (item 8), FedVeca's τ_max is
bounded by the data (item 12), and ``fedsweep sweep --plan`` (item 16)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.components.step_policies.fedveca import (
    TAU_RULES,
    TauRuleError,
    load_rule,
    r1,
    register_tau_rule,
    rule_names,
)
from fedsweep.config.hashing import config_hash, legacy_config_hash
from fedsweep.config.load import ConfigError, build_config
from fedsweep.specs.load import expand, load_spec
from tests.helpers import small_run, small_spec, tiny_config, tiny_dataset, write_yaml

ROOT = Path(__file__).resolve().parents[2]
VECA = dict(algorithm="fednova", step_policy="fedveca")
runner = CliRunner()


@pytest.fixture
def cli(monkeypatch):
    """``fedsweep ARGS`` in this process, from folder ``cwd``: (exit code, output). The
    modules it imports and the rules they register are forgotten afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules, rules = set(sys.modules), dict(TAU_RULES)

    def invoke(*args, cwd=None):
        if cwd is not None:
            monkeypatch.chdir(cwd)
        result = runner.invoke(app, [str(a) for a in args])
        return result.exit_code, result.output

    yield invoke
    tmp = str(Path(tempfile.gettempdir()).resolve())
    for name in set(sys.modules) - modules:
        # only the tests' own plugin modules (written under the temporary folder): a library's
        # submodule imported lazily during the test (SQLAlchemy 2.1 imports some on first use)
        # must stay, or a later import makes a second copy of its classes
        origin = getattr(sys.modules[name], "__file__", None) or ""
        if origin and str(Path(origin).resolve()).startswith(tmp):
            del sys.modules[name]
    TAU_RULES.clear()
    TAU_RULES.update(rules)


# ------------------------------------------------------------- item 1, 14: no code from a config
def test_a_config_naming_a_module_imports_nothing_and_is_refused(tmp_path, cli, monkeypatch):
    """``tau_rule: "evil:s"`` with evil.py beside the config: validate, run and sweep --plan all
    refuse it (exit 2, the registered rules listed) without importing the module."""
    marker = tmp_path / "MARKER"
    (tmp_path / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\ndef s(A, g, phi):\n    return A\n"
    )
    config = write_yaml(tmp_path / "c.yaml", small_run("x", "e", rounds=1, selector="none"))
    for args in (
        ["validate", config, "--set", "fedveca.tau_rule=evil:s"],
        ["run", config, "--no-track", "--set", "fedveca.tau_rule=evil:s"],
        ["validate", config, "--set", "fedveca.tau_rule=os:system"],
    ):
        args += ["--set", "algorithm=fednova", "--set", "step_policy=fedveca"]
        monkeypatch.syspath_prepend(str(tmp_path))  # importable, were it imported
        code, out = cli(*args, cwd=tmp_path)
        assert code == 2, out
        assert "unknown tau_rule" in out and "(allowed: R1, " in out and "--plugin" in out
        assert "Traceback" not in out
    assert not marker.exists()


def test_a_plugin_named_on_the_command_line_registers_a_rule(tmp_path, cli):
    """``--plugin myrules`` imports the module (from the current folder), which registers
    ``half``; the config names it; a plugin with a wrong signature is refused at import."""
    (tmp_path / "myrules.py").write_text(
        textwrap.dedent(
            """
            from fedsweep.components.step_policies.fedveca import r1, register_tau_rule

            def half(A, g_norm2, phi):
                return r1(A, g_norm2, phi) / 2

            register_tau_rule("half", half)
            """
        )
    )
    (tmp_path / "badsig.py").write_text(
        "from fedsweep.components.step_policies.fedveca import register_tau_rule\n"
        "def two(A, g):\n    return A\n"
        "register_tau_rule('two', two)\n"
    )
    config = write_yaml(tmp_path / "c.yaml", small_run("x", "e", rounds=1, selector="none"))
    veca = ["--set", "algorithm=fednova", "--set", "step_policy=fedveca"]
    code, out = cli("validate", config, *veca, "--set", "fedveca.tau_rule=half", cwd=tmp_path)
    assert code == 2 and "unknown tau_rule 'half'" in out  # not without the plugin
    code, out = cli(
        "validate", config, *veca, "--set", "fedveca.tau_rule=half", "--plugin", "myrules",
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 0 and "tau_rule: half" in out, out
    code, out = cli("validate", config, "--plugin", "badsig", cwd=tmp_path)
    assert code == 2 and "cannot be called as rule(A, g_norm2, phi)" in out, out
    code, out = cli("validate", config, "--plugin", "nosuch_module_x", cwd=tmp_path)
    assert code == 2 and "no module named 'nosuch_module_x'" in out
    code, out = cli("validate", config, "--plugin", "./myrules.py", cwd=tmp_path)
    assert code == 2 and "not a module name" in out


def test_register_checks_the_signature_and_the_name():
    """Item 14: a rule that cannot be called as rule(A, g_norm2, phi) never reaches a run."""
    with pytest.raises(TauRuleError, match="cannot be called as rule"):
        register_tau_rule("bad-two", lambda A, g: A)
    with pytest.raises(TauRuleError, match="not callable"):
        register_tau_rule("bad-value", 3)
    for name in ("fixed", "a:b", "", "9x"):
        with pytest.raises(TauRuleError, match="tau rule name"):
            register_tau_rule(name, r1)
    with pytest.raises(TauRuleError, match="registered already"):
        register_tau_rule("R1", lambda A, g, phi: A)
    assert "bad-two" not in TAU_RULES and "bad-value" not in TAU_RULES


def test_a_registered_rule_drives_the_run():
    """The rule a config names is the one the step policy calls (τ from it, floored, capped)."""
    calls = []

    def three(A, g_norm2, phi):
        calls.append(len(A))
        return torch.full_like(A, 3.7, dtype=torch.float64)

    register_tau_rule("tests-three", three)
    try:
        from fedsweep.experiment import FLRun

        cfg = tiny_config(**VECA, train__rounds=3, fedveca__tau_rule="tests-three")
        run = FLRun(cfg, dataset=tiny_dataset())
        for _ in range(3):
            run.step()
        assert calls == [3, 3]  # rounds 2 and 3 (no τ update after round 1)
        assert run.components.step_policy.tau == [3, 3, 3]
    finally:
        TAU_RULES.pop("tests-three", None)


@pytest.mark.slow
def test_an_entry_point_rule_is_named_from_metadata_and_loaded_only_when_used(tmp_path):
    """An installed package's ``fedsweep.tau_rules`` entry point: validation reads its name
    from the metadata without importing the package; building the run loads it."""
    (tmp_path / "eprules.py").write_text(
        f"open({str(tmp_path / 'IMPORTED')!r}, 'w').write('x')\n"
        "def quarter(A, g_norm2, phi):\n    return A * 0 + 4.0\n"
    )
    dist = tmp_path / "eprules-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: eprules\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[fedsweep.tau_rules]\nquarter = eprules:quarter\n")
    script = textwrap.dedent(
        f"""
        import sys, os
        sys.path.insert(0, {str(tmp_path)!r})
        from fedsweep.components.step_policies.fedveca import load_rule, rule_names
        from tests.helpers import tiny_config
        cfg = tiny_config(algorithm="fednova", step_policy="fedveca", fedveca__tau_rule="quarter")
        assert "quarter" in rule_names()
        assert not os.path.exists({str(tmp_path / "IMPORTED")!r}), "validation imported it"
        fn = load_rule("quarter")
        assert os.path.exists({str(tmp_path / "IMPORTED")!r}) and fn.__name__ == "quarter"
        print("ok")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_rule_names_and_loading_without_a_rule():
    assert rule_names()[0] == "R1" and rule_names()[-1] == "fixed"
    assert load_rule("fixed") is None and load_rule("R1") is r1
    with pytest.raises(TauRuleError, match="unknown tau_rule 'nope'"):
        load_rule("nope")


@pytest.mark.slow
def test_sweep_trials_import_the_drivers_plugins(tmp_path):
    """A sweep passes its --plugin modules (with the folder they came from) to every trial,
    which imports them in its own process before reading its config."""
    from fedsweep.plugins import load_plugins
    from fedsweep.sweep.ray_backend import trial_payload

    pkg = tmp_path / "rulespkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mine.py").write_text(
        "from fedsweep.components.step_policies.fedveca import r1, register_tau_rule\n"
        "register_tau_rule('tests-mine', lambda A, g_norm2, phi: r1(A, g_norm2, phi))\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        plugins = load_plugins(["rulespkg.mine"])
    finally:
        sys.path.remove(str(tmp_path))
        TAU_RULES.pop("tests-mine", None)
    assert plugins == [("rulespkg.mine", str(tmp_path.resolve()))]
    spec_path = write_yaml(
        tmp_path / "s.yaml",
        small_spec("plugfig", base={"selector": "none", **VECA}, curves=[{"label": "V"}]),
    )
    spec = load_spec(spec_path)
    payload = trial_payload(expand(spec, "smoke")[0], spec, "sqlite:///x.db", "f", "p", plugins)
    assert payload["plugins"] == [["rulespkg.mine", str(tmp_path.resolve())]]
    script = (
        "import json, sys; from fedsweep.plugins import load_plugin_list; "
        "from fedsweep.components.step_policies.fedveca import rule_names; "
        f"load_plugin_list(json.loads({json.dumps(json.dumps(payload['plugins']))})); "
        "print('tests-mine' in rule_names())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.strip() == "True", proc.stderr


# ------------------------------------------------------------------- item 8: unused sections
UNUSED = [
    ("bherd.alpha=0.9", "selector 'bherd'"),
    ("fedopt.lr=0.3", "server_optimizer 'adagrad' or 'adam' or 'yogi'"),
    ("fedveca.phi=0.1", "step_policy 'fedveca'"),
    ("poc.d=3", "sampler 'poc'"),
    ("fixed_steps.steps=3", "step_policy 'fixed'"),
]


@pytest.mark.parametrize(("setting", "reader"), UNUSED)
def test_a_value_for_an_unused_component_is_refused(setting, reader):
    """One config (run, validate, --set): a value no component reads is an error naming the
    key and why (exit 2 through the CLI: test below)."""
    key, _, value = setting.partition("=")
    with pytest.raises(ConfigError) as err:
        tiny_config(unused="refuse", **{key.replace(".", "__"): float(value)})
    text = str(err.value)
    assert f"field `{key}`: set, but this config does not use section `{key.split('.')[0]}`" in text
    assert f"read only by {reader}" in text


def test_unused_sections_through_the_cli(tmp_path):
    config = write_yaml(tmp_path / "c.yaml", small_run("x", "e", rounds=1, selector="none"))
    result = runner.invoke(app, ["validate", str(config), "--set", "bherd.alpha=0.9"])
    assert result.exit_code == 2 and "field `bherd.alpha`: set, but" in result.output
    assert "Traceback" not in result.output
    # in the file itself, with the file's own components not reading it: refused too
    tree = small_run("x", "e", rounds=1, selector="none", bherd={"alpha": 0.9})
    result = runner.invoke(app, ["validate", str(write_yaml(tmp_path / "d.yaml", tree))])
    assert result.exit_code == 2 and "field `bherd.alpha`" in result.output
    # a --set that switches the component away from the file's section: the section is dropped
    bherd = write_yaml(tmp_path / "b.yaml", small_run("x", "e", rounds=1, bherd={"alpha": 0.9}))
    result = runner.invoke(app, ["validate", str(bherd), "--set", "selector=none"])
    assert result.exit_code == 0, result.output
    plain = runner.invoke(app, ["validate", str(config)])
    assert result.output.splitlines()[-2] == plain.output.splitlines()[-2]  # the same hash


def test_the_hash_covers_the_components_in_use_only():
    """Hashes of configs without unused values are what they were (pinned values from main at
    fe06494, before this change); an unused value no longer splits the hash; the legacy hash
    is the old one."""
    base = {"device": "cpu", "data": {"dataset": "mnist-5k"}, "train": {"rounds": 3}}
    plain = build_config(base)
    noisy = build_config({**base, "bherd": {"alpha": 0.9}, "fedopt": {"lr": 0.3}}, unused="keep")
    assert config_hash(noisy) == config_hash(plain) == legacy_config_hash(plain)
    assert legacy_config_hash(noisy) != config_hash(noisy)
    used = build_config({**base, "selector": "bherd", "bherd": {"alpha": 0.9}})
    assert config_hash(used) == legacy_config_hash(used) != config_hash(plain)


#: (spec, trial id) -> (config hash, legacy hash): computed by main at fe06494 for every shipped
#: trial before and after this change (4,257 trials: 557 moved, each to a legacy hash equal to
#: its old hash); a few pinned here
PINNED = {
    ("bherd-fig3a", "bherd-fig3a|smoke|data.partition=case1|FedAvg (RR)|seed=0"): (
        "5c760af0505d6c92",
        None,
    ),
    ("bherd-fig3a", "bherd-fig3a|smoke|data.partition=case1|α=0.5|seed=0"): (
        "bfe7352a12c5c987",
        None,
    ),
    ("fedwalk-fig5", "fedwalk-fig5|smoke|data.dirichlet_alpha=0.1|FedWalk|seed=0"): (
        "6e8cf674a3f93f6b",
        None,
    ),
    ("fedwalk-fig5", "fedwalk-fig5|smoke|data.dirichlet_alpha=0.1|FedAvg|seed=0"): (
        "f434fa04c6bbc99a",
        "04e5d38af5e39e17",  # its hash at fe06494: the base's fedwalk/leash sections in it
    ),
}


def test_shipped_trials_keep_their_hash_or_carry_the_old_one_as_legacy():
    trials = {}
    for figure in {f for f, _ in PINNED}:
        for t in expand(load_spec(ROOT / "sweeps" / f"{figure}.yaml"), "smoke"):
            trials[(figure, t.trial_id)] = t
    for key, (digest, legacy) in PINNED.items():
        t = trials[key]
        assert (t.config_hash, t.legacy_hash) == (digest, legacy), key
        if legacy is not None:  # the trial runs without the base's unused sections
            assert t.config.fedwalk == type(t.config.fedwalk)() and t.config.hooks == []


def _bherd_base_spec(tmp_path, figure: str) -> Path:
    """A spec whose shared base sets ``bherd.alpha = 0.9`` with a BHerd and a FedAvg curve (the
    FedAvg curve does not use the section)."""
    tree = small_spec(
        figure,
        base={"bherd": {"alpha": 0.9}},
        curves=[
            {"label": "BHerd", "set": {"selector": "bherd"}},
            {"label": "FedAvg", "set": {"selector": "none"}},
        ],
    )
    return write_yaml(tmp_path / f"{figure}.yaml", tree)


def _legacy_store(tmp_path):
    """A store with one finished run of a FedAvg trial under a ``bherd:`` base, tagged as the
    code before this change tagged it (its hash with the unused bherd section), and the spec."""
    from fedsweep.tracking.tracked_run import TrackedRun

    spec_path = _bherd_base_spec(tmp_path, "legacyfig")
    spec = load_spec(spec_path)
    fedavg = next(t for t in expand(spec, "smoke") if t.curve == "FedAvg")
    assert fedavg.legacy_hash is not None and fedavg.config.bherd.alpha == 0.5
    # its config as the sweep built it before this change: with the base's bherd section
    full = fedavg.config.model_copy(update={"bherd": type(fedavg.config.bherd)(alpha=0.9)})
    assert legacy_config_hash(full) == fedavg.legacy_hash
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    cfg = full.model_copy(deep=True)
    cfg.tracking.enabled, cfg.tracking.uri, cfg.tracking.experiment = True, store, "legacyfig"
    old = TrackedRun(cfg, tags={"fedsweep.config_hash": fedavg.legacy_hash})
    result = old.execute()
    assert result.result.status == "finished"
    return spec_path, store, fedavg, result.run_id


def test_a_run_under_the_legacy_hash_is_reused_and_drawn(tmp_path):
    """Item 8 + 16: the sweep's plan reuses the old run (by its legacy hash), the runner's
    lookups count it as finished, the figures find it."""
    from fedsweep.judge.store import RunIndex, resolve_runs
    from fedsweep.sweep.plan import plan_sweep
    from fedsweep.sweep.store_index import finished_trials
    from fedsweep.tracking.connect import get_client

    spec_path, store, fedavg, run_id = _legacy_store(tmp_path)
    plan = plan_sweep(spec_path, "smoke", tracking_uri=store)
    rows = {r.trial_id: r for r in plan.trials}
    row = rows[fedavg.trial_id]
    assert (row.status, row.run_id, row.matched_by) == ("reuse", run_id, "legacy hash")
    assert row.legacy_hash == fedavg.legacy_hash
    assert [r.status for r in plan.trials].count("run") == len(plan.trials) - 1
    client = get_client(store, create=False)
    trials = expand(load_spec(spec_path), "smoke")
    assert finished_trials(client, trials) == {fedavg.config_hash}
    found = resolve_runs(load_spec(spec_path), "smoke", RunIndex.load(client), client=client)
    assert [(f.trial.trial_id, f.run.run_id) for f in found.found] == [(fedavg.trial_id, run_id)]


def test_sweep_plan_cli_lists_trials_without_ray_or_writes(tmp_path, cli, monkeypatch):
    """``sweep --plan``: every trial with its hash and what would happen, totals, JSON; no Ray
    started, no store created."""
    from fedsweep.sweep import stage

    def no_ray(*args, **kwargs):
        raise AssertionError("--plan started Ray")

    monkeypatch.setattr(stage, "init_ray", no_ray)
    monkeypatch.setattr(stage, "fit_trials", no_ray)
    spec_path, store, fedavg, run_id = _legacy_store(tmp_path)
    code, out = cli("sweep", spec_path, "--profile", "smoke", "--plan", "--tracking-uri", store)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("legacyfig [smoke]: 2 trials: 1 to run, 1 reused")
    assert any(
        fedavg.trial_id in line and f"run {run_id} (by its legacy hash)" in line
        and fedavg.legacy_hash in line
        for line in lines
    )  # fmt: skip
    code, out = cli(
        "sweep", spec_path, "--profile", "smoke", "--plan", "--json", "--tracking-uri", store
    )
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(rows) == 2
    assert {r["status"] for r in rows} == {"run", "reuse"}
    assert all(r["trial_id"].startswith("legacyfig|smoke|") for r in rows)
    # a store that does not exist is not created, and Ray was never started
    missing = tmp_path / "nostore" / "mlflow.db"
    code, out = cli("sweep", spec_path, "--plan", "--profile", "smoke", "--tracking-uri",
                    f"sqlite:///{missing}")  # fmt: skip
    assert code == 0 and "2 to run, 0 reused" in out and not missing.parent.exists()
    code, out = cli("sweep", spec_path, "--json", "--profile", "smoke")
    assert code == 2 and "--json: only with --plan" in out


def test_plan_estimates_from_the_stores_round_times(tmp_path):
    """A trial to run gets rounds x the seconds per round of the figure's finished runs of the
    same curve (here: another seed of it)."""
    from fedsweep.sweep.plan import _estimate, _round_times, plan_sweep
    from fedsweep.tracking.connect import get_client

    spec_path, store, fedavg, run_id = _legacy_store(tmp_path)
    client = get_client(store, create=False)
    client.set_tag(run_id, "fedsweep.profile", "smoke")
    client.set_tag(run_id, "fedsweep.curve", "FedAvg")
    client.set_tag(run_id, "fedsweep.panel", fedavg.panel_id)
    per_round, count = _round_times(client, "legacyfig", "smoke")
    run = client.get_run(run_id)
    want = (run.info.end_time - run.info.start_time) / 1000 / fedavg.config.train.rounds
    assert count == 1 and per_round[(fedavg.panel_id, "FedAvg")] == pytest.approx(want)
    assert _estimate(per_round, fedavg) == pytest.approx(want * fedavg.config.train.rounds)
    plan = plan_sweep(spec_path, "smoke", tracking_uri=store)
    (todo,) = plan.to_run
    assert todo.estimate_s == pytest.approx(want * todo.rounds)  # the figure's only run


def test_plan_scales_another_profiles_round_times_by_the_work_of_a_round(tmp_path):
    """Issue 35: without a run of the trial's own profile, the figure's runs of another profile
    give seconds per training sample, scaled by the trial's samples per round (rough, noted)."""
    import dataclasses

    from fedsweep.sweep.plan import _scaled_estimate, _scaled_times, _work, plan_sweep
    from fedsweep.tracking.connect import get_client

    spec_path, store, fedavg, run_id = _legacy_store(tmp_path)
    client = get_client(store, create=False)
    for key, value in [("profile", "quick"), ("curve", "FedAvg"), ("panel", fedavg.panel_id)]:
        client.set_tag(run_id, f"fedsweep.{key}", value)
    run = client.get_run(run_id)
    cfg = fedavg.config
    work = _work(cfg.data.dataset, cfg.data.train_subset, cfg.train.local_epochs)
    # its last round's time, not its duration over its rounds (mostly loading, for a short run)
    per_sample = run.data.metrics["round_time"] / work
    assert per_sample < (run.info.end_time - run.info.start_time) / 1000 / cfg.train.rounds / work
    scaled = _scaled_times(client, "legacyfig", "smoke")
    assert scaled[(fedavg.panel_id, "FedAvg")] == (pytest.approx(per_sample), ["quick"])
    assert _scaled_times(client, "legacyfig", "quick") == {}  # only *other* profiles
    # 4x the training samples and 2 local epochs: 8x the work per round
    bigger = cfg.model_copy(deep=True)
    bigger.data.train_subset = 4 * work
    bigger.train.local_epochs = 2.0
    big = dataclasses.replace(fedavg, config=bigger)
    seconds, note = _scaled_estimate(scaled, big)
    assert seconds == pytest.approx(per_sample * 8 * work * bigger.train.rounds)
    assert note == "scaled from the quick profile's runs (rough)"
    plan = plan_sweep(spec_path, "smoke", tracking_uri=store)
    assert plan.to_run and all(t.note.startswith("scaled from the quick") for t in plan.to_run)


# --------------------------------------------------------------------------- item 12: τ_max
def test_tau_max_is_bounded_by_the_data():
    with pytest.raises(ConfigError) as err:
        tiny_config(**VECA, fedveca__tau_max=10**9, fedveca__phi=1e-6)
    assert "field `fedveca.tau_max`: got 1000000000" in str(err.value)
    assert "at most 100 passes over the whole training set" in str(err.value)
    # MNIST 60,000 samples at batch size 20: 100 passes are 300,000 steps
    assert tiny_config(**VECA, fedveca__tau_max=300_000).fedveca.tau_max == 300_000
    with pytest.raises(ConfigError, match=r"allowed: 1\.\.300000"):
        tiny_config(**VECA, fedveca__tau_max=300_001)


def test_the_progress_bar_counts_local_steps_inside_a_round():
    """The engine tells ``LocalTrainer.on_steps`` the steps done in the round (all clients')
    every 256 steps and after each client; the bar moves inside the round."""
    from fedsweep.cli.progress import RunProgress
    from fedsweep.experiment import FLRun

    cfg = tiny_config(
        **VECA, train__rounds=2, fedveca__tau_init=600, fedveca__tau_max=600,
        fedveca__tau_rule="fixed",
    )  # fmt: skip
    run = FLRun(cfg, dataset=tiny_dataset())
    seen = []
    run.trainer.on_steps = lambda done, total: seen.append((done, total))
    run.step()
    # 3 clients x 600 steps (fused or not: a fused client reports every 256 steps too)
    assert seen == [(d + 600 * c, 1800) for c in range(3) for d in (256, 512, 600)]
    progress = RunProgress(rounds=2, enabled=True, console=Console(file=io.StringIO()))
    progress.__enter__()
    try:
        progress.on_start(run, None)
        assert run.trainer.on_steps == progress.on_steps
        progress._round_start -= 10  # a long round: the steps are shown
        progress._last_steps -= 10
        progress.on_steps(900, 1800)
        task = progress._progress.tasks[0]
        assert task.completed == pytest.approx(1.5) and "steps 900/1,800" in task.fields["stats"]
    finally:
        progress.__exit__(None, None, None)


def test_a_sweep_drops_unused_base_sections_per_curve_and_refuses_an_unused_set(tmp_path):
    """A sweep's shared ``base:`` section is dropped for the curves that do not use it (their
    config and hash are those of a config without it); a ``--set`` for a section no trial
    uses is refused."""
    from fedsweep.specs.load import SpecError

    spec = load_spec(_bherd_base_spec(tmp_path, "dropfig"))
    bherd, fedavg = expand(spec, "smoke")
    assert (bherd.config.bherd.alpha, bherd.legacy_hash) == (0.9, None)
    assert fedavg.config.bherd.alpha == 0.5 and fedavg.legacy_hash is not None
    plain = build_config(fedavg.config.model_dump(mode="json", exclude_defaults=True))
    assert config_hash(plain) == fedavg.config_hash
    assert expand(spec, "smoke", extra={"bherd.alpha": 0.3})[0].config.bherd.alpha == 0.3
    with pytest.raises(SpecError, match=r"--set fedopt.lr: no trial of this sweep uses section"):
        expand(spec, "smoke", extra={"fedopt.lr": 0.3})
