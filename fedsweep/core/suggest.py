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


def edits(a: str, b: str) -> int:
    """The edits (insert, delete, replace, swap two neighbours) that turn ``a`` into ``b``."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            row.append(cost)
        prev2, prev = prev, row
    return prev[-1]


def typo_of(value: str, allowed: Iterable[str], most: int = 2) -> str | None:
    """The allowed value ``value`` is a typo of (at most ``most`` edits away; the nearest),
    or None: a stricter test than :func:`closest`, for refusing a name another source (a
    store) might still know."""
    near = sorted((edits(str(value), str(a)), str(a)) for a in allowed)
    return near[0][1] if near and 0 < near[0][0] <= most else None
