"""Ray for a sweep: start, attach to (``--address``, failing in seconds when unreachable) and
stop Ray, check that a node can hold one trial, and what the Ray Tune fit of the trials
(``sweep.tune_fit.fit_trials``) is made of: each trial's payload (:func:`trial_payload`), names
and folders, the trial actors' environment, and the removal of Ray's folders, only ever inside
the store's ray_results."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import socket
from pathlib import Path

from fedsweep.core.errors import first_line
from fedsweep.specs.load import SpecError, SweepSpec, Trial
from fedsweep.specs.search import early_stop_of
from fedsweep.sweep.store_index import used_by_tag
from fedsweep.tracking.store import LINE_TAG

#: in a sweep's folder (``<store>/ray_results/<figure>-<profile>-<key>``), beside STATE_FILE:
#: the trials' checkpoint folders, one per config hash (fedsweep's own), and Ray Tune's
#: experiment (Ray's; removed before every fit and never read back)
TRIALS_DIR = "trials"
RAY_DIR = "ray"


#: tag of a derived trial's run: the source run id(s) its values come from, comma-separated
DERIVED_FROM = "fedsweep.derived_from"
#: tag of a search trial's run: the curve whose hyperparameter search it is
SEARCH_OF = "fedsweep.search_of"


def trial_payload(
    trial: Trial,
    spec: SweepSpec,
    tracking_uri: str,
    experiment: str,
    parent_run_id: str,
    plugins: list | None = None,
    state_dir: str | Path | None = None,
    state_remote: str | None = None,
) -> dict:
    """What ``fl_trial`` gets; ``state_dir``: the trial's checkpoint folder (None: none);
    ``state_remote``: its mirror on an object store (``--storage s3://...``), or None."""
    cfg = trial.config.model_copy(deep=True)
    cfg.threads = max(1, math.floor(spec.resources.cpu))  # torch threads = CPUs Ray gives
    cfg.tracking.uri = tracking_uri
    cfg.tracking.experiment = experiment
    cfg.tracking.run_name = trial.run_name
    return {
        "trial_id": trial.trial_id,
        "config": cfg.model_dump(mode="json"),
        "parent_run_id": parent_run_id,
        "checkpoint_every": spec.checkpoint_every,
        "state_dir": None if state_dir is None else str(state_dir),
        "state_remote": state_remote,
        "plugins": [list(p) for p in plugins or []],  # --plugin modules, imported first
        # a search trial under an early-stopping scheduler: its rungs and population
        "early_stop": early_stop_of(spec, trial),
        # a derived trial's readable provenance, logged once as a param at run creation
        "params": {
            **({"derived_from": trial.derived_note} if trial.derived_from else {}),
            **({"search_point": json.dumps(dict(trial.search_point))} if trial.search_of else {}),
        },
        "tags": {
            "mlflow.parentRunId": parent_run_id,
            "fedsweep.figure": trial.figure,
            "fedsweep.profile": trial.profile,
            "fedsweep.curve": trial.curve,
            "fedsweep.panel": trial.panel_id,
            "fedsweep.panel_label": trial.panel_label,
            LINE_TAG: trial.line_name,  # the UI's group of the line (tracking.store.VIEW_STATE)
            used_by_tag(trial.figure): trial.profile,
            "fedsweep.seed": str(trial.seed),
            "fedsweep.config_hash": trial.config_hash,
            "fedsweep.trial_id": trial.trial_id,
            **({DERIVED_FROM: ",".join(trial.derived_from)} if trial.derived_from else {}),
            **({SEARCH_OF: trial.search_of} if trial.search_of else {}),
        },
    }


def check_resources(spec: SweepSpec, spec_path: Path) -> None:
    """Fail now, not with trials PENDING forever, when no Ray node can hold one trial's
    ``resources`` (CPUs and GPUs per trial) ; the message says what the cluster has."""
    import ray

    cpu, gpu = spec.resources.cpu, spec.resources.gpu
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    if any(n.get("CPU", 0) >= cpu and n.get("GPU", 0) >= gpu for n in nodes):
        return
    best = max(nodes, key=lambda n: (n.get("GPU", 0), n.get("CPU", 0)), default={})
    total_cpu = sum(n.get("CPU", 0) for n in nodes)
    total_gpu = sum(n.get("GPU", 0) for n in nodes)
    raise SpecError(
        f"{spec_path}: resources: each trial asks for cpu={cpu:g}, gpu={gpu:g}, but no Ray "
        f"node has that much (largest node: {best.get('CPU', 0):g} CPUs, "
        f"{best.get('GPU', 0):g} GPUs; {len(nodes)} node(s), {total_cpu:g} CPUs and "
        f"{total_gpu:g} GPUs in all). Lower resources.cpu / resources.gpu in the spec, or "
        "attach to a cluster that has them (--address)."
    )


def check_storage(storage: str | Path | None) -> None:
    """Check a ``--storage`` now, before Ray starts (:func:`fedsweep.sweep.remote_state.
    storage_problem`: a folder that can be written, or an object store that answers its probe);
    :class:`SpecError` says why not."""
    from fedsweep.sweep.remote_state import storage_problem

    problem = storage_problem(storage)
    if problem:
        raise SpecError(problem)


#: file systems that every node of a cluster can share (``/proc/mounts``' types)
SHARED_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph",
             "glusterfs", "9p", "virtiofs")  # fmt: skip


