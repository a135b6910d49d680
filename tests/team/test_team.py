"""Team mode for real (``pytest -m team``): the how-to's commands run as written
(docs/how-to/team.md: PostgreSQL, an MLflow server on it, a Ray head), a 2-node Ray cluster
that loses a node mid-sweep, a credentialed URI whose password must appear nowhere, and two
drivers in two working directories against one server at once.

Needs PostgreSQL's server programs (``initdb``, ``pg_ctl``) and psycopg (``fedsweep[team]``);
skipped with the reason otherwise. ``HOME`` is a temporary folder, so ``~/.fedsweep/team`` and
Ray's token are the test's own; the ports are the how-to's defaults (skipped when taken).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import small_spec, write_yaml

pytestmark = [pytest.mark.team, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "how-to" / "team.md"
PORTS = {"PostgreSQL": 5433, "MLflow": 5001, "Ray": 6380}
SECRET = "Sw0rdf1sh-team-test"
SERVER = "http://127.0.0.1:5001"
HEAD = "127.0.0.1:6380"


def _missing() -> str | None:
    if not (shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))):
        return "PostgreSQL's server programs (initdb, pg_ctl) are not installed"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'fedsweep[team]')"
    for name, port in PORTS.items():
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return f"port {port} ({name}, the how-to's default) is taken on this machine"
    return None


def _enterable(folder: Path) -> Path:
    """``folder`` made enterable on its way from ``/`` (pytest's folders are mode 700): as root
    the database under ``~/.fedsweep/team`` is run by the postgres user, which must enter it
    (``team up`` refuses a --home it cannot reach)."""
    if os.geteuid() == 0:
        for part in [*reversed(folder.parents), folder]:
            if str(part).startswith(tempfile.gettempdir() + "/"):  # pytest's, under /tmp
                part.chmod(part.stat().st_mode | 0o111)
    return folder


def doc_block(name: str) -> str:
    """The bash block of the how-to marked ``<!-- team-check: NAME -->``."""
    text = DOC.read_text()
    found = re.search(rf"<!-- team-check: {name} -->\s*```bash\n(.*?)```", text, re.S)
    assert found, f"{DOC}: no block marked team-check: {name}"
    return found.group(1)


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """The how-to's "up" block, as written, in a bash whose HOME is a temporary folder; the
    environment it leaves (``source team.env``) for the tests; the "down" block at the end."""
    why = _missing()
    if why:
        pytest.skip(why)
    home = _enterable(tmp_path_factory.mktemp("home"))
    work = tmp_path_factory.mktemp("work")
    (work / "sweeps").symlink_to(ROOT / "sweeps")
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    # the head's GCS declares a lost node dead within ~2 s (Ray's default: about 30 s), so the
    # sweep sees it before it ends
    env.update(RAY_health_check_period_ms="500", RAY_health_check_failure_threshold="3",
               RAY_health_check_timeout_ms="1000")  # fmt: skip
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("RAY_ADDRESS", None)
    dump = "python -c 'import json, os; print(\"ENV\" + json.dumps(dict(os.environ)))'"
    proc = subprocess.run(
        ["bash", "-e", "-c", doc_block("up") + dump], cwd=work, env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("ENV{"))
        after = json.loads(line[len("ENV") :])
        assert after["MLFLOW_TRACKING_URI"] == SERVER and after["RAY_AUTH_MODE"] == "token"
        yield {"env": {**env, **after}, "home": home, "work": work, "up": proc.stdout}
    finally:
        down = subprocess.run(
            ["bash", "-e", "-c", doc_block("down")], cwd=work, env=env, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        assert down.returncode == 0, down.stdout + down.stderr
        from fedsweep.team.local import Team, db_folder

        # the database folder (as root it lives in the postgres user's home, not in HOME)
        shutil.rmtree(db_folder(Team(home / ".fedsweep" / "team")), ignore_errors=True)


def _sql(env: dict, query: str, *args) -> list[tuple]:
    import psycopg

    os.environ["PGPASSFILE"] = env["PGPASSFILE"]
    with psycopg.connect(host="127.0.0.1", port=5433, user="fedsweep", dbname="mlflow") as con:
        return con.execute(query, args).fetchall()


def _duplicate_metric_rows(env: dict) -> int:
    return _sql(
        env,
        "SELECT count(*) FROM (SELECT run_uuid, key, step FROM metrics "
        "GROUP BY run_uuid, key, step HAVING count(*) > 1) x",
    )[0][0]


def _metric_rows(env: dict) -> int:
    return _sql(env, "SELECT count(*) FROM metrics")[0][0]


def _until(predicate, proc, timeout: float = 300) -> None:
    """Until ``predicate()`` holds (polled) while the sweep ``proc`` runs."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _runs_per_hash(env: dict, lr: str) -> dict[str, int]:
    rows = _sql(
        env,
        "SELECT t.value, count(*) FROM runs r "
        "JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'fedsweep.config_hash' "
        "JOIN params p ON p.run_uuid = r.run_uuid AND p.key = 'train.lr' AND p.value = %s "
        "WHERE r.lifecycle_stage = 'active' GROUP BY t.value",
        lr,
    )
    return dict(rows)


def _sweep(env, cwd, spec, *args, timeout=600):
    return subprocess.Popen(
        [sys.executable, "-m", "fedsweep.cli.main", "sweep", str(spec), "--profile", "smoke",
         *args],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_the_howto_sweep_runs_on_the_team_services(team):
    """The how-to's sweep block, as written: the figure's runs land on the server, the figure
    is drawn from it, and its links point at the server."""
    proc = subprocess.run(
        ["bash", "-e", "-c", doc_block("sweep")], cwd=team["work"], env=team["env"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert re.search(r"bherd-fig4e \[smoke\]: \d+ run, 0 skipped, \d+ shared, 0 failed", out), out
    index = (team["work"] / "figures" / "team" / "index.html").read_text()
    assert SERVER in index and "127.0.0.1:5000" not in index
    assert _duplicate_metric_rows(team["env"]) == 0


def _node_processes(pgid: int) -> tuple[list[int], list[int]]:
    """The processes of the Ray node started in the session ``pgid`` (``ray start``, its
    raylet, agents), and the trial workers its raylet runs (Ray puts each worker in a session
    of its own, so they are found as the raylet's children: ``ray::ImplicitFunc...``)."""
    out = subprocess.run(
        ["ps", "-ww", "-eo", "pid=,pgid=,ppid=,args="], capture_output=True, text=True
    ).stdout
    rows = [line.strip().split(None, 3) for line in out.splitlines() if line.strip()]
    rows = [(int(pid), int(group), int(ppid), args) for pid, group, ppid, args in rows]
    node = [pid for pid, group, _, _ in rows if group == pgid]
    raylets = {pid for pid, group, _, args in rows if group == pgid and "raylet" in args}
    trials = [pid for pid, _, ppid, args in rows if ppid in raylets and "ImplicitFunc" in args]
    return node, trials


def _wait_for_nodes(env: dict, count: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(
            ["ray", "status", "--address", HEAD], env=env, capture_output=True, text=True
        ).stdout
        active = out.split("Active:")[-1].split("Pending:")[0]
        if "Active:" in out and active.count("node_") >= count:
            return
        assert time.monotonic() < deadline, f"the cluster never had {count} nodes:\n{out}"
        time.sleep(1)


def test_a_credentialed_sweep_on_two_nodes_survives_a_lost_node(team, tmp_path):
    """A 2-node cluster (the team's head and a second ``ray start``), a tracking URI with a
    password; the second node is killed while a trial runs on it. Every config ends with
    exactly one run, every metric row is there once, the console says what happened, and the
    password is nowhere: not in params, tags, artifacts, Ray's files, output or figures."""
    started = time.time()
    env = {**team["env"], "RAY_AUTH_MODE": "token"}
    spec = write_yaml(
        tmp_path / "team-node.yaml",
        small_spec("team-node", seeds=(0, 1, 2), rounds=100, alphas=(0.5, 1.0), checkpoint_every=5,
                   max_failures=3, train_subset=1500),
    )  # fmt: skip
    node = subprocess.Popen(
        ["ray", "start", "--address", HEAD, "--num-cpus", "1", "--block",
         "--disable-usage-stats"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    uri = f"http://alice:{SECRET}@127.0.0.1:5001"
    try:
        _wait_for_nodes(env, 2)  # before the sweep: Tune reuses the actors it starts first
        sweep = _sweep(env, tmp_path, spec, "--tracking-uri", uri, "--address", HEAD,
                       "--set", "train.lr=0.002")  # fmt: skip
        deadline = time.monotonic() + 300
        while not _node_processes(node.pid)[1]:  # a trial runs on the second node
            assert sweep.poll() is None, sweep.stdout.read()
            assert time.monotonic() < deadline, "no trial ever ran on the second node"
            time.sleep(0.2)
        rows = _metric_rows(team["env"])
        _until(lambda: _metric_rows(team["env"]) > rows, sweep)  # it trains: a round logged
        # the machine is lost: the node's processes and the trial it ran, at once
        for pid in [p for group in _node_processes(node.pid) for p in group]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        out, _ = sweep.communicate(timeout=600)
    finally:
        if node.poll() is None:
            os.killpg(node.pid, signal.SIGKILL)
    assert sweep.returncode == 0, out
    assert "team-node [smoke]: 6 run, 0 skipped, 0 shared, 0 failed of 6 trials" in out, out
    flat = " ".join(out.split())  # the console wraps its lines at the terminal's width
    # (where depends on the length of Ray's error text quoted before it: seen wrapped
    # between "newest" and "checkpoint")
    assert "; Ray restarts it, from its newest checkpoint" in flat, out
    assert "note: Ray node " in flat and " was lost; its trials restart" in flat, out
    assert "(1 restart)" in flat.split("team-node [smoke]: 6 run")[1].split("fedsweep sweep")[0]
    runs = _runs_per_hash(team["env"], "0.002")
    assert len(runs) == 6 and set(runs.values()) == {1}, runs
    assert _duplicate_metric_rows(team["env"]) == 0

    figures = subprocess.run(
        [sys.executable, "-m", "fedsweep.cli.main", "figures", "--spec", str(spec),
         "--profile", "smoke", "--set", "train.lr=0.002", "--tracking-uri", uri,
         "--out", str(tmp_path / "figs")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out += figures.stdout + figures.stderr
    # the password, nowhere
    assert SECRET not in out
    # the sweep's folder (Ray's trial configs, state files, checkpoints, the Ray log), the
    # server's artifacts, the figures, and Ray's session logs of this test's clusters
    sessions = [
        d for d in Path("/tmp/ray").glob("session_2*") if (d / "logs").is_dir()
        and (d / "logs").stat().st_mtime >= started
    ]  # fmt: skip
    folders = [tmp_path, team["home"] / ".fedsweep" / "team" / "artifacts", *sessions]
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 50 * 2**20:
                with contextlib.suppress(OSError):
                    assert SECRET.encode() not in path.read_bytes(), path
    for table, columns in (
        ("params", "value"),
        ("tags", "value"),
        ("experiment_tags", "value"),
        ("runs", "name"),
        ("registered_model_tags", "value"),
    ):
        hits = _sql(team["env"], f"SELECT count(*) FROM {table} WHERE {columns} LIKE %s",
                    f"%{SECRET}%")  # fmt: skip
        assert hits[0][0] == 0, table


def test_two_working_directories_drive_one_server_at_once(team, tmp_path):
    """The same figure from two folders at once (the second with --wait), and another figure
    with the same configs at the same time: no config is trained twice, no row written twice."""
    env = team["env"]
    one, two = tmp_path / "one", tmp_path / "two"
    for folder in (one, two):
        folder.mkdir()
        write_yaml(folder / "team-pair.yaml", small_spec("team-pair", seeds=(0, 1, 2), rounds=8))
    write_yaml(two / "team-other.yaml", small_spec("team-other", seeds=(0, 1, 2), rounds=8))
    common = ("--set", "train.lr=0.003", "--address", HEAD)
    first = _sweep(env, one, one / "team-pair.yaml", *common)
    _until(lambda: _sql(env, "SELECT 1 FROM registered_models WHERE name = %s",
                        "fedsweep.claim.driver.team-pair.smoke"), first)  # fmt: skip
    # the first driver, holding the figure, is paused until the second says it waits: on a
    # busy machine the first could otherwise end before the second arrived (a paused process
    # on this host is alive: its lease is not taken over, however still its heartbeat)
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = _sweep(env, two, two / "team-pair.yaml", *common, "--wait")
        said: list[str] = []
        reader = threading.Thread(
            target=lambda: said.extend(iter(second.stdout.readline, "")), daemon=True
        )
        reader.start()
        deadline = time.monotonic() + 300
        while "waiting for PID" not in " ".join("".join(said).split()):
            assert second.poll() is None or reader.is_alive(), "".join(said)
            assert time.monotonic() < deadline, "".join(said)
            time.sleep(0.2)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    other = _sweep(env, two, two / "team-other.yaml", *common)
    second.wait(timeout=900)
    reader.join(timeout=60)
    outs = [first.communicate(timeout=900)[0], "".join(said), other.communicate(timeout=900)[0]]
    for proc, out in zip((first, second, other), outs, strict=True):
        assert proc.returncode == 0, out
    joined = "\n".join(outs)
    second = " ".join(outs[1].split())  # the console wraps its lines at the terminal's width
    assert "waiting for PID" in second and "to end its sweep of team-pair [smoke]" in second
    assert "team-pair [smoke]: 0 run, 6 skipped" in outs[1], outs[1]
    runs = _runs_per_hash(env, "0.003")
    assert len(runs) == 6 and set(runs.values()) == {1}, (runs, joined)
    assert _duplicate_metric_rows(env) == 0


def test_without_address_a_sweep_starts_its_own_ray(team):
    """With a Ray head running on this machine and RAY_ADDRESS naming it, the sweep's Ray
    (no --address) is a private local one, not the head."""
    code = (
        "from fedsweep.sweep.ray_backend import init_ray, shutdown_ray\n"
        "import ray\n"
        "init_ray(None)\n"
        "print('GCS', ray.get_runtime_context().gcs_address)\n"
        "shutdown_ray()\n"
    )
    env = {**team["env"], "RAY_ADDRESS": HEAD}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("GCS ")), "")
    assert proc.returncode == 0 and line, proc.stdout + proc.stderr
    assert line.split()[1] != HEAD and not line.endswith(":6380"), line


def test_a_failed_up_keeps_its_database_under_home_and_removes_it(tmp_path, monkeypatch):
    """issue 48, item 14: the database cluster lives under --home (as root too: given to the
    postgres user, no longer in its home), and an `up` that fails after PostgreSQL started
    stops it and removes everything it created: the folder, the cluster, nothing in the
    postgres user's home. Only PostgreSQL starts (MLflow's start fails on purpose)."""
    if not (shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))):
        pytest.skip("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    pytest.importorskip("psycopg")
    import pwd

    from typer.testing import CliRunner

    import fedsweep.team.local as local
    from fedsweep.cli.main import app
    from fedsweep.core.processes import listens

    home = _enterable(tmp_path) / "team"
    monkeypatch.setenv("HOME", str(tmp_path))
    ports = []
    for _ in range(3):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    pg_home = Path("/var/lib/postgresql")
    pg_before = sorted(pg_home.iterdir()) if pg_home.is_dir() else []
    seen = {}

    def mlflow_fails(team, echo):
        data = home / "pg" / "data"
        seen.update(cluster=(data / "PG_VERSION").is_file(), owner=data.owner(),
                    running=listens(team.host, team.pg_port))  # fmt: skip
        raise local.TeamError("the MLflow server exited (1): on purpose")

    monkeypatch.setattr(local, "start_mlflow", mlflow_fails)
    res = CliRunner().invoke(
        app, ["team", "up", "--home", str(home), "--pg-port", str(ports[0]),
              "--mlflow-port", str(ports[1]), "--ray-port", str(ports[2])],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert res.stderr.strip().splitlines() == ["the MLflow server exited (1): on purpose"]
    assert seen == {
        "cluster": True,
        "owner": "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name,
        "running": True,
    }, seen
    assert f"team up failed: stopped PostgreSQL; removed {home}" in res.stdout, res.stdout
    assert not home.exists()
    assert not listens("127.0.0.1", ports[0])
    assert (sorted(pg_home.iterdir()) if pg_home.is_dir() else []) == pg_before
