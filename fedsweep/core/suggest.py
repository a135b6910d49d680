"""Did-you-mean: the allowed value nearest to a mistyped one, for every message that refuses."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(value: str, allowed: Iterable[str]) -> str | None:
    """The allowed value nearest to ``value`` (typos, swapped letters), or None."""
    found = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(value: str, allowed: Iterable[str]) -> str:
    """``" (did you mean 'alpha'?)"`` for a close match among ``allowed``, else ``""``."""
    close = closest(value, allowed)
    return f" (did you mean {close!r}?)" if close else ""
