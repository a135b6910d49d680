"""A research group's services on one machine (``fedsweep team up`` / ``down`` / ``status``,
``make team-up``): a PostgreSQL database, an MLflow tracking server on it that also proxies the
artifacts (so no client needs the artifact store's credentials or paths), and a Ray head.

Everything lives in one folder (default ``~/.fedsweep/team``, ``--home``): ``pg/`` (the
database, :func:`db_folder`), ``artifacts/`` (the server's artifact store), ``logs/``,
``team.json`` (ports and PIDs) and two
files only the owner can read: ``pgpass`` (the database password, in PostgreSQL's ``.pgpass``
format, generated once) and ``team.env`` (the variables to export). No password ever appears
on a command line, in a URI or in the output: the MLflow server reads it through
``PGPASSFILE``.

PostgreSQL refuses to run as root: as root, its programs run as the ``postgres`` user
(``runuser``), which then owns ``pg/`` and must be able to enter the folder.

``up`` checks the host, the ports and the folder before it creates anything (:func:`check`),
and a failure after that stops what it started and removes what it created (:class:`_Undo`):
a failed ``up`` leaves no database cluster behind.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fedsweep.core import atomic
from fedsweep.core.processes import alive, listens, mlflow_server_env

DEFAULT_HOME = Path("~/.fedsweep/team")
DB_USER = "fedsweep"
DB_NAME = "mlflow"
#: seconds the MLflow server has to answer /health after it starts (a slow 2-core machine
#: needs about a minute for the first start)
SERVER_START_S = 240.0
#: seconds ``status`` gives the MLflow server to answer its one /health request
STATUS_TIMEOUT_S = 15.0
#: ``up --auth``: MLflow's basic-auth app. Its admin user, and the files in the team's folder,
#: each mode 600: the app's configuration (no secret in it), its user database (password
#: hashes), the admin's generated password, the server's CSRF key (one for all its workers)
AUTH_ADMIN = "admin"
AUTH_CONFIG = "mlflow-auth.ini"
AUTH_DB = "mlflow-auth.db"
ADMIN_FILE = "mlflow-admin"
SECRET_KEY_FILE = "mlflow-secret-key"
#: who may do what without a permission of their own: log runs in every experiment, delete
#: none but their own experiments' (MLflow gives an experiment's creator MANAGE)
AUTH_DEFAULT_PERMISSION = "EDIT"


class TeamError(RuntimeError):
    """A service cannot be started or stopped; the message says why and what to do."""


@dataclass
class Team:
    """Where the services listen, and the PIDs of those this machine started."""

    home: Path
    host: str = "127.0.0.1"
    pg_port: int = 5433
    mlflow_port: int = 5001
    ray_port: int = 6380
    ray_cpus: int | None = None
    #: the MLflow server asks every request for a user name and password (MLflow's basic-auth
    #: app, ``up --auth``); kept once set
    auth: bool = False
    pids: dict[str, int] = field(default_factory=dict)

    # ------------------------------------------------------------------ addresses
    @property
    def database_uri(self) -> str:
        """The database's URI, without its password (``pgpass`` holds it)."""
        return f"postgresql://{DB_USER}@{self.host}:{self.pg_port}/{DB_NAME}"

    @property
    def tracking_uri(self) -> str:
        return f"http://{self.host}:{self.mlflow_port}"

    @property
    def ray_address(self) -> str:
        return f"{self.host}:{self.ray_port}"

    @property
    def env(self) -> dict[str, str]:
        """What a user of the team's services exports (also written to ``team.env``). With
        ``auth``, MLflow's own credential variables as the admin, the password read from its
        file when the line is run (``"$(cat FILE)"``: never printed, never in the file)."""
        env = {
            "MLFLOW_TRACKING_URI": self.tracking_uri,
            "RAY_AUTH_MODE": "token",
            # fedsweep sweep's --address: a member's sweep trains on the team's cluster
            "FEDSWEEP_RAY_ADDRESS": self.ray_address,
            "PGPASSFILE": str(self.home / "pgpass"),
        }
        if self.auth:
            import shlex

            env["MLFLOW_TRACKING_USERNAME"] = AUTH_ADMIN
            env["MLFLOW_TRACKING_PASSWORD"] = f'"$(cat {shlex.quote(str(self.home / ADMIN_FILE))})"'
        return env

    # ------------------------------------------------------------------ state
    @classmethod
    def load(cls, home: Path) -> Team | None:
        path = Path(home).expanduser() / "team.json"
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        data["home"] = Path(data["home"])
        return cls(**data)

    def save(self) -> None:
        data = asdict(self)
        data["home"] = str(self.home)
        atomic.write_text(self.home / "team.json", json.dumps(data, indent=1))
        lines = [f"export {k}={v}" for k, v in self.env.items()]
        _private_write(self.home / "team.env", "\n".join(lines) + "\n")


