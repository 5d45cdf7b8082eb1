"""The distributed mode's processes (daphne, a Celery worker and beat on PostgreSQL and Redis),
started with the commands of the Makefile and docker-compose.yml: one start-up for the tests that
run it (conftest's fixtures) and for the benchmarks (bench.latency), so the benchmark times the
stack the tests check; and the embedded mode (`make run`) the browser tests run. No pytest and
no Django here."""

import atexit
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"  # server logs, kept by CI
VENV_BIN = Path(sys.executable).parent
# The commands of docker-compose.yml and the Makefile; the web's bind address and port vary.
WEB = ["daphne", "-b", "0.0.0.0", "-p", "8000", "project.asgi:application"]
# The rounds' worker (prefork: a round is CPU) and the Proxmox collects' worker (threads: a
# collect waits on the network, and a thread waits without holding a process).
WORKER = ["celery", "-A", "project", "worker", "-n", "worker@%h", "-l", "info", "-Q", "celery,whatif"]
PROXMOX_WORKER = [*WORKER[:4], "-n", "proxmox@%h", "-l", "info", "-Q", "proxmox", "-P", "threads", "-c", "50"]
BEAT = [
    "celery",
    "-A",
    "project",
    "beat",
    "-l",
    "info",
]  # the scheduler: settings.CELERY_BEAT_SCHEDULER
# Web, worker and beat run restarted when they stop, as `make web`, `make worker`, `make beat`
# and the compose restart policy do.
SUPERVISE = [str(ROOT / "scripts" / "supervise")]
# One worker process as the single-worker tests run it: the production command, one process,
# no mingle/gossip chatter to wait for at start.
# It serves every queue, the Proxmox collects' too.
SINGLE_WORKER = [
    str(VENV_BIN / WORKER[0]),
    *WORKER[1:-2],
    "--concurrency",
    "1",
    "--without-mingle",
    "--without-gossip",
]
# `make web` collects the static files (hashed, compressed) before daphne starts.
COLLECTSTATIC = ["manage.py", "collectstatic", "--noinput", "-v", "0"]
# The static files every server copies before its own collect: the compressed copies are kept
# (dashboard/staticfiles.py), so a seeded collect takes 4 s instead of 30 s of Brotli on a slow
# machine, and the suite starts some twenty servers. Made once, by the first server that needs
# it, under a lock: `make test` gives its runs one seed (CRS_TEST_STATIC_SEED); each run made
# its own before, four full collects in the suite's first minutes, two CPU minutes of 24.
STATIC_SEED = Path(os.environ.get("CRS_TEST_STATIC_SEED") or Path(tempfile.gettempdir()) / f"crs-static-{os.getpid()}")
if "CRS_TEST_STATIC_SEED" not in os.environ:
    atexit.register(shutil.rmtree, STATIC_SEED, ignore_errors=True)