def filesystem_type(path: Path) -> str | None:
    """The type of the file system ``path`` is on (Linux ``/proc/mounts``), None elsewhere."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return None
    target = Path(path).resolve()
    best, kind = -1, None
    for fields in mounts:
        if len(fields) < 3:
            continue
        point = Path(fields[1].replace("\\040", " "))
        if (target == point or point in target.parents) and len(point.parts) > best:
            best, kind = len(point.parts), fields[2]
    return kind


def cluster_warnings(tracking_uri: str, storage: Path | None) -> list[str]:
    """On a Ray cluster of more than one node: a warning when the store is a local sqlite file
    (trials on other nodes cannot reach it) and when Ray's storage is on a local disk (a trial
    restarted on another node cannot find its checkpoint)."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len({n.get("NodeManagerAddress") for n in nodes}) < 2:  # one machine: nothing to share
        return []
    lines = []
    if tracking_uri.startswith("sqlite:///"):
        lines.append(
            f"warning: {len(nodes)} Ray nodes, but the store {tracking_uri} is a file on this "
            "machine: trials on other nodes cannot write to it. Use a tracking server or a "
            "database every node reaches (fedsweep team up; docs: how-to/team)."
        )
    kind = filesystem_type(storage) if storage is not None else None
    if kind is not None and not (kind in SHARED_FS or kind.startswith("fuse")):
        lines.append(
            f"warning: {len(nodes)} Ray nodes, but Ray's storage {storage} is on a local disk "
            f"({kind}): a trial restarted on another node starts from round 0. Pass --storage "
            "with a folder every node mounts at the same path (NFS)."
        )
    return lines


def where_it_trains(address: str | None) -> str:
    """One line for the sweep's start: the Ray it trains on, a cluster (``--address``) or a
    private local one. A member whose environment named the team's cluster only in
    ``$RAY_ADDRESS`` trained on a local Ray without a word (issue 62, item 2)."""
    import ray

    cpus = ray.cluster_resources().get("CPU", 0)
    if address:
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        return f"Ray: the cluster at {address} ({nodes} node(s), {cpus:g} CPUs)"
    line = f"Ray: a private local Ray on this machine ({cpus:g} CPUs)"
    named = os.environ.get("RAY_ADDRESS")
    if named:
        return (
            f"{line}; $RAY_ADDRESS={named} is not used: pass --address {named} (or set "
            "$FEDSWEEP_RAY_ADDRESS) to train on that cluster"
        )
    return f"{line}; --address HOST:PORT joins a cluster"


