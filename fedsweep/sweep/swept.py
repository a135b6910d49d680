"""Which profiles a store holds swept runs for, newest sweep first.

A reading command given no ``--profile`` (``fedsweep figures``) draws what the store has: the
profile of the newest swept run of the figures asked for. Swept runs carry the tags
``fedsweep.figure`` and ``fedsweep.profile`` and live in the experiment named after their
figure (docs/concepts/tracking.md), so this is one ``search_runs`` per profile, newest first,
one row each: cheap on a store of any size.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedsweep.specs.load import PROFILES
from fedsweep.tracking.connect import get_client
from fedsweep.tracking.uri import store_missing


@dataclass(frozen=True)
class SweptProfile:
    profile: str
    #: start time (ms since the epoch) of the newest run of the figures at this profile
    newest_ms: int


def swept_profiles(tracking_uri: str, figures: list[str] | None = None) -> list[SweptProfile]:
    """The profiles with swept runs of ``figures`` (None: of any figure) in the store at
    ``tracking_uri``, the most recently swept first; ``[]`` when the store does not exist or
    holds none."""
    if store_missing(tracking_uri):
        return []
    client = get_client(tracking_uri, create=False)
    if figures:
        found = (client.get_experiment_by_name(f) for f in dict.fromkeys(figures))
        experiments = [e.experiment_id for e in found if e is not None]
    else:
        experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    out = []
    for profile in PROFILES:
        runs = client.search_runs(
            experiments,
            filter_string=f"tags.`fedsweep.profile` = '{profile}'",
            max_results=1,
            order_by=["attributes.start_time DESC"],
        )
        if runs:
            out.append(SweptProfile(profile, int(runs[0].info.start_time or 0)))
    return sorted(out, key=lambda s: (-s.newest_ms, s.profile))