def own_static(static: Path) -> dict[str, str]:
    """The environment that gives a server `static` as its STATIC_ROOT, seeded (STATIC_SEED).
    Every server of the suite needs its own: collectstatic deletes a hashed file before it
    writes it again, and a server (or the in-process tests' WhiteNoise) scanning a shared
    directory meanwhile fails on the missing file (seen in CI, var/static)."""
    STATIC_SEED.parent.mkdir(parents=True, exist_ok=True)
    with open(STATIC_SEED.with_name(STATIC_SEED.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the others wait for the first collect
        if not STATIC_SEED.exists():
            making = STATIC_SEED.with_name(STATIC_SEED.name + ".making")
            shutil.rmtree(making, ignore_errors=True)
            env = {"CRS_STATIC_ROOT": str(making), "CRS_SECRET_KEY": "static-seed"}
            log = ARTIFACTS / f"static-seed-{os.getpid()}.log"
            assert start(COLLECTSTATIC, env, log).wait(600) == 0, log.read_text()
            making.rename(STATIC_SEED)
    shutil.copytree(STATIC_SEED, static, dirs_exist_ok=True)
    return {"CRS_STATIC_ROOT": str(static)}


@contextmanager
def distributed_stack(
    database_url: str, redis_url: str, password: str, name: str, logs: Path = ARTIFACTS, round_interval: int = 1
):
    """web, worker and beat, started exactly as `make web`, `make worker` and `make beat` do, on a
    migrated database with the demo cluster (rounds every `round_interval` seconds) and
    `admin` / `password`.
    Yields the web's URL and the processes (web, worker, beat, Proxmox worker); logs go to <logs>/<name>-*.log."""
    env = {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "CRS_ADMIN_PASSWORD": password,
        "CRS_SECRET_KEY": f"{name}-test",
    }
    demo = ["manage.py", "demo", "--round-interval", str(round_interval)]
    for setup in (["manage.py", "migrate", "--noinput"], demo):
        assert start(setup, env, logs / f"{name}-setup.log").wait(120) == 0
    port, processes = processes_of_a_stack(env, name, [str(VENV_BIN / WORKER[0]), *WORKER[1:]], logs)
    try:
        wait_for_port(port, processes[0], timeout=180)  # daphne's start on a busy machine (the soak runs beside)
        yield f"http://127.0.0.1:{port}", processes
    finally:
        for process in processes:
            stop(process)


@contextmanager
def embedded(log: str, password: str, *options: str, start_timeout: float = 60.0):
    """runembedded on a fresh SQLite file with one-second rounds, as `make run` starts it, with
    `admin` / `password`. Yields its URL and the environment it runs with (to run manage.py
    beside it: `shell`). Logs to artifacts/<log>."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "DATABASE_URL": f"sqlite:///{tmp}/e2e.sqlite3",
            "REDIS_URL": "",
            "CRS_ADMIN_PASSWORD": password,
            "CRS_SECRET_KEY": "e2e-only",
            **own_static(Path(tmp) / "static"),
        }
        args = ["manage.py", "runembedded", "--port", str(port), "--round-interval", "1", *options]
        process = start(args, env, ARTIFACTS / log)
        try:
            wait_for_port(port, process, start_timeout)
            yield f"http://127.0.0.1:{port}", env
        finally:
            stop(process)


def shell(env: dict, code: str) -> str:
    """Run Python in `manage.py shell` beside a server (on its database); what it printed."""
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", **env},
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def processes_of_a_stack(
    env: dict,
    name: str,
    worker: list[str] = SINGLE_WORKER,
    logs: Path = ARTIFACTS,
    workers: int = 1,
    beat_options: tuple[str, ...] = (),
) -> tuple[int, list[subprocess.Popen]]:
    """The static files, then the supervised web (daphne), `workers` supervised `worker`s,
    supervised beat (with `beat_options`: a benchmark's baseline scheduler) and the supervised
    Proxmox collects' worker, as `make web`, `make worker`, `make beat` and `make worker-proxmox`
    start them, on `env`'s database and Redis (an outage test's own); (the web's port, the
    processes: web, the workers, beat, the Proxmox worker). Logs go to <logs>/<name>-*.log."""
    env = {**env, **own_static(logs / f"{name}-static")}
    assert start(COLLECTSTATIC, env, logs / f"{name}-setup.log").wait(120) == 0
    port = free_port()
    web = [str(VENV_BIN / WEB[0]), "-b", "127.0.0.1", "-p", str(port), *WEB[5:]]
    beat = [str(VENV_BIN / BEAT[0]), *BEAT[1:], *beat_options]
    # Several workers on one host each need a node name of their own (celery's -n, the last one given).
    names = [[]] if workers == 1 else [["-n", f"worker{i}@%h"] for i in range(1, workers + 1)]
    worker_logs = [f"{name}-worker.log"] if workers == 1 else [f"{name}-worker{i}.log" for i in range(1, workers + 1)]
    return port, [
        start([*SUPERVISE, *web], env, logs / f"{name}-web.log", new_session=True),
        *(
            start([*SUPERVISE, *worker, *named], env, logs / log, new_session=True)
            for named, log in zip(names, worker_logs, strict=True)
        ),
        start([*SUPERVISE, *beat], env, logs / f"{name}-beat.log", new_session=True),
        start(
            [*SUPERVISE, str(VENV_BIN / PROXMOX_WORKER[0]), *PROXMOX_WORKER[1:]],
            env,
            logs / f"{name}-proxmox.log",
            new_session=True,
        ),
    ]


def fresh_database(url: str) -> None:
    """Drop and create the PostgreSQL database named in `url` (for the server subprocesses)."""
    import psycopg

    parts = urllib.parse.urlsplit(url)
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{parts.path.lstrip("/")}"')


def drop_database(url: str) -> None:
    import psycopg

    parts = urllib.parse.urlsplit(url)
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


def start(args: list[str], env: dict, log: Path, new_session: bool = False) -> subprocess.Popen:
    """A server subprocess of this repository, logging to `log` (kept for CI artifacts).

    It runs the production settings: pytest-django exports the test settings module, which
    the subprocess would otherwise inherit along with the test database.
    """
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", **env}
    log.parent.mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, *args] if args[0].endswith(".py") else args,
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=new_session,
    )


def memory_mb(pid: int) -> tuple[float, float]:
    """RSS and PSS of a process and all its descendants (prefork children count)."""
    rss = pss = 0.0
    for p in [pid, *descendants(pid)]:
        for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss += int(line.split()[1]) / 1024
            elif line.startswith("Pss:"):
                pss += int(line.split()[1]) / 1024
    return rss, pss


def descendants(pid: int) -> list[int]:
    children = [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    return children + [d for c in children for d in descendants(c)]


class RedisServer:
    """A redis-server of the caller's own on a free port, to stop and start at will (outages)
    without disturbing the shared Redis other tests use."""

    def __init__(self, log: Path):
        self.port, self.log, self.process = free_port(), log, None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=self.log.open("a"),
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, self.process, timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            stop(self.process)


def stop(process: subprocess.Popen) -> None:
    process.terminate()  # SIGTERM: servers started from scripts ignore SIGINT (stack-notes.md)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        if os.getpgid(process.pid) == process.pid:  # its own session (a supervisor and its child)
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
        process.wait()
