"""``fedsweep``: run FL experiments from YAML configs and browse them in MLflow.

One module per command group (``run.py``: run/validate, ``sweep.py``, ``figures.py``,
``explore.py``: runs/compare, ``bundle.py``: bundle/verify, ``ui.py``, ``team.py``: team up/down/status); ``common.py`` holds the shared options, the help
conventions (``Command``/``Group``) and the clean error path.
"""

from __future__ import annotations

import os

import typer

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from fedsweep.cli import bundle, explore, figures, report, robustness, run, sweep, team, ui  # noqa: E402
from fedsweep.cli.common import EXIT_CODES_HELP, Command, Group  # noqa: E402

app = typer.Typer(
    name="fedsweep",
    cls=Group,
    help="Faithful federated-learning runs, tracked in MLflow.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=True,  # --install-completion: tab completion of --figure/--profile
    pretty_exceptions_enable=False,
)

app.command(cls=Command)(run.run)
app.command(cls=Command)(sweep.sweep)
app.command(cls=Command)(figures.figures)
app.command(cls=Command)(report.report)
app.command(cls=Command)(robustness.robustness)
app.command(cls=Command)(bundle.bundle)
app.command(cls=Command)(bundle.verify)
app.command(cls=Command)(run.validate)
app.command(cls=Command)(explore.runs)
app.command("find", cls=Command, hidden=True)(explore.runs)
app.command(cls=Command)(explore.compare)
app.command(cls=Command)(ui.ui)
app.add_typer(team.team_app)


if __name__ == "__main__":  # pragma: no cover
    app()
