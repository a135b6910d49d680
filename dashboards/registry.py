"""Figure id -> builder (``BuildContext -> FigureResult``) of the paper figures; every other spec
is drawn by the generic layout (``dashboards.generic.build``, see ``build.builder_for``)."""

from __future__ import annotations

from collections.abc import Callable

from dashboards import (
    bherd_fig2,
    bherd_fig3,
    bherd_fig4abc,
    bherd_fig4d,
    bherd_fig4e,
    fedveca,
    fedwalk,
    intro,
)
from dashboards.model import BuildContext, FigureResult

Builder = Callable[[BuildContext], FigureResult]

BUILDERS: dict[str, Builder] = {
    "bherd-fig2a": bherd_fig2.build,
    "bherd-fig2b": bherd_fig2.build,
    "bherd-fig3a": bherd_fig3.build,
    "bherd-fig3b": bherd_fig3.build,
    "bherd-fig3c": bherd_fig3.build,
    "bherd-fig3d": bherd_fig3.build,
    "bherd-fig4abc": bherd_fig4abc.build,
    "bherd-fig4d": bherd_fig4d.build,
    "bherd-fig4e": bherd_fig4e.build,
    "intro-fedavg": intro.build_fedavg,
    "intro-epochs": intro.build_epochs,
    "intro-cohort": intro.build_cohort,
    "intro-fedopt": intro.build_fedopt,
    "intro-sampling": intro.build_generic,
    "intro-selection": intro.build_generic,
    "fedveca-fig3": fedveca.build_curves,
    "fedveca-fig4": fedveca.build_premise,
    "fedveca-fig5": fedveca.build_curves,
    "fedveca-fig6": fedveca.build_estimates,
    "fedveca-fig7": fedveca.build_curves,
    "fedveca-fig8": fedveca.build_curves,
    "fedwalk-table2": fedwalk.build_table2,
    "fedwalk-fig2": fedwalk.build_fig2,
    "fedwalk-fig3": fedwalk.build_fig3,
    "fedwalk-fig4": fedwalk.build_fig4,
    "fedwalk-fig5": fedwalk.build_fig5,
}
