"""Refusals before the heavy imports (issue 49, item 4): an unknown config key (in ``fedsweep
run``'s config file or its ``--set``, in ``fedsweep sweep --set``), a tracking URI that cannot be
used and a ``--storage`` that cannot hold checkpoints answer in the time Python takes to start,
not after torch's, Ray's and MLflow's imports (1-4 s idle on a 2-core machine, more loaded).

Nothing here imports torch, Ray or MLflow's store: the keys come from the run config's key index
(``fedsweep.config.keys``; without an index for this source, the check is left to the full
validation, which writes it), the URI check is ``tracking.uri.check_tracking_uri`` creating
nothing, the storage check ``sweep.remote_state.storage_problem``. Each command validates in
full afterwards as before; the messages are the full validation's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedsweep.cli.common import UsageError


def overrides_of(items: list[str] | None) -> dict[str, Any] | None:
    """``--set key=value`` items as ``fedsweep.config.load.parse_overrides`` reads them, or None
    when one is malformed (that message is the full parser's)."""
    from fedsweep.config.yamlio import YamlFileError, loads

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            return None
        try:
            out[key.strip()] = loads(raw, f"override {item!r}") if raw.strip() else None
        except YamlFileError:
            return None
    return out


def refuse_unknown_keys(
    tree: Any, overrides: dict[str, Any] | None, source: str, header: str | None = None
) -> None:
    """:class:`UsageError` with the full validation's message when ``tree`` with ``overrides``
    has a key the run config does not know (``fedsweep.config.keys.unknown_key_lines``);
    ``header``: its first line (default: ``invalid config (<source>):``)."""
    from fedsweep.config.keys import unknown_key_lines

    lines = unknown_key_lines(tree, overrides)
    if lines:
        raise UsageError("\n".join([header or f"invalid config ({source}):", *lines]))


def refuse_tracking_uri(uri: str | None) -> None:
    """The tracking URI's problem (``TrackingUriError``), creating nothing: its scheme, a
    server that does not answer, a database that does not open one connection, a SQLite file
    whose folder cannot be made or written."""
    from fedsweep.tracking import credentials
    from fedsweep.tracking.connect import check_database
    from fedsweep.tracking.uri import check_tracking_uri, resolve_tracking_uri

    resolved = resolve_tracking_uri(uri)
    check_tracking_uri(resolved, write=True, create=False)
    if credentials.scheme(resolved) in credentials.DB_SCHEMES:
        check_database(resolved)


def refuse_run_early(
    config: Path,
    items: list[str] | None,
    data_dir: str | None,
    tracking_uri: str | None,
    no_track: bool,
) -> None:
    """``fedsweep run``: an unknown key of the config file or ``--set``, then the tracking URI
    when the run is tracked (as ``fedsweep.cli.run._load`` and ``_check_runnable`` see them)."""
    from fedsweep.config.yamlio import YamlFileError, read_yaml

    sets = overrides_of(items)
    if sets is None or not Path(config).is_file():
        return
    if data_dir:
        sets["data.root"] = str(Path(data_dir).resolve())
    if tracking_uri:
        sets["tracking.uri"] = tracking_uri
    try:
        tree = read_yaml(config, "config file")
    except (YamlFileError, RecursionError):
        return  # the full load names the problem
    if not isinstance(tree, dict):
        return
    from fedsweep.specs.names import sweep_spec_refusal

    refusal = sweep_spec_refusal(config, tree, "run")
    if refusal:
        raise UsageError(refusal)
    refuse_unknown_keys(tree, None, str(config))  # the file's own keys first
    given = {k: v for k, v in sets.items() if k not in ("data.root", "tracking.uri")}
    # a typo on the command line: the message says --set, not "the config file is invalid"
    refuse_unknown_keys({}, given, str(config), f"invalid --set (applied to {config}):")
    tracking = tree.get("tracking") if isinstance(tree.get("tracking"), dict) else {}
    enabled = sets.get("tracking.enabled", tracking.get("enabled", True))
    uri = sets.get("tracking.uri", tracking.get("uri"))
    if not no_track and enabled is True and (uri is None or isinstance(uri, str)):
        refuse_tracking_uri(uri)


def refuse_sweep_early(
    names: list[str] | None,
    sweeps_dir: Path,
    items: list[str] | None,
    plan: bool,
    tracking_uri: str | None,
    storage: str | None,
) -> None:
    """``fedsweep sweep``: an unknown ``--set`` key (named as the first spec's trials would
    name it), then, unless ``--plan`` (which reads the store and writes nothing), the tracking
    URI, ``$FEDSWEEP_CLAIM_STALE_S`` and ``--storage``."""
    from fedsweep.specs.names import spec_path

    sets = overrides_of(items)
    if sets and names:
        path = spec_path(names[0], sweeps_dir)
        # the name a sweep's trials give their config: the spec's path, resolved by a sweep
        # (fedsweep.sweep.runner), as given by --plan (fedsweep.sweep.plan)
        source = str(path if plan else path.resolve())
        # the keys come from the command line: the message says so, not "the spec is invalid"
        header = f"invalid --set (applied to every trial of {source}):"
        refuse_unknown_keys({}, sets, source, header)
    if plan:
        return
    refuse_tracking_uri(tracking_uri)
    from fedsweep.tracking.leases import LeaseSettingError, stale_s

    try:  # the leases' setting (trials read it too): a bad value, before anything runs
        stale_s()
    except LeaseSettingError as err:
        raise UsageError(str(err)) from None
    from fedsweep.sweep.remote_state import storage_problem

    problem = storage_problem(storage)
    if problem:
        raise UsageError(problem)
