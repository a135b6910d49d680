"""BHerd (docs/figures.md, "BHerd"; sweeps/bherd-fig*.yaml): Fig. 2a/2b (``fig2``), the
hyper-parameter sweeps of Fig. 3a–3d (``fig3``), the selection records of Fig. 4a–c
(``fig4abc``), the per-client distances of Fig. 4d (``fig4d``), random reshuffling in Fig. 4e
(``fig4e``), our diagnosis of Fig. 3a's null result (``diagnosis``) and the named measures and
guards of its claims (``fedsweep.judge.papers.bherd``; the claims themselves are declared in
``sweeps/bherd-*.yaml`` and judged by :mod:`fedsweep.judge.claim`)."""

from __future__ import annotations

from dashboards.papers.bherd import diagnosis, fig2, fig3, fig4abc, fig4d, fig4e

BUILDERS = {
    "bherd-fig2a": fig2.build,
    "bherd-fig2b": fig2.build,
    "bherd-fig3a": fig3.build,
    "bherd-fig3b": fig3.build,
    "bherd-fig3c": fig3.build,
    "bherd-fig3d": fig3.build,
    "bherd-fig4abc": fig4abc.build,
    "bherd-fig4d": fig4d.build,
    "bherd-fig4e": fig4e.build,
    "bherd-diagnosis": diagnosis.build,
}

__all__ = ["BUILDERS"]
