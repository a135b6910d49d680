"""The base of every typed config section: unknown keys, booleans given as numbers and
non-finite numbers are errors. Each component (base method, selector, sampler, server optimizer,
schedule) defines its own section next to its code; ``fedsweep.config.schema`` assembles them."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


def _numeric_kind(annotation: Any) -> str | None:
    """ "an integer" / "a number" for an ``int`` / ``float`` field (``X | None``, ``Annotated``
    and unions such as ``int | Literal['full']`` included)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _numeric_kind(typing.get_args(annotation)[0])
    if _is_union(annotation):
        kinds = [_numeric_kind(a) for a in typing.get_args(annotation)]
        return (
            "an integer" if "an integer" in kinds else ("a number" if "a number" in kinds else None)
        )
    if annotation is int:
        return "an integer"
    if annotation is float:
        return "a number"
    return None


def _element_kind(annotation: Any) -> str | None:
    """The numeric kind of a list's or tuple's elements (``list[int]``, ``tuple[float, ...]``,
    optional or annotated), else None."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _element_kind(typing.get_args(annotation)[0])
    if _is_union(annotation):
        kinds = [_element_kind(a) for a in typing.get_args(annotation)]
        return next((k for k in kinds if k), None)
    if typing.get_origin(annotation) in (list, tuple, set, frozenset):
        kinds = [_numeric_kind(a) for a in typing.get_args(annotation) if a is not Ellipsis]
        return next((k for k in kinds if k), None)
    return None


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


class NoBoolNumbers(BaseModel):
    """A model whose numeric fields (``int``, ``float``, lists of them; optional, annotated or
    in a union) refuse YAML booleans: ``true``, ``yes`` and ``on`` all load as True, which
    pydantic would read as 1. Config sections and sweep specs both derive from it."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """``true``/``false`` are not numbers: pydantic would read ``rounds: true`` as 1."""
        if info.field_name is None:
            return value
        field = cls.model_fields[info.field_name]
        if isinstance(value, bool):
            kind = _numeric_kind(field.annotation)
            if kind is not None:
                raise ValueError(
                    f"a boolean is not {kind} (allowed: {kind}{numeric_bounds(field)})"
                )
        elif isinstance(value, list | tuple) and any(isinstance(v, bool) for v in value):
            kind = _element_kind(field.annotation)
            if kind is not None:  # `milestones: [yes]` would read as [1]
                noun = kind.split(" ", 1)[1]
                raise ValueError(f"a boolean is not {kind} (allowed: a list of {noun}s)")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _fits_int64(cls, value: Any, info: ValidationInfo) -> Any:
        """An integer beyond 64 bits (``rounds: 99999999999999999999``) passes pydantic's
        ``int`` but not numpy, torch or MLflow: refused here, not mid-run."""
        if info.field_name is None:
            return value
        items = value if isinstance(value, list | tuple) else (value,)
        for item in items:
            if _beyond_int64(item):
                bounds = numeric_bounds(cls.model_fields[info.field_name])
                joined = f"{bounds} and" if bounds else ""
                what = f"{item} does" if item is not value else "does"
                raise ValueError(
                    f"{what} not fit a 64-bit integer (allowed: an integer{joined} <= {INT64[1]})"
                )
        return value


#: the range of a 64-bit signed integer (numpy's and torch's int64, MLflow's integers)
INT64 = (-(2**63), 2**63 - 1)


def _beyond_int64(value: Any) -> bool:
    return (
        isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]
    )


class Section(NoBoolNumbers):
    # allow_inf_nan=False: `.inf`, `1e400` (overflows to inf) and `.nan` are refused everywhere
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


def numeric_bounds(field) -> str:
    """`` >= 1``, `` > 0 and <= 1``: the numeric constraints of a field, for messages."""
    parts = []
    metadata = list(field.metadata)
    annotation = field.annotation
    for option in typing.get_args(annotation) if _is_union(annotation) else (annotation,):
        if typing.get_origin(option) is typing.Annotated:  # ``Annotated[int, Field(ge=1)]``
            for extra in typing.get_args(option)[1:]:
                metadata += list(getattr(extra, "metadata", [extra]))
    for meta in metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(meta, attr, None)
            if bound is not None:
                parts.append(f"{sign} {bound}")
    return " " + " and ".join(parts) if parts else ""
