"""A slot written as its component with its settings (a component block) is the same config
as the component's name plus its sections: same values, same hash, the same ``--set`` keys; and
``--set slot.key`` sets the chosen component's setting."""

from __future__ import annotations

import pytest

from fedsweep.config.hashing import config_hash
from fedsweep.config.load import ConfigError, build_config
from fedsweep.config.schema import expand_blocks

TREE = {
    "device": "cpu",
    "data": {"dataset": "mnist-5k", "num_clients": 3},
    "train": {"rounds": 2, "lr": 0.01},
    "tracking": {"enabled": False},
}


def config(overrides=None, **top):
    return build_config({**TREE, **top}, overrides)


def test_a_block_is_its_sections():
    block = config(server_optimizer={"name": "adam", "lr": 0.01, "tau": 0.1})
    flat = config(server_optimizer="adam", fedopt={"lr": 0.01, "tau": 0.1})
    assert block == flat and config_hash(block) == config_hash(flat)
    assert (block.server_optimizer, block.fedopt.lr, block.fedopt.tau) == ("adam", 0.01, 0.1)
    sampler = config(sampler={"name": "uniform", "size": 2, "weighting": "simple"})
    assert (sampler.sampler, sampler.cohort.size, sampler.uniform.weighting) == (
        "uniform",
        2,
        "simple",
    )
    hooks = expand_blocks({"hooks": [{"name": "fedwalk", "tau": 0.5, "task": "LH"}]})
    assert hooks == {"hooks": ["fedwalk"], "fedwalk": {"tau": 0.5}, "leash": {"task": "LH"}}


def test_overrides_reach_a_block_and_slot_keys_map_to_sections():
    tree = {"server_optimizer": {"name": "adam", "lr": 0.01}}
    assert config({"fedopt.lr": 0.5}, **tree).fedopt.lr == 0.5  # the override wins
    assert config({"server_optimizer.lr": 0.5}, **tree).fedopt.lr == 0.5
    # the new component first, then its setting, whatever the order on the command line
    swapped = config({"server_optimizer.lr": 0.3, "server_optimizer": "sgd"}, **tree)
    assert (swapped.server_optimizer, swapped.server_sgd.lr) == ("sgd", 0.3)
    assert swapped.fedopt.lr == 0.1  # the file's adam settings went with adam (default again)
    # no slot in the file: its default component's setting
    assert config({"server_optimizer.momentum": 0.5}).server_sgd.momentum == 0.5


@pytest.mark.parametrize(
    ("tree", "overrides", "message"),
    [
        ({"server_optimizer": {"name": "adam", "beta": 0.1}}, None, "has no setting 'beta'"),
        ({"server_optimizer": {"name": "adamw"}}, None, "allowed: sgd"),
        ({"server_optimizer": "adam"}, {"server_optimizer.beta": 0.1}, "allowed: beta1, beta2"),
        (
            {"server_optimizer": {"name": "adam", "lr": 0.2}, "fedopt": {"lr": 0.3}},
            None,
            "give it once",
        ),
        ({"hooks": [{"tau": 0.5}]}, None, "needs `name`"),
    ],
)
def test_bad_blocks_name_the_field(tree, overrides, message):
    with pytest.raises(ConfigError, match=message):
        config(overrides, **tree)
