"""The papers' figures, one package per paper (``bherd``, ``intro``, ``fedveca``, ``fedwalk``).
Each package exposes ``BUILDERS`` (figure id -> builder); ``dashboards.registry`` collects them.
Their claims are declared in the specs and judged by :mod:`fedsweep.judge` (the papers' own
measures and guards: :mod:`fedsweep.judge.papers`).

Imports go one way: a paper imports the generic modules of ``dashboards`` (``figdata``,
``generic``, ``style``, ``store``, ...), never another paper; no generic module imports a paper,
except the registry that collects them.
"""