class UnsafeRemovalError(RuntimeError):
    """A folder to remove that is not strictly inside the store's ray_results folder."""


def remove_inside(path: Path, root: Path, *, missing_ok: bool = False) -> None:
    """``shutil.rmtree(path)``, only when ``path`` resolves (symlinks followed) to a folder
    strictly inside ``root`` (the store's ray_results); anything else raises
    :class:`UnsafeRemovalError` and removes nothing."""
    root_real = Path(root).resolve()
    target = Path(path).resolve()
    if target == root_real or root_real not in target.parents:
        raise UnsafeRemovalError(
            f"refusing to remove {path} (resolves to {target}): not inside {root_real}"
        )
    if Path(path).is_symlink():  # inside, but a link: remove the link, not what it points to
        Path(path).unlink()
        return
    if not target.exists() and missing_ok:
        return
    shutil.rmtree(target, ignore_errors=missing_ok)


def trial_name(trial) -> str:
    """Ray's name for a trial: the MLflow run name (``seed 1 · α=0.3 · Case 2``)."""
    return trial.config["trial"]["config"]["tracking"]["run_name"]


def trial_dirname(trial) -> str:
    return f"trial_{trial.trial_id}"


class RayUnavailableError(RuntimeError):
    """The Ray cluster named by ``--address`` cannot be reached."""


#: seconds an ``--address`` has to accept a connection
RAY_CONNECT_TIMEOUT_S = 5.0


#: Ray's connection retries, bounded for ``--address``: 1 attempt of at most 5 s (+2 s for the
#: GCS RPC) instead of 20 attempts of ~41 s (820 s measured for a closed port, Ray 2.60). Read
#: by Ray at import time, so set only when ``ray`` is not imported yet.
RAY_CONNECT_ENV = {
    "RAY_NUM_REDIS_GET_RETRIES": "1",
    "RAY_py_gcs_connect_timeout_s": "5",
    "RAY_gcs_rpc_server_connect_timeout_s": "2",
}


def bound_ray_connect(address: str | None) -> None:
    """With ``--address``, make an unreachable cluster fail in ~10 s (user settings win)."""
    import sys

    if address and "ray" not in sys.modules:
        for key, value in RAY_CONNECT_ENV.items():
            os.environ.setdefault(key, value)


def check_ray_address(address: str) -> None:
    """Fail in seconds when nothing listens at a ``HOST:PORT`` / ``ray://HOST:PORT`` address
    (``ray.init`` would retry for minutes). ``auto`` and other forms are left to Ray."""
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), RAY_CONNECT_TIMEOUT_S).close()
    except OSError as err:
        why = (
            f"no answer within {RAY_CONNECT_TIMEOUT_S:g} s"
            if isinstance(err, TimeoutError)
            else (err.strerror or str(err))
        )
        raise RayUnavailableError(
            f"--address {address}: cannot reach a Ray cluster there ({why}); start one "
            "(ray start --head) or leave --address out to run on a local Ray"
        ) from None


def init_ray(address: str | None) -> bool:
    """Start (or attach to) Ray unless it runs already; True when this call started it. When
    :func:`start_ray` began starting it in the background, wait for that start (its error,
    e.g. :class:`RayStartError`, is raised here)."""
    start = _take_start()
    if start is not None:
        return start.result(address)
    return _init_ray_now(address)


def _init_ray_now(address: str | None) -> bool:
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:  # also when Ray is up already: never run on another cluster than the one named
        check_ray_address(address)
    if ray.is_initialized():
        return False
    kwargs = {"include_dashboard": False, "configure_logging": True, "logging_level": "WARNING"}
    with keep_sigterm_handler(), masked_entrypoint():
        _connect(ray, address, kwargs)
    return True