def _private_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (mode 0600), atomically."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------ PostgreSQL
def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (folder / name).is_file():
            return str(folder / name)
    raise TeamError(
        f"PostgreSQL's server program {name} is not found: install PostgreSQL (Debian/Ubuntu: "
        "apt-get install postgresql; macOS: brew install postgresql) or put its bin folder "
        "on PATH"
    )


def _as_db_owner(cmd: list[str]) -> list[str]:
    """``cmd`` as the ``postgres`` user when this process is root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser is None:
        raise TeamError("PostgreSQL refuses to run as root and runuser is not found")
    return [runuser, "-u", "postgres", "--", *cmd]


def _chown_db_owner(path: Path) -> None:
    if os.geteuid() == 0:
        import pwd

        entry = pwd.getpwnam("postgres")
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _run(cmd: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd="/", **kwargs)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise TeamError(f"{what} failed: {' / '.join(tail)}")
    return proc


def db_folder(team: Team) -> Path:
    """Where the database cluster lives: ``<home>/pg``, as root too (given to the ``postgres``
    user). A cluster that an earlier fedsweep created as root in the ``postgres`` user's home
    (``/var/lib/postgresql/fedsweep-team-<key>``) is still used where it is."""
    if os.geteuid() == 0:
        import hashlib
        import pwd

        key = hashlib.sha256(str(team.home).encode()).hexdigest()[:8]
        try:
            legacy = Path(pwd.getpwnam("postgres").pw_dir) / f"fedsweep-team-{key}"
        except KeyError:  # no postgres user: check() says so
            legacy = None
        if legacy is not None and (legacy / "data" / "PG_VERSION").is_file():
            return legacy
    return team.home / "pg"


def _pg_running(team: Team) -> bool:
    """The team's database cluster exists and its server runs (``pg_ctl status``)."""
    data = db_folder(team) / "data"
    if not (data / "PG_VERSION").is_file():
        return False
    cmd = _as_db_owner([_pg_bin("pg_ctl"), "-D", str(data), "status"])
    return subprocess.run(cmd, capture_output=True, text=True, cwd="/").returncode == 0


