"""The papers' own measures and guards (one module per paper), registered on import with
:func:`fedsweep.judge.measures.measure` and :func:`~fedsweep.judge.measures.guard`."""

from __future__ import annotations

from fedsweep.judge.papers import bherd, fedveca, fedwalk, intro

__all__ = ["bherd", "fedveca", "fedwalk", "intro"]