@contextlib.contextmanager
def masked_entrypoint():
    """For ``ray.init``: the driver's command line that Ray records as its job's
    ``entrypoint`` in the cluster's job table (``ray list jobs``, ``ray._private.state.jobs()``:
    ``Entrypoint``), readable by anyone holding the cluster's token while the head runs, with
    every password in it masked (:func:`fedsweep.tracking.credentials.redact`): a
    ``--tracking-uri postgresql://alice:SECRET@db/mlflow`` no longer leaves its password there.
    Ray 2.60 takes that line from ``ray._private.utils.get_entrypoint_name`` (``psutil``'s
    ``cmdline`` of the driver), which is wrapped for the call."""
    from fedsweep.tracking.credentials import redact

    try:
        from ray._private import utils
    except ImportError:
        utils = None
    original = getattr(utils, "get_entrypoint_name", None)
    if original is None:
        yield
        return

    def masked() -> str:
        return redact(original())

    utils.get_entrypoint_name = masked
    try:
        yield
    finally:
        utils.get_entrypoint_name = original


class _BackgroundStart:
    """Ray starting in a thread of its own (:func:`start_ray`) while the driver opens the
    store. The thread lives until Ray is shut down: Ray starts its core processes (GCS,
    raylet) so that they die with the *thread* that started them (Linux'
    ``PR_SET_PDEATHSIG`` follows the thread), so a thread that ended would take them along.
    ``ray.init`` in a thread other than the main one leaves the driver's Python SIGTERM handler
    to Ray's C-level one: :meth:`result`, in the main thread, puts it back."""

    def __init__(self, address: str | None):
        import signal
        import threading

        self.address = address
        self.started = False
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._release = threading.Event()
        main = threading.current_thread() is threading.main_thread()
        self._sigterm = signal.getsignal(signal.SIGTERM) if main else None
        self._thread = threading.Thread(target=self._run, name="fedsweep-ray-start", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.started = _init_ray_now(self.address)
        except BaseException as err:  # noqa: BLE001 - raised in the driver's thread by result()
            self.error = err
        finally:
            self.done.set()
        if self.started:
            self._release.wait()  # Ray's processes live as long as this thread

    def result(self, address: str | None) -> bool:
        """Wait for the start; True when it started Ray (as :func:`init_ray`)."""
        import signal
        import threading

        self.done.wait()
        if threading.current_thread() is threading.main_thread() and self._sigterm is not None:
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signal.SIGTERM, self._sigterm)
        if self.error is not None:
            raise self.error
        if address != self.address:  # never run on another cluster than the one named
            return _init_ray_now(address)
        return self.started

    def release(self) -> None:
        """After ``ray.shutdown()``: let the thread end."""
        self._release.set()
        self._thread.join(timeout=5)


#: the start of Ray under way in the background (:func:`start_ray`), not yet waited for
_PENDING: _BackgroundStart | None = None
#: the thread that started the running Ray, ended by :func:`shutdown_ray`
_KEEPER: _BackgroundStart | None = None


def start_ray(address: str | None) -> bool:
    """Begin starting (or attaching to) Ray in the background, so that it comes up while the
    driver opens the store; :func:`init_ray` then waits for it. Nothing when Ray runs already
    or a start is under way; False then. Ray's own modules are imported here, in the calling
    thread, so that the two threads never import the same modules at once (MLflow's imports
    run in the caller meanwhile)."""
    global _PENDING
    if _PENDING is not None:
        return False
    import click  # noqa: F401 - ray.init imports it (as MLflow does): here, not in both threads
    import ray

    if ray.is_initialized():
        return False
    _quiet_thread_warning()
    _PENDING = _BackgroundStart(address)
    return True


def _take_start() -> _BackgroundStart | None:
    """The pending background start, handed to its waiter (once)."""
    global _PENDING, _KEEPER
    start, _PENDING = _PENDING, None
    if start is not None:
        _KEEPER = start
    return start


def abandon_start() -> None:
    """A driver that fails before it waited for its background start: wait for Ray to be up,
    then stop it (a failed start leaves nothing), so no Ray is left starting behind the error."""
    if _PENDING is None:
        return
    start = _take_start()
    with contextlib.suppress(Exception):  # its error is not the driver's
        start.result(start.address)
    shutdown_ray()


