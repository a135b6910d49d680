"""FedAvgM (``server_optimizer: avgm``): the worked example of a new component, one file
(``fedsweep/components/server_optimizers/avgm.py``) and this test."""

from __future__ import annotations

import pytest
import torch

from fedsweep.components.compose import SERVER_OPTIMIZERS, config_sections, method_label
from fedsweep.config.hashing import config_hash
from fedsweep.config.load import ConfigError
from fedsweep.core.messages import RoundContext
from tests.helpers import run_rounds, tiny_config, tiny_dataset

F64 = torch.float64


def test_registered_with_its_section_and_defaults():
    cfg = tiny_config(server_optimizer="avgm")
    assert "avgm" in SERVER_OPTIMIZERS
    assert (cfg.fedavgm.lr, cfg.fedavgm.momentum) == (1.0, 0.9)
    assert config_sections(cfg)[-1] == "fedavgm"
    assert method_label(cfg) == "fedavg"  # a server optimizer does not rename the method


def test_two_steps_by_hand():
    """v_1 = u_1; w_1 = w_0 − η_s v_1; v_2 = β v_1 + u_2; w_2 = w_1 − η_s v_2 (β=0.5, η_s=2)."""
    cfg = tiny_config(server_optimizer="avgm", fedavgm__lr=2.0, fedavgm__momentum=0.5)
    opt = SERVER_OPTIMIZERS["avgm"](cfg)
    w = torch.tensor([1.0, 2.0], dtype=F64)
    ctx = RoundContext(round=1, lr=0.1, local_epochs=1.0)
    opt.setup(w)
    w = opt.step(w, torch.tensor([0.5, -1.0], dtype=F64), ctx)
    assert w.tolist() == [0.0, 4.0]
    w = opt.step(w, torch.tensor([0.5, 0.5], dtype=F64), ctx)
    assert w.tolist() == [-1.5, 4.0]
    again = SERVER_OPTIMIZERS["avgm"](cfg)  # the buffer survives a checkpoint
    again.setup(w)
    again.load_state_dict(opt.state_dict())
    assert torch.equal(again.v, opt.v)


def test_equals_server_sgd_momentum_under_a_constant_rate():
    """v in model units vs server_sgd's buffer in gradient units: the same steps while η is
    constant (to rounding), different arithmetic, so not bit for bit."""
    data = tiny_dataset()
    avgm = run_rounds(tiny_config(server_optimizer="avgm", fedavgm__momentum=0.6), data)
    sgd = run_rounds(tiny_config(server_sgd__momentum=0.6), data)
    assert torch.allclose(avgm.w, sgd.w, rtol=1e-5, atol=1e-6)
    plain = run_rounds(tiny_config(), data)
    assert not torch.allclose(avgm.w, plain.w, rtol=1e-3, atol=1e-4)


def test_component_block_and_hash():
    block = tiny_config(server_optimizer={"name": "avgm", "momentum": 0.5})
    flat = tiny_config(server_optimizer="avgm", fedavgm__momentum=0.5)
    assert block == flat and config_hash(block) == config_hash(flat)
    # a new component's section leaves every other run's hash as it was: unused, default
    assert config_hash(tiny_config()) == config_hash(tiny_config(unused="keep"))
    with pytest.raises(ConfigError, match="momentum"):
        tiny_config(server_optimizer="avgm", fedavgm__momentum=1.0)
    with pytest.raises(ConfigError, match="no setting 'beta'"):
        tiny_config(server_optimizer={"name": "avgm", "beta": 0.5})