def _log_tail(log: Path) -> str:
    """The last non-empty line of a service's log (why it stopped, usually), shortened."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def start_postgres(team: Team, echo) -> None:
    """Create the database cluster (first time: a generated password in ``pgpass``), start it
    and create the ``mlflow`` database."""
    base = db_folder(team)
    data, run, logs = base / "data", base / "run", base / "logs"
    pgpass = team.home / "pgpass"
    for folder in (base, run, logs):
        folder.mkdir(parents=True, exist_ok=True)
        _chown_db_owner(folder)
    if not (data / "PG_VERSION").is_file():
        password = secrets.token_urlsafe(24)
        data.mkdir(parents=True, exist_ok=True)
        os.chmod(data, 0o700)
        _chown_db_owner(data)
        pwfile = run / f".pw-{os.getpid()}"  # initdb reads it; removed right after
        _private_write(pwfile, password + "\n")
        _chown_db_owner(pwfile)
        initdb = [_pg_bin("initdb"), "-D", str(data), "-U", DB_USER, "-E", "UTF8"]
        initdb += ["--auth=scram-sha-256", f"--pwfile={pwfile}"]
        try:
            _run(_as_db_owner(initdb), "initdb")
        finally:
            pwfile.unlink(missing_ok=True)
        _private_write(pgpass, f"*:*:*:{DB_USER}:{password}\n")
        echo(f"PostgreSQL: created the database cluster in {data}")
    if not pgpass.is_file():
        raise TeamError(f"{pgpass} is missing: the database password is lost; remove {data}")
    log = logs / "postgres.log"
    pg_ctl = _pg_bin("pg_ctl")
    status = subprocess.run(
        _as_db_owner([pg_ctl, "-D", str(data), "status"]), capture_output=True, text=True, cwd="/"
    )
    if status.returncode != 0:
        options = f"-p {team.pg_port} -k {run} -c listen_addresses={team.host}"
        try:
            _run(
                _as_db_owner(
                    [pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w", "start"]
                ),
                "pg_ctl start",
            )
        except TeamError as err:  # pg_ctl says "Examine the log output": the log's reason
            raise TeamError(f"{err}: {_log_tail(log)} (log: {log})") from None
    _create_database(team)
    echo(f"PostgreSQL:  {team.database_uri}  (password: {pgpass})")


def _create_database(team: Team) -> None:
    import psycopg

    env_before = os.environ.get("PGPASSFILE")
    os.environ["PGPASSFILE"] = str(team.home / "pgpass")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                con = psycopg.connect(
                    host=team.host, port=team.pg_port, user=DB_USER, dbname="postgres",
                    autocommit=True, connect_timeout=5,
                )  # fmt: skip
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        with con:
            found = con.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,))
            if found.fetchone() is None:
                con.execute(f'CREATE DATABASE "{DB_NAME}"')
    finally:
        if env_before is None:
            os.environ.pop("PGPASSFILE", None)
        else:
            os.environ["PGPASSFILE"] = env_before


def stop_postgres(team: Team, echo) -> None:
    data = db_folder(team) / "data"
    if not (data / "PG_VERSION").is_file():
        return
    proc = subprocess.run(
        _as_db_owner([_pg_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
        capture_output=True,
        text=True,
        cwd="/",
    )
    if proc.returncode == 0:
        echo("PostgreSQL: stopped")


# ------------------------------------------------------------------------------ MLflow
def answers(url: str, timeout: float = 3.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except OSError:
        return False


def start_mlflow(team: Team, echo) -> None:
    """``mlflow server`` on the database, proxying the artifacts (``--serve-artifacts``: a
    client uploads to the server, which writes to ``artifacts/``), detached; waits until it
    answers."""
    if answers(f"{team.tracking_uri}/health"):
        if team.auth and _open_to_anyone(team):
            raise TeamError(
                f"--auth: the MLflow server at {team.tracking_uri} runs already, without "
                "authentication; stop it (fedsweep team down) and run fedsweep team up --auth"
            )
        echo(f"MLflow:      {team.tracking_uri}  (already running)")
        return
    _free(team.host, team.mlflow_port, "--mlflow-port")
    logs = team.home / "logs"
    artifacts = team.home / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    env = mlflow_server_env({**os.environ, "PGPASSFILE": str(team.home / "pgpass")})
    cmd = [sys.executable, "-m", "mlflow", "server",
           "--backend-store-uri", team.database_uri,
           "--artifacts-destination", str(artifacts), "--serve-artifacts",
           "--host", team.host, "--port", str(team.mlflow_port), "--workers", "2"]  # fmt: skip
    if team.auth:
        cmd += ["--app-name", "basic-auth"]
        env.update(_auth_env(team, echo))
    with open(logs / "mlflow.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, start_new_session=True)
    team.pids["mlflow"] = proc.pid
    team.save()
    _wait_until(
        lambda: answers(f"{team.tracking_uri}/health"),
        proc, "the MLflow server", "answer", logs / "mlflow.log", SERVER_START_S, 1.0,
    )  # fmt: skip
    echo(f"MLflow:      {team.tracking_uri}  (UI and tracking; artifacts in {artifacts})")
    if team.auth:
        echo(
            f"MLflow:      every request needs a user and password; the admin's ({AUTH_ADMIN}) "
            f"password is in {team.home / ADMIN_FILE}"
        )


def _auth_env(team: Team, echo) -> dict[str, str]:
    """The files of MLflow's basic-auth app (created once, mode 600) and the variables the
    server reads them through: no secret on its command line (``ps``) or in its output."""
    home = team.home
    config = (
        "[mlflow]\n"
        f"default_permission = {AUTH_DEFAULT_PERMISSION}\n"
        f"database_uri = sqlite:///{home / AUTH_DB}\n"
        f"admin_username = {AUTH_ADMIN}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    _private_write(home / AUTH_CONFIG, config)
    for name in (ADMIN_FILE, SECRET_KEY_FILE):
        if not (home / name).is_file():
            _private_write(home / name, secrets.token_urlsafe(24) + "\n")
            if name == ADMIN_FILE:
                echo(f"MLflow:      generated the password of its admin ({AUTH_ADMIN}) in "
                     f"{home / name} (mode 600)")  # fmt: skip
    db = home / AUTH_DB
    if not db.exists():  # the app creates it: mode 600 from the start
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT, 0o600))
    return {
        "MLFLOW_AUTH_CONFIG_PATH": str(home / AUTH_CONFIG),
        # read by the app only while the admin does not exist yet (its first start)
        "MLFLOW_AUTH_ADMIN_PASSWORD": (home / ADMIN_FILE).read_text().strip(),
        "MLFLOW_FLASK_SERVER_SECRET_KEY": (home / SECRET_KEY_FILE).read_text().strip(),
    }


def _open_to_anyone(team: Team) -> bool:
    """The running MLflow server answers a request without credentials (no ``--auth``)."""
    import urllib.error

    url = f"{team.tracking_uri}/api/2.0/mlflow/experiments/get-by-name?experiment_name=Default"
    try:
        with urllib.request.urlopen(url, timeout=STATUS_TIMEOUT_S):
            return True
    except urllib.error.HTTPError as err:
        return err.code not in (401, 403)
    except OSError:
        return False


def _free(host: str, port: int, option: str) -> None:
    if listens(host, port):
        raise TeamError(f"port {port} on {host} is in use; choose another with {option}")


def _wait_until(ready, proc, what: str, verb: str, log: Path, timeout: float, poll: float):
    """Poll ``ready()`` until it is true; raise :class:`TeamError` naming ``log`` when the
    service's process ``proc`` exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise TeamError(f"{what} exited ({proc.returncode}): {_log_tail(log)} (log: {log})")
        if time.monotonic() > deadline:
            raise TeamError(f"{what} does not {verb} after {timeout:g} s; see {log}")
        time.sleep(poll)


