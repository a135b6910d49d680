"""Issue 63, item 5: the sweep driver in functions a reader can hold (none over 100 lines, no
file of fedsweep/sweep/ at 800), and the tests' crashes on purpose kept out of the production
trial payload: they come through a test-only ``--plugin`` module (``tests/faults.py``) that
the trial asks for observers (``trial.plugin_observers``)."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

from fedsweep.specs.load import expand, load_spec
from fedsweep.sweep.ray_backend import trial_payload
from fedsweep.sweep.runner import run_sweep
from tests.faults import Crash, fault_plugins
from tests.helpers import small_spec, write_yaml

SWEEP = Path(__file__).resolve().parents[2] / "fedsweep" / "sweep"


def test_no_function_of_the_sweep_driver_is_over_100_lines_nor_a_file_at_800():
    long = []
    for path in sorted(SWEEP.glob("*.py")):
        text = path.read_text()
        assert len(text.splitlines()) < 800, path
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 100:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_trial_payload_carries_no_fault_injection(tmp_path):
    spec_path = write_yaml(tmp_path / "s.yaml", small_spec("shape"))
    spec = load_spec(spec_path)
    trial = expand(spec, "smoke")[0]
    payload = trial_payload(trial, spec, "sqlite:///x.db", "shape", "parent")
    assert not {k for k in payload if "fail" in k}, sorted(payload)
    assert "fail_at" not in inspect.signature(run_sweep).parameters


def test_a_plugin_module_adds_observers_to_the_trials_it_names(tmp_path):
    """Only the payload's own plugin modules are asked (a Ray worker keeps the modules of
    earlier sweeps' trials); a resumed attempt gets past the crash."""
    from fedsweep.sweep.trial import plugin_observers

    spec_path = write_yaml(tmp_path / "s.yaml", small_spec("shape"))
    spec = load_spec(spec_path)
    a, b = expand(spec, "smoke")[:2]
    plugins = fault_plugins(tmp_path, {a.trial_id: (3, "enospc")})
    sys.path.append(plugins[1][1])
    try:
        __import__(plugins[1][0])
        mine = trial_payload(a, spec, "sqlite:///x.db", "shape", "parent", plugins)
        (crash,) = plugin_observers(mine, tmp_path / "state", resumed=False)
        assert isinstance(crash, Crash) and (crash.at, crash.kind) == (3, "enospc")
        assert plugin_observers(mine, tmp_path / "state", resumed=True) == []
        other = trial_payload(b, spec, "sqlite:///x.db", "shape", "parent", plugins)
        assert plugin_observers(other, None, resumed=False) == []
        plain = trial_payload(a, spec, "sqlite:///x.db", "shape", "parent")
        assert plugin_observers(plain, None, resumed=False) == []
    finally:
        sys.path.remove(plugins[1][1])
        sys.modules.pop(plugins[1][0], None)
