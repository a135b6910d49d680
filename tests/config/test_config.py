"""Typed configs: bad values fail up front naming the field, the value and the allowed values."""

from __future__ import annotations

import pytest

from fedsweep.config.load import ConfigError, build_config, load_config, parse_overrides


def test_defaults_are_the_bherd_paper_settings():
    cfg = build_config({})
    assert (cfg.train.rounds, cfg.train.batch_size, cfg.train.lr, cfg.train.local_epochs) == (
        500,
        100,
        1e-4,
        1.0,
    )
    assert cfg.bherd.alpha == 0.5 and cfg.bherd.round == "half_up"
    assert cfg.bherd.scale == "E_over_alpha"


def test_bad_enum_value_names_field_value_and_allowed():
    with pytest.raises(ConfigError) as err:
        build_config({"train": {"order": "shuffle"}})
    msg = str(err.value)
    assert "train.order" in msg and "'shuffle'" in msg
    assert "'fixed'" in msg and "'rr'" in msg and "'iid'" in msg


def test_out_of_range_and_unknown_key():
    with pytest.raises(ConfigError, match=r"bherd\.alpha.*1\.5"):
        build_config({"bherd": {"alpha": 1.5}})
    with pytest.raises(ConfigError, match=r"train\.lrr.*unknown key"):
        build_config({"train": {"lrr": 0.1}})


def test_unknown_algorithm_lists_allowed():
    with pytest.raises(ConfigError, match=r"algorithm.*'fedsgd'.*fedavg.*centralized"):
        build_config({"algorithm": "fedsgd"})


def test_invalid_selector_composition_is_rejected_with_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        build_config({"algorithm": "centralized", "selector": "bherd"})
    msg = str(err.value)
    assert "'bherd' cannot be composed with algorithm 'centralized'" in msg
    assert "bherd-fedavg" in msg


def test_overrides_are_yaml_typed_and_dotted():
    sets = parse_overrides(
        [
            "train.lr=0.01",
            "selector=bherd",
            "bherd.alpha=0.3",
            "data.partition=case2",
            "eval.train_metrics=false",
        ]
    )
    cfg = build_config({}, sets)
    assert cfg.train.lr == 0.01 and cfg.bherd.alpha == 0.3
    assert cfg.data.partition == "case2" and cfg.eval.train_metrics is False
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["train.lr"])


def test_load_config_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("selector: bherd\ntrain:\n  rounds: 7\n")
    cfg = load_config(path, ["bherd.alpha=0.7"])
    assert cfg.selector == "bherd" and cfg.train.rounds == 7 and cfg.bherd.alpha == 0.7
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")


def test_shipped_configs_validate():
    from pathlib import Path

    files = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
    assert files
    for f in files:
        load_config(f)
    default = load_config(Path(__file__).resolve().parents[2] / "configs" / "bherd-default.yaml")
    assert (default.model.name, default.data.dataset, default.data.num_clients) == (
        "svm",
        "mnist",
        5,
    )
    assert (default.data.partition, default.train.order, default.train.rounds) == (
        "case3",
        "fixed",
        500,
    )
    assert default.selector == "bherd" and default.bherd.alpha == 0.5
