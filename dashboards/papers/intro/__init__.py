"""The introduction-to-FL figures (docs/figures.md, "Introduction-to-FL slides").

``intro-sampling`` and ``intro-selection`` are the generic layout (curves over rounds). The
other four add what McMahan's and Charles et al.'s tables and the slides' Fig. 11 show, drawn
from the seed-mean curves (``fedsweep.judge.targets``: rounds to the profile's ``target_acc``, "> T"
when not reached within T); the claims read the same rounds per run:

* ``intro-fedavg``: test accuracy over rounds per partition, with the target as a dotted line,
  and below a table of rounds to the target and speed-up over FedSGD (McMahan's Table 2 form);
* ``intro-epochs``: test accuracy over rounds, and rounds to the target against E;
* ``intro-cohort``: test and training accuracy over rounds, rounds to the target against M,
  and the catastrophic training failures per M (a run's training accuracy falling to at most
  half of the previous round's, counted per run);
* ``intro-fedopt`` (``fedopt``): the curves are a learning-rate grid; per method only the grid
  point with the best seed-mean final test accuracy is drawn (grid points with a diverged or
  blown-up seed excluded: ``fedopt.best_of_grid``), and a table gives the whole grid.

The claims are declared in ``sweeps/intro-*.yaml`` (judged by :mod:`fedsweep.judge.claim`); the
slides' own measures and guards they name are ``fedsweep.judge.papers.intro``; what the figures share,
``common``.
"""

from __future__ import annotations

from dashboards.papers.intro import fedopt, figures

BUILDERS = {
    "intro-fedavg": figures.build_fedavg,
    "intro-epochs": figures.build_epochs,
    "intro-cohort": figures.build_cohort,
    "intro-fedopt": fedopt.build_fedopt,
    "intro-sampling": figures.build_generic,
    "intro-selection": figures.build_generic,
}

__all__ = ["BUILDERS"]
