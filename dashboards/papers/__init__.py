"""The papers' figures and claims, one package per paper (``bherd``, ``intro``, ``fedveca``,
``fedwalk``). Each package exposes ``BUILDERS`` (figure id -> builder) and, while its claims
are prose-keyed, ``CRITERIA`` (normalized claim text -> criterion; a paper whose claims are
declared in its specs registers named measures and guards instead, ``intro.measures``);
``dashboards.registry`` collects them.

Imports go one way: a paper imports the generic modules of ``dashboards`` (``figdata``,
``generic``, ``claims``, ``style``, ``store``, ...), never another paper; no generic module
imports a paper, except the registry that collects them.
"""
