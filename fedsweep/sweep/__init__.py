"""Sweeps: the trials of a figure's plan (``fedsweep.specs``: panels x curves x seeds of run
configs) scheduled by Ray Tune (runner.py), each tracked as an MLflow child run.

The spec language is a layer of its own, ``fedsweep.specs`` (its modules lived here until
issue 50; the old names ``fedsweep.sweep.spec``, ``spec_model``, ... no longer import)."""
