"""The spec language's old module names (``fedsweep.sweep.spec`` and the others moved to
``fedsweep.specs``, issue 50) import as the new modules themselves, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys

import pytest

from fedsweep.sweep import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_name_is_the_new_module(old):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old]):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_the_old_spec_imports_keep_working():
    from fedsweep.sweep.spec import expand as old_expand
    from fedsweep.sweep.spec import load_spec as old_load_spec

    from fedsweep.specs.load import expand, load_spec

    assert (old_expand, old_load_spec) == (expand, load_spec)


def test_a_name_that_never_was_here_is_still_missing():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fedsweep.sweep.no_such_module")
