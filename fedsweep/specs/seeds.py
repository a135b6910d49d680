"""``--seeds``: the seeds a command runs or reads instead of the profile's, as typed on the
command line (read before anything heavy is imported: a bad value answers at once)."""

from __future__ import annotations


class SeedsError(ValueError):
    """A ``--seeds`` value that names no seeds: the message names the bad part and the forms."""


#: the most seeds ``--seeds`` may name (a typo such as 0-99999 is not a sweep)
MAX_SEEDS = 1000


def parse_seeds(text: str | None) -> list[int] | None:
    """``--seeds``: ``"10"`` (a count: seeds 0..9), ``"0-9"`` (a range), ``"0,1,5"`` or
    ``"0-4,7"`` (``"3,"``: the one seed 3) -> the seeds, sorted, each once; None for None.
    Raises :class:`SeedsError` naming the bad part and the allowed forms."""
    if text is None:
        return None
    allowed = "allowed: a count N (seeds 0..N-1), a range A-B, or a list such as 0,1,5 or 0-4,7"
    text = text.strip()
    if not text.isascii():  # str.isdigit() and int() also take '²' and other scripts' digits
        raise SeedsError(f"--seeds: got {text!r}: not ASCII digits ({allowed})")
    if text.isdigit():
        count = int(text)
        if not 1 <= count <= MAX_SEEDS:
            raise SeedsError(f"--seeds: got {text!r} (a count from 1 to {MAX_SEEDS}; {allowed})")
        return list(range(count))
    seeds: dict[int, None] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:  # "3," is the one seed 3
            continue
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise SeedsError(f"--seeds: got {text!r}: bad part {part!r} ({allowed})")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise SeedsError(f"--seeds: got {text!r}: {part!r} runs backwards ({allowed})")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise SeedsError(f"--seeds: got {text!r}: more than {MAX_SEEDS} seeds ({allowed})")
        seeds.update(dict.fromkeys(range(first, last + 1)))
    if not seeds:
        raise SeedsError(f"--seeds: got {text!r}: no seed ({allowed})")
    return sorted(seeds)


def seeds_text(seeds: list[int]) -> str:
    """The shortest ``--seeds`` form of ``seeds``: ``"0-9"``, ``"0-4,7"``."""
    parts, run = [], []
    for s in seeds:
        if run and s == run[-1] + 1:
            run.append(s)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [s]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)
