"""``fedsweep ui``: the MLflow web UI for the project's store, stopped as a whole.

The address is printed only once the server answers an HTTP request (MLflow takes up to a
minute or two to start on a busy machine; a link printed earlier led to "connection refused").
The server's own output (uvicorn's access log, one line per request, and library warnings) goes
to a log file beside the store, ``ui-<port>.log``, whose path is printed once. While it serves,
``<store dir>/ui.json`` holds its address and this process's pid, so the links other commands
print (``fedsweep runs``, figures' links to MLflow) use the port really served
(:func:`fedsweep.tracking.store.served_ui`); it is removed when the UI stops.

The server is MLflow's app through fedsweep's MLflow app plugin (``mlflow ui --app-name
fedsweep``: :mod:`fedsweep.cli.ui_app`), whose page opens a new browser in MLflow's training
view and each fedsweep experiment in its saved view's layout. Once it answers, each figure's
link (:func:`figure_links`: the experiments with fedsweep's saved view) is printed before the
experiment list's address.

``mlflow ui`` starts a server process that starts uvicorn with several web workers (and, unless
its job execution is off, as fedsweep starts it: :func:`fedsweep.core.processes.mlflow_server_env`,
a job runner and consumers, some of which open sessions of their own). Sending SIGTERM to the
first process alone left the rest running and holding the port. So the server is started in
its own session (its own process group), and on SIGINT/SIGTERM/SIGHUP, and on any exit, the
whole tree is stopped: every descendant (found by parent pid before anything is killed) and the
process group get SIGTERM, then SIGKILL after a grace period. A signal's stop then exits
128 + the signal (130 Ctrl-C, 143 SIGTERM), as every command does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated

import typer

from fedsweep.cli.common import EXIT_FAILED, TrackingUriOption, UsageError, clean_errors, fail
from fedsweep.core.processes import alive, listens, mlflow_server_env

GRACE_S = 5.0
#: how long to wait for the server to answer before giving up (``--start-timeout``)
START_TIMEOUT_S = 300.0
#: the server's health route (MLflow answers ``OK``) and how long one try may take
HEALTH_PATH = "/health"
PROBE_TIMEOUT_S = 2.0
PROBE_EVERY_S = 0.25


def _children_map() -> dict[int, list[int]]:
    """Parent pid -> child pids of every process (Linux /proc; else ``ps``)."""
    out: dict[int, list[int]] = {}
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid ...; comm may hold spaces or parentheses
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            out.setdefault(ppid, []).append(int(entry.name))
        return out
    listing = subprocess.run(
        ["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, timeout=10
    ).stdout
    for line in listing.splitlines():
        pid, ppid = (int(x) for x in line.split())
        out.setdefault(ppid, []).append(pid)
    return out


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, their children, ...)."""
    children = _children_map()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal_all(pids: set[int], group: int | None, sig: int) -> None:
    if group is not None:
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_tree(proc: subprocess.Popen, grace: float = GRACE_S) -> None:
    """SIGTERM the process, its group and every descendant; SIGKILL what is left after
    ``grace`` seconds; reap the process."""
    pids = descendants(proc.pid) | {proc.pid}
    group = proc.pid  # started with start_new_session: its pid is its group id
    _signal_all(pids, group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()
        pids |= {p for p in descendants(proc.pid)} if proc.returncode is None else set()
        if not any(alive(p) for p in pids):
            break
        time.sleep(0.1)
    left = {p for p in pids if alive(p)}
    if left:
        _signal_all(left, group, signal.SIGKILL)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass


def bind_problem(host: str, port: int) -> str | None:
    """Why the server could not listen on ``host:port`` (tried here with a socket of our own,
    as uvicorn binds: SO_REUSEADDR), or None. The server would otherwise print a bind
    traceback from a worker and the command end without a clear reason."""
    import errno

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        return f"--host {host}: not an address of this machine ({err.strerror})"
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return (
                    f"port {port} on {host} is already in use (another `fedsweep ui`?); "
                    "stop it or choose another with --port"
                )
            if err.errno == errno.EACCES:
                return f"port {port} on {host}: permission denied (ports below 1024 need root)"
            if err.errno == errno.EADDRNOTAVAIL:
                return f"--host {host}: not an address of this machine (cannot listen there)"
            return f"cannot listen on {host}:{port} ({err.strerror or err})"
    return None


class _Stop(BaseException):
    """Raised by the signal handlers to leave ``proc.wait()``: a ``BaseException``, as
    ``KeyboardInterrupt`` is, so that no ``except Exception`` on the way (the figure links'
    store query, the health probe) swallows it and leaves the command serving after Ctrl-C or
    SIGTERM."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def url_host(host: str) -> str:
    """The host to put in a URL for a server bound to ``host``: loopback for a wildcard
    address, an IPv6 address in brackets."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def answers(url: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """An HTTP GET of ``url`` gets a 2xx answer within ``timeout`` seconds (directly: an
    ``http_proxy`` of the environment is not asked for the local server)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def log_path(uri: str, port: int) -> Path:
    """Where the server's output goes: ``ui-<port>.log`` in a local store's folder, else in
    the temporary folder (a database or server store has no folder of its own here)."""
    from fedsweep.tracking.uri import store_folder

    folder = store_folder(uri)
    if folder is None or not folder.is_dir() or not os.access(folder, os.W_OK):
        folder = Path(tempfile.gettempdir())
    return folder / f"ui-{port}.log"


def remember(uri: str, base: str) -> Path | None:
    """Write ``<store dir>/ui.json`` (address, pid, store) atomically; None where the store
    has no folder or it cannot be written (links then fall back to the default address)."""
    from fedsweep.core.atomic import OutputWriteError, write_text
    from fedsweep.tracking.store import ui_state_path

    path = ui_state_path(uri)
    if path is None:
        return None
    state = {"url": base, "pid": os.getpid(), "tracking_uri": uri, "started": time.time()}
    try:
        write_text(path, json.dumps(state, indent=2) + "\n")
    except (OutputWriteError, OSError):
        return None
    return path


def forget(path: Path | None) -> None:
    """Remove ``ui.json`` if it is still this process's (a later ``fedsweep ui`` on the same
    store may have replaced it)."""
    if path is None:
        return
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def default_workers() -> int:
    """The web workers of a server started without ``--workers``: one per two cores this
    process may use, 1 to 4. MLflow's own default, 4, each importing MLflow at once, never
    answered within the start timeout on a loaded 2-core machine, where 1 came up."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores // 2))


def not_answered(base: str, timeout: float, workers: int, log: Path) -> str:
    """The line for a server that did not answer in time: what to change, ``--workers`` first
    (fewer workers start sooner on a busy machine), then ``--start-timeout``."""
    fewer = "--workers 1 starts sooner on a busy machine, " if workers > 1 else ""
    return (
        f"the MLflow server did not answer on {base} within {timeout:g} s with --workers "
        f"{workers} (stopped; {fewer}--start-timeout waits longer); its log: {log}"
    )


def _last_line(path: Path) -> str:
    """The log's last non-empty line (why the server stopped, usually), shortened."""
    try:
        lines = [x.strip() for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


#: how many experiments' links ``fedsweep ui`` prints (the most recently updated first)
LINKS_SHOWN = 10


def app_registered() -> bool:
    """fedsweep's MLflow app plugin (:mod:`fedsweep.cli.ui_app`) is installed: the entry point
    ``mlflow.app`` / ``fedsweep`` of ``pyproject.toml`` (an install older than it has none)."""
    from importlib.metadata import entry_points

    from fedsweep.cli.ui_app import APP_NAME

    return any(
        ep.name == APP_NAME and ep.value.startswith("fedsweep.cli.ui_app:")
        for ep in entry_points(group="mlflow.app")
    )


#: the most runs :func:`name_lines` tags in one start of the UI (a store swept before the tag
#: existed gets the rest at the next start)
LINES_NAMED = 5000


def name_lines(client, experiment_ids: list[str], limit: int = LINES_NAMED) -> int:
    """Tag the trials of ``experiment_ids`` swept before ``fedsweep.line`` existed with it (their
    curve, panel and profile tags name it: ``naming.trial_line_name``), so that the saved view,
    which groups by it, groups them too instead of leaving them under "Additional runs"; at most
    ``limit`` runs. The number tagged; a store that cannot be written is left as it is."""
    from fedsweep.tracking.naming import trial_line_name
    from fedsweep.tracking.store import LINE_TAG

    done = 0
    try:
        runs = client.search_runs(
            experiment_ids,
            filter_string="tags.`fedsweep.curve` LIKE '%'",
            max_results=min(limit * 4, 50000),
        )
        for run in runs:
            tags = run.data.tags
            if LINE_TAG in tags or "fedsweep.profile" not in tags or done >= limit:
                continue
            line = trial_line_name(
                tags["fedsweep.curve"],
                tags.get("fedsweep.panel_label", ""),
                tags["fedsweep.profile"],
            )
            client.set_tag(run.info.run_id, LINE_TAG, line)
            done += 1
    except Exception:  # noqa: BLE001 - a convenience: the UI serves the store all the same
        pass
    return done


def figure_links(uri: str, base: str, limit: int = LINKS_SHOWN) -> list[str]:
    """One line per experiment of the store that has fedsweep's saved view (a figure's
    experiment is named by its id), the most recently updated first: its name and the link that
    opens its trials grouped by figure line, charted (``store.ui_url``); at most ``limit`` and a
    line for the rest. [] where the store cannot be read (the UI starts all the same)."""
    from fedsweep.tracking.connect import get_client
    from fedsweep.tracking.store import PANEL_VIEW_ID, VIEW_TAG, VIEW_TAG_PREFIX, ui_url

    try:
        client = get_client(uri, create=False)
        experiments = client.search_experiments(
            max_results=1000, order_by=["last_update_time DESC"]
        )
    except Exception:  # noqa: BLE001 - links are a convenience, the UI still serves
        return []
    ours = [e for e in experiments if VIEW_TAG in (e.tags or {})]
    if not ours:
        return []
    name_lines(client, [e.experiment_id for e in ours])
    width = max(len(e.name) for e in ours[:limit])
    panel = VIEW_TAG_PREFIX + PANEL_VIEW_ID.format(n="")  # a panel's view: store.panel_views
    lines = []
    for e in ours[:limit]:
        panels = sum(key.startswith(panel) for key in e.tags)
        also = f"  (+{panels} panel views: its Views menu)" if panels else ""
        lines.append(f"  {e.name:<{width}}  {ui_url(base, e.experiment_id)}{also}")
    if len(ours) > limit:
        lines.append(f"  ... and {len(ours) - limit} more in the experiment list")
    return ["figures (each opens its trials grouped by figure line, charted):", *lines]


def ui(
    port: Annotated[
        int, typer.Option(metavar="PORT", min=1, max=65535, help="Port to serve on.")
    ] = 5000,
    host: Annotated[
        str, typer.Option(metavar="HOST", help="Interface to bind (loopback by default).")
    ] = "127.0.0.1",
    workers: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            min=1,
            help="Web workers (default: one per two cores of this machine, 1 to 4; 1 on a "
            "2-core machine). Fewer start sooner on a busy machine.",
            show_default=False,
        ),
    ] = None,
    start_timeout: Annotated[
        float,
        typer.Option(
            metavar="SECONDS",
            min=1,
            help="Give up (exit 1) if the server does not answer within this time.",
        ),
    ] = START_TIMEOUT_S,
    tracking_uri: TrackingUriOption = None,
) -> None:
    """Serve the MLflow web UI for the project's store (Ctrl-C stops it and all its workers).

    Prints each figure's link (its trials grouped by figure line, charted) and the experiment
    list's URL, http://HOST:PORT/#/experiments, once the server answers; a new browser opens
    in MLflow's training view, not its GenAI one. The server's log goes to ui-PORT.log beside
    the store. SIGINT, SIGTERM and SIGHUP stop the whole process tree (server, web workers,
    job consumer), then it exits 128 + the signal (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    from fedsweep.tracking.connect import prepare_store
    from fedsweep.tracking.uri import resolve_tracking_uri

    with clean_errors():
        uri = resolve_tracking_uri(tracking_uri)
        from fedsweep.tracking.credentials import redact, scheme

        if scheme(uri) in ("http", "https"):  # a tracking server serves its own UI
            raise UsageError(
                f"the store {redact(uri)} is a tracking server: it serves its own MLflow UI, "
                f"open {redact(uri).rstrip('/')}/#/experiments (fedsweep ui serves a database "
                "or a local store)"
            )
        problem = bind_problem(host, port) or (
            f"port {port} on {host} is already in use (another `fedsweep ui`?); stop it or "
            "choose another with --port"
            if listens(host, port)
            else None
        )
        if problem:
            raise UsageError(problem)
        try:
            prepare_store(uri, create=False)  # reading: never creates a store
        except OSError as err:
            raise UsageError(f"cannot use the store {uri}: {err}") from None
    from fedsweep.tracking.connect import connect_uri
    from fedsweep.tracking.store import ui_path

    env = mlflow_server_env()
    password = connect_uri(uri) != uri
    if password:  # a password: through the environment, not the command line
        env["MLFLOW_BACKEND_STORE_URI"] = connect_uri(uri)
    workers = workers or default_workers()
    cmd = [sys.executable, "-m", "mlflow", "ui"]
    cmd += [] if password else ["--backend-store-uri", uri]
    plugin = app_registered()
    if plugin:  # MLflow's app whose page opens a new browser in "Model training" (ui_app)
        from fedsweep.cli.ui_app import APP_NAME

        cmd += ["--app-name", APP_NAME]
    cmd += ["--host", host, "--port", str(port), "--workers", str(workers)]
    base = f"http://{url_host(host)}:{port}"
    log = log_path(uri, port)
    try:
        out = open(log, "w", encoding="utf-8")  # noqa: SIM115 - closed once the server runs
    except OSError as err:
        fail(f"cannot write the UI's log {log}: {err.strerror or err}", EXIT_FAILED)
    typer.echo(f"MLflow UI for {uri}")
    typer.echo(f"starting the server (its log: {log}) ...")

    def on_signal(signum, _frame):
        raise _Stop(signum)

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.getsignal(sig) for sig in handled}
    code = 0
    failure = ""
    remembered: Path | None = None
    proc: subprocess.Popen | None = None
    try:
        for sig in handled:
            signal.signal(sig, on_signal)
        with out:
            proc = subprocess.Popen(
                cmd,
                start_new_session=True,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        links = figure_links(uri, base)  # read while the server starts
        deadline = time.monotonic() + start_timeout
        while not answers(base + HEALTH_PATH):
            if proc.poll() is not None:
                why = _last_line(log)
                failure = (
                    f"the MLflow server exited (code {proc.returncode}) before it answered"
                    + (f": {why}" if why else "")
                    + f"; its log: {log}"
                )
                break
            if time.monotonic() > deadline:
                failure = not_answered(base, start_timeout, workers, log)
                break
            time.sleep(PROBE_EVERY_S)
        if not failure:
            remembered = remember(uri, base)
            for line in links:
                typer.echo(line)
            if not plugin:
                typer.echo(
                    "note: fedsweep's MLflow app is not installed (pip install -e . registers "
                    "it): a new browser opens an experiment in MLflow's GenAI view; the links "
                    "printed here open its runs"
                )
            # the query opens the "Model training" view for this URL (MLflow 3.17 starts a new
            # browser in GenAI's, unless fedsweep's app serves the page: ui_app); an
            # experiment's link adds fedsweep's saved view (store.ui_path)
            typer.echo(f"experiments: {base}/{ui_path()}  (Ctrl-C to stop)")
            code = proc.wait()
            if code not in (0, -signal.SIGTERM, -signal.SIGINT):
                why = _last_line(log)
                failure = (
                    f"the MLflow server stopped (code {code})"
                    + (f": {why}" if why else "")
                    + f"; its log: {log}"
                )
    except _Stop as stop:
        code = 128 + stop.signum
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    finally:
        for sig in handled:  # a second signal while stopping must not abort the clean-up
            signal.signal(sig, signal.SIG_IGN)
        if proc is not None:
            stop_tree(proc)
        forget(remembered)
        for sig, old in previous.items():
            signal.signal(sig, old)
    if code in (128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGHUP):
        # stopped by a signal, its tree stopped: 128 + the signal (130 Ctrl-C, 143 SIGTERM,
        # 129 SIGHUP), as every command documents (docs/concepts/exit-codes.md)
        typer.echo("MLflow UI stopped.")
        raise typer.Exit(code)
    if failure:
        fail(failure, EXIT_FAILED)
    raise typer.Exit(code)
