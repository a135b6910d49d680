"""The papers' figures and claims, one package per paper (``bherd``, ``intro``, ``fedveca``,
``fedwalk``). Each package exposes ``BUILDERS`` (figure id -> builder) and ``CRITERIA``
(normalized claim text -> criterion); ``dashboards.registry`` collects them.

Imports go one way: a paper imports the generic modules of ``dashboards`` (``figdata``,
``generic``, ``claims``, ``style``, ``store``, ...), never another paper; no generic module
imports a paper, except the registry that collects them.
"""
