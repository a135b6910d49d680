"""How a ``fedsweep sweep`` ends when it is stopped or its disk fills: SIGTERM acts as Ctrl-C
(:func:`sigterm_as_sigint`), and either stop is one line saying what was done, where the
checkpoints are and the command that continues it (exit 130 or 143); a full file system is one
line naming it (exit 1), not Ray's and MLflow's chains of tracebacks (:func:`one_line_stops`)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from fedsweep.cli.common import clean_errors, on_sigterm


@contextmanager
def one_line_stops(
    specs, profile: str, panel, storage, tracking_uri, seeds: str | None
) -> Iterator[None]:
    """The block runs the sweeps of a command (its messages outside Ray's capture), SIGTERM
    acting as Ctrl-C (:func:`sigterm_as_sigint`). A stop, even one during an outage of the
    store, leaves as :func:`interrupted` says; a full file system as one line, exit 1. The
    command line's ``--panel``, ``--storage``, ``--tracking-uri`` and ``--seeds`` are for the
    line that says how to continue."""
    terminated: list[int] = []
    stop = None
    try:
        # (messages outside the capture)
        with clean_errors(), sigterm_as_sigint(terminated) as stop:
            yield
    except KeyboardInterrupt as err:
        interrupted(err, terminated, specs, profile, panel, storage, tracking_uri, seeds=seeds)
    except Exception as err:
        full = disk_full_at(err, tracking_uri)
        if full is None and (terminated or (stop is not None and stop.requested)):
            # Ctrl-C or SIGTERM during an outage of the store: its clean-up writes failed fast
            # (one try each: sigterm_as_sigint), and the stop is still a stop
            from fedsweep.core.errors import first_line

            why = f"the store did not answer the clean-up ({first_line(err, 160)})"
            interrupted(
                why, terminated, specs, profile, panel, storage, tracking_uri, marked=False,
                seeds=seeds,
            )  # fmt: skip
        if full is None:
            raise
        # a full file system: one line naming it (the runs are ended as far as the store
        # can still be written), not Ray's and MLflow's chains of tracebacks
        typer.secho(f"sweep failed: {full}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None


@contextmanager
def sigterm_as_sigint(seen: list[int]):
    """While inside, SIGTERM (a scheduler, ``timeout``, ``docker stop``) acts as Ctrl-C: during
    the trials Ray Tune stops them gracefully (checkpoints saved), elsewhere it raises
    KeyboardInterrupt; either way the sweep's runs end KILLED. ``seen`` records it. After
    either signal every MLflow request is tried once (``tracking.outage.brief_once_stopped``):
    the clean-up of a sweep stopped during an outage of the store took MLflow's retries,
    minutes. Yields whether a stop was asked for (``.requested``)."""
    from fedsweep.tracking.outage import brief_once_stopped, relay_sigint, stop_requested

    def on_term(signum, frame):
        seen.append(signum)
        stop_requested()
        signal.raise_signal(signal.SIGINT)

    previous = signal.getsignal(signal.SIGINT)
    with brief_once_stopped() as stop, on_sigterm(on_term):
        relay_sigint()  # Ctrl-C outside a fit (Ray Tune's fit wraps its own: sweep.ray_backend)
        try:
            yield stop
        finally:
            with contextlib.suppress(ValueError, TypeError):  # not the main thread
                signal.signal(signal.SIGINT, previous)


def interrupted(
    err, terminated, specs, profile, panel, storage, tracking_uri, marked: bool = True,
    seeds: str | None = None,
) -> None:  # fmt: skip
    """The one line of a sweep stopped by Ctrl-C or SIGTERM (what was done, where the
    checkpoints are, the command that continues it), then exit 130 or 143. ``marked``: False
    when the store could not be written (an outage): the runs are left for the next sweep."""
    from fedsweep.sweep.runner import StoppedBeforeItsRun

    how = "SIGTERM" if terminated else "Ctrl-C"
    detail = f"{err}; " if str(err) else ""
    command = " ".join(
        ["fedsweep sweep", *map(str, specs), "--profile", profile]
        + [f"--panel {p}" for p in panel or []]
        + ([f"--seeds {seeds}"] if seeds else [])
    )
    if isinstance(err, StoppedBeforeItsRun):  # e.g. a driver that waited with --wait
        typer.echo(
            f"interrupted ({how}): {detail}it had opened no parent run (none marked KILLED). "
            f"Run it again with: {command} (and the same options)",
            err=True,
        )
        raise typer.Exit(128 + (signal.SIGTERM if terminated else signal.SIGINT)) from None
    again = f"{command} --resume"
    kept = (
        ""
        if "checkpoints are kept" in detail
        else f"; their checkpoints are kept in {checkpoints_at(storage, tracking_uri)}"
    )
    runs = (
        "the sweep's parent run and its unfinished trials are marked KILLED"
        if marked
        else "the sweep's runs could not be marked KILLED now (the next sweep of the figure "
        "ends those left RUNNING)"
    )
    typer.echo(
        f"interrupted ({how}): {detail}{runs}{kept}. Continue with: {again} (and the same "
        "--set options)",
        err=True,
    )
    raise typer.Exit(128 + (signal.SIGTERM if terminated else signal.SIGINT)) from None


def checkpoints_at(storage: str | None, tracking_uri: str | None) -> str:
    """Where a sweep keeps its trials' checkpoints: ``--storage`` (a folder, or an object store
    such as ``s3://bucket/prefix``, its credentials masked), else ``<store dir>/ray_results``
    (``tracking.uri.ray_results_dir``)."""
    from fedsweep.tracking.credentials import redact
    from fedsweep.tracking.uri import ray_results_dir, resolve_tracking_uri

    if storage:
        return redact(str(storage))
    try:
        return str(ray_results_dir(resolve_tracking_uri(tracking_uri)))
    except Exception:  # noqa: BLE001 - a hint on the way out
        return "the store's ray_results folder"


def disk_full_at(err: BaseException, tracking_uri: str | None):
    """A full file system in ``err``'s chain (``fedsweep.sweep.trial.disk_full``), naming the
    store's folder when it names no path; else None."""
    from fedsweep.sweep.store_index import store_folder
    from fedsweep.sweep.trial import disk_full
    from fedsweep.tracking.uri import default_store_dir, resolve_tracking_uri

    full = disk_full(err)
    if full is None:
        return None
    return full.at(store_folder(resolve_tracking_uri(tracking_uri)) or default_store_dir())
