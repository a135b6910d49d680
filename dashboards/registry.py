"""The papers' figures, collected: ``BUILDERS`` (figure id -> builder, ``BuildContext ->
FigureResult``; every other spec is drawn by the generic layout, ``dashboards.generic.build``, see
``build.builder_for``), ``METRIC_KEYS`` (figure id -> how its spec's metric names map to MLflow
keys, ``build.check_metrics``) and ``REPORT_SECTIONS`` (name -> a paper's extra block for
``fedsweep report``, called as ``add(results, rebuild, tracking_uri, profile, sweeps_dir)``: it
may append Markdown to its figures' ``report_tables``).

Each paper is a package of ``dashboards.papers`` exposing its ``BUILDERS``; a figure id given by
two papers is an error at import. Claims are declared data (``fedsweep.specs.claims``), judged by
:mod:`fedsweep.judge`, never here.
"""

from __future__ import annotations

from collections.abc import Callable

from dashboards.model import BuildContext, FigureResult

# The one import from the generic layer into the papers: the registry collects them. Every
# other module of dashboards/ is generic and imports no paper (the papers import it), so the
# imports stay one-way and circle-free.
from dashboards.papers import bherd, fedveca, fedwalk, intro

Builder = Callable[[BuildContext], FigureResult]

PAPERS = (bherd, intro, fedveca, fedwalk)


def _collect(table: str) -> dict:
    out: dict = {}
    for paper in PAPERS:
        for key, value in getattr(paper, table, {}).items():
            if key in out:
                raise ValueError(f"{paper.__name__}: {table} {key!r} is another paper's too")
            out[key] = value
    return out


BUILDERS: dict[str, Builder] = _collect("BUILDERS")
METRIC_KEYS: dict[str, Callable[[str], str]] = _collect("METRIC_KEYS")
REPORT_SECTIONS: dict[str, Callable[..., object]] = _collect("REPORT_SECTIONS")
