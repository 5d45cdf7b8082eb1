"""The distributed mode as docker-compose.yml runs it: daphne, a Celery worker and beat as
separate processes on PostgreSQL and Redis, with the commands of the Makefile."""

import asyncio
import json
import os
import signal
import urllib.error
import urllib.request

import pytest
from conftest import flushed_redis, own_database, wait_until

from harness.stack import BEAT, PROXMOX_WORKER, ROOT, WEB, WORKER, distributed_stack, shell
from harness.wsclient import Client, login

PASSWORD = "distributed-password"
# A Proxmox cluster whose host answers nothing: its collects fail on the Proxmox worker's queue.
PROXMOX_CLUSTER = """
from dashboard.models import Cluster
Cluster.objects.create(name="pve", source_kind="proxmox", source_config={"host": "127.0.0.1", "port": 9})
"""


@pytest.mark.servers
def test_compose_runs_the_commands_tested_here():
    compose = (ROOT / "docker-compose.yml").read_text()
    assert " ".join(WEB) in compose
    assert json.dumps(WORKER) in compose and json.dumps(BEAT) in compose and json.dumps(PROXMOX_WORKER) in compose
    assert "restart: unless-stopped" in compose  # the worker is restarted, as scripts/supervise does here


@pytest.mark.servers
def test_the_makefile_runs_these_commands_supervised():
    """`make web`, `make worker` and `make beat` restart what dies (the fault soak kills each)."""
    makefile = (ROOT / "Makefile").read_text()
    commands = (" ".join(WEB).replace("8000", "$(PORT)"), " ".join(WORKER), " ".join(PROXMOX_WORKER), " ".join(BEAT))
    for command in commands:
        assert f"scripts/supervise $(VENV)/bin/{command}" in makefile, command


@pytest.fixture(scope="module")
def served():
    """One stack for the module: its tests only read (a round, health, refused settings), but the
    last, which pauses the rounds' worker and resumes it. (The URL, the processes, the environment.)"""
    with flushed_redis() as redis_url, own_database("distributed") as database_url:
        with distributed_stack(database_url, redis_url, PASSWORD, "distributed") as (url, processes):
            yield url, processes, {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "CRS_SECRET_KEY": "shell"}


@pytest.fixture(scope="module")
def stack(served):
    return served[0]


@pytest.mark.servers
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


# What an operator's fuzzing of the production stack got a 500 for (issue 12, item 4), sent to the
# real daphne with the production settings: each is a 400 that names the field.
BAD_SETTINGS = [
    ('{"threshold": 1' + "0" * 400 + "}", "threshold: number too large"),
    ("[" * 100_000, "nested deeper than 1024 levels"),
    ('{"margin": NaN}', "margin"),
    ('{"colour": "red"}', "colour is not a setting"),
]


@pytest.mark.servers
def test_bad_input_to_the_production_stack_is_a_400_naming_the_field(stack):
    cookie = login(stack, "admin", PASSWORD)
    csrf = dict(part.split("=", 1) for part in cookie.split("; "))["csrftoken"]
    headers = {"Cookie": cookie, "X-CSRFToken": csrf, "Content-Type": "application/json"}
    for body, said in BAD_SETTINGS:
        request = urllib.request.Request(
            f"{stack}/api/v1/clusters/1/settings/", data=body.encode(), headers=headers, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        text = refused.value.read().decode()
        assert refused.value.code == 400 and said in text, (body[:40], refused.value.code, text[:300])
    settings = json.load(
        urllib.request.urlopen(
            urllib.request.Request(f"{stack}/api/v1/clusters/1/state/", headers={"Cookie": cookie}), timeout=30
        )
    )["settings"]
    assert settings["threshold"] == 0.3 and settings["margin"] == 0.1  # nothing stored was changed


@pytest.mark.servers
def test_healthz_tells_the_rounds_worker_from_the_proxmox_worker(served):
    """Each worker beats for the queues it consumes: with the rounds' worker stopped and the
    Proxmox worker running, /healthz says the rounds' worker is down (both once beat as one)."""
    url, processes, env = served

    def health() -> dict:
        return json.load(urllib.request.urlopen(f"{url}/healthz", timeout=30))

    assert "proxmox_worker" not in health()  # no Proxmox cluster: not a part yet
    shell(env, PROXMOX_CLUSTER)
    wait_until(lambda: health()["worker"] == "ok" and health()["proxmox_worker"] == "ok", timeout=60, step=1)
    rounds_worker = processes[1]
    os.killpg(rounds_worker.pid, signal.SIGSTOP)  # the worker hangs, its supervisor too
    try:
        said = wait_until(lambda: (h := health())["worker"].startswith("down: no heartbeat") and h, timeout=90, step=1)
        assert said["proxmox_worker"] == "ok", said
    finally:
        os.killpg(rounds_worker.pid, signal.SIGCONT)
    wait_until(lambda: health()["worker"] == "ok", timeout=60, step=1)
