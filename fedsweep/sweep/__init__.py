"""Sweeps: the trials of a figure's plan (``fedsweep.specs``: panels x curves x seeds of run
configs) scheduled by Ray Tune (runner.py), each tracked as an MLflow child run."""