def _quiet_thread_warning() -> None:
    """Ray warns, on every ``ray.init`` outside the main thread, that it set no SIGTERM
    handler; fedsweep keeps its own handler on purpose (:class:`_BackgroundStart`)."""
    import logging

    log = logging.getLogger("ray._private.worker")
    if not any(isinstance(f, _NoThreadWarning) for f in log.filters):
        log.addFilter(_NoThreadWarning())


class _NoThreadWarning:
    def filter(self, record) -> bool:
        return not str(record.msg).startswith("SIGTERM handler is not set")


@contextlib.contextmanager
def keep_sigterm_handler():
    """``ray.init`` installs a C-level SIGTERM handler in the driver that aborts the process
    (exit -6, no clean-up); put back the Python handler that was there before (``fedsweep
    sweep`` turns SIGTERM into a graceful stop with every run marked KILLED)."""
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _connect(ray, address: str | None, kwargs: dict) -> None:
    if address:
        check_ray_address(address)
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, ValueError) as err:  # ValueError: ray:// without ray[client]
            first = first_line(err, None)
            raise RayUnavailableError(f"--address {address}: {first}") from None
    else:
        # "local": a private Ray of this process, never a cluster found through RAY_ADDRESS or
        # /tmp/ray/ray_current_cluster (plain ray.init() would join one: --address is the way)
        _start_local(ray, kwargs)
        from fedsweep.sweep import ray_watchdog

        ray_watchdog.start()  # a kill -9 of this driver leaves no Ray process behind


class RayStartError(RuntimeError):
    """Ray's local node did not come up, twice (a loaded machine); the message is one line
    saying what to do. Exit code 1: nothing is wrong with the input."""


#: seconds between a failed start of Ray's local node and the second try; Ray's own wait for
#: its raylet is a fixed 30 s (``ray._private.node``), its wait for the GCS port is
#: ``RAY_gcs_server_port_wait_time_s`` (raised to :data:`RAY_RETRY_GCS_WAIT_S` for the retry)
RAY_RETRY_PAUSE_S = 5.0
RAY_RETRY_GCS_WAIT_S = "120"


def _start_local(ray, kwargs: dict, echo=None) -> None:
    """``ray.init(address="local")``, once more after a pause (with a longer wait for Ray's
    GCS) when the node does not come up, e.g. its raylet missing Ray's fixed 30 s on a loaded
    2-core machine; the second failure is :class:`RayStartError` (one line), not Ray's
    traceback. What the first attempt started is stopped before the second."""
    import sys
    import time

    try:
        ray.init(address="local", **kwargs)
        return
    except Exception as err:  # noqa: BLE001 - Ray raises a bare Exception for this timeout
        first = first_line(err, 200)
    with contextlib.suppress(Exception):
        ray.shutdown()
    say = echo or (lambda text: print(text, file=sys.stderr, flush=True))
    say(f"note: Ray's local node did not come up ({first}); trying once more")
    time.sleep(RAY_RETRY_PAUSE_S)
    added = "RAY_gcs_server_port_wait_time_s" not in os.environ
    if added:
        os.environ["RAY_gcs_server_port_wait_time_s"] = RAY_RETRY_GCS_WAIT_S
    try:
        ray.init(address="local", **kwargs)
    except Exception as err:  # noqa: BLE001
        with contextlib.suppress(Exception):
            ray.shutdown()
        raise RayStartError(
            f"Ray's local node did not come up, twice ({first_line(err, 160)}); the machine is "
            f"probably loaded ({_load_text()}): wait for it to calm down and run the command "
            "again, or start Ray yourself (ray start --head --num-cpus N) and pass "
            "--address auto"
        ) from None
    finally:
        if added:
            os.environ.pop("RAY_gcs_server_port_wait_time_s", None)


