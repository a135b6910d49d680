"""Typed run configuration (pydantic): validated up front, before anything runs.

``fedsweep.config.schema`` (the ``RunConfig``), ``fedsweep.config.load`` (files, ``--set``
overrides, error messages), ``fedsweep.config.hashing`` (the config hash) and
``fedsweep.core.section`` (the base of every component's section). Nothing is imported here:
components import ``section`` without pulling in the schema that imports them.
"""
