"""``fedsweep team up|down|status``: a research group's services on one machine (PostgreSQL, an
MLflow tracking server with proxied artifacts, a Ray head); ``fedsweep.team.local`` does the
work, docs/how-to/team.md shows the same on several machines."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import Command, Group, UsageError, clean_errors

team_app = typer.Typer(
    name="team",
    cls=Group,
    help="Shared services for a research group: PostgreSQL, an MLflow server, a Ray head.",
    no_args_is_help=True,
)

HomeOption = Annotated[
    Path,
    typer.Option(
        metavar="DIR",
        help="The services' folder: database, artifacts, logs, password file.",
    ),
]
DEFAULT_HOME = Path("~/.fedsweep/team")


@team_app.command(cls=Command)
def up(
    home: HomeOption = DEFAULT_HOME,
    host: Annotated[
        str,
        typer.Option(
            metavar="ADDRESS",
            help="The address the three services listen on (this machine's LAN address for "
            "other machines to join; default: this machine only).",
        ),
    ] = "127.0.0.1",
    pg_port: Annotated[int, typer.Option(metavar="PORT", help="PostgreSQL's port.")] = 5433,
    mlflow_port: Annotated[
        int, typer.Option(metavar="PORT", help="The MLflow server's port (UI and tracking).")
    ] = 5001,
    ray_port: Annotated[int, typer.Option(metavar="PORT", help="The Ray head's port.")] = 6380,
    ray_cpus: Annotated[
        int | None,
        typer.Option(metavar="N", help="CPUs the Ray head offers (default: all of them)."),
    ] = None,
    auth: Annotated[
        bool,
        typer.Option(
            "--auth",
            help="The MLflow server asks every request for a user and password (MLflow's "
            "basic-auth app; the admin's generated password in DIR/mlflow-admin; members "
            "export MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD). Kept once set.",
        ),
    ] = False,
) -> None:
    """Start PostgreSQL, an MLflow server on it and a Ray head; print the addresses and what
    to export. Idempotent: a service that runs already is left as it is.

    The database password is generated once and kept in DIR/pgpass (mode 600); no password is
    printed or put in a URI. Stop everything with `fedsweep team down`."""
    from fedsweep.team.local import Team, TeamError
    from fedsweep.team.local import up as start

    home = home.expanduser().resolve()
    with clean_errors():
        try:
            team = start(
                Team(home, host, pg_port, mlflow_port, ray_port, ray_cpus, auth),
                echo=typer.echo,
            )
        except TeamError as err:
            raise UsageError(str(err)) from None
    typer.echo("\nexport these (also in " + str(team.home / "team.env") + "):")
    for key, value in team.env.items():
        typer.echo(f"  export {key}={value}")
    typer.echo(
        f"then: fedsweep sweep SPEC   (trains on the Ray head {team.ray_address}: "
        f"$FEDSWEEP_RAY_ADDRESS; runs and UI: {team.tracking_uri})"
    )


@team_app.command(cls=Command)
def down(home: HomeOption = DEFAULT_HOME) -> None:
    """Stop the services `fedsweep team up` started (their data stays in DIR)."""
    from fedsweep.team.local import down as stop

    stop(home.expanduser().resolve(), echo=typer.echo)


@team_app.command(cls=Command)
def status(home: HomeOption = DEFAULT_HOME) -> None:
    """Whether each service answers; exit 1 when one does not."""
    from fedsweep.team.local import Team
    from fedsweep.team.local import status as look

    home = home.expanduser().resolve()
    team = Team.load(home)
    if team is None:
        typer.echo(f"no team services recorded in {home} (start them: fedsweep team up)")
        raise typer.Exit(1)
    states = look(home)
    where = {"postgres": team.database_uri, "mlflow": team.tracking_uri, "ray": team.ray_address}
    for name, ok in states.items():
        typer.echo(f"{name:<9} {'up  ' if ok else 'DOWN'}  {where[name]}")
    raise typer.Exit(0 if all(states.values()) else 1)
