"""The spec language, below the sweep driver and the dashboards: a figure's spec (``sweeps/*.yaml``,
load.py) -> its plan (figure.py: panels, curves, trials with their configs and config hashes,
derived curves, data substitutions, claims). Nothing is imported here: ``fedsweep.specs.names``
is read before the heavy imports."""
