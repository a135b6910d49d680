"""One-sentence error texts: the first line of an exception, for messages that must not carry a
traceback or a library's page of advice."""

from __future__ import annotations


def first_line(err: BaseException, limit: int | None = 300) -> str:
    """The first line of ``str(err)`` (its class name when it has no text), cut at ``limit``
    characters (None: whole)."""
    line = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return line if limit is None else line[:limit]
