"""``fedsweep``: run FL experiments from YAML configs and browse them in MLflow.

One module per command group (``run.py``: run/validate, ``sweep.py``, ``figures.py``,
``ui.py``); ``common.py`` holds the shared options and the clean error path.
"""

from __future__ import annotations

import os

import typer

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from fedsweep.cli import figures, run, sweep, ui  # noqa: E402

app = typer.Typer(
    name="fedsweep",
    help="Faithful federated-learning runs, tracked in MLflow.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command()(run.run)
app.command()(sweep.sweep)
app.command()(figures.figures)
app.command()(run.validate)
app.command()(ui.ui)


if __name__ == "__main__":  # pragma: no cover
    app()
