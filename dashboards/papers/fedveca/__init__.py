"""FedVeca (docs/figures.md, "FedVeca"; sweeps/fedveca-fig3 … fig8.yaml): the figures
(``figures``: the curves of Fig. 3, 5, 7, 8, the premise of Fig. 4, one run's estimates in
Fig. 6), the named measures and guard of its claims (``fedsweep.judge.papers.fedveca``; the claims themselves are
declared in the specs) and the verdicts under R1 against the damped variant (``variant``)."""

from __future__ import annotations

from dashboards.papers.fedveca import figures, variant

BUILDERS = {
    "fedveca-fig3": figures.build_curves,
    "fedveca-fig4": figures.build_premise,
    "fedveca-fig5": figures.build_curves,
    "fedveca-fig6": figures.build_estimates,
    "fedveca-fig7": figures.build_curves,
    "fedveca-fig8": figures.build_curves,
}

#: figure id -> a spec metric's MLflow key, for the figures whose specs name per-client metrics
#: by their last part (Fig. 6: ``tau`` = ``client/{i}/tau``; ``build.check_metrics``)
METRIC_KEYS = {"fedveca-fig6": figures.metric_key}

#: the FedVeca report's extra block: the verdicts under R1 against our reconstruction's damped
#: variant [U] (issue 35; ``fedsweep report`` calls it, ``dashboards.registry`` collects it)
REPORT_SECTIONS = {"fedveca-variant": variant.add_variant_section}

__all__ = ["BUILDERS", "METRIC_KEYS", "REPORT_SECTIONS"]
