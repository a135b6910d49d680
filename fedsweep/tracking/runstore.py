"""The store operations of a tracked run, a sweep trial and its leases, behind one interface
with two implementations, chosen once per store (:func:`open_store`):

- :class:`~fedsweep.tracking.lite.LiteStore`: a local SQLite store of the pinned MLflow, with
  ``sqlite3`` and plain file writes (no ``import mlflow``: a Ray trial actor starts seconds of
  CPU sooner);
- :class:`ClientStore`: MLflow's client, for any store (PostgreSQL, MySQL, a tracking server, a
  remote artifact root, another MLflow version), with ``tracking.direct``'s single statements
  on a SQL store.

Both write the same rows for the same calls (``tests/tracking/test_lite.py``). The interface:

- experiments and runs: ``ensure_experiment(name)``, ``create_run(experiment_id, tags,
  run_name) -> (run_id, artifact_uri)``, ``reopen_run``, ``set_tags``, ``write_params``,
  ``write_metrics``, ``end_run``;
- reads: ``artifact_uri``, ``run_tag``, ``metric_history(run_id, key) -> [(step, value)]``,
  ``keys_past(run_id, step)``, ``done_run_candidates(hashes)``, ``unfinished_child(parent,
  hash)``;
- artifacts: ``list_artifacts``, ``read_text``, ``log_text``, ``log_artifacts``;
- leases (registered models, ``tracking.leases``): ``create_lease``, ``lease_tags``,
  ``set_lease_tag``, ``delete_lease``, ``release_lease``;
- ``client``: MLflow's client of the store, for anything else (a ``LiteStore`` makes it, and
  imports MLflow, on first use).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from fedsweep.tracking import direct
from fedsweep.tracking.connect import connect_uri, prepare_store
from fedsweep.tracking.lite import LiteStore, lite_db
from fedsweep.tracking.store import ensure_experiment
from fedsweep.tracking.uri import file_uri_path

#: MLflow's limit on the params (and on the tags) of one ``log_batch`` request
MAX_PARAMS = 100


def open_store(tracking_uri: str, experiment: str | None = None) -> LiteStore | ClientStore:
    """The store of the clean URI ``tracking_uri``: a :class:`LiteStore` where
    ``lite.lite_db`` says it can serve it (and, given ``experiment``, that experiment exists,
    is active and keeps its artifacts in a local folder), else a :class:`ClientStore` on
    MLflow's client of the prepared store (``store.get_client``)."""
    db = lite_db(tracking_uri)
    if db is not None:
        lite = LiteStore(tracking_uri, db)
        if experiment is None or lite.serves_experiment(experiment):
            return lite
    from mlflow import MlflowClient

    prepare_store(tracking_uri)
    uri = connect_uri(tracking_uri)  # the registry too: the leases are registered models
    return ClientStore(MlflowClient(tracking_uri=uri, registry_uri=uri), tracking_uri)


def as_store(client_or_store) -> LiteStore | ClientStore:
    """A store of this interface, or MLflow's client wrapped in a :class:`ClientStore`."""
    if isinstance(client_or_store, LiteStore | ClientStore):
        return client_or_store
    return ClientStore(client_or_store)


