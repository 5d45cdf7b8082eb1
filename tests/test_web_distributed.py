"""The distributed mode as docker-compose.yml runs it: daphne, a Celery worker and beat as
separate processes on PostgreSQL and Redis, with the commands of the Makefile."""

import asyncio
import json
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, drop_database, free_port, fresh_database, service_or_skip, start, stop, wait_for_port
from wsclient import Client, login

VENV_BIN = Path(sys.executable).parent
ARTIFACTS = Path(__file__).parent / "artifacts"
PASSWORD = "distributed-password"
# The commands of docker-compose.yml and the Makefile; the web's bind address and port vary.
WEB = ["daphne", "-b", "0.0.0.0", "-p", "8000", "dashboard.asgi:application"]
WORKER = ["celery", "-A", "dashboard", "worker", "-l", "info"]
BEAT = ["celery", "-A", "dashboard", "beat", "-l", "info", "--scheduler",
        "django_celery_beat.schedulers:DatabaseScheduler"]


def test_compose_runs_the_commands_tested_here():
    compose = (ROOT / "docker-compose.yml").read_text()
    assert " ".join(WEB) in compose
    assert json.dumps(WORKER) in compose and json.dumps(BEAT) in compose


@pytest.fixture
def database_url():
    """A database of its own on the test PostgreSQL server, made fresh and dropped afterwards."""
    url = urllib.parse.urlsplit(service_or_skip("CRS_TEST_DATABASE_URL"))
    url = url._replace(path=f"/{url.path.lstrip('/') or 'crs'}_distributed").geturl()
    fresh_database(url)
    yield url
    drop_database(url)


@pytest.fixture
def stack(database_url, redis_url):
    """web, worker and beat, started exactly as `make web`, `make worker` and `make beat` do."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = free_port()
    env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "CRS_ADMIN_PASSWORD": PASSWORD,
           "CRS_SECRET_KEY": "distributed-test"}
    for setup in (["manage.py", "migrate", "--noinput"], ["manage.py", "demo", "--round-interval", "1"]):
        assert start(setup, env, ARTIFACTS / "distributed-setup.log").wait(120) == 0
    web = [str(VENV_BIN / WEB[0]), "-b", "127.0.0.1", "-p", str(port), *WEB[5:]]
    processes = [start(web, env, ARTIFACTS / "distributed-web.log")] + [
        start([str(VENV_BIN / command[0]), *command[1:]], env, ARTIFACTS / f"distributed-{command[3]}.log")
        for command in (WORKER, BEAT)]
    try:
        wait_for_port(port, processes[0])
        yield f"http://127.0.0.1:{port}"
    finally:
        for process in processes:
            stop(process)


def test_round_reaches_the_browser_through_redis(stack):
    cookie = login(stack, "admin", PASSWORD)

    async def first_round():
        client = await Client.connect(stack, "/ws/clusters/1/", cookie)
        try:
            while (message := await client.receive_json())["type"] != "round":
                pass
            return message
        finally:
            client.close()

    message = asyncio.run(asyncio.wait_for(first_round(), timeout=90))
    assert 0.0 < message["imbalance"] <= 1.0
    assert len(message["node_usage"]) == 12
    health = json.load(urllib.request.urlopen(f"{stack}/healthz", timeout=30))
    assert (health["database"], health["channel_layer"]) == ("ok", "ok")
    assert health["last_round"]["demo"] is not None
