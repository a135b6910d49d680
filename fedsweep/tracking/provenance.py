"""A found run is what its hash tag says it is, or it is not reused.

Sweeps reuse a finished run whose ``fedsweep.config_hash`` tag equals a trial's hash
(``tracking.direct.done_runs_by_hash``). A tag is only a claim: a config could set it through
``tracking.tags`` (refused since issue 48, but older runs and other writers of a shared store
exist), and a run adopted under a wrong hash puts its curve into another figure's verdicts.
So before a run is adopted its logged config (``config.yaml``, written once when the run was
created, ``tracking.run_logger``) is read back, validated, and hashed the way the trial was: the
tag must be that config's hash or its legacy hash (``config.hashing.legacy_config_hash``). A run
that fails is skipped with one warning naming it; an older run of the same hash that passes is
taken instead, else the trial runs.

Verdicts are kept per process by run id (a finished run's config does not change), so a sweep
reads each adopted run's config once however often it looks it up.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence

from fedsweep.tracking.run_logger import CONFIG_FILE as CONFIG_ARTIFACT
from fedsweep.tracking.runstore import as_store

#: run id -> "" when its logged config hashes to its tag, else why not
_CHECKED: dict[str, str] = {}
_WARNED: set[str] = set()


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


def logged_config_text(client, run_id: str) -> str:
    """The run's ``config.yaml`` (OSError / the store's exception when it has none);
    ``client``: MLflow's client or a ``tracking.runstore`` store."""
    return as_store(client).read_text(run_id, CONFIG_ARTIFACT)


def hash_problem(client, run_id: str, tag: str) -> str:
    """ "" when run ``run_id``'s logged config hashes to ``tag`` (its hash or legacy hash), else
    a short reason."""
    from pydantic import ValidationError

    from fedsweep.config.hashing import config_hash, legacy_config_hash
    from fedsweep.config.schema import RunConfig
    from fedsweep.config.yamlio import loads

    try:
        # libyaml's parser where PyYAML has it, within the loader's bounds: a logged config
        # of nested aliases (a few hundred bytes standing for 10^9 values) is refused before
        # validation walks it
        tree = loads(logged_config_text(client, run_id), f"run {run_id}'s config.yaml")
    except Exception as err:  # noqa: BLE001 - no artifact, unreachable store, bad YAML
        return f"its logged config cannot be read ({type(err).__name__})"
    try:
        config = RunConfig.model_validate(tree)
    except (ValidationError, TypeError, ValueError) as err:
        first = (str(err).splitlines() or [""])[0]
        return f"its logged config is not a valid config ({first[:120]})"
    found = config_hash(config)
    if tag not in (found, legacy_config_hash(config)):
        return f"its logged config hashes to {found}"
    return ""


def verified_done_runs(
    client,
    hashes: Iterable[str],
    warn: Callable[[str], None] | None = None,
    statuses: Sequence[str] | None = None,
) -> dict[str, tuple[str, int]]:
    """``done_runs_by_hash`` with every run checked (:func:`hash_problem`): for each hash, its
    latest started done run (``statuses``, default ``tracking.direct.DONE_STATUSES``) whose
    logged config hashes to the tag (``client``: MLflow's
    client or a ``tracking.runstore`` store). A run that fails is named
    in one warning (``warn``, default stderr; once per run and process) and skipped."""
    say = warn or _warn
    store = as_store(client)
    out: dict[str, tuple[str, int]] = {}
    found = (
        store.done_run_candidates(hashes)
        if statuses is None
        else store.done_run_candidates(hashes, statuses)
    )
    for h, candidates in found.items():
        for run_id, start in candidates:
            if run_id not in _CHECKED:
                _CHECKED[run_id] = hash_problem(store, run_id, h)
            problem = _CHECKED[run_id]
            if not problem:
                out[h] = (run_id, start)
                break
            if run_id not in _WARNED:
                _WARNED.add(run_id)
                say(
                    f"run {run_id} is tagged fedsweep.config_hash={h}, but {problem}: not "
                    "reused (a forged or corrupted tag)"
                )
    return out
