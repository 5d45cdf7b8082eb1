"""The live page's WebSocket in the distributed mode (the real Redis channel layer) stays open
and keeps receiving rounds: redis-py's socket timeout once equalled channels-redis's blocking
read, and every socket was closed with 1011 after 10-19 s."""

import asyncio
import time

import pytest
from conftest import ARTIFACTS, distributed_stack, own_database
from wsclient import Client, login

PASSWORD = "socket-password"


async def hold(base: str, cookie: str, seconds: float) -> tuple[int, float]:
    """Hold one socket for `seconds`; the rounds received and the longest silence between them.
    A close by the server raises ConnectionError."""
    client = await Client.connect(base, "/ws/clusters/1/", cookie)
    rounds, longest, last = 0, 0.0, time.monotonic()
    deadline = last + seconds
    try:
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = await asyncio.wait_for(client.receive_json(), timeout=left)
            except TimeoutError:
                break
            if message["type"] == "round":
                now = time.monotonic()
                rounds, longest, last = rounds + 1, max(longest, now - last), now
    finally:
        client.close()
    return rounds, max(longest, time.monotonic() - last)


@pytest.mark.parametrize("seconds", [pytest.param(60, id="60s"), pytest.param(600, id="10min", marks=pytest.mark.soak)])
def test_a_socket_stays_open_and_keeps_receiving_rounds(redis_url, seconds):
    name = f"socket{seconds}"
    with own_database(name) as database_url, distributed_stack(database_url, redis_url, PASSWORD, name) as base:
        cookie = login(base, "admin", PASSWORD)
        rounds, longest = asyncio.run(hold(base, cookie, seconds))
    # one-second rounds; a busy shared machine may stretch a few of them
    assert rounds >= seconds / 4
    assert longest < 15
    with (ARTIFACTS / "socket-figures.txt").open("a") as figures:
        figures.write(f"socket held {seconds} s: open throughout, {rounds} rounds, longest silence {longest:.1f} s\n")
