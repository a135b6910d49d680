"""fedsweep's figure dashboards: MLflow runs -> Plotly figures of the papers (docs/figures.md).

``build_figures(tracking_uri, profile, out_dir, figures, sweeps_dir)`` builds the figures,
writes ``<id>.html`` (offline), ``<id>.png``/``.pdf``/``.svg`` and merges them into
``index.html``; ``BUILDERS`` maps the paper figures' ids to their builders, every other spec is
drawn by the generic layout (``dashboards.generic``).
"""

from dashboards.build import FigureSelectionError, build_figures
from dashboards.model import FigureOptions, FigureResult
from dashboards.registry import BUILDERS
from fedsweep.judge.verdicts import ClaimVerdict

__all__ = [
    "BUILDERS",
    "ClaimVerdict",
    "FigureOptions",
    "FigureResult",
    "FigureSelectionError",
    "build_figures",
]