def stop_group(pid: int, grace: float = 10.0) -> bool:
    """SIGTERM the process group of ``pid`` (a service started in its own session), then
    SIGKILL what is left after ``grace`` seconds; True when something was running."""
    if not alive(pid):
        return False
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return True
            time.sleep(0.2)
    return True


# ------------------------------------------------------------------------------ Ray
def start_ray(team: Team, echo) -> None:
    """A Ray head (``ray start --head --block``, detached in its own session so that ``down``
    stops exactly its processes), with token authentication."""
    pid = team.pids.get("ray")
    if pid and alive(pid):
        echo(f"Ray head:    {team.ray_address}  (already running)")
        return
    _free(team.host, team.ray_port, "--ray-port")
    ray = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    cmd = [ray, "start", "--head", "--block", "--port", str(team.ray_port),
           "--node-ip-address", team.host, "--disable-usage-stats", "--include-dashboard=false"]  # fmt: skip
    if team.ray_cpus is not None:
        cmd += ["--num-cpus", str(team.ray_cpus)]
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    token = ensure_ray_token(echo)
    logs = team.home / "logs"
    with open(logs / "ray-head.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, start_new_session=True)
    team.pids["ray"] = proc.pid
    team.save()
    _wait_until(
        lambda: listens(team.host, team.ray_port),
        proc, "the Ray head (ray start)", "listen", logs / "ray-head.log", 120.0, 0.5,
    )  # fmt: skip
    where = f"token authentication: {token}" if token else "token authentication: $RAY_AUTH_TOKEN"
    echo(f"Ray head:    {team.ray_address}  ({where})")


def ray_token_path() -> Path:
    """Where Ray 2.60 reads the cluster's token: ``$RAY_AUTH_TOKEN_PATH``, else
    ``~/.ray/auth_token``."""
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def ensure_ray_token(echo) -> Path | None:
    """The token file of the team's Ray cluster, readable by its owner only; None when the
    token is given in ``$RAY_AUTH_TOKEN``. Whoever reads the token runs code on the cluster,
    and whoever may replace it in its folder chooses it, so:

    - a missing token is generated here (256 random bits, hex: Ray's own format,
      ``ray._private.authentication``) and written with mode 600 from the start, its folder
      created with mode 700 (``ray get-auth-token --generate`` wrote it with mode 644, and
      always to ``~/.ray``, whatever ``$RAY_AUTH_TOKEN_PATH`` said);
    - an existing token file that others may read is made mode 600, and a folder of this
      user's that others may write loses their write permission (``up`` says so);
    - a folder of another user's that others may write (not sticky) is refused."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return None
    import stat

    path = ray_token_path()
    folder = path.parent
    if not folder.exists():
        folder.mkdir(mode=0o700, parents=True)
    st = folder.stat()
    open_write = st.st_mode & 0o022
    if open_write and st.st_uid == os.geteuid():
        folder.chmod(stat.S_IMODE(st.st_mode) & ~0o022)
        echo(f"Ray: {folder} was writable by others (mode {stat.S_IMODE(st.st_mode):o}); "
             f"now {stat.S_IMODE(st.st_mode) & ~0o022:o}")  # fmt: skip
    elif open_write and not st.st_mode & stat.S_ISVTX:
        raise TeamError(
            f"{folder}: another user's folder that others may write (mode "
            f"{stat.S_IMODE(st.st_mode):o}) cannot hold the Ray cluster's token; choose "
            "another with $RAY_AUTH_TOKEN_PATH"
        )
    if not path.is_file():
        _private_write(path, secrets.token_hex(32))
        echo(f"Ray: generated the cluster's authentication token in {path} (mode 600)")
        return path
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        try:
            path.chmod(0o600)
        except OSError as err:
            raise TeamError(
                f"{path}: the Ray cluster's token is readable by others (mode {mode:o}) and "
                f"cannot be made mode 600 ({err.strerror}); fix it, or choose another with "
                "$RAY_AUTH_TOKEN_PATH"
            ) from None
        echo(f"Ray: {path} was readable by others (mode {mode:o}); now 600")
    return path


# ------------------------------------------------------------------------------ checks
#: what a port option accepts
PORTS = "allowed: 1-65535"


def check(team: Team) -> None:
    """Refuse, in one line naming the option, what ``up`` could not use, before anything is
    created: a port out of range or given twice, a negative ``--ray-cpus`` (``ray start``
    failed on it after the database and the MLflow server had started), a ``--host`` that is not an IPv4 address of
    this machine, a port in use (unless by the team's own service, which ``up`` leaves
    running), a ``--home`` that cannot be written (or, as root, that the ``postgres`` user
    cannot enter), PostgreSQL's programs missing. These used to surface as a vague ``pg_ctl``
    line or a traceback, after a database cluster had been created."""
    ports = {"--pg-port": team.pg_port, "--mlflow-port": team.mlflow_port,
             "--ray-port": team.ray_port}  # fmt: skip
    for option, port in ports.items():
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise TeamError(f"{option} {port}: not a port ({PORTS})")
    cpus = team.ray_cpus
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 0):
        raise TeamError(
            f"--ray-cpus {cpus}: not a number of CPUs (allowed: 0 or more, 0: the head runs "
            "no trials; default: all of them)"
        )
    given = list(ports.items())
    for index, (option, port) in enumerate(given):
        earlier = [o for o, p in given[:index] if p == port]
        if earlier:
            raise TeamError(f"{option} {port}: already {earlier[0]}'s (each service needs its own)")
    if team.auth:
        try:
            import flask_wtf  # noqa: F401 - MLflow's basic-auth app needs it (CSRF)
        except ImportError:
            raise TeamError(
                "--auth: MLflow's basic-auth app needs the package Flask-WTF, which is not "
                "installed (pip install 'fedsweep[team]')"
            ) from None
    _check_host(team.host)
    _check_home(team.home)
    old = Team.load(team.home) if (team.home / "team.json").is_file() else None
    running = {
        "--pg-port": lambda: old is not None and _pg_running(team),
        "--mlflow-port": lambda: answers(f"{team.tracking_uri}/health"),
        "--ray-port": lambda: old is not None and alive(old.pids.get("ray") or 0),
    }
    for option, port in ports.items():
        problem = _listen_problem(team.host, port, option)
        if problem and not running[option]():
            raise TeamError(problem)
    _pg_bin("initdb")
    _pg_bin("pg_ctl")


def _check_host(host: str) -> None:
    if ":" in host:  # the team's URIs (http://HOST:PORT, postgresql://...@HOST) take no IPv6
        raise TeamError(
            f"--host {host}: an IPv6 address (allowed: an IPv4 address or name of this "
            "machine, e.g. 127.0.0.1 or its LAN address)"
        )
    problem = _listen_problem(host, 0, "--host")
    if problem:
        raise TeamError(problem)


def _listen_problem(host: str, port: int, option: str) -> str | None:
    """Why a service could not listen on ``host:port`` (tried here with a socket of our own,
    as the servers bind: SO_REUSEADDR), naming ``option``; or None."""
    try:
        address = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]
    except socket.gaierror as err:
        return f"--host {host}: not an address of this machine ({err.strerror})"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as err:
            if err.errno == errno.EADDRNOTAVAIL:
                return f"--host {host}: not an address of this machine (cannot listen there)"
            if err.errno == errno.EADDRINUSE:
                return f"{option} {port}: in use on {host}; choose another with {option}"
            if err.errno == errno.EACCES:
                return f"{option} {port}: permission denied (ports below 1024 need root)"
            return f"{option} {port}: cannot listen on {host} ({err.strerror or err})"
    return None


def _check_home(home: Path) -> None:
    from fedsweep.core.atomic import folder_problem

    problem = folder_problem(home, "--home")
    if problem:
        raise TeamError(problem)
    if os.geteuid() != 0:
        return
    import pwd

    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        raise TeamError(
            "PostgreSQL refuses to run as root and there is no postgres user to run it as "
            "(install PostgreSQL's server package, or run fedsweep team as another user)"
        ) from None
    gids = set(os.getgrouplist(owner.pw_name, owner.pw_gid))
    blocked = _closed_to(home, owner.pw_uid, gids)
    if blocked is not None:
        raise TeamError(
            f"--home {home}: as root, PostgreSQL runs as the postgres user, which cannot enter "
            f"{blocked} (mode {blocked.stat().st_mode & 0o777:o}); choose a --home it can "
            "enter, e.g. /srv/fedsweep-team, or run fedsweep team as another user"
        )


def _closed_to(home: Path, uid: int, gids: set[int]) -> Path | None:
    """The first existing folder on the way to ``home`` that the user ``uid`` (groups
    ``gids``) may not enter (search permission by the mode bits; ACLs are not read), or None.
    Folders ``up`` creates are made enterable (:func:`_open_created`)."""
    for folder in [*reversed(home.parents), home]:
        try:
            st = folder.stat()
        except OSError:
            return None  # from here on, up creates the folders
        if st.st_uid == uid:
            bit = 0o100
        elif st.st_gid in gids:
            bit = 0o010
        else:
            bit = 0o001
        if not st.st_mode & bit:
            return folder
    return None


def _open_created(home: Path, missing: Path | None) -> None:
    """As root, let the ``postgres`` user enter the folders ``up`` created on the way to
    ``home`` (``missing`` and below), whatever the umask: search only, not listing."""
    if os.geteuid() != 0 or missing is None:
        return
    for folder in [*reversed(home.parents), home]:
        if folder == missing or missing in folder.parents:
            folder.chmod(folder.stat().st_mode | 0o111)


# ------------------------------------------------------------------------------ all
class _Undo:
    """What ``up`` found before it started, to undo a failed ``up``: stop the services it
    started, remove the files and folders it created, put back the files it rewrote."""

    NAMES = ("logs", "pg", "artifacts", "team.json", "team.env", "pgpass", AUTH_CONFIG,
             AUTH_DB, ADMIN_FILE, SECRET_KEY_FILE)  # fmt: skip
    #: rewritten by ``up`` (pgpass: by a new cluster's initdb), put back as they were
    KEPT = ("team.json", "team.env", "pgpass")

    def __init__(self, team: Team):
        home = team.home
        self.missing = None if home.exists() else home  # the top folder up creates
        while self.missing is not None and not self.missing.parent.exists():
            self.missing = self.missing.parent
        self.created = [home / n for n in self.NAMES if not (home / n).exists()]
        self.kept = {n: (home / n).read_bytes() for n in self.KEPT if (home / n).is_file()}
        old = Team.load(home) if "team.json" in self.kept else None
        self.pids = dict(old.pids) if old else {}
        self.pg_ran = _pg_running(team) if old else False

    def run(self, team: Team, echo) -> None:
        """Undo and say so in one line; never raises (the error that failed ``up`` is the
        one to report)."""
        done = self._stop(team)
        gone = [self.missing] if self.missing else self.created
        gone = [p for p in gone if p.exists() or p.is_symlink()]
        for path in gone:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        for name, data in self.kept.items():
            try:
                if name == "team.json":
                    atomic.write_bytes(team.home / name, data)
                else:
                    _private_write(team.home / name, data.decode())
            except OSError:
                pass
        if gone:
            done.append("removed " + ", ".join(str(p) for p in gone))
        if done:
            echo(f"team up failed: {'; '.join(done)}")

    def _stop(self, team: Team) -> list[str]:
        done = []
        for name, pid in team.pids.items():
            if self.pids.get(name) != pid and stop_group(pid):
                done.append(f"stopped {'the Ray head' if name == 'ray' else 'MLflow'}")
        try:
            if not self.pg_ran and _pg_running(team):
                stop_postgres(team, lambda _line: None)
                done.append("stopped PostgreSQL")
        except (OSError, TeamError):
            pass
        return done


def up(team: Team, echo=print) -> Team:
    """Start the services (:func:`check` first: nothing is created for a bad host, port or
    folder). A failure, or Ctrl-C, stops what this call started and removes what it created
    (:class:`_Undo`); the error is raised again."""
    check(team)
    undo = _Undo(team)
    try:
        (team.home / "logs").mkdir(parents=True, exist_ok=True)
        _open_created(team.home, undo.missing)
        old = Team.load(team.home)
        if old is not None:
            team.pids = old.pids
            team.auth = team.auth or old.auth  # a server once protected stays so
        team.save()
        start_postgres(team, echo)
        start_mlflow(team, echo)
        start_ray(team, echo)
        team.save()
    except BaseException:
        undo.run(team, echo)
        raise
    return team


def down(home: Path, echo=print) -> None:
    team = Team.load(home)
    if team is None:
        echo(f"no team services recorded in {home}")
        return
    # the Ray head and the MLflow server stop side by side (each may take its SIGTERM grace),
    # then PostgreSQL, which the server used
    pids = {name: pid for name in ("ray", "mlflow") if (pid := team.pids.pop(name, None))}
    with ThreadPoolExecutor(max_workers=2) as pool:
        stopped = dict(zip(pids, pool.map(stop_group, pids.values()), strict=True))
    for name in ("ray", "mlflow"):
        if stopped.get(name):
            echo(f"{'Ray head' if name == 'ray' else 'MLflow'}: stopped")
    stop_postgres(team, echo)
    team.save()


def status(home: Path) -> dict[str, bool]:
    team = Team.load(home)
    if team is None:
        return {}
    return {
        "postgres": listens(team.host, team.pg_port),
        # a loaded 2-core machine kept a request waiting past 3 s: status is asked once
        "mlflow": answers(f"{team.tracking_uri}/health", timeout=STATUS_TIMEOUT_S),
        "ray": listens(team.host, team.ray_port),
    }
