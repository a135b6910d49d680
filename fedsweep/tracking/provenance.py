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

The figures and the reports apply the same check to the run they draw for each config hash
(:class:`DrawnRuns`, used by ``fedsweep.judge.store.RunIndex``): a run that fails is skipped with one
warning naming it, an older run of the hash that passes drawn instead. So that a figure of
hundreds of runs does not read every run's config on every build, a verdict is also kept in a
small local file (``$FEDSWEEP_PROVENANCE_CACHE``, default the user's cache folder
``fedsweep/provenance``; ``0``/``off`` keeps none), keyed by the run id, its tag and, for a run
whose artifacts are a local folder, the size and modification time of its ``config.yaml``: a
config rewritten since is checked again. A remote artifact store's run is keyed by its id and
tag only (reading its config's size would be a round trip too).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

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


def hash_problem(client, run_id: str, tag: str, folder: Path | None = None) -> str:
    """ "" when run ``run_id``'s logged config hashes to ``tag`` (its hash or legacy hash), else
    a short reason. ``folder``: the run's local artifact folder, read directly when given."""
    from pydantic import ValidationError

    from fedsweep.config.hashing import config_hash, legacy_config_hash
    from fedsweep.config.schema import RunConfig
    from fedsweep.config.yamlio import loads, read_yaml

    try:
        # libyaml's parser where PyYAML has it, within the loader's bounds: a logged config
        # of nested aliases (a few hundred bytes standing for 10^9 values) is refused before
        # validation walks it
        source = f"run {run_id}'s config.yaml"
        if folder is not None:  # read at most the loader's bound
            tree = read_yaml(folder / CONFIG_ARTIFACT, source)
        else:
            tree = loads(logged_config_text(client, run_id), source)
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


#: the environment variable naming the folder of the drawn runs' verdicts (``0``/``off``: none)
CACHE_ENV = "FEDSWEEP_PROVENANCE_CACHE"
CACHE_FILE = "checked.json"
#: the most verdicts the file keeps (the newest written); a run id and tag are ~60 bytes
CACHE_MAX = 200_000


def _cache_path() -> Path | None:
    from fedsweep.core.cache import cache_folder

    folder = cache_folder(CACHE_ENV, "provenance")
    return None if folder is None else folder / CACHE_FILE


class DrawnRuns:
    """The check before a run is drawn (the module's docstring): ``problem(run_id, tag,
    artifact_uri)`` is "" for a run whose logged config hashes to its tag, else why not, named
    in one warning per run and process (``warn``, default stderr); :meth:`save` keeps the new
    verdicts in the local file."""

    def __init__(self, client, warn: Callable[[str], None] | None = None):
        self.client = client
        self.say = warn or _warn
        self.path = _cache_path()
        self.saved: dict[str, str] = {}
        self.new: dict[str, str] = {}
        #: run id -> why it was skipped (the runs a build left out)
        self.skipped: dict[str, str] = {}
        if self.path is not None:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                if isinstance(data, dict):
                    self.saved = {str(k): str(v) for k, v in data.items()}
            except (OSError, ValueError):
                pass  # no file yet, or a broken one: checked again, then rewritten

    def problem(self, run_id: str, tag: str, artifact_uri: str | None = None) -> str:
        from fedsweep.tracking.uri import file_uri_path

        folder = file_uri_path(artifact_uri) if artifact_uri else None
        stamp = "remote"
        if folder is not None:
            try:
                st = (folder / CONFIG_ARTIFACT).stat()
                stamp = f"{st.st_size}-{st.st_mtime_ns}"
            except OSError:
                stamp = ""  # no config: checked (and failed) every time, never kept
        key = f"{run_id} {tag} {stamp}"
        found = self.new.get(key, self.saved.get(key)) if stamp else None
        if found is None:
            found = hash_problem(self.client, run_id, tag, folder)
            if stamp:
                self.new[key] = found
        if found:
            self.skipped[run_id] = found
            if run_id not in _WARNED:
                _WARNED.add(run_id)
                self.say(
                    f"run {run_id} is tagged fedsweep.config_hash={tag}, but {found}: not drawn "
                    "(a forged or corrupted tag; an older run of the hash is drawn if one passes)"
                )
        return found

    def save(self) -> None:
        """Keep the verdicts of this build in the local file (atomically; a file that cannot be
        written is left as it is: the next build checks again)."""
        if self.path is None or not self.new:
            return
        from fedsweep.core.atomic import write_text

        merged = {**self.saved, **self.new}
        if len(merged) > CACHE_MAX:
            merged = dict(list(merged.items())[-CACHE_MAX:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_text(self.path, json.dumps(merged, separators=(",", ":")))
        except OSError:
            return
        self.saved, self.new = merged, {}
