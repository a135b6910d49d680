"""Bad inputs end with one clear message and exit code 2 before Ray or MLflow start (issue 9,
items 6 and 7): YAML files, numbers, duplicate keys, sweep specs, partition feasibility,
tracking URIs, devices, models; figure ids as slugs, removal only inside ray_results, and
checkpoints read with ``weights_only=True``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.config.load import load_config
from fedsweep.config.schema import max_clients
from fedsweep.experiment import FLRun
from fedsweep.specs.load import figure_id_problem, load_spec, spec_paths
from fedsweep.sweep.ray_backend import UnsafeRemovalError, remove_inside
from fedsweep.sweep.trial import load_state
from tests.helpers import small_run, small_spec, tiny_config, tiny_dataset, write_yaml

runner = CliRunner()
SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def assert_clean(res, *needles: str) -> str:
    """Exit 2, no traceback, one message containing every needle."""
    out = res.output
    assert res.exit_code == 2, out
    assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit), repr(
        res.exception
    )
    assert "Traceback" not in out and "<unicode string>" not in out, out
    for needle in needles:
        assert needle in out, (needle, out)
    return out


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    """The default store (and the sweep log folder) under tmp_path, not the working tree."""
    monkeypatch.setenv("FEDSWEEP_STORE_DIR", str(tmp_path / "default-store"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture
def no_ray_no_mlflow(monkeypatch):
    """Fail the test if a sweep gets as far as MLflow or Ray."""
    import fedsweep.sweep.runner as runner_mod
    import fedsweep.sweep.stage as stage_mod

    def boom(*a, **k):
        raise AssertionError("MLflow or Ray was started")

    monkeypatch.setattr(runner_mod, "get_client", boom)
    monkeypatch.setattr(stage_mod, "fit_trials", boom)


def config_file(tmp_path: Path, text: str | None = None, **sections) -> Path:
    path = tmp_path / "cfg.yaml"
    if text is None:
        write_yaml(path, small_run("v", "validation", **sections))
    else:
        path.write_text(text)
    return path


GOOD = yaml.safe_dump(small_run("v", "validation"), sort_keys=False)


# ------------------------------------------------------------------------- YAML files
@pytest.mark.parametrize(
    "text, needles",
    [
        ("data:\n\tdataset: mnist\n", ["line 2, column 1", "tab"]),
        ("data: [1,\n", ["line 2, column 1", "not valid YAML"]),
        ("train: {rounds: 2\nmodel: x\n", ["not valid YAML", "line"]),
    ],
    ids=["tab", "unclosed-list", "unclosed-map"],
)
def test_malformed_yaml_names_file_line_and_column(tmp_path, text, needles):
    cfg = config_file(tmp_path, text)
    out = assert_clean(invoke("validate", cfg), str(cfg), *needles)
    assert len(out.strip().splitlines()) == 1


def test_binary_config_and_spec_are_refused(tmp_path):
    blob = tmp_path / "blob.yaml"
    blob.write_bytes(bytes(range(256)))
    assert_clean(invoke("validate", blob), str(blob), "not a text file")
    assert_clean(invoke("run", blob, "--no-track"), str(blob), "not a text file")
    assert_clean(invoke("sweep", blob), str(blob), "not a text file")
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"name: a\x00b\n")
    assert_clean(invoke("validate", nul), "not a text file")


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_config_is_refused(tmp_path, text):
    cfg = config_file(tmp_path, text)
    assert_clean(invoke("validate", cfg), f"config file {cfg} is empty")
    assert_clean(invoke("run", cfg, "--no-track"), "is empty")


@pytest.mark.parametrize(
    "text, key, lines",
    [
        (GOOD + "train:\n  lr: 0.5\n", "'train'", "first at line"),
        (GOOD.replace("lr: 0.001", "lr: 0.001\n  lr: 0.5"), "'lr'", "first at line"),
    ],
    ids=["section-twice", "key-twice"],
)
def test_duplicate_yaml_keys_are_refused(tmp_path, text, key, lines):
    cfg = config_file(tmp_path, text)
    out = assert_clean(invoke("validate", cfg), str(cfg), f"duplicate key {key}", lines)
    assert re.search(r"line \d+, column \d+", out)


def test_duplicate_keys_in_a_spec_are_refused(tmp_path):
    path = write_yaml(tmp_path / "s.yaml", small_spec("dup-fig"))
    path.write_text(path.read_text() + "seeds: [3]\n")
    assert_clean(invoke("sweep", path), "duplicate key 'seeds'", str(path))


def test_overrides_with_broken_yaml_are_clean(tmp_path):
    cfg = config_file(tmp_path)
    assert_clean(invoke("validate", cfg, "--set", "train.lr=[1,"), "not valid YAML")


# ----------------------------------------------------------------------------- numbers
@pytest.mark.parametrize(
    "key, raw, needles",
    [
        ("train.lr", ".inf", ["`train.lr`", "finite", "> 0"]),
        ("train.lr", "1e400", ["`train.lr`", "finite"]),
        ("train.lr", ".nan", ["`train.lr`", "finite"]),
        ("bherd.alpha", "-.inf", ["`bherd.alpha`", "finite"]),
        ("train.rounds", "true", ["`train.rounds`", "got True", "boolean", "integer >= 1"]),
        ("train.lr", "false", ["`train.lr`", "boolean", "a number > 0"]),
        ("data.num_clients", "true", ["`data.num_clients`", "boolean"]),
        ("seed", "false", ["`seed`", "boolean"]),
        ("data.train_subset", "true", ["`data.train_subset`", "boolean"]),
    ],
)
def test_non_finite_and_boolean_numbers_are_refused(tmp_path, key, raw, needles):
    section, _, name = key.rpartition(".")
    tree = small_run("v", "validation")
    node = tree.setdefault(section, {}) if section else tree
    node[name] = "PLACEHOLDER"
    text = yaml.safe_dump(tree).replace("PLACEHOLDER", raw)
    cfg = config_file(tmp_path, text)
    assert_clean(invoke("validate", cfg), *needles)
    assert_clean(invoke("run", cfg, "--no-track"), *needles)


def test_yaml_ints_still_pass_for_float_fields(tmp_path):
    cfg = config_file(tmp_path, GOOD.replace("lr: 0.001", "lr: 1"))
    assert load_config(cfg).train.lr == 1.0
    cfg = config_file(tmp_path, GOOD.replace("lr: 0.001", "lr: 1e-3"))  # a str to PyYAML
    assert load_config(cfg).train.lr == 1e-3


def test_pinned_config_hashes_do_not_change():
    from fedsweep.config.hashing import config_hash

    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "configs").glob("*.yaml")):
        load_config(path)  # every shipped config still validates
    assert len(config_hash(load_config(root / "configs" / "bherd-default.yaml"))) == 16


# ---------------------------------------------------------------------- partitions, models
@pytest.mark.parametrize(
    "data, limit",
    [
        ({"dataset": "mnist-5k", "partition": "case3", "num_clients": 5000}, 4000),
        ({"dataset": "mnist-5k", "partition": "iid", "num_clients": 301, "train_subset": 300}, 300),
        ({"dataset": "cifar10", "partition": "shards", "num_clients": 30000}, 25000),
        ({"dataset": "mnist", "partition": "case2", "num_clients": 55000}, 54215),
        ({"dataset": "cifar100", "partition": "dirichlet", "num_clients": 50001}, 50000),
    ],
    ids=["mnist5k", "subset", "shards", "case2-mnist", "dirichlet"],
)
def test_infeasible_partitions_are_refused(tmp_path, data, limit):
    tree = small_run("v", "validation", data={"train_subset": None, **data})
    tree["data"] = {k: v for k, v in tree["data"].items() if v is not None}
    cfg = write_yaml(tmp_path / "c.yaml", tree)
    out = assert_clean(
        invoke("validate", cfg), "`data.num_clients`", f"got {data['num_clients']}", f"1..{limit}"
    )
    assert "OK" not in out


def test_partition_limits_match_the_partition_code():
    """At the limit every client gets a sample; one more client leaves one empty (or fails)."""
    import numpy as np

    from fedsweep.config.schema import DataConfig
    from fedsweep.data.partitions import make_partition

    labels = np.arange(40) % 10  # the first 40 samples (data.train_subset: 40)
    options = {"dirichlet": {"alpha": 100.0, "min_size": 1}, "shards": {"shards_per_client": 2}}
    for partition in ("case1", "iid", "shards", "dirichlet"):
        data = DataConfig(dataset="mnist-5k", partition=partition, train_subset=40)
        limit, _ = max_clients(data)
        assert limit == (20 if partition == "shards" else 40)
        opts = options.get(partition, {})
        parts = make_partition(partition, labels, limit, rng=0, **opts)
        assert min(len(p) for p in parts) >= 1, partition
        try:
            over = make_partition(partition, labels, limit + 1, rng=0, **opts)
        except ValueError:
            continue
        assert min(len(p) for p in over) == 0, partition
    assert max_clients(DataConfig(dataset="mnist-5k", partition="shards"))[0] == 2000
    assert max_clients(DataConfig(dataset="mnist", partition="case2"))[0] == 54215


def test_resnet18_on_grayscale_data_is_refused(tmp_path):
    cfg = config_file(tmp_path, model={"name": "resnet18"})
    assert_clean(invoke("validate", cfg), "`model.name`", "'resnet18'", "3-channel", "mnist-5k")


def test_cuda_without_gpu_is_refused(tmp_path, monkeypatch, no_ray_no_mlflow):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = config_file(tmp_path)
    out = assert_clean(
        invoke("run", cfg, "--no-track", "--set", "device=cuda"),
        "`device`",
        "no CUDA device is available",
        "cpu, auto",
    )
    assert len(out.strip().splitlines()) == 1
    spec = write_yaml(tmp_path / "s.yaml", small_spec("cuda-fig", base={"device": "cuda"}))
    store = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    assert_clean(
        invoke("sweep", spec, "--profile", "smoke", "--tracking-uri", store),
        "no CUDA device is available",
    )


# ------------------------------------------------------------------------- tracking URIs
@pytest.mark.parametrize(
    "uri, needle",
    [
        ("sqlite:////etc/passwd/x/mlflow.db", "cannot create the folder"),
        ("foo://x", "unknown scheme 'foo'"),
        ("BARE", "file store"),
        ("RO", "not writable"),
    ],
)
def test_bad_tracking_uris_are_one_sentence(tmp_path, uri, needle, no_ray_no_mlflow):
    if uri == "BARE":
        uri = str(tmp_path / "plain-folder")
    if uri == "RO":
        if os.geteuid() == 0:
            pytest.skip("root can write anywhere")
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        uri = f"sqlite:///{ro / 'mlflow.db'}"
    cfg = config_file(tmp_path)
    out = assert_clean(invoke("run", cfg, "--tracking-uri", uri, "-q"), needle)
    assert len(out.strip().splitlines()) == 1
    spec = write_yaml(tmp_path / "s.yaml", small_spec("uri-fig"))
    assert_clean(invoke("sweep", spec, "--profile", "smoke", "--tracking-uri", uri), needle)


def test_runs_with_an_unknown_scheme_is_clean():
    assert_clean(invoke("runs", "--tracking-uri", "foo://x"), "unknown scheme")


# ----------------------------------------------------------------------------- sweep specs
@pytest.mark.parametrize(
    "top, needles",
    [
        ({"seeds": []}, ["seeds", "empty list"]),
        ({"profiles": {"paper": {}, "quick": {}, "smoke": {"seeds": []}}}, ["smoke.seeds"]),
        ({"seeds": [0, 1, 0]}, ["repeated seed", "[0]"]),
        (
            {"profiles": {"paper": {}, "quick": {"seeds": [2, 2]}, "smoke": {}}},
            ["quick.seeds", "repeated seed"],
        ),
        (
            {"curves": [{"label": "a", "set": {}}, {"label": "a", "set": {"bherd.alpha": 0.3}}]},
            ["repeated label", "'a'"],
        ),
        ({"curves": {"key": "bherd.alpha", "values": [0.5, 0.5]}}, ["repeated label"]),
    ],
    ids=["seeds", "profile-seeds", "dup-seeds", "dup-profile-seeds", "dup-labels", "dup-grid"],
)
def test_bad_spec_lists_are_refused(tmp_path, top, needles, no_ray_no_mlflow):
    spec = write_yaml(tmp_path / "s.yaml", small_spec("list-fig", **top))
    assert_clean(invoke("sweep", spec, "--profile", "smoke"), str(spec), *needles)


def test_max_concurrent_below_one_is_refused(tmp_path, no_ray_no_mlflow):
    spec = write_yaml(tmp_path / "s.yaml", small_spec("mc-fig"))
    for value in ("0", "-3"):
        assert_clean(
            invoke("sweep", spec, "--max-concurrent", value), f"--max-concurrent: got {value}"
        )


# ----------------------------------------------------------------------------- figures
@pytest.mark.slow
def test_figures_with_a_bad_sweeps_dir_is_clean(tmp_path):
    from fedsweep.tracking.connect import get_client

    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    get_client(uri)  # a store that exists (a missing one is refused first: test_early_refusals)
    a_file = tmp_path / "file.yaml"
    a_file.write_text("x: 1\n")
    common = ["--out", str(tmp_path / "o"), "--tracking-uri", uri]
    assert_clean(invoke("figures", *common, "--sweeps-dir", a_file), "is a file, not a folder")
    missing = tmp_path / "nope"
    assert_clean(invoke("figures", *common, "--sweeps-dir", missing), "does not exist")
    assert_clean(
        invoke("figures", *common, "--sweeps-dir", SWEEPS, "--figure", "bherd-fig9"),
        "unknown figure id",
    )
    assert_clean(invoke("figures", *common, "--profile", "fast"), "fast")


# ------------------------------------------------------------------------- item 7: security
@pytest.mark.parametrize(
    "figure",
    ["../../../escaped", "/tmp/abs", "a/b", "..", "Upper", "-dash", "a..b", "", "x" * 65],
)
def test_figure_ids_must_be_slugs(tmp_path, figure, no_ray_no_mlflow):
    spec = write_yaml(tmp_path / "s.yaml", small_spec(figure))
    assert_clean(invoke("sweep", spec, "--profile", "smoke"), "not a slug")


def test_extension_figure_ids_must_be_slugs(tmp_path):
    write_yaml(tmp_path / "parent.yaml", small_spec("parent-fig"))
    child = tmp_path / "child.yaml"
    child.write_text("extends: parent-fig\nfigure: ../../outside\ntitle: t\n")
    assert_clean(invoke("sweep", child), "not a slug")


@pytest.mark.slow
def test_shipped_and_test_figure_ids_are_slugs():
    ids = [load_spec(p).figure for p in spec_paths(SWEEPS)]
    assert ids and all(figure_id_problem(i) is None for i in ids)
    for fid in ("bherd-fig3a", "my-alpha-study", "names-fig", "test-fig", "my-fig3a.v2"):
        assert figure_id_problem(fid) is None


def test_removal_outside_ray_results_is_refused(tmp_path):
    root = tmp_path / "store" / "ray_results"
    (root / "fig-smoke" / "trial").mkdir(parents=True)
    outside = tmp_path / "escaped"
    (outside / "keep").mkdir(parents=True)
    for crafted in (
        root / ".." / ".." / "escaped",
        outside,
        root,
        root / ".",
        Path("/"),
    ):
        with pytest.raises(UnsafeRemovalError):
            remove_inside(crafted, root)
    link = root / "link-out"
    link.symlink_to(outside)
    with pytest.raises(UnsafeRemovalError):
        remove_inside(link, root)
    assert (outside / "keep").is_dir() and link.is_symlink()
    remove_inside(root / "fig-smoke", root)  # inside: removed
    assert not (root / "fig-smoke").exists() and root.is_dir()
    remove_inside(root / "gone", root, missing_ok=True)


@pytest.mark.parametrize(
    "sections",
    [
        {"selector": "bherd", "model__name": "mlp", "train__order": "rr"},
        {"algorithm": "scaffold", "train__order": "iid"},
        {"algorithm": "fednova", "fednova__momentum": 0.5, "fednova__gmf": 0.3},
        {"selector": "grab", "grab__variant": "grab_stale_mean"},
    ],
    ids=["bherd-rr", "scaffold-iid", "fednova", "grab-stale-mean"],
)
def test_checkpoints_load_with_weights_only_and_resume_exactly(tmp_path, sections):
    cfg = tiny_config(train__rounds=4, train__local_epochs=0.7, **sections)
    data = tiny_dataset()
    straight = FLRun(cfg, dataset=data)
    straight.run()
    first = FLRun(cfg, dataset=data)
    for _ in range(2):
        first.step()
    path = tmp_path / "fl_state.pt"
    torch.save(first.state_dict(), path)
    state = torch.load(path, weights_only=True)  # no pickled code objects in a checkpoint
    assert state["round"] == 2
    second = FLRun(cfg, dataset=data)
    second.load_state_dict(load_state(path))
    second.run()
    assert second.round == 4 and torch.equal(second.w, straight.w)
    for k, v in straight.record_arrays().items():
        assert (second.record_arrays()[k] == v).all()


def test_trial_restore_reads_weights_only(tmp_path, monkeypatch):
    """``_restore`` (Ray checkpoint -> state) goes through ``torch.load(weights_only=True)``."""
    import json

    import fedsweep.sweep.trial as trial_mod

    seen = []
    real = torch.load

    def spy(*args, **kwargs):
        seen.append(kwargs.get("weights_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(trial_mod.torch, "load", spy)
    run = FLRun(tiny_config(selector="bherd"), dataset=tiny_dataset())
    run.step()
    torch.save(run.state_dict(), tmp_path / trial_mod.STATE_FILE)
    (tmp_path / trial_mod.META_FILE).write_text(json.dumps({"mlflow_run_id": "abc"}))

    class Checkpoint:
        def as_directory(self):
            from contextlib import nullcontext

            return nullcontext(str(tmp_path))

    state, run_id = trial_mod._restore(Checkpoint())
    assert run_id == "abc" and state["round"] == 1 and seen == [True]


def test_pruned_checkpoint_restores_from_the_newest_state(tmp_path):
    """Ray keeps every checkpoint folder, the trial keeps the state file in the newest two only;
    a restore of an older folder (named by a driver snapshot taken before a kill -9) takes the
    newest state of the trial, and a trial with no state left restarts in the same MLflow run."""
    import json

    from ray import tune

    import fedsweep.sweep.trial as trial_mod

    run = FLRun(tiny_config(), dataset=tiny_dataset())
    for k in range(1, 5):
        run.step()
        folder = tmp_path / f"checkpoint_{k:06d}"
        folder.mkdir()
        torch.save(run.state_dict(), folder / trial_mod.STATE_FILE)
        (folder / trial_mod.META_FILE).write_text(json.dumps({"mlflow_run_id": "abc"}))
        trial_mod.prune_states(tmp_path)
    kept = sorted(f.parent.name for f in tmp_path.glob("*/" + trial_mod.STATE_FILE))
    assert kept == ["checkpoint_000003", "checkpoint_000004"]
    assert len(list(tmp_path.glob("checkpoint_*"))) == 4  # every folder stays
    state, run_id = trial_mod._restore(
        tune.Checkpoint.from_directory(tmp_path / "checkpoint_000001")
    )
    assert (state["round"], run_id) == (4, "abc")
    state, _ = trial_mod._restore(tune.Checkpoint.from_directory(tmp_path / "checkpoint_000003"))
    assert state["round"] == 3  # its own state when it still has one
    trial_mod.prune_states(tmp_path, keep=0)
    state, run_id = trial_mod._restore(
        tune.Checkpoint.from_directory(tmp_path / "checkpoint_000002")
    )
    assert (state, run_id) == (None, "abc")


# ------------------------------------------------- samplers, server optimizers (issue 10)
UNI = {"sampler": "uniform"}


@pytest.mark.parametrize(
    "top, needles",
    [
        ({**UNI, "cohort": {"size": 5}}, ["`cohort.size`", "got 5", "1..3"]),
        ({**UNI, "cohort": {"size": 0}}, ["`cohort.size`", "got 0", ">= 1"]),
        ({**UNI, "cohort": {"fraction": 1.5}}, ["`cohort.fraction`", "got 1.5", "<= 1"]),
        ({**UNI, "cohort": {"fraction": 0}}, ["`cohort.fraction`", "got 0", "> 0"]),
        ({**UNI}, ["sampler 'uniform' needs the cohort", "cohort.size", "cohort.fraction"]),
        ({"cohort": {"size": 2}}, ["`cohort.size`", "sampler 'full' trains every client"]),
        ({"sampler": "poc", "cohort": {"size": 2}, "poc": {"d": 1}}, ["`poc.d`", "got 1", "2..3"]),
        ({"sampler": "poc", "cohort": {"size": 2}, "poc": {"d": 4}}, ["`poc.d`", "got 4", "2..3"]),
        ({"sampler": "divfl", "cohort": {"size": 4}}, ["`cohort.size`", "got 4", "1..3"]),
        ({"sampler": "unifrom"}, ["`sampler`", "unknown sampler", "did you mean 'uniform'"]),
        (
            {"algorithm": "centralized", "selector": "none", **UNI, "cohort": {"size": 2}},
            ["cannot be composed with algorithm 'centralized'", "allowed samplers: full"],
        ),
        ({"server_optimizer": "adam", "fedopt": {"beta1": 1.0}}, ["`fedopt.beta1`", "< 1"]),
        ({"server_optimizer": "yogi", "fedopt": {"beta2": -0.1}}, ["`fedopt.beta2`", ">= 0"]),
        ({"server_optimizer": "adam", "fedopt": {"tau": 0}}, ["`fedopt.tau`", "got 0", "> 0"]),
        ({"server_optimizer": "adagrad", "fedopt": {"lr": -1}}, ["`fedopt.lr`", "> 0"]),
        ({"server_sgd": {"lr": 0}}, ["`server_sgd.lr`", "got 0", "> 0"]),
        ({"server_sgd": {"momentum": 1}}, ["`server_sgd.momentum`", "< 1"]),
        ({"server_optimizer": "adamw"}, ["unknown server_optimizer", "did you mean 'adam'"]),
        ({"hooks": ["leash"]}, ["`hooks`", "unknown hook 'leash'"]),
        (
            {"lr_schedule": "step", "lr_step": {"milestones": [200, 100]}},
            ["`lr_step.milestones`", "increasing"],
        ),
        (
            {
                "algorithm": "fednova",
                "selector": "none",
                "fednova": {"gmf": 0.3},
                "server_sgd": {"momentum": 0.5},
            },
            ["fednova.gmf", "old name of `server_sgd.momentum`"],
        ),
    ],
    ids=[
        "m>N",
        "m<1",
        "C>1",
        "C=0",
        "no-cohort",
        "cohort-with-full",
        "poc-d<m",
        "poc-d>N",
        "divfl-m>N",
        "unknown-sampler",
        "centralized-sampled",
        "beta1=1",
        "beta2<0",
        "tau=0",
        "fedopt-lr<0",
        "server-lr=0",
        "momentum=1",
        "unknown-server",
        "unknown-hook",
        "milestones",
        "gmf-conflict",
    ],
)
def test_bad_pipeline_configs_are_refused(tmp_path, top, needles):
    cfg = write_yaml(tmp_path / "c.yaml", small_run("v", "validation", **top))
    assert_clean(invoke("validate", cfg), *needles)
    assert_clean(invoke("run", cfg, "--no-track"), *needles)


def test_bad_pipeline_spec_fails_before_ray_and_mlflow(tmp_path, no_ray_no_mlflow):
    spec = small_spec("bad-cohort", base={"sampler": "poc", "cohort": {"size": 2}, "poc": {"d": 9}})
    path = write_yaml(tmp_path / "bad-cohort.yaml", spec)
    assert_clean(invoke("sweep", path, "--profile", "smoke"), "`poc.d`", "got 9")


@pytest.mark.slow
def test_scheme2_accepts_equal_client_sizes(tmp_path):
    top = {**UNI, "cohort": {"size": 2}, "uniform": {"weighting": "scheme2"}}
    tree = small_run("v", "validation", **top)
    tree["data"] = {**tree["data"], "partition": "iid"}  # 300 samples on 3 clients: 100 each
    res = invoke("validate", write_yaml(tmp_path / "c.yaml", tree))
    assert res.exit_code == 0 and "OK" in res.output, res.output


# ------------------------------------------------------------------------------ issue 48
def test_issue_48_quantity_skew_exponent_range_and_unused(tmp_path, no_ray_no_mlflow):
    """issue 48, item 6: an exponent below 0.05 is refused (it overflowed to negative client
    sizes), and one set without ``quantity_skew: powerlaw`` is refused by ``validate``/``run``,
    left out of the hash where a spec's trials carry it, and refused as a sweep ``--set`` no
    trial reads."""
    from fedsweep.config.hashing import config_hash
    from fedsweep.data.partitions import powerlaw_sizes

    data = {"dataset": "mnist-5k", "partition": "iid", "num_clients": 3, "train_subset": 300}
    skewed = {**data, "quantity_skew": "powerlaw", "quantity_skew_exponent": 0.01}
    cfg = write_yaml(tmp_path / "c.yaml", small_run("v", "validation", data=skewed))
    for cmd in ("validate", "run"):
        assert_clean(
            invoke(cmd, cfg, *(["--no-track"] if cmd == "run" else [])),
            "`data.quantity_skew_exponent`",
            "got 0.01",
            "allowed: a number >= 0.05",
        )
    edge = small_run("v", "validation", data={**skewed, "quantity_skew_exponent": 0.05})
    assert invoke("validate", write_yaml(tmp_path / "e.yaml", edge)).exit_code == 0
    sizes = powerlaw_sizes(60000, 60000, 0.05, 0)  # the smallest exponent, the most clients
    assert sizes.sum() == 60000 and sizes.min() == 1
    with pytest.raises(ValueError, match=r"too small for 1000 clients.*>= 0.05"):
        powerlaw_sizes(60000, 1000, 0.01, 0)  # was: sizes of -9223372036854775806

    unused = small_run("v", "validation", data={**data, "quantity_skew_exponent": 0.5})
    assert_clean(
        invoke("validate", write_yaml(tmp_path / "u.yaml", unused)),
        "field `data.quantity_skew_exponent`: got 0.5, but data.quantity_skew is 'none'",
        "read only with data.quantity_skew powerlaw",
    )
    ok = write_yaml(tmp_path / "ok.yaml", small_run("v", "validation", data=data))
    assert_clean(
        invoke("validate", ok, "--set", "data.quantity_skew_exponent=2"),
        "field `data.quantity_skew_exponent`: got 2.0",
    )
    # a sweep's base may set it for its powerlaw trials: the others keep their hash
    plain = tiny_config(data__partition="iid")
    with_exp = tiny_config(data__partition="iid", data__quantity_skew_exponent=0.5)
    assert config_hash(with_exp) == config_hash(plain)
    skew = tiny_config(data__partition="iid", data__quantity_skew="powerlaw")
    skew_exp = tiny_config(
        data__partition="iid", data__quantity_skew="powerlaw", data__quantity_skew_exponent=0.5
    )
    assert config_hash(skew_exp) != config_hash(skew)
    spec = write_yaml(tmp_path / "s.yaml", small_spec("skewless"))
    assert_clean(
        invoke("sweep", spec, "--profile", "smoke", "--set", "data.quantity_skew_exponent=2"),
        "--set data.quantity_skew_exponent: no trial of this sweep reads it",
    )


def test_issue_48_integers_beyond_int64_are_refused(tmp_path):
    """issue 48, item 8: ``train.rounds`` beyond a 64-bit integer passed ``validate``."""
    cfg = config_file(tmp_path, train={"rounds": 10**20, "batch_size": 25, "lr": 0.001})
    assert_clean(
        invoke("validate", cfg),
        "field `train.rounds`: got 100000000000000000000: does not fit a 64-bit integer",
        f"(allowed: an integer >= 1 and <= {2**63 - 1})",
    )
    at_max = config_file(tmp_path, train={"rounds": 2**63 - 1, "batch_size": 25, "lr": 0.001})
    assert invoke("validate", at_max).exit_code == 0
    spec = write_yaml(tmp_path / "s.yaml", small_spec("huge-seed", seeds=(0, 2**64)))
    assert_clean(invoke("sweep", spec, "--plan", "--profile", "smoke"), "does not fit a 64-bit")


@pytest.mark.parametrize("label", ["two\nlines", "nul\x00byte", "tab\there"])
def test_issue_48_labels_are_one_printable_line(tmp_path, label, no_ray_no_mlflow):
    """issue 48, item 8: a curve, panel or reading label with a newline or NUL was accepted
    (it is a trial id, a run name and a legend entry)."""
    curves = [{"label": label, "set": {"bherd.alpha": 0.5}}]
    spec = write_yaml(tmp_path / "c.yaml", small_spec("lab", curves=curves))
    assert_clean(
        invoke("sweep", spec, "--plan", "--profile", "smoke"),
        f"curves: label {label!r} has the control character",
        "a label is one line of printable text",
    )
    choice = {"id": "a", "label": label, "set": {"data.partition": "case1"}}
    spec = write_yaml(tmp_path / "p.yaml", small_spec("lab", panels={"setting": [choice]}))
    assert_clean(invoke("sweep", spec, "--plan", "--profile", "smoke"), "panels.setting: label")
    reading = [{"label": label, "set": {"bherd.alpha": 0.3}}]
    spec = write_yaml(tmp_path / "r.yaml", small_spec("lab", readings=reading))
    assert_clean(invoke("sweep", spec, "--plan", "--profile", "smoke"), "readings: label")


def test_libyaml_and_python_loaders_read_every_shipped_file_alike():
    """The fast loader (libyaml's parser, PyYAML's constructor) gives the Python loader's data
    for every shipped spec and config, and a bad file is reported in the Python loader's words
    (line and column)."""
    import yaml

    from fedsweep.config import yamlio

    if yamlio.FastUniqueKeyLoader is None:
        pytest.skip("PyYAML without libyaml")
    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "sweeps").glob("*.yaml")) + sorted((root / "configs").rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        text = path.read_text()
        slow = yaml.load(text, Loader=yamlio.UniqueKeyLoader)  # noqa: S506
        fast = yaml.load(text, Loader=yamlio.FastUniqueKeyLoader)  # noqa: S506
        assert repr(fast) == repr(slow), path
    with pytest.raises(yamlio.YamlFileError) as err:
        yamlio.loads("a: 1\nb:\n\t- 2\n", "x.yaml")
    assert str(err.value) == (
        "x.yaml, line 3, column 1: not valid YAML: while scanning for the next token found "
        "character '\\t' that cannot start any token (YAML does not allow tab characters for "
        "indentation; use spaces)"
    )