class ClientStore:
    """The interface on MLflow's client ``client`` (of the clean URI ``tracking_uri``)."""

    def __init__(self, client, tracking_uri: str | None = None):
        self.client = client
        self.tracking_uri = tracking_uri or ""
        #: artifact URI -> MLflow's artifact repository of a local location (None: the client)
        self._repos: dict[str, object] = {}

    # ------------------------------------------------------------- runs
    def ensure_experiment(
        self, name: str, description: str | None = None, *, overwrite: bool = False
    ) -> str:
        return ensure_experiment(
            self.client, name, self.tracking_uri, description, overwrite=overwrite
        )

    def create_run(
        self, experiment_id: str, tags: dict[str, str], run_name: str | None
    ) -> tuple[str, str]:
        run = self.client.create_run(experiment_id, tags=tags, run_name=run_name)
        return run.info.run_id, run.info.artifact_uri

    def reopen_run(self, run_id: str) -> None:
        self.client.update_run(run_id, status="RUNNING")

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)) for k, v in tags.items()]
        for i in range(0, len(items), MAX_PARAMS):
            self.client.log_batch(run_id, tags=items[i : i + MAX_PARAMS])

    def write_params(self, run_id: str, params: Sequence[tuple[str, str]]) -> None:
        direct.write_params(self.client, run_id, params)

    def write_metrics(self, run_id: str, rows: Sequence[tuple[str, float, int, int]]) -> None:
        direct.write_metrics(self.client, run_id, rows)

    def end_run(self, run_id: str, status: str, tags: dict[str, str]) -> None:
        direct.end_run(self.client, run_id, status, tags)

    # ------------------------------------------------------------- reads
    def artifact_uri(self, run_id: str) -> str | None:
        return direct.artifact_uri(self.client, run_id)

    def run_tag(self, run_id: str, key: str) -> str | None:
        return self.client.get_run(run_id).data.tags.get(key)

    def metric_history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        return [(m.step, m.value) for m in self.client.get_metric_history(run_id, key)]

    def keys_past(self, run_id: str, step: int) -> list[str]:
        run = self.client.get_run(run_id)
        return [m.key for m in run.data._metric_objs if m.step > step]

    def done_run_candidates(
        self, hashes: Iterable[str], statuses: Sequence[str] = direct.DONE_STATUSES
    ) -> dict[str, list[tuple[str, int]]]:
        return direct.done_run_candidates(self.client, hashes, statuses)

    def unfinished_child(self, parent_run_id: str, config_hash: str) -> str | None:
        found = direct.unfinished_children(self.client, parent_run_id, config_hash)
        if found is not None:  # one query (SQL store)
            return found[0] if found else None
        experiments = [e.experiment_id for e in self.client.search_experiments()]
        runs = self.client.search_runs(
            experiments,
            filter_string=(
                f"tags.`mlflow.parentRunId` = '{parent_run_id}' and "
                f"tags.`{direct.HASH_TAG}` = '{config_hash}'"
            ),
        )
        done = direct.ENDED_STATUSES
        return next(
            (r.info.run_id for r in runs if r.data.tags.get(direct.STATUS_TAG) not in done), None
        )

    # ------------------------------------------------------------- artifacts
    def _repo(self, artifact_uri: str | None):
        """MLflow's artifact repository of a local artifact location (what the client writes a
        run's artifacts with; the client would read the whole run to find it), else None."""
        if not artifact_uri or file_uri_path(artifact_uri) is None:
            return None
        if artifact_uri not in self._repos:
            from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

            self._repos[artifact_uri] = get_artifact_repository(artifact_uri)
        return self._repos[artifact_uri]

    def list_artifacts(self, run_id: str, artifact_uri: str | None = None) -> list[str]:
        return [f.path for f in self.client.list_artifacts(run_id)]

    def read_text(self, run_id: str, path: str) -> str:
        folder = file_uri_path(self.artifact_uri(run_id) or "")
        if folder is not None:
            return (folder / path).read_text()
        with tempfile.TemporaryDirectory() as tmp:
            return Path(self.client.download_artifacts(run_id, path, tmp)).read_text()

    def log_text(self, run_id: str, artifact_uri: str | None, text: str, artifact_file: str):
        repo = self._repo(artifact_uri)
        if repo is None:
            self.client.log_text(run_id, text, artifact_file)
            return
        with tempfile.TemporaryDirectory() as tmp:  # as the client writes it
            path = Path(tmp) / artifact_file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            parent = str(Path(artifact_file).parent)
            repo.log_artifact(str(path), None if parent == "." else parent)

    def log_artifacts(
        self, run_id: str, artifact_uri: str | None, local_dir, artifact_path: str | None
    ) -> None:
        repo = self._repo(artifact_uri)
        if repo is None:
            self.client.log_artifacts(run_id, str(local_dir), artifact_path)
        else:
            repo.log_artifacts(str(local_dir), artifact_path)

    # ------------------------------------------------------------- leases
    def create_lease(self, name: str, tags: dict[str, str], description: str) -> bool:
        from mlflow.exceptions import MlflowException

        try:
            self.client.create_registered_model(name, tags=tags, description=description)
            return True
        except MlflowException as err:
            if err.error_code == "RESOURCE_ALREADY_EXISTS":
                return False
            raise

    def lease_tags(self, name: str) -> dict[str, str] | None:
        from mlflow.exceptions import MlflowException

        try:
            return dict(self.client.get_registered_model(name).tags)
        except MlflowException as err:
            if err.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise

    def set_lease_tag(self, name: str, key: str, value: str) -> None:
        self.client.set_registered_model_tag(name, key, value)

    def delete_lease(self, name: str) -> None:
        from mlflow.exceptions import MlflowException

        try:
            self.client.delete_registered_model(name)
        except MlflowException as err:
            if err.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise

    def release_lease(self, name: str, token: str) -> None:
        """On a SQL store the check and the delete in one transaction (MLflow's own delete,
        whose cascade removes the tags), else through the client."""
        store = _registry_sql_store(self.client)
        if store is not None:
            _release_sql(store, name, token)
            return
        holder = self.lease_tags(name)
        if holder is not None and holder.get("token") == token:
            self.delete_lease(name)


def _registry_sql_store(client):
    """The client's model registry store when it is MLflow's SQLAlchemy one, else None."""
    from mlflow.store.model_registry.sqlalchemy_store import SqlAlchemyStore

    store = client._get_registry_client().store
    return store if isinstance(store, SqlAlchemyStore) else None


def _release_sql(store, name: str, token: str) -> None:
    from mlflow.exceptions import MlflowException

    with store.ManagedSessionMaker(read_only=False) as session:
        try:
            model = store._get_registered_model(session, name, eager=True)
        except MlflowException as err:
            if err.error_code == "RESOURCE_DOES_NOT_EXIST":
                return
            raise
        tags = {t.key: t.value for t in model.registered_model_tags}
        if tags.get("token") == token:
            session.delete(model)