def _load_text() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load unknown"
    return (
        f"load average {one:.1f} over the last minute, {five:.1f} over five, {os.cpu_count()} CPUs"
    )


def shutdown_ray() -> None:
    """Stop the Ray this process started (or detach from a cluster), if it runs: its last
    forwarded worker lines are printed now, not after the caller's console is done. A start
    still under way in the background (:func:`start_ray`) is waited for first."""
    global _KEEPER
    import sys

    start = _take_start()
    if start is not None:
        with contextlib.suppress(Exception):  # a failed start left nothing to stop
            start.result(start.address)
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    keeper, _KEEPER = _KEEPER, None
    if keeper is not None:
        keeper.release()
    from fedsweep.sweep import ray_watchdog

    ray_watchdog.stop()


#: credentials Ray Tune copies from the driver's environment into every trial actor's
#: ``runtime_env`` (Ray 2.60: ``ray.tune.execution.class_cache.ENV_VARS_TO_PROPAGATE``), which
#: Ray's runtime-env agent then writes, in clear, into ``<session>/logs/runtime_env_agent.log``
CLOUD_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN",
                 "AWS_SESSION_TOKEN")  # fmt: skip
_SECRET_WORDS = ("SECRET", "TOKEN", "PASSWORD", "ACCESS_KEY", "CREDENTIAL")


def _is_secret(name: str) -> bool:
    return name in CLOUD_SECRETS or any(word in name.upper() for word in _SECRET_WORDS)


@contextlib.contextmanager
def secrets_kept_from_ray():
    """For one fit: keep Ray Tune from putting the driver's credentials into its trial actors'
    ``runtime_env`` (logged in clear by Ray's runtime-env agent); yields them (name -> value,
    those set) for the caller to hand to the trials through Ray's object store
    (``tune.with_parameters``; ``trial.fl_trial`` sets them in the worker's environment).

    Ray's own list of variables to propagate loses its secret names for the fit and gets them
    back after; were it not the set Ray 2.60 has, the variables leave the driver's environment
    for the fit instead (and come back after it)."""
    try:
        from ray.tune.execution import class_cache

        propagated = class_cache.ENV_VARS_TO_PROPAGATE
    except (ImportError, AttributeError):
        propagated = None
    names = set(CLOUD_SECRETS)
    if isinstance(propagated, set):
        names |= {n for n in propagated if _is_secret(n)}
    held = {n: os.environ[n] for n in sorted(names) if os.environ.get(n)}
    if isinstance(propagated, set):
        removed = propagated & names
        propagated -= removed
        try:
            yield held
        finally:
            propagated |= removed
        return
    for name in held:
        os.environ.pop(name, None)
    try:
        yield held
    finally:
        os.environ.update(held)


@contextlib.contextmanager
def plain_trial_workers():
    """For one fit: Ray Tune's trial actors without Tune's default ``runtime_env``. Tune gives
    every trial actor the environment variable ``PL_DISABLE_FORK=1`` (for PyTorch Lightning,
    which fedsweep does not use) as a ``runtime_env``; Ray starts a worker with a
    ``runtime_env`` through its ``setup_worker.py``, which imports Ray and then replaces itself
    with the worker, which imports Ray again, and never gives such an actor one of the idle
    workers it pre-starts (one per CPU, while the driver opens the store and imports Tune).
    Measured with Ray 2.60 on 2 cores: 0.7 s more CPU and 0.4-0.8 s more before the trial
    starts, per actor; a plain trial actor takes a pre-started worker. The variables Tune
    propagates from the driver's environment (when they are set) still make a
    ``runtime_env``."""
    try:
        from ray.tune.execution import class_cache

        defaults = class_cache.DEFAULT_ENV_VARS
    except (ImportError, AttributeError):
        defaults = None
    if not isinstance(defaults, dict):
        yield
        return
    kept = dict(defaults)
    defaults.clear()
    try:
        yield
    finally:
        defaults.update(kept)
