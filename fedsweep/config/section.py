"""The base of every typed config section: unknown keys, booleans given as numbers and
non-finite numbers are errors. Each component (base method, selector, sampler, server optimizer,
schedule) defines its own section next to its code; ``fedsweep.config.schema`` assembles them."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


def _numeric_kind(annotation: Any) -> str | None:
    """ "an integer" / "a number" for an ``int`` / ``float`` field (``X | None`` included)."""
    options = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    if int in options:
        return "an integer"
    if float in options:
        return "a number"
    return None


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


class Section(BaseModel):
    # allow_inf_nan=False: `.inf`, `1e400` (overflows to inf) and `.nan` are refused everywhere
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """``true``/``false`` are not numbers: pydantic would read ``rounds: true`` as 1."""
        if isinstance(value, bool) and info.field_name is not None:
            field = cls.model_fields[info.field_name]
            kind = _numeric_kind(field.annotation)
            if kind is not None:
                raise ValueError(
                    f"a boolean is not {kind} (allowed: {kind}{numeric_bounds(field)})"
                )
        return value


def numeric_bounds(field) -> str:
    """`` >= 1``, `` > 0 and <= 1``: the numeric constraints of a field, for messages."""
    parts = []
    for meta in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(meta, attr, None)
            if bound is not None:
                parts.append(f"{sign} {bound}")
    return " " + " and ".join(parts) if parts else ""
