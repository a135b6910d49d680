"""FedWalk (docs/figures.md, "FedWalk"; sweeps/fedwalk-*.yaml): the figures and the claims.

Every number is the paper's "global model with the highest accuracy" (W11): per run the best
value over rounds (``fedsweep.judge.reducers``), then the seed mean ± std (``--band sem``: ± the
standard error; ``none``: no error bars). The final-round value is shown beside it (table
cells, CSV, hover text). Accuracies are in percent, as in the paper.

* ``fedwalk-table2``: a table, rows the eight methods, per setting the best training and test
  accuracy and the chosen η_0; leashed rows carry their difference to the base method
  (FedWalk − FedAvg, SCAFFOLD+FedWalk − SCAFFOLD, ...) in points. The same table is written
  as ``fedwalk-table2.csv`` (one row per method × setting, final values included) and
  ``fedwalk-table2.tex`` (booktabs) beside the figure. The η_0 of each method and setting is
  the grid point with the best seed-mean best test accuracy; grid points with a diverged or
  blown-up seed are no candidates (W4; ``methods.choose_lr``);
* ``fedwalk-fig2``: the training loss over rounds per setting, each method at the η_0 the
  table chose there (seed mean ± band), the leashed methods dashed;
* ``fedwalk-fig3``: best test accuracy against τ, one colour per leash task (points with
  error bars, a quadratic least-squares trend line through the seed means);
* ``fedwalk-fig4``: grouped bars per setting, FedWalk (red) vs pre-training (blue) per leash
  task, FedAvg without a leash as a dashed reference line;
* ``fedwalk-fig5``: FedAvg and FedWalk against the Dirichlet a (log axis), and below the gain
  FedWalk − FedAvg.

``--diff-from`` does not apply (a learning-rate choice or a summary per run, not curves of
one label).

Modules: ``table2``, ``fig2`` … ``fig5`` (the figures), ``common`` (what they share),
``methods`` (a curve's Table 2 method, the η_0 grid and choice), ``fedsweep.judge.papers.fedwalk`` (the named
measures of the paper's claims; the claims themselves are declared in
``sweeps/fedwalk-*.yaml``: each method at its chosen η_0 is a ``tune:`` comparison).
"""

from __future__ import annotations

from dashboards.papers.fedwalk import fig2, fig3, fig4, fig5, table2

BUILDERS = {
    "fedwalk-table2": table2.build_table2,
    "fedwalk-fig2": fig2.build_fig2,
    "fedwalk-fig3": fig3.build_fig3,
    "fedwalk-fig4": fig4.build_fig4,
    "fedwalk-fig5": fig5.build_fig5,
}

__all__ = ["BUILDERS"]
