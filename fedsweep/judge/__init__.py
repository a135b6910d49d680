"""The judge: declared claims (``fedsweep.specs.claims``) decided on a figure's runs.

A layer of its own, on top of the specs and beside the sweep, below the figures: nothing here
draws, and nothing here imports Plotly or ``dashboards``. From the ground up:

* :mod:`~fedsweep.judge.stats`: per-seed effects, Student-t intervals, the four verdicts,
  Holm's correction, the seeds a claim needs;
* :mod:`~fedsweep.judge.reducers`, :mod:`~fedsweep.judge.targets`: per-run reductions of a
  metric history (best, final) and rounds to a target;
* :mod:`~fedsweep.judge.panels`: a figure's panels and their regimes;
* :mod:`~fedsweep.judge.runs`: :class:`~fedsweep.judge.runs.ClaimData`, one figure's runs as the
  claims read them (per seed, per round; diverged and blown-up seeds);
* :mod:`~fedsweep.judge.evidence`: a claim's parts decided and recorded, per panel;
* :mod:`~fedsweep.judge.measures` (and :mod:`~fedsweep.judge.papers`): the named measures and
  guards a claim declares;
* :mod:`~fedsweep.judge.degenerate`: two sides that computed the same thing;
* :mod:`~fedsweep.judge.claim`: one declared claim judged on one figure's data;
* :mod:`~fedsweep.judge.verdicts`: :class:`~fedsweep.judge.verdicts.ClaimVerdict` per claim
  and regime, :class:`~fedsweep.judge.verdicts.FigureVerdicts` per figure;
* :mod:`~fedsweep.judge.check`: whether a spec's claims can be judged, before anything runs.
"""

from fedsweep.judge.runs import RunTable
from fedsweep.judge.verdicts import ClaimVerdict, FigureVerdicts, judge

__all__ = ["ClaimVerdict", "FigureVerdicts", "RunTable", "judge"]
